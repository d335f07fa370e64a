"""``--backend auto`` with deterministic fakes: the check against fp32, the timing, the fallbacks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import serve_in_process, tiny_list_encoder, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.backends import factory
from dialogue_ranker.serving.backends.auto import AutoBackend, Option, Tolerance, choice_of
from dialogue_ranker.serving.backends.fake import FakeBackend, hashed_logit
from dialogue_ranker.serving.backends.openvino import resolve_precision, resolve_weights
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.cpu import cpu_flags, int8_dot_products, native_bf16
from dialogue_ranker.serving.errors import BackendError
from dialogue_ranker.serving.samples import agreement, load_samples, write_samples
from dialogue_ranker.serving.settings import Settings
from dialogue_ranker.serving.tokenization import Turn

TOLERANCE = Tolerance(min_top1_agreement=0.9, max_mean_abs_diff=0.01)


def write_tiny_samples(directory: Path) -> Path:
    """Three requests of the tiny tokenizer, with the fake backend's logits as the 'fp32' reference."""
    encoder = tiny_list_encoder(directory)
    requests = [
        encoder.encode_request([Turn("user", "could you make some coffee")], ["the machine is broken"], c)
        for c in (["sure", "no", "sorry one moment"], ["yes please", "hello"], ["tea", "coffee", "no", "yes"])
    ]
    calls = [[sequence] for request in requests for sequence in request]
    fake = FakeBackend()
    fake.start()
    logits = [fake.infer(encoder.pad(call)) for call in calls]
    return write_samples(
        directory / "samples.json", calls, logits, pad_id=encoder.pad_id, reference="fake", source="tiny"
    )


def shifted(offset: float):
    """A fake scoring like the reference plus ``offset`` (out of tolerance when large)."""
    return lambda ids: hashed_logit(ids) + offset


def auto(options: Sequence[Option], samples: Path | None, **overrides) -> AutoBackend:
    kwargs = {"tolerance": TOLERANCE, "probe_s": 0.05, "concurrency": 2, **overrides}
    return AutoBackend(options, samples=samples, calibration=Calibrator.identity(), **kwargs)


def test_samples_round_trip_as_backend_calls_with_their_reference(tmp_path: Path) -> None:
    samples = load_samples(write_tiny_samples(tmp_path))
    fake = FakeBackend()
    fake.start()
    logits = [fake.infer(batch) for batch in samples.batches]
    assert len(samples.batches) == 4 and samples.candidates == 9  # 4 candidates: two sequences
    assert agreement(logits, samples, Calibrator.identity()).mean_abs_diff == pytest.approx(0, abs=1e-6)


def test_a_malformed_samples_file_is_refused_by_path(tmp_path: Path) -> None:
    path = tmp_path / "samples.json"
    path.write_text(json.dumps({"kind": "shared-prefix", "pad_id": 0, "requests": [{"sequences": []}]}))
    with pytest.raises(ValueError, match="samples.json"):
        load_samples(path)


def test_auto_serves_the_fastest_runtime_within_tolerance(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    slow = Option("onnx", "int8", lambda: FakeBackend(latency_s=0.005))
    fast = Option("openvino", "bf16", lambda: FakeBackend(score_fn=shifted(0.001)))
    backend = auto([slow, fast], samples)
    backend.start()
    choice = backend.choice
    assert choice is not None and choice.mode == "auto"
    assert (choice.precision, backend.precision) == ("bf16", "bf16")
    assert [t.accepted for t in choice.trials] == [True, True]
    assert choice.trials[1].candidates_per_s > choice.trials[0].candidates_per_s  # type: ignore[operator]
    assert "fastest" in choice.reason and "onnx/int8" in choice.rates()
    assert backend.infer(load_samples(samples).batches[0]).shape == (3,)


def test_auto_refuses_a_runtime_out_of_tolerance_however_fast(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    exact = Option("onnx", "int8", lambda: FakeBackend(latency_s=0.005))
    off = Option("openvino", "bf16", lambda: FakeBackend(score_fn=shifted(0.5)))
    backend = auto([exact, off], samples)
    backend.start()
    assert backend.choice is not None and backend.choice.backend == "fake"
    refused = backend.choice.trials[1]
    assert not refused.accepted and refused.candidates_per_s is None
    assert "mean abs. difference" in refused.note and refused.mean_abs_diff > 0.01  # type: ignore[operator]


def test_a_refusal_names_every_check_that_failed() -> None:
    assert TOLERANCE.refuses(0.95, 0.005) == ""
    assert TOLERANCE.refuses(0.875, 0.005) == "top-1 agreement 0.875 < 0.9"
    assert TOLERANCE.refuses(0.875, 0.02) == "top-1 agreement 0.875 < 0.9, mean abs. difference 0.0200 > 0.01"


@pytest.mark.parametrize(("flags", "expected"), [({"avx2"}, False), ({"avx2", "avx_vnni"}, True),
                                                 ({"avx512_vnni"}, True), ({"amx_int8"}, True)])  # fmt: skip
def test_int8_dot_products_are_read_from_the_cpu_flags(flags, expected) -> None:
    assert int8_dot_products(frozenset(flags)) is expected


@pytest.mark.parametrize("dot_products", [True, False])
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_a_forced_onnx_backend_warns_only_for_int8_weights_on_a_cpu_without_int8_dot_products(
    model_dir: Path, monkeypatch, caplog, dot_products: bool, precision: str
) -> None:
    """The shipped graph declared as each precision a bundle ships (the warning reads the metadata's)."""
    from dataclasses import replace

    from dialogue_ranker.serving.model_bundle import load_bundle

    monkeypatch.setattr(factory, "int8_dot_products", lambda: dot_products)
    spec = replace(load_bundle(model_dir).ranker, precision=precision)
    with caplog.at_level("WARNING", logger=factory.__name__):
        factory.build_backend(Settings(backend="onnx", model=model_dir), spec)
    warned = [r for r in caplog.records if "no int8 dot products" in r.getMessage()]
    assert len(warned) == (1 if precision == "int8" and not dot_products else 0)


def test_auto_falls_back_to_the_first_runtime_when_none_is_within_tolerance(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    options = [Option("onnx", "int8", lambda: FakeBackend(score_fn=shifted(1.0)))]
    backend = auto(options, samples)
    backend.start()
    assert backend.choice is not None and "no runtime within tolerance" in backend.choice.reason
    assert backend.health()


def test_auto_without_samples_serves_the_first_runtime_and_says_why(tmp_path: Path) -> None:
    options = [Option("onnx", "int8", FakeBackend), Option("openvino", "bf16", FakeBackend)]
    backend = auto(options, None)
    backend.start()
    assert backend.choice is not None and "no sample sequences" in backend.choice.reason
    assert backend.choice.trials == ()


def test_an_option_that_cannot_run_here_is_reported_not_tried(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    options = [Option("onnx", "int8", FakeBackend), Option("openvino", "bf16", None, "not installed")]
    backend = auto(options, samples)
    backend.start()
    assert backend.choice is not None
    assert [(t.accepted, t.note) for t in backend.choice.trials] == [(True, ""), (False, "not installed")]


def test_a_forced_backend_reports_itself_as_forced() -> None:
    choice = choice_of(FakeBackend())
    assert (choice.mode, choice.backend, choice.reason, choice.trials) == (
        "forced",
        "fake",
        "--backend fake",
        (),
    )


def test_native_bf16_needs_avx512_bf16_or_amx(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert not native_bf16(cpu_flags(cpuinfo))
    assert native_bf16(frozenset({"avx512f", "avx512_bf16"})) and native_bf16(frozenset({"amx_bf16"}))
    assert resolve_precision("auto", frozenset({"avx2"})) == "f32"
    assert resolve_precision("auto", frozenset({"avx512_bf16"})) == "bf16"
    assert resolve_precision("bf16", frozenset()) == "bf16"


@pytest.mark.parametrize(
    ("setting", "precision", "flags", "weights"),
    [
        ("auto", "bf16", {"avx512_bf16", "amx_bf16", "amx_int8"}, "fp32"),  # AMX tiles: fp32 weights
        ("auto", "f32", {"avx512_bf16", "amx_bf16", "amx_int8"}, "int8"),  # f32: the int8 products
        ("auto", "bf16", {"avx512_bf16", "avx512_vnni"}, "int8"),  # AVX-512 BF16 without AMX
        ("auto", "f32", {"avx2"}, "int8"),
        ("int8", "bf16", {"amx_bf16"}, "int8"),  # a setting wins
        ("fp32", "f32", {"avx2"}, "fp32"),
    ],
)
def test_openvino_weights_auto_are_fp32_for_bf16_on_amx_only(
    setting: str, precision: str, flags: set[str], weights: str
) -> None:
    assert resolve_weights(setting, precision, frozenset(flags)) == weights  # type: ignore[arg-type]


def test_the_openvino_backend_gets_the_weights_its_cpu_calls_for(
    fake_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dialogue_ranker.serving import cpu

    spec = load_spec(fake_bundle)
    for flags, weights in ((frozenset({"avx512_bf16"}), "int8"), (frozenset({"amx_bf16"}), "fp32")):
        monkeypatch.setattr(cpu, "cpu_flags", lambda flags=flags: flags)
        assert factory.openvino_backend(Settings(model=fake_bundle), spec, "bf16").weights == weights
    forced = Settings(model=fake_bundle, openvino={"weights": "int8"})  # on the AMX flags still
    assert factory.openvino_backend(forced, spec, "bf16").weights == "int8"


def test_auto_skips_openvino_where_it_is_not_installed(
    fake_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(factory, "openvino_available", lambda: False)
    options = factory.auto_options(Settings(model=fake_bundle), load_spec(fake_bundle))
    assert [(o.label, o.build is None) for o in options] == [
        ("onnx/fp32", False),
        ("openvino/bf16", True),
        ("openvino/f32", True),
    ]
    assert "not installed" in options[1].unavailable


def test_auto_skips_bf16_on_a_cpu_without_native_bf16(
    fake_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(factory, "openvino_available", lambda: True)
    monkeypatch.setattr(factory, "native_bf16", lambda: False)
    options = factory.auto_options(Settings(model=fake_bundle), load_spec(fake_bundle))
    assert [(o.label, o.build is None) for o in options] == [
        ("onnx/fp32", False),
        ("openvino/bf16", True),
        ("openvino/f32", False),
    ]
    assert "no native bf16" in options[1].unavailable


async def test_the_choice_is_listed_by_v1_models_and_in_the_model_info_metric(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")

    def backends(settings: Settings, spec) -> AutoBackend:
        exact = Option("fake", "fp32", FakeBackend)
        return AutoBackend(
            [exact], samples=write_tiny_samples(tmp_path), calibration=spec.calibration,
            tolerance=TOLERANCE, probe_s=0.05, concurrency=1,
        )  # fmt: skip

    app = create_app(Settings(model=bundle), backend_factory=backends)
    async with serve_in_process(app) as client:
        listed = (await client.get("/v1/models")).json()["data"][0]
        metrics = (await client.get("/metrics")).text
    assert listed["backend"] == "fake" and listed["precision"] == "fp32"
    assert listed["backend_choice"]["mode"] == "auto"
    assert listed["backend_choice"]["trials"][0]["accepted"] is True
    info = next(line for line in metrics.splitlines() if line.startswith("ranker_model_info{"))
    assert 'backend_selection="auto"' in info and 'backend_rates="fake/fp32=' in info


def load_spec(bundle: Path):
    from dialogue_ranker.serving.model_bundle import load_bundle

    return load_bundle(bundle).ranker


def test_of_two_runtimes_about_as_fast_the_one_nearer_fp32_serves(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    exact, near = FakeBackend(), FakeBackend(score_fn=shifted(0.005))
    rates = {id(exact): 100.0, id(near): 103.0}  # within TIE_MARGIN: timing noise

    class FixedRates(AutoBackend):
        def _rate(self, backend, samples, seconds) -> float:  # type: ignore[no-untyped-def]
            return rates[id(backend)]

    backend = FixedRates(
        [Option("onnx", "int8", lambda: exact), Option("openvino", "bf16", lambda: near)],
        samples=samples, calibration=Calibrator.identity(), tolerance=TOLERANCE, probe_s=0.05, concurrency=1,
    )  # fmt: skip
    backend.start()
    assert backend.choice is not None and backend.choice.precision == "int8"
    assert "nearer fp32" in backend.choice.reason


def test_runtimes_are_timed_in_turns_and_each_keeps_its_best_round(tmp_path: Path) -> None:
    """A burst of other work slows one round; the runtime it hit is still judged by its best."""
    samples = write_tiny_samples(tmp_path)
    first, second = FakeBackend(), FakeBackend(score_fn=shifted(0.001))
    order: list[str] = []
    # The first runtime is disturbed in the first round only (as a busy host would do to it).
    rounds = {id(first): iter([10.0, 300.0, 290.0]), id(second): iter([200.0, 210.0, 205.0])}
    names = {id(first): "first", id(second): "second"}

    class Scripted(AutoBackend):
        def _rate(self, backend, samples, seconds) -> float:  # type: ignore[no-untyped-def]
            order.append(names[id(backend)])
            return next(rounds[id(backend)])

    backend = Scripted(
        [Option("onnx", "int8", lambda: first), Option("openvino", "bf16", lambda: second)],
        samples=samples, calibration=Calibrator.identity(), tolerance=TOLERANCE, probe_s=0.3, concurrency=1,
    )  # fmt: skip
    backend.start()
    assert order == ["first", "second", "second", "first", "first", "second"]  # turns rotate each round
    assert backend.choice is not None and backend.choice.precision == "int8"
    assert [t.candidates_per_s for t in backend.choice.trials] == [300.0, 210.0]


def test_a_runtime_that_fails_while_timed_is_refused(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    calls = {"n": 0}

    def fails_after_the_check(ids):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > 20:  # the cold call and the checking pass go through
            raise BackendError("device lost")
        return hashed_logit(ids)

    failing = Option("openvino", "bf16", lambda: FakeBackend(score_fn=fails_after_the_check))
    options = [Option("onnx", "int8", FakeBackend), failing]
    backend = auto(options, samples)
    backend.start()
    assert backend.choice is not None and backend.choice.precision == "int8"
    refused = backend.choice.trials[1]
    assert not refused.accepted and refused.note.startswith("failed while timed")


def test_the_trial_tries_no_further_runtime_once_its_time_is_spent(tmp_path: Path) -> None:
    samples = write_tiny_samples(tmp_path)
    built: list[str] = []

    def build(name: str, latency_s: float = 0.0):  # type: ignore[no-untyped-def]
        return lambda: built.append(name) or FakeBackend(latency_s=latency_s)

    options = [Option("onnx", "int8", build("onnx", 0.02)), Option("openvino", "bf16", build("bf16"))]
    backend = auto(options, samples, max_trial_s=0.01)
    backend.start()
    assert built == ["onnx"]
    assert backend.choice is not None and backend.choice.precision == "int8"
    untried = backend.choice.trials[1]
    assert not untried.accepted and "auto.max-trial-s" in untried.note


def test_a_stored_choice_serves_a_restart_without_a_trial(tmp_path: Path) -> None:
    from dialogue_ranker.serving.backends.choice_cache import ChoiceCache

    samples = write_tiny_samples(tmp_path)
    built: list[str] = []

    def options() -> list[Option]:
        def build(name: str, latency_s: float):  # type: ignore[no-untyped-def]
            return lambda: built.append(name) or FakeBackend(latency_s=latency_s)

        return [Option("onnx", "int8", build("onnx", 0.005)), Option("openvino", "bf16", build("bf16", 0.0))]

    cache = ChoiceCache(tmp_path / "cache", {"graph": "abc", "cpu": "test"})
    first = auto(options(), samples, cache=cache)
    first.start()
    assert first.choice is not None and first.choice.precision == "bf16" and built == ["onnx", "bf16"]
    assert cache.path.is_file()

    built.clear()
    restart = auto(options(), samples, cache=cache)
    restart.start()
    assert built == ["bf16"], "only the stored choice is started"
    assert restart.choice is not None and restart.choice.precision == "bf16"
    assert restart.choice.reason.startswith("stored choice of the trial at")
    assert restart.choice.trials == first.choice.trials

    built.clear()
    other_machine = ChoiceCache(tmp_path / "cache", {"graph": "abc", "cpu": "other"})
    elsewhere = auto(options(), samples, cache=other_machine)
    elsewhere.start()
    assert built == ["onnx", "bf16"], "another machine (another key) tries again"


def test_a_cache_directory_that_cannot_be_written_costs_only_the_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dialogue_ranker.serving.backends.choice_cache import ChoiceCache

    samples = write_tiny_samples(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    backend = auto([Option("onnx", "int8", FakeBackend)], samples, cache=ChoiceCache(blocker / "cache", {}))
    backend.start()
    assert backend.health()
    assert "backend choice cache not written" in caplog.text


def test_the_cache_key_changes_with_the_machine_the_graph_and_the_settings(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    spec = load_spec(bundle)
    keys = {
        factory.choice_cache(Settings(model=bundle), spec, tmp_path).key,
        factory.choice_cache(Settings(model=bundle, openvino={"streams": 1}), spec, tmp_path).key,
    }
    assert len(keys) == 2
    cache = factory.choice_cache(Settings(model=bundle), spec, tmp_path)
    assert cache.parts["cpu"] and cache.parts["flags"] == sorted(cpu_flags())
    assert cache.key == factory.choice_cache(Settings(model=bundle), spec, tmp_path).key
