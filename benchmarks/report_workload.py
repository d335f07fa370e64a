"""The benchmark report's inputs (``report.py``): the requests, their encodings, timed calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench_gateway import SUGAR, encode_all, make_requests

from dialogue_ranker.serving.model_bundle import ModelBundle
from dialogue_ranker.serving.tokenization import DEFAULT_SPEAKER, EncodedPair, PairEncoder, Turn, turn_text

BUILTIN_REQUESTS = 200


class Unavailable(Exception):
    """A row cannot be measured here (a missing file or package); the message says which."""


#: A timed call: what to run, how many requests it answers, how many pairs it scores.
Call = tuple[Callable[[], Any], int, int]


@dataclass(frozen=True)
class Workload:
    """The requests as the service receives them, and their pairs as the service encodes them."""

    requests: list[dict[str, Any]]
    #: As the shipped model reads them: pairs, or a shared-prefix model's sequences.
    encoded: list[list[Any]]
    #: As a per-pair cross-encoder reads them (the CrossEncoder row).
    pairs_encoded: list[list[EncodedPair]]
    source: str

    @property
    def pairs(self) -> int:
        """(Request, candidate) pairs over all requests."""
        return sum(len(r) for r in self.pairs_encoded)

    @property
    def mean_tokens(self) -> float:
        """Mean real (unpadded) tokens per pair."""
        return sum(len(p) for r in self.pairs_encoded for p in r) / self.pairs

    @property
    def shipped_tokens_per_candidate(self) -> float:
        """Mean tokens the shipped model computes per candidate."""
        return sum(len(s) for r in self.encoded for s in r) / self.pairs


def load_workload(bundle: ModelBundle, limit: int | None) -> Workload:
    """The SUGAR test split (or the built-in sample set), at most ``limit`` requests."""
    if SUGAR.is_file():
        from dialogue_ranker.data.sugar import load_sugar, select, split_indices

        examples = load_sugar(SUGAR)
        seed = bundle.metadata.get("training_data", {}).get("split_seed")
        if bundle.shared_prefix:
            from dialogue_ranker.evaluation.domains import group_split

            examples = [e for e in examples if group_split(f"sugar-{e.index}") == "test"]
            source = "SUGAR test part of the group split"
        elif seed is None:
            source = f"SUGAR {SUGAR.name}, every example (the model records no split seed)"
        else:
            examples = select(examples, split_indices(examples, seed=int(seed))["test"])
            source = f"SUGAR test split (seed {seed})"
        requests = [
            {
                "context": e.request,
                "situations": list(e.statements),
                "candidates": list(e.candidates),
            }
            for e in examples
        ]
        source += ": one request per example, all 12 statements, default settings"
    else:
        requests = make_requests(limit or BUILTIN_REQUESTS)
        source = f"built-in sample set ({SUGAR} is absent): 12 statements, 3 to 10 candidates"
    requests = requests[:limit] if limit else requests
    encoder = pair_encoder(bundle)
    pairs = [
        encoder.encode_request([Turn("user", r["context"])], r["situations"], r["candidates"])
        for r in requests
    ]
    return Workload(requests, encode_all(bundle, requests), pairs, source)


def pair_encoder(bundle: ModelBundle) -> Any:
    """How a per-pair cross-encoder of the model's shape reads a request (256 tokens a pair)."""
    return (
        PairEncoder.from_file(bundle.tokenizer_path, max_length=256)
        if bundle.shared_prefix
        else bundle.pair_encoder()
    )


def pair_texts(request: dict[str, Any], pairs: Sequence[EncodedPair], *, sep_token: str) -> list[list[str]]:
    """The [segment A, segment B] texts whose tokenization is what PairEncoder built.

    Segment A is the speaker-tagged turn, then (when any survived truncation) a separator and
    the statements PairEncoder kept; segment B is the candidate. The tokenizer reads the
    separator's text as the special token, and tokenizing joined statements gives the ids of
    tokenizing them one by one (the pre-tokenizer splits on the spaces between them).
    """
    turn = turn_text(Turn(DEFAULT_SPEAKER, request["context"]))
    texts = []
    for candidate, pair in zip(request["candidates"], pairs, strict=True):
        statements = request["situations"][: pair.statements_kept]
        texts.append([" ".join([turn, sep_token, *statements]) if statements else turn, candidate])
    return texts


def in_groups(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def measure_calls(calls: Sequence[Call]) -> tuple[float, list[float], list[Any]]:
    """Pairs/s, per-request latencies (s) and outputs of calls run one after another.

    Every request of a call waits for the whole call, so each gets the call's duration.
    """
    calls[0][0]()  # warm-up: first-call allocations and thread-pool start are not throughput
    latencies: list[float] = []
    outputs = []
    busy_s, pairs = 0.0, 0
    for call, requests, call_pairs in calls:
        started = time.perf_counter()
        outputs.append(call())
        elapsed = time.perf_counter() - started
        busy_s += elapsed
        pairs += call_pairs
        latencies += [elapsed] * requests
    return pairs / busy_s, latencies, outputs
