"""Start-to-ready of ``ranker serve``: auto with a fresh trial, auto with its stored choice, onnx.

Each is started in turns (median of ``--starts``), on this machine.

    .venv/bin/python benchmarks/start_to_ready.py --starts 3

The same install as the Docker image's (the serving dependencies), so the figure is the image's
start-to-ready on this CPU, less the container's own start.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from dialogue_ranker.bench.cli import machine_line  # noqa: E402
from dialogue_ranker.bench.load import start_service  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        modes = {
            "auto, a fresh trial": lambda i: ["--auto.cache-dir", f"{cache}/fresh-{i}"],
            "auto, its stored choice": lambda i: ["--auto.cache-dir", f"{cache}/kept"],
            "--backend onnx": lambda i: ["--backend", "onnx"],
        }
        start_service("warm the cache", ["--auto.cache-dir", f"{cache}/kept"]).stop()
        seconds: dict[str, list[float]] = {mode: [] for mode in modes}
        for i in range(args.starts):
            for mode, flags in modes.items():
                service = start_service(mode, flags(i))
                seconds[mode].append(service.ready_s)
                service.stop()
    print(machine_line())
    print("| start | ready after (median s) | each start (s) |\n| --- | ---: | --- |")
    for mode, values in seconds.items():
        print(f"| {mode} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")


if __name__ == "__main__":
    main()
