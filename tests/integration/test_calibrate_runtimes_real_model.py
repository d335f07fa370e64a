"""``ranker calibrate-runtimes`` on a copy of the real bundle: its entries written, served and evaluated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import serve_in_process

from dialogue_ranker.cli import main as ranker
from dialogue_ranker.data.ranking_data import write_lists
from dialogue_ranker.evaluation.domains import held_out
from dialogue_ranker.evaluation.domains import main as evaluate
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.openvino import openvino_available, resolve_weights
from dialogue_ranker.serving.cpu import native_bf16
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(not openvino_available(), reason="openvino is not installed (the openvino extra)"),
    pytest.mark.skipif(not native_bf16(), reason="this CPU has no native bf16 (AVX-512 BF16, AMX)"),
]

#: SUGAR dev lists: few, to keep the test short (three runtimes score each).
LISTS = 24


@pytest.fixture(scope="module")
def calibrated(
    model_dir: Path, shared_data: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """A copy of the bundle with ``calibration_by_runtime`` fitted on a few SUGAR dev lists, and the lists."""
    from dialogue_ranker.training.converters.sugar import convert_sugar

    tmp_path = tmp_path_factory.mktemp("calibrate-runtimes")
    bundle = tmp_path / "bundle"
    shipped = (model_dir / "metadata.json").read_bytes()
    shutil.copytree(model_dir, bundle)  # never the shipped bundle itself
    lists = tmp_path / "sugar.jsonl"
    write_lists(lists, held_out(list(convert_sugar(shared_data / "sugar" / "sugar.jsonl")), "dev", LISTS))
    ranker(["calibrate-runtimes", str(bundle), "--lists", f"sugar={lists}", "--split", "all",
            "--calibrate-on", "sugar", "--threshold-on", "sugar"])  # fmt: skip
    assert (model_dir / "metadata.json").read_bytes() == shipped
    return bundle, lists


async def test_each_runtime_gets_its_own_map_and_the_service_serves_it(calibrated: tuple[Path, Path]) -> None:
    bundle, _ = calibrated
    meta = json.loads((bundle / "metadata.json").read_text())
    entries = meta["calibration_by_runtime"]
    assert list(entries) == ["onnx", "openvino-bf16", "openvino-f32"]
    assert (
        entries["onnx"]["calibration"] == meta["calibration"]
        and entries["onnx"]["threshold"] == meta["threshold"]
    )
    bf16 = entries["openvino-bf16"]
    assert bf16["calibration"] != meta["calibration"] and bf16["lists"] == {"sugar": LISTS}
    assert bf16["threshold"] == meta["threshold"]  # the bundle's operating point, on bf16's own map
    assert set(bf16["dev"]["sugar"]) == {"own_map", "onnx_map"}

    settings = Settings(model=bundle, backend="openvino", openvino={"precision": "bf16"})
    async with serve_in_process(create_app(settings)) as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
    assert listed["calibration_in_force"] == "openvino-bf16"
    assert listed["calibration"] == bf16["calibration"] and listed["threshold"] == bf16["threshold"]


def test_evaluate_with_openvino_scores_with_the_runtimes_map(
    calibrated: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, lists = calibrated
    results = evaluate(["--model", str(bundle), "--lists", f"sugar={lists}", "--split", "all",
                        "--backend", "openvino", "--precision", "bf16"])  # fmt: skip
    weights = resolve_weights("auto", "bf16")  # as the service resolves them on this CPU
    assert f"(openvino, bf16, {weights} weights; its own calibration)" in capsys.readouterr().out
    own = json.loads((bundle / "metadata.json").read_text())["calibration_by_runtime"]["openvino-bf16"]
    # The same lists and runtime as the fit: the figures it recorded (bf16 sums may differ in order
    # between compilations, so not to the last digit).
    assert load_bundle(bundle).for_runtime("openvino-bf16").threshold == own["threshold"]
    assert results["sugar"]["ece"] == pytest.approx(own["dev"]["sugar"]["own_map"]["ece"], abs=0.01)
    assert results["sugar"]["abstention_accuracy"] == pytest.approx(
        own["dev"]["sugar"]["own_map"]["abstention_accuracy"], abs=0.02
    )


def test_a_rerun_replaces_the_entries(calibrated: tuple[Path, Path]) -> None:
    bundle, lists = calibrated
    before = json.loads((bundle / "metadata.json").read_text())["calibration_by_runtime"]
    # Runs last: the other tests read the entries fitted on all LISTS lists.
    half = str(LISTS // 2)
    ranker(["calibrate-runtimes", str(bundle), "--lists", f"sugar={lists}", "--split", "all",
            "--calibrate-on", "sugar", "--threshold-on", "sugar", "--max-lists", half])  # fmt: skip
    after = json.loads((bundle / "metadata.json").read_text())["calibration_by_runtime"]
    assert list(after) == list(before) and after["openvino-bf16"]["lists"] == {"sugar": LISTS // 2}
