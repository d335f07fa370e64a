"""The export's measurements of its graphs, run as the service runs them (one request's sequence per call).

Per graph: logit error against fp32, whether a candidate's probability moves with the other
candidates in its sequence, speed on situated requests with every statement, and dev P@1 /
nDCG@3 per file; the fp32 graph's parity with PyTorch; the cost of the extra context views.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation.scoring import score_lists, score_sequences, session
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights
from dialogue_ranker.serving.list_encoding import EncodedList, ListEncoder
from dialogue_ranker.training.dev_scoring import dev_report, fit_calibration
from dialogue_ranker.training.ensemble import EnsembleRanker
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, score_requests
from dialogue_ranker.training.similarity import SimilarityRanker


def list_requests(encoder: ListEncoder, lists: list[RankingList]) -> list[list[EncodedList]]:
    """Each list as the service encodes its request: every situation, every candidate."""
    return [encoder.encode_request(x.context, x.situations, [c.text for c in x.candidates]) for x in lists]


def list_invariance(sess, encoder: ListEncoder, lists: list[RankingList], calibrator: Calibrator) -> dict:
    """Each candidate scored alone (prefix + it) versus inside its whole list, after calibration."""
    changes = []
    for x in lists:
        texts = [c.text for c in x.candidates]
        together = score_sequences(sess, encoder, [encoder.encode_request(x.context, x.situations, texts)])[0]
        alone = np.concatenate(
            score_sequences(
                sess, encoder, [encoder.encode_request(x.context, x.situations, [t]) for t in texts]
            )
        )
        changes.append(np.abs(calibrator(together) - calibrator(alone)))
    flat = np.concatenate(changes)
    return {"max_abs_prob_change": float(flat.max()), "mean_abs_prob_change": float(flat.mean())}


def requests_per_s(sess, requests: list[list[EncodedList]], encoder: ListEncoder) -> float:
    """Requests per second over ``requests``, one sequence per call, after one warm-up pass."""
    score_sequences(sess, encoder, requests[:10])
    started = time.perf_counter()
    score_sequences(sess, encoder, requests)
    return len(requests) / (time.perf_counter() - started)


def views_speed(sess, encoder: ListEncoder, lists: list[RankingList], views: ViewWeights) -> dict:
    """Multi-turn requests per second with one view and with the bundle's views, side by side."""
    score_lists(sess, encoder, lists[:10], views=views)
    speeds = {}
    for name, weights in (("one_view", ONE_VIEW), ("last_turn_view", views)):
        started = time.perf_counter()
        score_lists(sess, encoder, lists, views=weights)
        speeds[f"{name}_requests_per_s"] = round(len(lists) / (time.perf_counter() - started), 1)
    return {
        "requests": len(lists),
        "mean_turns": round(float(np.mean([len(x.context) for x in lists])), 2),
        **speeds,
        "ratio": round(speeds["last_turn_view_requests_per_s"] / speeds["one_view_requests_per_s"], 3),
    }


def torch_parity(
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker,
    fp32_sess,
    encoder: ListEncoder,
    sample: list[list[EncodedList]],
) -> tuple[float, np.ndarray]:
    """The fp32 graph's largest logit difference from PyTorch on ``sample``, and its logits there."""
    torch_logits = np.concatenate(score_requests(model, encoder, sample, torch.device("cpu")))
    fp32_logits = np.concatenate(score_sequences(fp32_sess, encoder, sample))
    return float(np.max(np.abs(torch_logits - fp32_logits))), fp32_logits


def measure_variants(
    report: dict[str, Any],
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker,
    paths: dict[str, Path],
    encoder: ListEncoder,
    dev: dict[str, list[RankingList]],
    dev_requests: dict[str, list[list[EncodedList]]],
    situated: list[list[EncodedList]],
) -> dict[str, dict[str, list[np.ndarray]]]:
    """Measure every graph in ``paths`` into ``report``; returns each graph's dev logits, per file.

    ``dev_requests``: ``dev``'s lists as :func:`list_requests` encodes them; ``situated``: the
    requests timed. ``report`` gets ``torch_parity_max_abs_logit`` and a ``variants`` entry per graph.
    """
    if not situated:  # situated_requests never returns none; a caller's empty sample is refused by name
        raise SystemExit("the export's speed sample is empty: no dev request to time the graphs on")
    situated_candidates = sum(s.candidates for r in situated for s in r)
    sample = [r for held in dev_requests.values() for r in held[:40]]
    fp32_sess = session(paths["fp32"])
    report["torch_parity_max_abs_logit"], fp32_logits = torch_parity(model, fp32_sess, encoder, sample)
    print("torch parity", report["torch_parity_max_abs_logit"], flush=True)

    logits_by_variant: dict[str, dict[str, list[np.ndarray]]] = {}
    for variant, path in paths.items():
        sess = fp32_sess if variant == "fp32" else session(path)
        logits = {name: score_sequences(sess, encoder, requests) for name, requests in dev_requests.items()}
        logits_by_variant[variant] = logits
        fitted = fit_calibration(dev, logits)
        speed = requests_per_s(sess, situated, encoder)
        flat = np.concatenate(score_sequences(sess, encoder, sample))
        report["variants"][variant] = {
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "max_abs_logit_vs_fp32": float(np.max(np.abs(flat - fp32_logits))),
            "candidate_alone_vs_in_list": list_invariance(
                sess, encoder, [x for lists in dev.values() for x in lists[:15]], fitted["maps"]["platt"]
            ),
            "situated_requests_per_s": round(speed, 1),
            "situated_candidates_per_s": round(speed * situated_candidates / len(situated), 1),
            "dev": dev_report(dev, logits),
        }
        print(variant, json.dumps(report["variants"][variant]), flush=True)
    return logits_by_variant


#: Statements a request needs to count as situated (SUGAR's requests have 12): the SLO's shape.
SITUATED_STATEMENTS = 8


def situated_requests(dev_requests: dict[str, list[list[EncodedList]]], n: int) -> list[list[EncodedList]]:
    """A seeded sample of ``n`` situated requests with every statement (the shape of the service's SLO).

    A run whose dev lists have no such request (persona lines, knowledge snippets: a few statements
    or none) is timed on a sample of all its dev lists instead, and says so.

    Raises:
        SystemExit: the run has no dev lists at all (nothing to time or check the graphs on).
    """
    every = [r for lists in dev_requests.values() for r in lists]
    situated = [r for r in every if r[0].statements_kept >= SITUATED_STATEMENTS]
    if not situated:
        if not every:
            raise SystemExit("the run has no dev lists: the export checks and times its graphs on them")
        print(
            f"speed sample: no dev list has {SITUATED_STATEMENTS}+ statements; timing "
            f"{min(n, len(every))} of all {len(every)} dev lists instead",
            flush=True,
        )
        situated = every
    return random.Random(0).sample(situated, min(n, len(situated)))
