"""``ranker export --threshold-from BUNDLE``: a candidate keeps a bundle's abstention threshold."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import SHIPPED_MODEL

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.export.calibration_choice import fit_shipped_calibration
from dialogue_ranker.export.card import render_card
from dialogue_ranker.export.export_args import build_parser
from dialogue_ranker.serving.tokenization import Turn


def _dev(n: int = 80) -> tuple[dict[str, list[RankingList]], dict[str, list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    lists, logits = [], []
    for i in range(n):
        candidates = (Candidate("good", 1), *(Candidate(f"bad {j}", 0) for j in range(3)))
        lists.append(RankingList(context=(Turn("user", "hi"),), candidates=candidates, group=f"g{i}"))
        logits.append(np.array([1.5, -1.0, -1.5, -2.0]) + rng.normal(scale=1.2, size=4))
    return {"a": lists}, {"a": logits}


def _args(**given: str) -> argparse.Namespace:
    # Parsed by the export command's own parser, so a flag this module relies on must exist there.
    argv = ["--run", "r", "--out", "o", "--calibrate-on", "a"]
    for name, value in given.items():
        argv += [f"--{name.replace('_', '-')}", value]
    return build_parser(None).parse_args(argv)


def _bundle(tmp_path: Path, threshold: float) -> Path:
    bundle = tmp_path / "shipped"
    bundle.mkdir()
    metadata = {"name": "m", "version": "1.2.3", "threshold": threshold}
    (bundle / "metadata.json").write_text(json.dumps(metadata))
    return bundle


def test_the_threshold_is_kept_from_the_bundle_named_and_the_map_is_still_fitted(tmp_path: Path) -> None:
    dev, logits = _dev()
    chosen = fit_shipped_calibration(_args(), dev, dev, logits, None, None, 0.0)
    kept = fit_shipped_calibration(
        _args(threshold_from=str(_bundle(tmp_path, 0.321))), dev, dev, logits, None, None, 0.0
    )
    assert kept["threshold"] == 0.321 != chosen["threshold"]
    assert kept["threshold_from"] == "m@1.2.3" and kept["threshold_on"] == []
    assert kept["maps"]["platt"] == chosen["maps"]["platt"]  # only the threshold is kept


def test_keeping_a_threshold_and_choosing_one_are_refused_together(tmp_path: Path) -> None:
    dev, logits = _dev()
    both = _args(threshold_from=str(_bundle(tmp_path, 0.5)), threshold_on="a")
    with pytest.raises(SystemExit, match="give one"):
        fit_shipped_calibration(both, dev, dev, logits, None, None, 0.0)


def test_the_card_says_where_the_threshold_came_from(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SHIPPED_MODEL, bundle, ignore=shutil.ignore_patterns("model.onnx", "retriever"))
    metadata = json.loads((bundle / "metadata.json").read_text())
    metadata.pop("threshold_from", None)
    metadata["threshold_fitted_on"] = ["sugar"]
    (bundle / "metadata.json").write_text(json.dumps(metadata))
    assert "(chosen on the dev lists of sugar)" in render_card(bundle)
    metadata |= {"threshold_from": "dialogue-minilm-l6@2.10.0", "threshold_fitted_on": []}
    (bundle / "metadata.json").write_text(json.dumps(metadata))
    kept = "(kept from `dialogue-minilm-l6@2.10.0`, the operating point it was released with)"
    assert kept in render_card(bundle)
