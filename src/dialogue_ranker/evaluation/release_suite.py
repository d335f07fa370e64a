"""The frozen suite ``ranker release-check`` scores two bundles on, and each set's per-item rows.

The suite is a TOML file (``data/release-suite.toml``): a table per set, so a new set plugs in by
naming its file. Kinds:

- ``lists``: a ranking-data file (``file``), the part of the group split to read (``split``:
  ``train``, ``dev``, ``test``, ``all``, or parts joined by ``+`` such as ``dev+test``), a
  seeded sample (``max_lists``, ``seed``), the metrics to gate on (``metrics``; default every one
  the lists support) and optionally the file's ``sha256``, which freezes it: another file under
  the same name is refused rather than compared.
- ``handmade``: the hand-made requests (``data/handmade_requests/requests.json``), each ranked by the
  service's ranker in process: the share whose person's pick ranks first.
- ``bank``: a dev bank (:mod:`dialogue_ranker.evaluation.bank_eval`): ``sample`` queries of a lists
  file's ``split``, the ``k`` nearest responses of the bundle's retriever ranked and fused as the
  service serves a bank request; R@1 and MRR.

Each set gives, per model, a row of numbers per item (:mod:`dialogue_ranker.evaluation.bootstrap`),
so the two models' metrics are resampled together.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import DataError, RankingList, read_lists
from dialogue_ranker.evaluation import metrics as m
from dialogue_ranker.evaluation.bootstrap import Metric, ece_metric, ece_rows, ratio
from dialogue_ranker.evaluation.domains import COLUMNS, ListScorer, held_out, pairs_won, within_context_auc
from dialogue_ranker.evaluation.scoring import scoring_runtime
from dialogue_ranker.serving.model_bundle import ModelBundle, load_bundle

#: The metrics a ``lists`` set can gate on: the per-domain evaluation's columns, in its order.
LIST_METRICS = COLUMNS
KINDS = ("lists", "handmade", "bank")
#: The parts of the group split a set may read (``+`` joins several: ``dev+test``), or ``all``.
SPLITS = ("train", "dev", "test")


class SuiteError(DataError):
    """A suite file that cannot be read: names the file, the set and the field."""


@dataclass(frozen=True)
class SuiteSet:
    """One set of the suite: its kind, name, file and the kind's options."""

    kind: str
    name: str
    file: Path
    split: str = "test"
    max_lists: int = 0
    seed: int = 0
    metrics: tuple[str, ...] = ()
    sha256: str | None = None
    #: ``bank`` sets: queries, responses retrieved per query, and which responses make the bank.
    sample: int = 100
    k: int = 20
    bank_responses: str = "all"


@dataclass(frozen=True)
class Suite:
    """The sets and how the intervals are drawn."""

    path: Path
    sets: tuple[SuiteSet, ...]
    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95
    #: How much worse a metric may be where no interval is drawn: fewer than ``min_items`` items count
    #: toward it (a bootstrap of a handful of lists says little).
    margin: float = 0.01
    min_items: int = 10
    notes: dict[str, str] = field(default_factory=dict)


_SET_FIELDS = {f for f in SuiteSet.__dataclass_fields__} - {"kind", "name"}


def load_suite(path: Path, root: Path) -> Suite:
    """Read a suite file; relative ``file`` paths are read from ``root`` (the repository).

    Raises :class:`SuiteError` naming the set and field for a bad entry.
    """
    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SuiteError(f"{path}: {e}") from None
    sets, seen = [], set()
    for kind in KINDS:
        for entry in raw.get(kind, []):
            name = entry.get("name")
            where = f"{path}: [[{kind}]] {name or '(no name)'}"
            unknown = sorted(set(entry) - _SET_FIELDS - {"name"})
            if not name or name in seen or unknown:
                why = f"unknown field {unknown[0]!r}" if unknown else "needs a name of its own"
                raise SuiteError(f"{where}: {why}")
            seen.add(name)
            values: dict[str, Any] = {k: v for k, v in entry.items() if k != "name"}
            if "file" not in values:
                raise SuiteError(f"{where}: needs a file")
            values["file"] = root / values["file"]
            split = str(values.get("split", "test"))
            if split != "all" and any(part not in SPLITS for part in split.split("+")):
                why = f"all, one of {SPLITS}, or parts joined by '+'"
                raise SuiteError(f"{where}: split {values['split']!r}: {why}")
            values["metrics"] = tuple(values.get("metrics", ()))
            bad = [x for x in values["metrics"] if x not in LIST_METRICS]
            if kind != "lists" and values["metrics"] or bad:
                raise SuiteError(f"{where}: metrics: {bad or values['metrics']} (lists sets: {LIST_METRICS})")
            sets.append(SuiteSet(kind, name, **values))
    if not sets:
        raise SuiteError(f"{path}: no sets ([[lists]], [[handmade]] or [[bank]] tables)")
    options = {k: raw[k] for k in ("resamples", "seed", "confidence", "margin", "min_items") if k in raw}
    return Suite(Path(path), tuple(sets), **options)


def check_files(suite: Suite) -> None:
    """Every set's file is there and, where the suite pins it, the same bytes. Raises :class:`SuiteError`."""
    for s in suite.sets:
        if not s.file.is_file():
            raise SuiteError(
                f"{suite.path}: set {s.name}: {s.file} is absent (a frozen suite is scored whole)"
            )
        if s.sha256 and hashlib.sha256(s.file.read_bytes()).hexdigest() != s.sha256:
            raise SuiteError(f"{suite.path}: set {s.name}: {s.file} is not the file the suite froze (sha256)")


def list_metrics() -> dict[str, Metric]:
    """Every ``lists`` metric, as a :class:`Metric` of the rows :func:`list_rows` gives."""
    out = {name: ratio(name) for name in LIST_METRICS if name != "ece"}
    out["ece"] = ece_metric()
    return out


def list_rows(lists: list[RankingList], probs: list[np.ndarray], threshold: float) -> dict[str, np.ndarray]:
    """Per metric, a row per list: what :func:`dialogue_ranker.evaluation.domains.evaluate` pools."""
    columns: dict[str, list[tuple[float, float]]] = {name: [] for name in LIST_METRICS if name != "ece"}
    for x, p in zip(lists, probs, strict=True):
        gains = [c.gain for c in x.candidates]
        appropriate = [c.appropriate for c in x.candidates]
        ranked = max(gains) > 0
        columns["precision_at_1"].append((m.precision_at_1(p, gains), 1.0) if ranked else (0.0, 0.0))
        columns["ndcg_at_3"].append((m.ndcg_at_k(p, gains, 3), 1.0) if ranked else (0.0, 0.0))
        columns["mrr"].append((m.reciprocal_rank(p, gains), 1.0) if ranked else (0.0, 0.0))
        ten = len(x.candidates) == 10 and sum(appropriate) == 1
        columns["r1_of_10"].append((float(appropriate[int(np.argmax(p))]), 1.0) if ten else (0.0, 0.0))
        for kind in ("adversarial", "random"):
            against = [c.generator == kind and not c.appropriate for c in x.candidates]
            auc = within_context_auc(p, appropriate, against)
            columns[f"auc_{kind}"].append((auc, 1.0) if auc is not None else (0.0, 0.0))
        columns["pair_agreement"].append(m.ordered_pairs(p, gains))
        columns["situation_flip"].append(pairs_won(x, p, "situation-flip"))
        columns["contradicted"].append(pairs_won(x, p, "contradicted"))
        decisions = m.abstention_accuracy([p.tolist()], [[int(a) for a in appropriate]], threshold)
        columns["abstention_accuracy"].append((2 * decisions, 2.0) if 0 in appropriate else (0.0, 0.0))
    rows = {name: np.asarray(values, dtype=np.float64).reshape(-1, 2) for name, values in columns.items()}
    rows["ece"] = ece_rows(probs, [np.asarray([c.appropriate for c in x.candidates], float) for x in lists])
    return rows


def supported(rows: dict[str, np.ndarray]) -> list[str]:
    """The metrics these rows can measure: those with an item counting toward them."""
    return [name for name in LIST_METRICS if name == "ece" or rows[name][:, 1].sum() > 0]


@functools.lru_cache(maxsize=2)
def read_set(s: SuiteSet) -> list[RankingList]:
    """A ``lists`` or ``bank`` set's lists: its split, its seeded sample.

    Kept for the second bundle of a check (a large file such as Topical-Chat's, 44,747 lists, takes
    a while to read and validate); the lists are only read, never changed.
    """
    return held_out(read_lists(s.file), s.split, s.max_lists, s.seed)


@dataclass(frozen=True)
class Scoring:
    """The runtime both bundles of a check are scored with (``--backend``, ``--precision``...).

    ONNX Runtime by default. ``openvino`` scores as ``--backend auto`` serves on a CPU where
    ONNX Runtime's int8 kernels stray (no VNNI or AMX: an int8 graph's top-1 agreement with fp32
    falls to 0.875), so a candidate of another precision is not compared with a handicapped
    shipped model. Each bundle is read with that runtime's own calibration map, as the service
    reads it.
    """

    backend: str = "onnx"
    precision: str = "auto"
    openvino_weights: str = "auto"
    threads: int = 2

    @property
    def runtime(self) -> str:
        """The runtime as ``calibration_by_runtime`` names it: ``onnx``, ``openvino-f32``..."""
        return scoring_runtime(self)  # type: ignore[arg-type]

    def bundle(self, bundle_dir: Path) -> ModelBundle:
        """The bundle with the map and threshold of the runtime that scores it."""
        return load_bundle(bundle_dir).for_runtime(self.runtime)

    def scorer(self, bundle: ModelBundle) -> ListScorer:
        """A list scorer on this runtime."""
        return ListScorer(
            bundle,
            threads=self.threads,
            backend=self.backend,
            precision=self.precision,
            weights=self.openvino_weights,
        )


def score_lists(bundle: ModelBundle, lists: list[RankingList], scoring: Scoring) -> dict[str, np.ndarray]:
    """A bundle's rows of every ``lists`` metric on ``lists``, scored as ``ranker evaluate`` does."""
    probs = scoring.scorer(bundle).probabilities(lists)
    return list_rows(lists, probs, bundle.threshold)
