"""``ranker calibrate-runtimes`` without a model: the fit on a runtime's logits and the metadata it writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import write_fake_bundle

from dialogue_ranker.data.ranking_data import Candidate, RankingList, write_lists
from dialogue_ranker.export import runtime_calibration
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.tokenization import Turn


def scored_lists(seed: int, n: int = 120) -> tuple[list[RankingList], list[np.ndarray]]:
    """Lists of one appropriate and three inappropriate candidates, with logits that mostly order them."""
    rng = np.random.default_rng(seed)
    lists, logits = [], []
    for i in range(n):
        candidates = (Candidate("good", 1), *(Candidate(f"bad {j}", 0) for j in range(3)))
        lists.append(RankingList(context=(Turn("user", "hi"),), candidates=candidates, group=f"g{i}"))
        logits.append(np.array([1.5, -1.0, -1.5, -2.0]) + rng.normal(scale=1.2, size=4))
    return lists, logits


@pytest.fixture
def dev() -> tuple[dict[str, list[RankingList]], dict[str, list[np.ndarray]]]:
    (a, za), (b, zb) = scored_lists(0), scored_lists(1)
    return {"a": a, "b": b}, {"a": za, "b": zb}


def test_a_runtimes_map_is_the_exports_fit_on_its_logits(tmp_path: Path, dev) -> None:
    lists, logits = dev
    bundle = load_bundle(write_fake_bundle(tmp_path / "bundle"))
    fitted = runtime_calibration.fit_runtime(
        bundle, lists, logits, calibrate_names=["a"], threshold_names=["a", "b"]
    )
    shifted = {name: [z + 0.5 for z in zs] for name, zs in logits.items()}
    moved = runtime_calibration.fit_runtime(
        bundle, lists, shifted, calibrate_names=["a"], threshold_names=["a", "b"]
    )
    assert fitted.calibration.method == "platt" and 0.0 <= fitted.threshold <= 1.0
    # Logits shifted by a constant: the intercept moves by a * 0.5, the probabilities and threshold stay.
    a, b = fitted.calibration.params["a"], fitted.calibration.params["b"]
    assert moved.calibration.params["b"] == pytest.approx(b - 0.5 * a, abs=1e-3)
    assert moved.threshold == pytest.approx(fitted.threshold, abs=1e-3)
    figures = runtime_calibration.dev_figures(lists, logits, {"own_map": fitted})
    assert set(figures) == {"a", "b"} and set(figures["a"]["own_map"]) == {"ece", "abstention_accuracy"}


def entry(a: float, threshold: float) -> dict:
    return {
        "calibration": Calibrator("platt", {"a": a, "b": 0.0}).to_dict(),
        "threshold": threshold,
        "lists": {"a": 1},
        "dev": {
            "a": {
                "own_map": {"ece": 0.1, "abstention_accuracy": 0.7},
                "onnx_map": {"ece": 0.1, "abstention_accuracy": 0.6},
            }
        },
    }


def test_a_rerun_replaces_the_runtimes_it_measured_and_keeps_the_others(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    machine = {"cpu": "test"}
    runtime_calibration.write_entries(
        bundle, {"openvino-f32": entry(1.0, 0.4), "openvino-bf16": entry(2.0, 0.6)}, machine
    )
    runtime_calibration.write_entries(
        bundle, {"openvino-f32": entry(3.0, 0.5), "onnx": entry(1.0, 0.5)}, machine
    )
    meta = json.loads((bundle / "metadata.json").read_text())
    by_runtime = meta["calibration_by_runtime"]
    assert list(by_runtime) == ["onnx", "openvino-bf16", "openvino-f32"]
    assert (
        by_runtime["openvino-f32"]["calibration"]["a"] == 3.0
        and by_runtime["openvino-bf16"]["threshold"] == 0.6
    )
    assert meta["calibration"] == {
        "method": "platt",
        "a": 1.0,
        "b": 0.0,
    }  # the bundle's own map is left alone
    assert load_bundle(bundle).for_runtime("openvino-f32").threshold == 0.5
    assert (
        "| openvino-f32 | a | 1 | 0.500 | 0.1000 | 0.1000 | 0.6000 | 0.7000 |"
        in runtime_calibration.table(by_runtime)
    )


def test_the_files_default_to_those_the_export_fitted_on_and_must_be_given(tmp_path: Path) -> None:
    bundle = load_bundle(write_fake_bundle(tmp_path / "bundle"))
    meta = {
        **bundle.metadata,
        "calibration_fitted_on": ["sugar"],
        "threshold_fitted_on": ["sugar", "topical-chat"],
    }
    bundle = dataclasses.replace(bundle, metadata=meta)
    lists = {"sugar": [], "topical-chat": []}
    assert runtime_calibration.fitted_on(bundle, None, "threshold_fitted_on", lists) == [
        "sugar",
        "topical-chat",
    ]
    assert runtime_calibration.fitted_on(bundle, "topical-chat", "calibration_fitted_on", lists) == [
        "topical-chat"
    ]
    with pytest.raises(SystemExit, match="--calibrate-on: no --lists named sugar"):
        runtime_calibration.fitted_on(bundle, None, "calibration_fitted_on", {"topical-chat": []})


def test_every_runtime_auto_may_pick_is_calibrated() -> None:
    assert [r.key for r in runtime_calibration.runtimes()] == ["onnx", "openvino-bf16", "openvino-f32"]


class ShiftedScorer:
    """Stands in for ``ListScorer``: the lists' logits, OpenVINO's shifted as a runtime might shift them."""

    logits_by_group: dict[str, np.ndarray] = {}

    def __init__(self, bundle, *, threads: int, backend: str, precision: str) -> None:
        self.shift = {"onnx": 0.0, "bf16": 0.3, "f32": -0.1}[precision if backend == "openvino" else "onnx"]

    def logits(self, lists: list[RankingList]) -> list[np.ndarray]:
        return [self.logits_by_group[x.group] + self.shift for x in lists]


@pytest.mark.parametrize("threshold", ["bundle", "refit"])
def test_the_command_writes_each_runtimes_map_with_the_bundles_threshold_unless_refit(
    tmp_path: Path, dev, monkeypatch: pytest.MonkeyPatch, threshold: str
) -> None:
    lists, logits = dev
    # Groups unique across the files: the fake scorer finds a list's logits by its group.
    lists = {
        name: [dataclasses.replace(x, group=f"{name}-{x.group}") for x in held]
        for name, held in lists.items()
    }
    ShiftedScorer.logits_by_group = {
        x.group: z for name in lists for x, z in zip(lists[name], logits[name], strict=True)
    }
    files = []
    for name, held in lists.items():
        write_lists(tmp_path / f"{name}.jsonl", held)
        files += ["--lists", f"{name}={tmp_path / f'{name}.jsonl'}"]
    monkeypatch.setattr(runtime_calibration, "ListScorer", ShiftedScorer)
    monkeypatch.setattr(runtime_calibration.Runtime, "unavailable", lambda self: "")
    monkeypatch.setattr(runtime_calibration, "machine", lambda: {"cpu": "test"})
    bundle_dir = write_fake_bundle(tmp_path / "bundle", threshold=0.45)

    entries = runtime_calibration.main(
        [str(bundle_dir), *files, "--split", "all", "--calibrate-on", "a", "--threshold-on", "a,b",
         "--threshold", threshold]
    )  # fmt: skip
    written = json.loads((bundle_dir / "metadata.json").read_text())["calibration_by_runtime"]
    assert list(written) == ["onnx", "openvino-bf16", "openvino-f32"] and written["onnx"]["threshold"] == 0.45
    assert written["onnx"]["calibration"] == {"method": "platt", "a": 1.0, "b": 0.0}
    bf16 = load_bundle(bundle_dir).for_runtime("openvino-bf16")
    refit = written["onnx"]["refit_here"]
    # A constant shift of the logits: the same probabilities once the intercept takes it up.
    assert bf16.calibration.params["b"] == pytest.approx(
        refit["calibration"]["b"] - 0.3 * refit["calibration"]["a"], abs=5e-3
    )
    if threshold == "bundle":
        assert bf16.threshold == 0.45 and written["openvino-bf16"]["threshold_fitted_on"] is None
    else:
        assert bf16.threshold == pytest.approx(refit["threshold"], abs=1e-3)
        assert written["openvino-bf16"]["threshold_fitted_on"] == ["a", "b"]
    assert (
        entries["openvino-f32"]["dev"]["b"]["own_map"]["ece"]
        == written["openvino-f32"]["dev"]["b"]["own_map"]["ece"]
    )
