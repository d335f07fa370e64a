"""A bundle's sample sequences: real requests as the service encodes them, with their fp32 logits.

``samples.json`` (named by the graph's ``samples`` entry in ``metadata.json``) holds a few dev
requests already encoded, each as the backend call the batcher would make, and the logits the
fp32 graph of the same weights gives them. ``--backend auto`` runs every candidate runtime on them
at start: the calibrated scores must agree with the fp32 reference's (top-1 and mean absolute
difference) before a runtime may serve, and they are what it is timed on. The export writes the
file; this module reads it and compares scores.

    {"kind": "shared-prefix" | "pairs", "pad_id": 0, "reference": "...", "source": "...",
     "requests": [{"sequences": [{"input_ids": [...], ...}], "logits": [...]}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.list_encoding import EncodedList, ListBatch, pad_lists
from dialogue_ranker.serving.tokenization import Batch, EncodedPair, pad_pairs

#: The token fields stored per sequence (the rest of EncodedList / EncodedPair is bookkeeping).
LIST_FIELDS = ("input_ids", "token_type_ids", "position_ids", "segment_ids")
SIMILARITY_FIELDS = ("similarity_ids", "similarity_positions", "similarity_segments")
PAIR_FIELDS = ("input_ids", "token_type_ids")


@dataclass(frozen=True)
class SampleSet:
    """Backend calls ready to run, each with the fp32 reference logits of its candidates."""

    batches: tuple[Batch | ListBatch, ...]
    reference: tuple[np.ndarray, ...]
    #: What the reference logits are (which graph, which runtime) and where the requests came from.
    description: str

    @property
    def candidates(self) -> int:
        """Logits over all calls."""
        return sum(len(r) for r in self.reference)


@dataclass(frozen=True)
class Agreement:
    """How a runtime's calibrated scores compare with the fp32 reference's on the samples."""

    #: Share of calls (with at least two candidates) whose best-scored candidate is the reference's.
    top1_agreement: float
    #: Mean and largest absolute difference of calibrated scores over every candidate.
    mean_abs_diff: float
    max_abs_diff: float


def _encoded(kind: str, fields: dict[str, Any]) -> EncodedList | EncodedPair:
    ids, types = [int(i) for i in fields["input_ids"]], [int(i) for i in fields["token_type_ids"]]
    if kind == "pairs":
        return EncodedPair(ids, types, turns_kept=0, statements_kept=0)
    segments = [int(i) for i in fields["segment_ids"]]
    return EncodedList(
        ids,
        types,
        [int(i) for i in fields["position_ids"]],
        segments,
        candidates=max(segments, default=0),
        turns_kept=0,
        statements_kept=0,
        similarity_ids=tuple(fields.get("similarity_ids", ())),
        similarity_positions=tuple(fields.get("similarity_positions", ())),
        similarity_segments=tuple(fields.get("similarity_segments", ())),
    )


def load_samples(path: str | Path) -> SampleSet:
    """Read ``samples.json``.

    Raises:
        ValueError: the file is malformed, or a call's logits do not match its candidates.
    """
    try:
        data = json.loads(Path(path).read_text())
        kind, pad_id = str(data["kind"]), int(data["pad_id"])
        batches: list[Batch | ListBatch] = []
        reference = []
        for request in data["requests"]:
            items = [_encoded(kind, s) for s in request["sequences"]]
            if kind == "pairs":
                batches.append(pad_pairs([i for i in items if isinstance(i, EncodedPair)], pad_id))
            else:
                batches.append(pad_lists([i for i in items if isinstance(i, EncodedList)], pad_id))
            reference.append(np.asarray(request["logits"], dtype=np.float32))
            if len(reference[-1]) != sum(i.outputs for i in items):
                raise ValueError("a request's logits do not match its candidates")
    except (OSError, KeyError, TypeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise ValueError(f"{path}: malformed sample sequences ({e!r})") from e
    if not batches:
        raise ValueError(f"{path}: no sample sequences")
    description = f"{data.get('reference', 'fp32 logits')}; {data.get('source', '')}".strip("; ")
    return SampleSet(tuple(batches), tuple(reference), description)


def write_samples(
    path: str | Path,
    requests: Sequence[Sequence[EncodedList | EncodedPair]],
    logits: Sequence[np.ndarray],
    *,
    pad_id: int,
    reference: str,
    source: str,
) -> Path:
    """Write ``samples.json``: each request's sequences (one backend call) and their fp32 logits."""
    kind = "pairs" if requests and isinstance(requests[0][0], EncodedPair) else "shared-prefix"
    fields = PAIR_FIELDS if kind == "pairs" else LIST_FIELDS + SIMILARITY_FIELDS
    out = []
    for sequences, z in zip(requests, logits, strict=True):
        rows = [{k: list(v) for k, v in asdict(s).items() if k in fields and len(v)} for s in sequences]
        out.append({"sequences": rows, "logits": [round(float(x), 6) for x in np.asarray(z).reshape(-1)]})
    body = {"kind": kind, "pad_id": pad_id, "reference": reference, "source": source, "requests": out}
    Path(path).write_text(json.dumps(body, separators=(",", ":")) + "\n")
    return Path(path)


def agreement(logits: Sequence[np.ndarray], samples: SampleSet, calibration: Calibrator) -> Agreement:
    """Compare a runtime's logits for the sample calls with the reference, after calibration."""
    diffs, agreed, lists = [], 0, 0
    for z, ref in zip(logits, samples.reference, strict=True):
        p, q = calibration(np.asarray(z).reshape(-1)), calibration(ref)
        diffs.append(np.abs(p - q))
        if len(ref) > 1:
            lists += 1
            agreed += int(np.argmax(p) == np.argmax(q))
    flat = np.concatenate(diffs)
    return Agreement(
        top1_agreement=agreed / lists if lists else 1.0,
        mean_abs_diff=float(flat.mean()),
        max_abs_diff=float(flat.max()),
    )
