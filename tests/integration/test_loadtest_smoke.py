"""The Locust suite (``loadtests/``) run headless against a real server with the shipped model."""

from __future__ import annotations

import csv
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import REPO_ROOT, launch_service, wait_ready

from loadtests.scenarios import SCENARIOS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

logger = logging.getLogger(__name__)

LOCUSTFILE = "loadtests/locustfile.py"
STEP_SHAPE = "loadtests/shapes/step.py"
REPORT_PREFIX = "smoke"  # --csv writes smoke_stats.csv, smoke_failures.csv, ...


@contextmanager
def running_service(args: list[str], log_path: Path) -> Iterator[str]:
    # The log goes to a file: a pipe nobody reads during the load would fill and stall the server.
    with log_path.open("wb") as log:
        process, base_url = launch_service(args, cwd=REPO_ROOT, stdout=log)
        try:
            try:
                wait_ready(base_url, process)
            except AssertionError as e:
                raise AssertionError(f"{e}\n{log_path.read_text(errors='replace')[-2000:]}") from e
            yield base_url
        finally:
            process.terminate()
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def server_url(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A long deadline: admission control sheds a request (429) whose wait would not fit its
    # deadline, and on a CPU shared with other jobs a large pool can wait seconds. Shedding is
    # tested on its own (test_faults.py, test_batching.py); here only errors may fail the gate.
    args = ["--model", str(model_dir), "--limits.request-timeout-s", "120"]
    with running_service(args, tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


def run_locust(base_url: str, out: Path, *args: str, run_time_s: int) -> tuple[int, str]:
    """Locust headless as a subprocess, reports under ``out``; its exit code and output."""
    # The run must not depend on the caller's LOADTEST_*/LOCUST_* settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADTEST_", "LOCUST_"))}
    reports = ["--csv", str(out / REPORT_PREFIX), "--html", str(out / "report.html")]
    command = [sys.executable, "-m", "locust", "--headless", "--only-summary", "--host", base_url]
    command += ["--run-time", f"{run_time_s}s", *reports, *args]
    result = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=run_time_s + 60,
    )
    logger.info("locust exited with %d:\n%s", result.returncode, result.stdout)
    return result.returncode, result.stdout


def test_every_scenario_runs_without_failures_under_the_step_shape(server_url: str, tmp_path: Path) -> None:
    # Equal weights: each user deals every scenario once in its first four requests.
    weights = [arg for name in SCENARIOS for arg in (f"--weight-{name.replace('_', '-')}", "1")]
    code, output = run_locust(
        server_url,
        tmp_path,
        *("-f", f"{LOCUSTFILE},{STEP_SHAPE}", "--users", "4", "--spawn-rate", "4"),
        *("--step-users", "2", "--step-time-s", "5", "--wait-min-s", "0.05", "--wait-max-s", "0.2"),
        # Not a latency test (a shared CPU): only failures may fail the gate here.
        *("--slo-max-error-ratio", "0", "--slo-p95-ms", "600000"),
        *weights,
        run_time_s=20,
    )

    assert code == 0, output[-4000:]
    stats_csv = tmp_path / f"{REPORT_PREFIX}_stats.csv"
    assert stats_csv.is_file(), output[-4000:]
    with stats_csv.open(newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    for scenario in SCENARIOS:
        row = rows.get(f"rank:{scenario}")
        assert row is not None, f"no requests of {scenario}: {sorted(rows)}"
        assert int(row["Request Count"]) > 0, row
        assert int(row["Failure Count"]) == 0, row
    report = tmp_path / "report.html"
    assert report.is_file() and "rank:large_pool" in report.read_text(encoding="utf-8")


def test_the_slo_gate_fails_a_run_whose_p95_is_over_the_limit(server_url: str, tmp_path: Path) -> None:
    code, output = run_locust(
        server_url,
        tmp_path,
        *("-f", LOCUSTFILE, "--users", "2", "--spawn-rate", "2", "--wait-min-s", "0", "--wait-max-s", "0.1"),
        *("--slo-p95-ms", "1"),  # no request over HTTP with a real model takes under 1 ms
        run_time_s=4,
    )

    assert code != 0, output[-4000:]
    assert "SLO gate FAILED" in output and "ms > 1 ms" in output, output[-4000:]


def test_agent_traffic_runs_clean_against_guidelines_the_suite_was_not_told(
    model_dir: Path, abcd_kb: Path, tmp_path: Path
) -> None:
    # The service loads ABCD's 55 intents; Locust gets no --guidelines and asks GET /v1/guidelines.
    args = ["--model", str(model_dir), "--guidelines", str(abcd_kb)]
    with running_service(args, tmp_path / "server.log") as url:
        only_agent = [
            arg
            for name in SCENARIOS
            for arg in (f"--weight-{name.replace('_', '-')}", "1" if name == "agent_assist" else "0")
        ]
        code, output = run_locust(
            url,
            tmp_path,
            *(
                "-f",
                LOCUSTFILE,
                "--users",
                "2",
                "--spawn-rate",
                "2",
                "--wait-min-s",
                "0.05",
                "--wait-max-s",
                "0.2",
            ),
            *only_agent,
            *("--slo-max-error-ratio", "0", "--slo-p95-ms", "600000"),
            run_time_s=10,
        )
    assert code == 0, output[-4000:]
    with (tmp_path / f"{REPORT_PREFIX}_stats.csv").open(newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    row = rows["rank:agent_assist"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0, row
