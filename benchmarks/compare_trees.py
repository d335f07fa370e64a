"""Two checkouts of the service under the same load, measured in turns: is a change slower.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/compare_trees.py --before /tmp/before --after .

Each tree's ``ranker serve`` runs from its own ``src/`` (same venv, same model), ``--backend onnx``
and no logit cache, so only the code between the HTTP layer and the runtime differs; each level
is measured in ``--rounds`` turns (the order reversed each round) and the medians printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from dialogue_ranker.bench.cli import machine_line  # noqa: E402
from dialogue_ranker.bench.load import Service, run_load, start_service  # noqa: E402
from dialogue_ranker.bench.workload import bench_requests  # noqa: E402


def serve(tree: Path) -> Service:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
    flags = ["--backend", "onnx", "--ranking.logit-cache-entries", "0",
             "--model", str(tree / "models" / "dialogue-minilm-l6")]  # fmt: skip
    return start_service(str(tree), flags, env=env, cwd=tree)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--clients", default="4,16")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=5.0, help="per round")
    args = parser.parse_args()
    servers = {f"before ({args.before})": serve(args.before), f"after ({args.after})": serve(args.after)}
    try:
        requests, source = bench_requests()
        for service in servers.values():
            run_load(service.port, requests, 4, 2.0)  # warm-up
        print(machine_line())
        print(source)
        for clients in (int(c) for c in args.clients.split(",")):
            rates: dict[str, list[float]] = {label: [] for label in servers}
            for round_ in range(args.rounds):
                order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
                for label in order:
                    load = run_load(servers[label].port, requests, clients, args.seconds)
                    rates[label].append(load.candidates_per_s)
            for label, values in rates.items():
                rounds = ", ".join(f"{v:.0f}" for v in values)
                median = statistics.median(values)
                print(f"{clients} clients, {label}: median {median:.1f} pairs/s (rounds: {rounds})")
    finally:
        for service in servers.values():
            service.stop()


if __name__ == "__main__":
    main()
