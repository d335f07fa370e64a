"""Builds the backend that ``settings.backend`` names for one graph of the bundle."""

from __future__ import annotations

import importlib.metadata
import logging
from functools import partial
from pathlib import Path

from dialogue_ranker.serving.backends import optional
from dialogue_ranker.serving.backends.auto import AutoBackend, Option, Tolerance
from dialogue_ranker.serving.backends.base import AnyBackend
from dialogue_ranker.serving.backends.choice_cache import ChoiceCache, file_digest
from dialogue_ranker.serving.backends.onnx import OnnxBackend
from dialogue_ranker.serving.backends.openvino import (
    INSTALL_HINT,
    OpenVinoBackend,
    Precision,
    openvino_available,
    resolve_precision,
    resolve_weights,
)
from dialogue_ranker.serving.cpu import (
    available_cpus,
    batch_workers,
    cpu_flags,
    cpu_model,
    int8_dot_products,
    intra_op_threads,
    native_bf16,
)
from dialogue_ranker.serving.model_bundle import OnnxModelSpec
from dialogue_ranker.serving.settings import Settings

logger = logging.getLogger(__name__)


def build_backend(settings: Settings, spec: OnnxModelSpec) -> AnyBackend:
    """The backend named by ``settings.backend`` for one ONNX graph of the bundle."""
    if settings.backend == "onnx":
        if spec.precision == "int8" and not int8_dot_products():
            # auto measures this and serves another runtime; a forced choice is the operator's, said at
            # start for each int8 graph it applies to.
            logger.warning(
                "backend onnx (%s): this CPU has no int8 dot products (VNNI, AMX): ONNX Runtime's int8 "
                "kernels saturate and its scores stray from the fp32 reference (top-1 agreement 0.875 on "
                "an AVX2-only Zen 3); --backend auto or openvino serves f32 within tolerance",
                spec.path.name,
            )
        return onnx_backend(settings, spec)
    if settings.backend == "openvino":
        return openvino_backend(settings, spec, resolve_precision(settings.openvino.precision))
    if settings.backend == "auto":
        return auto_backend(settings, spec)
    if settings.backend == "fake":
        from dialogue_ranker.serving.backends.fake import FakeBackend, poison_ids

        fake = settings.fake
        return FakeBackend(
            latency_s=fake.latency_s,
            fail_every_n_batches=fake.fail_every_n_batches,
            fail_on_ids=poison_ids(fake.fail_on_text, spec.tokenizer_path) if fake.fail_on_text else (),
        )
    optional.require("triton")  # a missing client says which install brings it
    from dialogue_ranker.serving.backends.triton import TritonBackend

    triton = settings.triton
    return TritonBackend(
        url=triton.url,
        model_name=triton.ranker_model,
        input_names=spec.input_names,
        output_name=spec.output_name,
        timeout_s=triton.timeout_s,
        health_timeout_s=triton.health_timeout_s,
        length_buckets=_buckets_within(triton.length_buckets, spec.max_length),
        max_batch_pairs=triton.max_batch_pairs,
    )


def _buckets_within(buckets: list[int], max_length: int) -> tuple[int, ...]:
    # Pairs never pass the model's length limit, so it is the last bucket. A shared-prefix sequence
    # holding several candidates can: it is sent at its own length (scored right, batched less).
    if not buckets:
        return ()
    return (*(b for b in buckets if b < max_length), max_length)


def onnx_backend(settings: Settings, spec: OnnxModelSpec) -> OnnxBackend:
    """ONNX Runtime on ``spec``, threads from the container's CPU quota unless set."""
    return OnnxBackend(
        spec,
        intra_op_threads=settings.onnx.intra_op_threads or intra_op_threads(settings.batching.workers),
        inter_op_threads=settings.onnx.inter_op_threads,
        solo_threads=settings.onnx.solo_threads or available_cpus(),
    )


def openvino_backend(settings: Settings, spec: OnnxModelSpec, precision: Precision) -> OpenVinoBackend:
    """OpenVINO on ``spec`` at ``precision``: a stream per CPU of the quota unless set."""
    ov = settings.openvino
    return OpenVinoBackend(
        spec,
        precision=precision,
        streams=ov.streams or available_cpus(),
        threads_per_stream=ov.threads_per_stream,
        requests=batch_workers(settings.batching.workers),
        solo_threads=ov.solo_threads or available_cpus(),
        dynamic_quantization_group_size=ov.dynamic_quantization_group_size,
        weights=resolve_weights(ov.weights, precision),
        runtime_cache_capacity=ov.runtime_cache_capacity,
    )


def auto_options(settings: Settings, spec: OnnxModelSpec) -> list[Option]:
    """The candidates of ``--backend auto``: ONNX Runtime (always; the fallback), then ``auto.runtimes``."""
    options = [Option("onnx", spec.precision, partial(onnx_backend, settings, spec))]
    installed = openvino_available()
    for runtime in settings.auto.runtimes:
        precision: Precision = "bf16" if runtime == "openvino-bf16" else "f32"
        if not installed:
            options.append(Option("openvino", precision, None, f"openvino is not installed ({INSTALL_HINT})"))
        elif precision == "bf16" and not native_bf16():
            options.append(Option("openvino", precision, None, "no native bf16 here (AVX-512 BF16, AMX)"))
        else:
            build = partial(openvino_backend, settings, spec, precision)
            options.append(Option("openvino", precision, build))
    return options


def auto_backend(settings: Settings, spec: OnnxModelSpec) -> AutoBackend:
    """``--backend auto`` for ``spec``: its candidates, the bundle's samples and the tolerance."""
    auto = settings.auto
    return AutoBackend(
        auto_options(settings, spec),
        samples=spec.samples,
        calibration=spec.calibration,
        tolerance=Tolerance(auto.min_top1_agreement, auto.max_mean_abs_diff),
        probe_s=auto.probe_s,
        concurrency=batch_workers(settings.batching.workers),
        max_trial_s=auto.max_trial_s,
        cache=None if auto.cache_dir is None else choice_cache(settings, spec, auto.cache_dir),
    )


def choice_cache(settings: Settings, spec: OnnxModelSpec, directory: Path) -> ChoiceCache:
    """Where ``spec``'s choice is kept, keyed by everything that decides it."""
    return ChoiceCache(
        directory,
        {
            "graph": file_digest(spec.path),
            "samples": file_digest(spec.samples) if spec.samples is not None else None,
            "cpu": cpu_model(),
            "flags": sorted(cpu_flags()),
            "cpus": available_cpus(),
            "versions": {name: _version(name) for name in ("onnxruntime", "openvino")},
            "settings": {
                "onnx": settings.onnx.model_dump(mode="json"),
                "openvino": settings.openvino.model_dump(mode="json"),
                "auto": settings.auto.model_dump(mode="json", exclude={"cache_dir", "max_trial_s"}),
                "workers": settings.batching.workers,
            },
        },
    )


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
