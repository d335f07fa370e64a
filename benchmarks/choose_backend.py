"""What ``ranker serve`` (``--backend auto``, the default) would choose on this host, and why.

    .venv/bin/python benchmarks/choose_backend.py                  # the shipped model, the defaults
    .venv/bin/python benchmarks/choose_backend.py --model DIR --probe-s 2

Runs exactly what the service runs at start for the bundle's ranker: each in-process runtime and
precision available here (ONNX Runtime; OpenVINO in bf16 where the CPU has native bf16, and in
f32, where the ``openvino`` extra is installed) scores the bundle's sample sequences, is checked
against their fp32 logits, and is timed with the batcher's concurrent calls. Prints the CPU, each
candidate's figures, the choice and the reason. Nothing is served.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "src"))

from dialogue_ranker.data.machine import read_cpu  # noqa: E402
from dialogue_ranker.serving.backends.factory import auto_backend  # noqa: E402
from dialogue_ranker.serving.cpu import available_cpus, batch_workers, cpu_flags, native_bf16  # noqa: E402
from dialogue_ranker.serving.model_bundle import load_bundle  # noqa: E402
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR, Settings  # noqa: E402

#: The flags that decide the runtimes' kernels, as the report quotes them.
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="the bundle")
    parser.add_argument("--probe-s", type=float, default=None, help="seconds each runtime is timed")
    args = parser.parse_args(argv)
    settings = Settings(model=[str(args.model)])
    if args.probe_s:
        settings.auto.probe_s = args.probe_s
    bundle = load_bundle(args.model)
    cpu, flags = read_cpu(), cpu_flags()
    print(f"CPU: {cpu.model}")
    print(f"flags: {' '.join(f for f in FLAGS if f in flags) or 'none of ' + ', '.join(FLAGS)}")
    print(
        f"CPUs usable: {available_cpus()}; concurrent calls: {batch_workers(settings.batching.workers)}; "
        f"native bf16: {'yes' if native_bf16() else 'no'}"
    )
    print(f"model: {bundle.model_id}; samples: {bundle.ranker.samples or 'none'}")
    auto = settings.auto
    print(
        f"tolerance: top-1 agreement >= {auto.min_top1_agreement}, mean |calibrated score - fp32's| <= "
        f"{auto.max_mean_abs_diff}; each timed for {auto.probe_s} s\n"
    )
    backend = auto_backend(settings, bundle.ranker)
    backend.start()
    choice = backend.choice
    assert choice is not None
    head = ("runtime", "precision", "accepted", "cand/s", "top-1", "mean|dp|", "max|dp|")
    widths = ("<10", "<9", "<8", ">8", ">6", ">9", ">8")
    print(" ".join(f"{h:{w}}" for h, w in zip(head, widths, strict=True)) + "  note")
    for t in choice.trials:
        cells = [
            f"{t.candidates_per_s:8.1f}" if t.candidates_per_s is not None else f"{'-':>8}",
            f"{t.top1_agreement:6.3f}" if t.top1_agreement is not None else f"{'-':>6}",
            f"{t.mean_abs_diff:9.5f}" if t.mean_abs_diff is not None else f"{'-':>9}",
            f"{t.max_abs_diff:8.5f}" if t.max_abs_diff is not None else f"{'-':>8}",
        ]
        print(f"{t.runtime:<10} {t.precision:<9} {str(t.accepted).lower():<8} {' '.join(cells)}  {t.note}")
    print(f"\nauto would serve: {choice.backend} {choice.precision}\nwhy: {choice.reason}")
    print(f"calibration in force: {bundle.for_runtime(choice.runtime).calibration_in_force}")
    backend.close()


if __name__ == "__main__":
    main()
