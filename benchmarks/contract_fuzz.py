"""The API against its published contract: schemathesis over every route of ``/openapi.json``.

    python -m benchmarks.contract_fuzz                                   # 250 cases an operation a phase
    python -m benchmarks.contract_fuzz --max-examples 40 --seed 7 --out /tmp/contract.txt

1. ``ranker serve`` on a free loopback port: the shipped model on ONNX Runtime (one thread), a
   response bank (``--bank NAME=FILE``, default the load tests' sample replies), guidelines
   (``--guidelines``, default ABCD's ``kb.json`` from ``../shared/data`` where it is, else the
   shipped ones) and request logs in the working directory (so ``POST /v1/feedback`` is on);
   ready once the bank is embedded;
2. schemathesis (``benchmarks/contract_fuzz.toml``): every check, the examples, coverage,
   fuzzing and stateful phases (the stateful one follows the document's links: a bank from
   ``/v1/banks`` into ``/rank``, a model from ``/v1/models`` into the ranking routes, a request id
   from ``/rank`` into ``/v1/feedback``), from the
   seed; the answers a schema-valid request may get besides a 2xx are declared in
   ``benchmarks/contract_checks.py``;
3. its report, printed and written to ``--out`` (default
   ``benchmarks/results/contract_fuzz.txt``); the exit code is schemathesis's (0: no failure).

The suite runs the same with a small count (``tests/integration/test_contract.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.service_load import REPO_ROOT, free_port, wait_http
from loadtests.bank import sample_bank, write_bank

CONFIG = REPO_ROOT / "benchmarks" / "contract_fuzz.toml"
ABCD_KB = REPO_ROOT.parent / "shared" / "data" / "abcd" / "kb.json"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "contract_fuzz.txt"
PHASES = "examples,coverage,fuzzing,stateful"
#: Seconds to wait for ``/readyz`` (the model loads, the bank embeds).
READY_TIMEOUT_S = 300


def schemathesis_command(url: str, *, max_examples: int, seed: int, keep_going: bool) -> list[str]:
    """The schemathesis run against the service at ``url`` (run from the working directory)."""
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
        "run", f"{url}/openapi.json", "--phases", PHASES, "--max-examples", str(max_examples),
        "--seed", str(seed),
        # One worker: the service under test shares the CPUs with it.
        "--workers", "1",
    ]  # fmt: skip
    return command + (["--continue-on-failure"] if keep_going else [])


def run_contract(
    *,
    model: Path | None,
    banks: Sequence[str],
    guidelines: Path | None,
    max_examples: int,
    seed: int,
    workdir: Path,
    keep_going: bool = False,
) -> tuple[int, str]:
    """Serve, fuzz and stop: schemathesis's exit code and its report.

    ``model``: a bundle (None: the shipped one); ``banks``: ``NAME=FILE`` each; ``guidelines``: a
    ``kb.json`` (None: the service's default).
    The server's log is ``workdir/server.log``, its request logs ``workdir/request-logs``;
    schemathesis runs in ``workdir``.

    Raises:
        SystemExit: the service exited or was not ready in time.
    """
    port = free_port()
    serve = [
        sys.executable, "-m", "dialogue_ranker.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        # ONNX Runtime as it is (no `auto` trials at start), on one thread: the fuzzer needs the other.
        "--backend", "onnx", "--onnx.intra-op-threads", "1",
        # Request logs on: POST /v1/feedback answers 409 without them.
        "--logs.dir", str(workdir / "request-logs"),
    ]  # fmt: skip
    if model is not None:
        serve += ["--model", str(model)]
    for bank in banks:
        serve += ["--bank", bank]
    if guidelines is not None:
        serve += ["--guidelines", str(guidelines)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    url = f"http://127.0.0.1:{port}"
    with (workdir / "server.log").open("wb") as log:
        server = subprocess.Popen(serve, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"{url}/readyz", server, "the service", timeout_s=READY_TIMEOUT_S)
        command = schemathesis_command(url, max_examples=max_examples, seed=seed, keep_going=keep_going)
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, check=False)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return done.returncode, done.stdout + done.stderr


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.contract_fuzz``: the exit code is schemathesis's."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-examples", type=int, default=250, help="cases an operation a phase")
    parser.add_argument("--seed", type=int, default=61)
    parser.add_argument("--bank", action="append", default=[], help="NAME=FILE (default: sample replies)")
    parser.add_argument("--guidelines", type=Path, default=ABCD_KB if ABCD_KB.is_file() else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="contract-") as tmp:
        workdir = Path(tmp)
        banks = args.bank or [f"samples={workdir / 'samples.jsonl'}"]
        if not args.bank:
            write_bank(workdir / "samples.jsonl", sample_bank())
        code, report = run_contract(
            model=None,
            banks=banks,
            guidelines=args.guidelines,
            max_examples=args.max_examples,
            seed=args.seed,
            workdir=workdir,
            keep_going=True,
        )
    guidelines = args.guidelines.name if args.guidelines else "the shipped guidelines"
    names = ", ".join(bank.split("=")[0] for bank in banks)
    header = (
        f"# python -m benchmarks.contract_fuzz --max-examples {args.max_examples} --seed {args.seed}\n"
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; banks: {names}; guidelines: {guidelines}; "
        f"exit code {code}\n\n"
    )
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(header + report)
    print(f"wrote {args.out}")
    return code


if __name__ == "__main__":
    sys.exit(main())
