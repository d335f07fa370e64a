"""The model assets the service loads: ``models/<name>/metadata.json`` and the files it names.

A bundle directory holds:

- ``metadata.json``: name, version, backbone, ``max_length``, the ranker's ONNX file and input
  names, ``calibration`` (see :mod:`dialogue_ranker.serving.calibration`), the abstention ``threshold`` (a
  calibrated probability), and the training data, attribution and metrics for the model card;
- ``calibration_by_runtime`` (optional): a ``calibration`` and ``threshold`` fitted on another
  runtime's logits, per runtime (``openvino-bf16``...; written by ``ranker calibrate-runtimes``),
  served instead of the bundle's own when that runtime scores (:meth:`ModelBundle.for_runtime`);
- ``serving`` (optional): how the graphs must be run, e.g. ``{"sub_batch_pairs": 1}`` for a
  dynamically quantised graph, whose activation scales are computed over the whole input
  tensor, so that a pair's score never depends on what it was batched with;
- ``views`` (optional): ``{"last_turn_weight": 0.5}`` scores a multi-turn request a second time
  with its last turn alone and averages the logits; ``prior_weight`` and ``prior_centre`` add a
  third view, the candidates with no context (:mod:`dialogue_ranker.serving.context_views`);
- the ONNX file(s) and ``tokenizer.json``; a graph's ``samples`` names its sample sequences
  (``samples.json``: a few dev requests and their fp32 logits, see :mod:`dialogue_ranker.serving.samples`),
  which ``--backend auto`` checks each runtime against;
- ``retriever/`` (optional): the retrieval encoder response banks are embedded with
  (``retriever.json``, its graph and tokenizer; written by ``ranker export-retriever``), a file
  of its own so that the ranker's metadata and the retriever are exported independently; its
  ``fusion`` (written by ``ranker evaluate-bank --write``) says how a bank request's logits and
  cosines make the final score (:mod:`dialogue_ranker.serving.fusion`).

The export CLIs (``ranker export``, ``ranker export-retriever``) write bundles; this module only
reads them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.calibration import Calibrator, RuntimeCalibration
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights
from dialogue_ranker.serving.fusion import NO_FUSION, Fusion
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.tokenization import AnyPairEncoder, PairEncoder, TemplatePairEncoder

#: A ranker's encoder: pairs (the project's layout or a foreign template) or shared-prefix sequences.
AnyEncoder = AnyPairEncoder | ListEncoder

METADATA_FILE = "metadata.json"
RETRIEVER_DIR = "retriever"
RETRIEVER_FILE = "retriever.json"


class BundleError(ValueError):
    """The model directory is missing a file or its metadata is malformed."""


@dataclass(frozen=True)
class OnnxModelSpec:
    """One ONNX graph of the bundle and how to feed it."""

    path: Path
    input_names: tuple[str, ...]
    output_name: str
    max_length: int
    #: The bundle's tokenizer (the fake backend's poison text is matched as these token ids).
    tokenizer_path: Path | None = None
    #: The graph's weights' precision, first word of its metadata ``precision`` (``int8``, ``fp32``).
    precision: str = "fp32"
    #: Sample sequences with their fp32 logits (``samples.json``), which ``--backend auto`` checks.
    samples: Path | None = None
    #: The map from this graph's logits to probabilities (auto compares calibrated scores).
    calibration: Calibrator = Calibrator.identity()


@dataclass(frozen=True)
class RetrieverSpec:
    """A sentence encoder for response banks: a text in, one L2-normalised vector out.

    Pooling and normalisation are inside the graph; ``sha256`` (of the graph file) is what the
    bank's embedding cache is keyed by, checked against the file before a bank is embedded.
    """

    directory: Path
    path: Path
    tokenizer_path: Path
    #: Tokens a text is cut to (the special tokens included).
    max_length: int
    dim: int
    sha256: str
    #: What the graph was exported from (a model name), and its weights' precision.
    name: str
    precision: str
    #: The request's last turns the retrieval query is made of (:func:`serving.banks.retrieval_query`).
    query_turns: int = 1
    #: How much the last turn alone weighs in the query vector (``query.last_turn_weight``; 0: the
    #: last ``query_turns`` turns alone): the vector is ``(1 - w) x embed(last turns) + w x
    #: embed(last turn)``, so a response's cosine with it is the same mix of its two cosines.
    last_turn_weight: float = 0.0
    input_names: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")
    output_name: str = "embedding"
    #: How a bank request's logits and cosines make its final score (``fusion``; none: the logits).
    fusion: Fusion = NO_FUSION

    @property
    def label(self) -> str:
        """How ``GET /v1/banks`` names the encoder: name, precision and the graph's digest."""
        return f"{self.name} ({self.precision}, sha256 {self.sha256[:12]})"


def find_retriever(path: str | Path) -> Path | None:
    """The retriever folder at ``path``: itself (with retriever.json), a bundle's ``retriever/``, or None."""
    path = Path(path)
    for candidate in (path, path / RETRIEVER_DIR):
        if (candidate / RETRIEVER_FILE).is_file():
            return candidate.resolve()
    return None


def load_retriever(directory: str | Path) -> RetrieverSpec:
    """Read a retriever directory's ``retriever.json`` (the graph's digest is checked by the user).

    Raises:
        BundleError: a file is missing or the metadata lacks a required entry.
    """
    directory = Path(directory).resolve()
    meta_path = _require_file(directory, RETRIEVER_FILE)
    try:
        meta = json.loads(meta_path.read_text())
        spec = RetrieverSpec(
            directory=directory,
            path=_require_file(directory, str(meta["file"])),
            tokenizer_path=_require_file(directory, str(meta.get("tokenizer", "tokenizer.json"))),
            max_length=int(meta["max_length"]),
            dim=int(meta["dim"]),
            sha256=str(meta["sha256"]),
            name=str(meta["name"]),
            precision=str(meta.get("precision") or "fp32"),
            query_turns=int((meta.get("query") or {}).get("turns", 1)),
            last_turn_weight=float((meta.get("query") or {}).get("last_turn_weight", 0.0)),
            input_names=tuple(meta.get("inputs", RetrieverSpec.input_names)),
            output_name=str(meta.get("output", RetrieverSpec.output_name)),
            fusion=_fusion(meta_path, meta.get("fusion")),
        )
    except (KeyError, TypeError, ValueError, IndexError) as e:
        if isinstance(e, BundleError):
            raise
        raise BundleError(f"{meta_path}: malformed retriever metadata ({e!r})") from e
    if spec.max_length < 2 or spec.dim < 1 or spec.query_turns < 1:
        raise BundleError(f"{meta_path}: max_length, dim and query.turns must be positive")
    if not 0.0 <= spec.last_turn_weight <= 1.0:
        raise BundleError(f"{meta_path}: query.last_turn_weight {spec.last_turn_weight} is not in [0, 1]")
    return spec


@dataclass(frozen=True)
class ModelBundle:
    """Everything the service needs to rank with one trained model."""

    directory: Path
    name: str
    version: str
    ranker: OnnxModelSpec
    tokenizer_path: Path
    calibration: Calibrator
    threshold: float
    metadata: dict[str, Any]
    #: Maps and thresholds fitted on other runtimes' logits (``calibration_by_runtime``), by runtime.
    runtime_calibrations: Mapping[str, RuntimeCalibration] = field(default_factory=dict)
    #: The runtime whose entry of ``runtime_calibrations`` is in force (None: the bundle's own map).
    calibration_runtime: str | None = None
    #: Pairs per backend call the model needs for batch-invariant scores (None: any batch).
    serving_sub_batch_pairs: int | None = None
    #: The extra context views' weights (none: one view); calibration and threshold were fitted with them.
    views: ViewWeights = ONE_VIEW
    #: The retrieval encoder of ``retriever/`` (None: the bundle has none, and serves no bank).
    retriever: RetrieverSpec | None = None

    @property
    def model_id(self) -> str:
        """``name@version``, as reported in every response."""
        return f"{self.name}@{self.version}"

    @property
    def calibration_in_force(self) -> str:
        """Which map scores are calibrated with: ``bundle`` (its own), or the runtime whose entry it is."""
        return self.calibration_runtime or "bundle"

    def for_runtime(self, runtime: str) -> ModelBundle:
        """The bundle as ``runtime`` serves it: with that runtime's calibration and threshold, if it has them.

        ``runtime``: :func:`~dialogue_ranker.serving.calibration.runtime_key` of the backend that
        scores (``onnx``, ``openvino-bf16``...). A runtime without an entry in
        ``calibration_by_runtime`` gets the bundle itself, with its own map (fitted on ONNX Runtime's
        logits). The one place the calibration in force is chosen: the service (at start, once the
        backend is chosen) and the evaluation both ask here.
        """
        own = self.runtime_calibrations.get(runtime)
        if own is None:
            return self
        return dataclasses.replace(
            self, calibration=own.calibration, threshold=own.threshold, calibration_runtime=runtime
        )

    @property
    def shared_prefix(self) -> bool:
        """True for a shared-prefix ranker (:mod:`serving.list_encoding`): a sequence per request."""
        return (self.metadata.get("encoding") or {}).get("kind") == "shared-prefix"

    def pair_encoder(self) -> AnyEncoder:
        """The ranker's encoder, with the model's length limits."""
        if self.shared_prefix:
            budgets = dict(self.metadata["encoding"])
            budgets.pop("kind")
            return ListEncoder.from_file(self.tokenizer_path, **{k: int(v) for k, v in budgets.items()})
        return self._encoder(self.ranker.max_length)

    def _encoder(self, max_length: int) -> AnyPairEncoder:
        # "template": a cross-encoder exported from Hugging Face (export.hf), laid out by its own
        # tokenizer; otherwise the project's dialogue layout.
        encoding = self.metadata.get("encoding") or {}
        if encoding.get("kind") == "template":
            return TemplatePairEncoder.from_file(
                self.tokenizer_path, max_length=max_length, pad_token=str(encoding["pad_token"])
            )
        return PairEncoder.from_file(self.tokenizer_path, max_length=max_length)


def _require_file(directory: Path, name: str) -> Path:
    path = directory / name
    if not path.is_file():
        raise BundleError(f"model directory {directory} has no {name}")
    return path


def _onnx_spec(
    directory: Path,
    spec: dict[str, Any],
    *,
    default_max_length: int,
    tokenizer: Path,
    calibration: dict[str, Any],
) -> OnnxModelSpec:
    return OnnxModelSpec(
        path=_require_file(directory, spec["file"]),
        input_names=tuple(spec.get("inputs", ("input_ids", "attention_mask", "token_type_ids"))),
        output_name=str(spec.get("output", "logits")),
        max_length=int(spec.get("max_length", default_max_length)),
        tokenizer_path=tokenizer,
        precision=(str(spec.get("precision") or "fp32").split() or ["fp32"])[0],
        samples=_require_file(directory, spec["samples"]) if spec.get("samples") else None,
        calibration=Calibrator.from_dict(calibration),
    )


def load_bundle(directory: str | Path) -> ModelBundle:
    """Read and check a model directory.

    Raises:
        BundleError: a file is missing or ``metadata.json`` lacks a required entry.
    """
    directory = Path(directory).resolve()
    meta_path = _require_file(directory, METADATA_FILE)
    try:
        meta = json.loads(meta_path.read_text())
        max_length = int(meta["max_length"])
        tokenizer = _require_file(directory, meta.get("tokenizer", "tokenizer.json"))
        ranker = _onnx_spec(
            directory,
            meta["ranker"],
            default_max_length=max_length,
            tokenizer=tokenizer,
            calibration=meta["calibration"],
        )
        bundle = ModelBundle(
            directory=directory,
            name=str(meta["name"]),
            version=str(meta["version"]),
            ranker=ranker,
            tokenizer_path=tokenizer,
            calibration=Calibrator.from_dict(meta["calibration"]),
            threshold=float(meta["threshold"]),
            metadata=meta,
            serving_sub_batch_pairs=int(meta.get("serving", {}).get("sub_batch_pairs", 0)) or None,
            views=_view_weights(meta_path, meta.get("views")),
            runtime_calibrations=_runtime_calibrations(meta_path, meta.get("calibration_by_runtime")),
            retriever=_bundled_retriever(directory),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, BundleError):
            raise
        raise BundleError(f"{meta_path}: malformed metadata ({e!r})") from e
    if not 0.0 <= bundle.threshold <= 1.0:
        raise BundleError(f"{meta_path}: threshold {bundle.threshold} is not in [0, 1]")
    return bundle


def _runtime_calibrations(meta_path: Path, entries: dict[str, Any] | None) -> dict[str, RuntimeCalibration]:
    """The bundle's ``calibration_by_runtime``, an entry refused by its runtime's name when malformed."""
    out = {}
    for runtime, entry in (entries or {}).items():
        try:
            out[runtime] = RuntimeCalibration.from_dict(entry)
        except (KeyError, TypeError, ValueError) as e:
            raise BundleError(f"{meta_path}: calibration_by_runtime.{runtime}: {e!r}") from None
    return out


def _view_weights(meta_path: Path, views: dict[str, Any] | None) -> ViewWeights:
    """The bundle's ``views``, refused by name when a weight is negative or not a number."""
    try:
        return ViewWeights.from_dict(views)
    except ValueError as e:
        raise BundleError(f"{meta_path}: views.{e}") from None


def _fusion(meta_path: Path, entry: dict[str, Any] | None) -> Fusion:
    """The retriever's ``fusion``, refused by name when malformed."""
    try:
        return Fusion.from_dict(entry)
    except (KeyError, TypeError, ValueError) as e:
        raise BundleError(f"{meta_path}: fusion: {e}") from None


def _bundled_retriever(directory: Path) -> RetrieverSpec | None:
    retriever = directory / RETRIEVER_DIR
    return load_retriever(retriever) if (retriever / RETRIEVER_FILE).is_file() else None
