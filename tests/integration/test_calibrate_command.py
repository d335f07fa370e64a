"""``ranker calibrate`` on a few real lists: a new bundle the service loads, saying what calibrated it.

ONNX Runtime only (``--runtimes onnx``) on 20 SUGAR lists: a few seconds on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import serve_in_process

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.model_bundle import load_bundle
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def few_lists(tmp_path: Path, sugar_lists: Path) -> Path:
    path = tmp_path / "team-lists.jsonl"
    path.write_text("".join(sugar_lists.read_text().splitlines(keepends=True)[:20]))
    return path


async def test_calibrate_writes_a_bundle_the_service_serves_with_its_own_map(
    tmp_path: Path, few_lists: Path, model_dir: Path, capsys
) -> None:
    from dialogue_ranker.export.calibrate import main

    out = tmp_path / "calibrated"
    recorded = main(
        ["--lists", str(few_lists), "--model", str(model_dir), "--out", str(out), "--holdout", "0.3",
         "--runtimes", "onnx"]
    )  # fmt: skip
    printed = capsys.readouterr().out
    base, bundle = load_bundle(model_dir), load_bundle(out)
    assert bundle.calibration.to_dict() != base.calibration.to_dict()
    assert bundle.threshold != base.threshold
    assert set(bundle.runtime_calibrations) == {"onnx"}  # the base's other runtimes' maps are not kept
    assert bundle.views == base.views and (out / "model.onnx").read_bytes() == base.ranker.path.read_bytes()
    calibrated = json.loads((out / "metadata.json").read_text())["calibrated_by"]
    assert calibrated == recorded
    assert calibrated["lists"] == "team-lists.jsonl" and calibrated["list_count"] == 20
    assert calibrated["sha256"] == hashlib.sha256(few_lists.read_bytes()).hexdigest()
    held = calibrated["held_out"]["onnx"]
    assert held["lists"] == calibrated["held_out_lists"] > 0
    assert calibrated["fitted_on_lists"] + held["lists"] == 20
    for figures in (held["before"], held["after"]):
        assert 0.0 <= figures["ece"] <= 1.0 and 0.0 <= figures["abstention_accuracy"] <= 1.0
    assert f"| onnx | {held['lists']} | {held['before']['ece']:.4f} | {held['after']['ece']:.4f} |" in printed
    assert "`team-lists.jsonl`" in (out / "MODEL_CARD.md").read_text()
    assert not list(out.glob("eval-*.json"))  # the old map's figures would describe another bundle

    settings = Settings(model=out, backend="onnx", onnx={"intra_op_threads": 1})
    async with serve_in_process(create_app(settings)) as client:
        models = (await client.get("/v1/models")).json()["data"][0]
        ranked = await client.post(
            "/rank", json={"context": "Play some music.", "candidates": ["Sure, softly.", "No."]}
        )
    assert models["calibrated_by"]["sha256"] == calibrated["sha256"]
    assert models["calibration"] == bundle.calibration.to_dict() and models["threshold"] == bundle.threshold
    assert ranked.status_code == 200, ranked.json()


def test_calibrate_refuses_to_write_over_a_bundle_it_did_not_write(tmp_path, few_lists, model_dir):
    from dialogue_ranker.export.calibrate import main

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "metadata.json").write_text("{}")
    with pytest.raises(SystemExit, match="not a bundle ranker calibrate wrote"):
        main(["--lists", str(few_lists), "--model", str(model_dir), "--out", str(tmp_path / "other"),
              "--runtimes", "onnx"])  # fmt: skip
    assert (tmp_path / "other" / "metadata.json").read_text() == "{}"


@pytest.mark.parametrize("within", [1.0, 0.0])
def test_a_runtime_whose_logits_agree_shares_the_first_runtimes_map_and_says_so(
    tmp_path: Path, few_lists: Path, model_dir: Path, within: float
) -> None:
    """The shipped int8 graph: OpenVINO f32's logits are about 0.1 from ONNX Runtime's, so a
    tolerance of 1 shares ONNX Runtime's map, and 0 fits OpenVINO's own on its own logits."""
    from dialogue_ranker.export.calibrate import PARITY_LISTS, chosen_runtimes, main

    if [r.key for r in chosen_runtimes("openvino-f32")] != ["onnx", "openvino-f32"]:
        pytest.skip("OpenVINO is not installed here")
    out = tmp_path / "calibrated"
    main(["--lists", str(few_lists), "--model", str(model_dir), "--out", str(out), "--holdout", "0",
          "--runtimes", "openvino-f32", "--share-map-within", str(within)])  # fmt: skip
    entries = json.loads((out / "metadata.json").read_text())["calibration_by_runtime"]
    onnx, openvino = entries["onnx"], entries["openvino-f32"]
    if within:
        assert openvino["shared_with"] == "onnx" and openvino["calibration"] == onnx["calibration"]
        parity = openvino["parity"]
        assert parity["lists"] == min(PARITY_LISTS, 20) and 0.0 <= parity["max_abs_logit"] <= within
    else:
        assert "shared_with" not in openvino and "parity" not in openvino
        assert openvino["calibration"] != onnx["calibration"]  # fitted on its own logits
    served = load_bundle(out).for_runtime("openvino-f32")
    assert (
        served.calibration.to_dict() == openvino["calibration"] and served.threshold == openvino["threshold"]
    )


def test_max_lists_fits_on_a_seeded_sample_and_records_it(
    tmp_path: Path, few_lists: Path, model_dir: Path
) -> None:
    from dialogue_ranker.export.calibrate import main

    runs = [
        main(
            [
                "--lists",
                str(few_lists),
                "--model",
                str(model_dir),
                "--out",
                str(tmp_path / name),
                "--runtimes",
                "onnx",
                "--holdout",
                "0.3",
                "--max-lists",
                "12",
                "--seed",
                "5",
            ]
        )  # fmt: skip
        for name in ("a", "b")
    ]
    first, again = runs
    assert first["list_count"] == 20 and first["sampled_lists"] == 12
    assert first["fitted_on_lists"] + first["held_out_lists"] == 12
    metadata = [json.loads((tmp_path / name / "metadata.json").read_text()) for name in ("a", "b")]
    assert metadata[0]["calibration"] == metadata[1]["calibration"]  # the same seed, the same sample
