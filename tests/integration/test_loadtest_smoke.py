"""The Locust suite (``loadtests/``) run headless against a real server with the shipped model.

The server serves a small response bank made the way ``python -m loadtests.bank`` makes the load
tests' bank: the first Topical-Chat conversations when ``../shared/data`` is there (the bank
scenario's contexts then come from the same conversations), else the suite's sample replies.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO_ROOT, launch_service, wait_ready

from loadtests.bank import DEFAULT_TOPICAL_CHAT, make_bank, read_bank_file
from loadtests.scenarios import SCENARIOS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

logger = logging.getLogger(__name__)

LOCUSTFILE = "loadtests/locustfile.py"
STEP_SHAPE = "loadtests/shapes/step.py"
REPORT_PREFIX = "smoke"  # --csv writes smoke_stats.csv, smoke_failures.csv, ...
#: Conversations of the smoke bank (about 20 turns each): a few seconds of embedding at start.
BANK_CONVERSATIONS = 12


@dataclass(frozen=True)
class Served:
    url: str
    bank_file: Path
    #: The bank scenario's contexts (a Topical-Chat file of the bank's conversations), or none.
    contexts: Path | None
    log: Path

    def refusals(self) -> str:
        """The server's log lines of requests it did not serve (429 and 5xx, with their reasons)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if "request not served" in line)[-4000:]

    def bank_args(self) -> list[str]:
        args = ["--bank-file", str(self.bank_file)]
        return args + (["--topical-chat", str(self.contexts)] if self.contexts else [])


def smoke_bank(directory: Path) -> tuple[Path, Path | None]:
    """A small bank, and the conversations it holds (so contexts and bank match), when there are any."""
    bank = directory / "loadtest.jsonl"
    if not DEFAULT_TOPICAL_CHAT.is_file():
        make_bank(bank, source="samples")
        return bank, None
    conversations = json.loads(DEFAULT_TOPICAL_CHAT.read_text(encoding="utf-8"))
    subset = dict(list(conversations.items())[:BANK_CONVERSATIONS])
    contexts = directory / "conversations.json"
    contexts.write_text(json.dumps(subset), encoding="utf-8")
    make_bank(bank, source="topical-chat", topical_chat=contexts)
    return bank, contexts


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
def served(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # A long deadline: admission control sheds a request (429) whose wait would not fit its
    # deadline, and on a CPU shared with other jobs a large pool can wait seconds. Shedding is
    # tested on its own (test_faults.py, test_batching.py); here only errors may fail the gate.
    work = tmp_path_factory.mktemp("server")
    bank, contexts = smoke_bank(work)
    args = ["--model", str(model_dir), "--limits.request-timeout-s", "120", "--bank", f"loadtest={bank}"]
    with running_service(args, work / "server.log") as url:  # ready once the bank is embedded
        yield Served(url, bank, contexts, work / "server.log")


@pytest.fixture(scope="module")
def server_url(served: Served) -> str:
    return served.url


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


def no_latency_limits() -> list[str]:
    """Not a latency test (a shared CPU): only failures may fail the gate."""
    limits = [arg for name in SCENARIOS for arg in (f"--slo-p95-ms-{name.replace('_', '-')}", "0")]
    return ["--slo-max-error-ratio", "0", "--slo-p95-ms", "0", *limits]


def only(scenario: str) -> list[str]:
    return [
        arg
        for name in SCENARIOS
        for arg in (f"--weight-{name.replace('_', '-')}", "1" if name == scenario else "0")
    ]


def test_every_scenario_runs_without_failures_under_the_step_shape(served: Served, tmp_path: Path) -> None:
    # Equal weights: each user deals every scenario once in its first five requests.
    weights = [arg for name in SCENARIOS for arg in (f"--weight-{name.replace('_', '-')}", "1")]
    code, output = run_locust(
        served.url,
        tmp_path,
        *("-f", f"{LOCUSTFILE},{STEP_SHAPE}", "--users", "4", "--spawn-rate", "4"),
        *("--step-users", "2", "--step-time-s", "5", "--wait-min-s", "0.05", "--wait-max-s", "0.2"),
        *no_latency_limits(),
        *weights,
        *served.bank_args(),
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
        assert int(row["Failure Count"]) == 0, f"{row}\n{served.refusals()}"
    report = tmp_path / "report.html"
    assert report.is_file() and "rank:large_pool" in report.read_text(encoding="utf-8")


def test_the_bank_scenario_gets_answers_ranked_with_the_bank_ids(served: Served, tmp_path: Path) -> None:
    report = tmp_path / "slo.json"
    code, output = run_locust(
        served.url,
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
        *no_latency_limits(),
        *only("bank"),
        *served.bank_args(),
        *("--slo-report", str(report)),
        run_time_s=8,
    )

    assert code == 0, output[-4000:]
    with (tmp_path / f"{REPORT_PREFIX}_stats.csv").open(newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    row = rows["rank:bank"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0, row
    figures = json.loads(report.read_text(encoding="utf-8"))
    # Every 200 was checked against the bank's file (its ids, echoes and repeat masks) and ranked
    # bank responses: the counts come from the answers themselves. The report's request count is
    # read at the same moment as the bank counters; the CSV's is written at another moment and
    # can miss the last request of the run.
    answers = figures["bank"]["answers"]
    assert answers == figures["scenarios"]["rank:bank"]["requests"], figures
    assert figures["bank"]["answers with bank ids"] == answers
    assert figures["bank"]["bank responses ranked"] >= answers
    assert set(figures["bank_ids_sample"]) <= set(read_bank_file(served.bank_file)), figures[
        "bank_ids_sample"
    ]
    assert figures["passed"] and figures["scenarios"]["rank:bank"]["failures"] == 0


def test_the_suite_refuses_to_run_the_bank_scenario_against_a_bank_the_service_lacks(
    served: Served, tmp_path: Path
) -> None:
    code, output = run_locust(
        served.url, tmp_path, *("-f", LOCUSTFILE, "--users", "1", "--bank-name", "faq"), run_time_s=5
    )

    assert code != 0, output[-4000:]
    assert "bank 'faq', which" in output and "(it serves: loadtest)" in output, output[-4000:]
    assert "--weight-bank 0" in output, output[-4000:]


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
        only_agent = only("agent_assist")
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
            *no_latency_limits(),
            run_time_s=10,
        )
    assert code == 0, output[-4000:]
    with (tmp_path / f"{REPORT_PREFIX}_stats.csv").open(newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    row = rows["rank:agent_assist"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0, row
