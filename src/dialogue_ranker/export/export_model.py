"""What the export turns into a graph: the run's encoder and ranker.

The ranker alone, as an output ensemble with another run (``--ensemble-with``), or with the
untrained encoder's similarity term (``--similarity``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.export.calibration_choice import refuse_unknown_files
from dialogue_ranker.export.graph_checks import list_requests
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training.backbone import backbone_dir
from dialogue_ranker.training.ensemble import EnsembleRanker
from dialogue_ranker.training.shared_prefix import SharedPrefixRanker, score_requests
from dialogue_ranker.training.similarity import SimilarityRanker, candidate_cosines, fit_weight

#: Shipped encoding budgets on top of the run's: how a long candidate list is cut into sequences.
MAX_CHUNK_TOKENS = 1024
MAX_CHUNK_CANDIDATES = 32
#: The models the export can turn into a graph.
ExportModel = SharedPrefixRanker | SimilarityRanker | EnsembleRanker


def export_encoder(run: Path, config: dict[str, Any], *, similarity: bool) -> ListEncoder:
    """The run's encoder with the shipped chunk budgets (and the similarity inputs, when asked)."""
    encoding = config["encoding"]
    return ListEncoder.from_file(
        run / "ranker",
        max_prefix_tokens=int(encoding["max_prefix_tokens"]),
        max_candidate_tokens=int(encoding["max_candidate_tokens"]),
        max_chunk_tokens=MAX_CHUNK_TOKENS,
        max_chunk_candidates=MAX_CHUNK_CANDIDATES,
        similarity=int(similarity),
    )


def load_run_model(
    run: Path, config: dict[str, Any], args: argparse.Namespace
) -> tuple[ExportModel, dict[str, Any]]:
    """The run's ranker, or its output ensemble with ``--ensemble-with``'s run.

    Returns the model and the configuration the bundle records (the ensemble's member added).
    """
    model: ExportModel = SharedPrefixRanker.load(run / "ranker").eval()
    if args.ensemble_with:
        if args.similarity:
            raise SystemExit("--ensemble-with and --similarity: choose one")
        other, share, other_config = ensemble_member(args.ensemble_with, run, config)
        model = EnsembleRanker.load([run, other], [1 - share, share]).eval()
        config = {
            **config,
            "ensemble": {"with": [{"run": str(other), "weight": share, "config": other_config}]},
        }
    return model, config


def with_similarity(
    args: argparse.Namespace,
    run: Path,
    dev: dict[str, list[RankingList]],
    held: dict[str, list[RankingList]],
    encoder: ListEncoder,
) -> tuple[SimilarityRanker, dict[str, Any]]:
    """``--similarity``: the ranker with the term, fitted on the files that choose the threshold."""
    names = (args.threshold_on or args.calibrate_on or ",".join(dev)).split(",")
    refuse_unknown_files("--similarity (fitted on the threshold's files)", names, held)
    return similarity_model(run, names, held, encoder)


def ensemble_member(spec: str, run: Path, config: dict[str, Any]) -> tuple[Path, float, dict[str, Any]]:
    """``RUN:W`` of ``--ensemble-with``: the other run, its share and its configuration, checked."""
    other, _, share_text = spec.rpartition(":")
    try:
        share = float(share_text)
    except ValueError:
        share = -1.0
    if not other or not 0 < share < 1:
        raise SystemExit(f"--ensemble-with {spec}: expected RUN:W with 0 < W < 1")
    if not (Path(other) / "config.json").is_file():
        raise SystemExit(f"--ensemble-with {other}: not a finished training run (no config.json)")
    other_config = json.loads((Path(other) / "config.json").read_text())
    if other_config.get("encoding") != config.get("encoding"):
        raise SystemExit(f"--ensemble-with {other}: its encoding differs from {run}'s")
    if (Path(other) / "ranker" / "tokenizer.json").read_bytes() != (
        run / "ranker" / "tokenizer.json"
    ).read_bytes():
        raise SystemExit(f"--ensemble-with {other}: its tokenizer differs from {run}'s")
    return Path(other), share, other_config


def similarity_model(
    run: Path, names: list[str], lists: dict[str, list[RankingList]], encoder: ListEncoder
) -> tuple[SimilarityRanker, dict[str, Any]]:
    """The run's ranker with the similarity term, its weight fitted on the dev lists of ``names``."""
    model = SimilarityRanker.load(run / "ranker", backbone_dir(), weight=0.0).eval()
    logits, cosines, gains = [], [], []
    for name in names:
        requests = list_requests(encoder, lists[name])
        logits += score_requests(model.ranker, encoder, requests, torch.device("cpu"))
        cosines += candidate_cosines(model, encoder, requests)
        gains += [[c.gain for c in x.candidates] for x in lists[name]]
    fitted = fit_weight([np.asarray(z) for z in logits], cosines, gains)
    model.weight.fill_(fitted["weight"])
    print("similarity weight", json.dumps(fitted), flush=True)
    return model, {**fitted, "fitted_on": names, "encoder": "all-MiniLM-L6-v2, untrained (frozen)"}
