"""A bundle's map per runtime (``calibration_by_runtime``): served when its runtime scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import serve_in_process, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends.auto import AutoBackend, Option, Tolerance
from dialogue_ranker.serving.backends.fake import FakeBackend
from dialogue_ranker.serving.calibration import Calibrator, runtime_key
from dialogue_ranker.serving.model_bundle import BundleError, load_bundle
from dialogue_ranker.serving.settings import Settings

BODY = {"context": "could you make some coffee", "candidates": ["sure", "no", "i will make tea"]}
#: The map and threshold the bundle carries for OpenVINO in bf16 (its own: a=1, b=0, threshold 0.5).
BF16 = {"calibration": {"method": "platt", "a": 2.0, "b": 1.0}, "threshold": 0.7}


class FakeOpenVino(FakeBackend):
    """The fake's scores, reported as OpenVINO's (the runtime a map is looked up by)."""

    name = "openvino"

    def __init__(self, precision: str) -> None:
        super().__init__()
        self.precision = precision


def bundle_with_runtime_maps(directory: Path) -> Path:
    bundle = write_fake_bundle(directory)
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["calibration_by_runtime"] = {
        "onnx": {"calibration": meta["calibration"], "threshold": 0.5},
        "openvino-bf16": BF16,
    }
    (bundle / "metadata.json").write_text(json.dumps(meta))
    return bundle


async def served(bundle: Path, backend_factory) -> tuple[dict, str, dict]:
    """``/v1/models``' entry, the ``ranker_model_info`` line and one ``/rank`` answer."""
    async with serve_in_process(
        create_app(Settings(model=bundle), backend_factory=backend_factory)
    ) as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
        metrics = (await client.get("/metrics")).text
        ranked = (await client.post("/rank", json=BODY)).json()
    info = next(line for line in metrics.splitlines() if line.startswith("ranker_model_info{"))
    return listed, info, ranked


async def test_the_chosen_runtimes_own_map_and_threshold_are_served(tmp_path: Path) -> None:
    def auto(settings: Settings, spec) -> AutoBackend:  # auto with one candidate: OpenVINO in bf16
        bf16 = Option("openvino", "bf16", lambda: FakeOpenVino("bf16"))
        return AutoBackend([bf16], samples=None, calibration=spec.calibration,
                           tolerance=Tolerance(0.9, 0.01), probe_s=0.05, concurrency=1)  # fmt: skip

    listed, info, ranked = await served(bundle_with_runtime_maps(tmp_path / "bundle"), auto)
    assert (listed["backend"], listed["precision"]) == ("openvino", "bf16")
    assert listed["calibration_in_force"] == "openvino-bf16"
    assert listed["calibration"] == BF16["calibration"] and listed["threshold"] == 0.7
    assert 'calibration="openvino-bf16"' in info
    assert ranked["threshold"] == 0.7
    expected = Calibrator.from_dict(BF16["calibration"])
    for candidate in ranked["ranking"]:
        assert candidate["score"] == pytest.approx(float(expected(np.array([candidate["logit"]]))[0]))


async def test_a_runtime_without_its_own_map_is_served_with_the_bundles(tmp_path: Path) -> None:
    def forced_f32(settings: Settings, spec) -> FakeBackend:
        return FakeOpenVino("f32")

    listed, info, ranked = await served(bundle_with_runtime_maps(tmp_path / "bundle"), forced_f32)
    assert (listed["backend_choice"]["mode"], listed["precision"]) == ("forced", "f32")
    assert listed["calibration_in_force"] == "bundle"
    assert listed["calibration"] == {"method": "platt", "a": 1.0, "b": 0.0} and listed["threshold"] == 0.5
    assert 'calibration="bundle"' in info and ranked["threshold"] == 0.5
    for candidate in ranked["ranking"]:
        assert candidate["score"] == pytest.approx(1 / (1 + np.exp(-candidate["logit"])))


def test_onnx_runtime_is_served_with_its_entry_which_is_the_bundles_own(tmp_path: Path) -> None:
    bundle = load_bundle(bundle_with_runtime_maps(tmp_path / "bundle"))
    onnx = bundle.for_runtime(runtime_key("onnx", "int8"))
    assert onnx.calibration_in_force == "onnx" and onnx.calibration == bundle.calibration
    assert bundle.for_runtime("triton") is bundle and bundle.calibration_in_force == "bundle"


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"calibration": {"method": "platt", "a": -1.0, "b": 0.0}, "threshold": 0.5}, "a > 0"),
        ({"calibration": BF16["calibration"], "threshold": 1.5}, "not in [0, 1]"),
        ({"calibration": BF16["calibration"]}, "threshold"),
    ],
)
def test_a_malformed_runtime_entry_is_refused_by_its_runtime(tmp_path: Path, entry: dict, words: str) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    meta = json.loads((bundle / "metadata.json").read_text())
    (bundle / "metadata.json").write_text(
        json.dumps({**meta, "calibration_by_runtime": {"openvino-bf16": entry}})
    )
    with pytest.raises(BundleError, match="calibration_by_runtime.openvino-bf16") as raised:
        load_bundle(bundle)
    assert words in str(raised.value)


def test_runtime_keys_are_the_auto_settings_names() -> None:
    assert [runtime_key("openvino", p) for p in ("bf16", "f32")] == ["openvino-bf16", "openvino-f32"]
    assert (runtime_key("onnx", "int8"), runtime_key("triton", "-")) == ("onnx", "triton")
