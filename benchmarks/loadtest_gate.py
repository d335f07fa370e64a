"""The load tests' SLO gate in one command: the service with the load-test bank, the default mix, the verdict.

    python -m benchmarks.loadtest_gate                       # 8 users, 90 s (make loadtest-gate)
    python -m benchmarks.loadtest_gate --users 8 --run-time 60s --serve-arg=--ranking.logit-cache-entries=0

1. the bank: ``runs/loadtest/bank/loadtest.jsonl`` (``python -m loadtests.bank``: every turn of
   Topical-Chat's test_freq conversations, 11,760 responses, or the suite's sample replies without
   ``../shared/data``), written when missing; its vectors are cached beside it after the first start;
2. ``ranker serve --bank loadtest=FILE`` on a free loopback port with the service's defaults (the
   shipped model, ``--backend auto``, the logit cache on) plus any ``--serve-arg``; ready once the
   bank is embedded (a cold start embeds for about 40 s on 2 cores);
3. each scenario alone: ``--lone`` requests one after another (after one warm-up each), checked as
   under load, for their latency without queueing: what each scenario's SLO is set against;
4. Locust, headless, the default mix (``loadtests/locustfile.py``'s weights and SLO limits) with
   ``--users`` plain users (``--spawn-rate`` a second) for ``--run-time``, every answer checked
   against the bank's file; the SLO gate's verdict is the exit code;
5. the results: ``--out`` (default ``benchmarks/results/loadtest_gate/``): ``summary.md`` (the
   tables for the docs), ``summary.json``, ``slo.json`` and Locust's stats and failures CSVs;
   ``--logs`` (default ``runs/loadtest-gate/``): the server's and Locust's logs, the HTML report
   and the stats history.

The CPU's other load spoils the timings: the summary records the load average before the start and
warns when the machine was busy. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.service_load import REPO_ROOT, free_port
from dialogue_ranker.serving.cpu import available_cpus
from loadtests.bank import DEFAULT_BANK_FILE, DEFAULT_BANK_NAME, make_bank, read_bank_file, read_conversations
from loadtests.checks import check_rank_body, check_status
from loadtests.expected import BankInfo, Expected, Guidelines
from loadtests.scenarios import SCENARIOS, Traffic, load_situated

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "loadtest_gate"
DEFAULT_LOGS = REPO_ROOT / "runs" / "loadtest-gate"
DEFAULT_SUGAR = REPO_ROOT.parent / "shared" / "data" / "sugar" / "sugar.jsonl"
#: Seconds to wait for ``/readyz`` (a cold bank embeds first).
READY_TIMEOUT_S = 900


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def start_service(args: argparse.Namespace, bank: Path, log: Path) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    command = [
        sys.executable, "-m", "dialogue_ranker.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--bank", f"{args.bank_name}={bank}", *args.serve_arg,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    started = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the service exited with {process.returncode}; see {log}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return process, url, time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise SystemExit(f"the service was not ready within {READY_TIMEOUT_S} s; see {log}")


def lone_latencies(url: str, bank: BankInfo, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each scenario's requests one at a time: p50, min and max ms, and how many were answered right."""
    guidelines = Guidelines.from_service(url)
    situated, _ = load_situated(DEFAULT_SUGAR if DEFAULT_SUGAR.is_file() else None)
    conversations = read_conversations(args.topical_chat) if args.topical_chat.is_file() else []
    traffic = Traffic(
        guidelines=guidelines, situated=situated, seed=0, bank=bank, conversations=conversations
    )
    out: dict[str, dict[str, Any]] = {}
    with httpx.Client(timeout=60) as client:
        for scenario in SCENARIOS:
            times, wrong = [], []
            for n in range(args.lone + 1):
                body = traffic.builder(scenario)()
                started = time.perf_counter()
                response = client.post(f"{url}/rank", json=body)
                ms = 1000 * (time.perf_counter() - started)
                problem = check_status(response.status_code, response.content) or check_rank_body(
                    response.content, Expected.of(body, guidelines, bank)
                )
                if problem is not None:
                    wrong.append(problem.reason)
                elif n:  # the first is a warm-up
                    times.append(ms)
            out[scenario] = {
                "requests": args.lone,
                "p50_ms": round(statistics.median(times), 1) if times else None,
                "min_ms": round(min(times), 1) if times else None,
                "max_ms": round(max(times), 1) if times else None,
                "wrong": wrong,
            }
    return out


def run_locust(url: str, bank_file: Path, args: argparse.Namespace, logs: Path, out: Path) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "LOCUST_"))}
    command = [
        sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", "--headless", "--only-summary",
        "--host", url, "--users", str(args.users), "--spawn-rate", str(args.spawn_rate),
        "--run-time", args.run_time, "--csv", str(logs / "loadtest"), "--csv-full-history",
        "--html", str(logs / "report.html"), "--bank-name", args.bank_name, "--bank-file", str(bank_file),
        "--topical-chat", str(args.topical_chat) if args.topical_chat.is_file() else "",
        "--slo-report", str(out / "slo.json"), *args.locust_arg,
    ]  # fmt: skip
    with (logs / "locust.log").open("w") as log:
        result = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    for name in ("loadtest_stats.csv", "loadtest_failures.csv"):
        if (logs / name).is_file():
            shutil.copy(logs / name, out / name)
    return result.returncode


def summary_markdown(summary: dict[str, Any]) -> str:
    machine, slo = summary["machine"], summary["slo"]
    lines = [
        f"# Load-test SLO gate: {'PASSED' if slo.get('passed') else 'FAILED'}",
        "",
        f"{summary['finished_at']}; {machine['cpu']}, {machine['cpus']} CPUs available; load average before "
        f"the start {machine['load_average_before']} ({machine['note']}).",
        f"Service: `{summary['service']['command']}`; ready in {summary['service']['ready_s']:.1f} s; bank "
        f"{summary['bank']['name']!r}: {summary['bank']['size']} responses from {summary['bank']['source']}, "
        f"{'read from the cache' if summary['bank']['from_cache'] else 'embedded'} in "
        f"{summary['bank']['embed_seconds']} s.",
        f"Locust: {summary['locust']['users']} users, {summary['locust']['spawn_rate']}/s, "
        f"{summary['locust']['run_time']}, think time 0.5 to 2 s, the default mix; exit code "
        f"{summary['locust']['exit_code']}.",
        "",
        "| scenario | alone p50 ms | requests | failed | p50 ms | p95 ms | p95 limit ms | p99 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    scenarios = slo.get("scenarios", {})
    for scenario in SCENARIOS:
        lone = summary["lone"].get(scenario, {})
        row = scenarios.get(f"rank:{scenario}", {})
        cells = [row.get(k, "") for k in ("requests", "failures", "p50_ms", "p95_ms")]
        limit = row.get("p95_limit_ms") or ""
        lines.append(
            f"| {scenario} | {lone.get('p50_ms', '')} | {' | '.join(str(c) for c in cells)} | {limit} | "
            f"{row.get('p99_ms', '')} |"
        )
    total = slo.get("total", {})
    lines += [
        f"| all | | {total.get('requests', '')} | {total.get('failures', '')} | {total.get('p50_ms', '')} | "
        f"{total.get('p95_ms', '')} | | {total.get('p99_ms', '')} |",
        "",
        f"Throughput {total.get('rps', '')} requests/s; shed (429): {total.get('shed_429', '')}; failures: "
        f"{slo.get('failures') or 'none'}.",
        f"Breaches: {'; '.join(slo.get('breaches', [])) or 'none'}.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--spawn-rate", type=float, default=2.0)
    parser.add_argument("--run-time", default="90s", help="Locust's --run-time (default 90s)")
    parser.add_argument(
        "--lone", type=int, default=5, help="requests of each scenario alone, first (0: none)"
    )
    parser.add_argument("--bank-file", type=Path, default=DEFAULT_BANK_FILE, help="written when missing")
    parser.add_argument("--bank-name", default=DEFAULT_BANK_NAME)
    parser.add_argument(
        "--topical-chat",
        type=Path,
        default=REPO_ROOT.parent / "shared/data/topical_chat/conversations/test_freq.json",
        help="the conversations of the bank and of the bank requests' contexts",
    )
    parser.add_argument("--serve-arg", action="append", default=[], help="one more `ranker serve` argument")
    parser.add_argument("--locust-arg", action="append", default=[], help="one more Locust argument")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.logs.mkdir(parents=True, exist_ok=True)

    cpus = available_cpus()
    load_before = os.getloadavg()[0]
    busy = load_before > 0.25 * cpus
    note = "busy: timings are upper bounds" if busy else "quiet"
    if busy:
        print(f"warning: load average {load_before:.2f} on {cpus} CPUs: timings will be upper bounds")
    source = "an existing file"
    if not args.bank_file.is_file():
        size, source = make_bank(args.bank_file, topical_chat=args.topical_chat)
        print(f"wrote the bank: {size} responses from {source} to {args.bank_file}")
    responses = read_bank_file(args.bank_file)

    process, url, ready_s = start_service(args, args.bank_file, args.logs / "server.log")
    try:
        listed = next(
            b for b in httpx.get(f"{url}/v1/banks", timeout=10).json()["data"] if b["name"] == args.bank_name
        )
        how = "from the cache" if listed["from_cache"] else "embedded"
        print(f"service ready in {ready_s:.1f} s at {url}; bank: {listed['size']} responses, {how} in "
              f"{listed['embed_seconds']} s")  # fmt: skip
        bank = BankInfo(args.bank_name, listed["size"], responses)
        lone = lone_latencies(url, bank, args) if args.lone > 0 else {}
        for scenario, row in lone.items():
            print(f"alone: {scenario:13s} p50 {row['p50_ms']} ms (min {row['min_ms']}, max {row['max_ms']})"
                  + (f"; wrong: {row['wrong']}" if row["wrong"] else ""))  # fmt: skip
        print(f"Locust: {args.users} users for {args.run_time} ...", flush=True)
        code = run_locust(url, args.bank_file, args, args.logs, args.out)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()

    slo_path = args.out / "slo.json"
    slo = (
        json.loads(slo_path.read_text())
        if slo_path.is_file()
        else {"passed": False, "breaches": ["no report"]}
    )
    serve_command = " ".join(["ranker serve", f"--bank {args.bank_name}={args.bank_file}", *args.serve_arg])
    summary = {
        "finished_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "machine": {
            "cpu": cpu_model(),
            "cpus": cpus,
            "load_average_before": round(load_before, 2),
            "load_average_after": round(os.getloadavg()[0], 2),
            "note": note,
        },
        "service": {"command": serve_command, "ready_s": round(ready_s, 1)},
        "bank": {
            "name": args.bank_name,
            "file": str(args.bank_file),
            "size": listed["size"],
            "source": source if source != "an existing file" else f"{args.bank_file.name} (existing)",
            "from_cache": listed["from_cache"],
            "embed_seconds": listed["embed_seconds"],
        },
        "locust": {
            "users": args.users,
            "spawn_rate": args.spawn_rate,
            "run_time": args.run_time,
            "extra": args.locust_arg,
            "exit_code": code,
        },
        "lone": lone,
        "slo": slo,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = summary_markdown(summary)
    (args.out / "summary.md").write_text(markdown)
    print(markdown)
    print(f"results: {args.out}; logs and the HTML report: {args.logs}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
