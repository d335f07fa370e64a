"""Locust load test of ``POST /rank`` with the service's traffic mix.

Every simulated user sends ranking requests, each one of five scenarios dealt by weight
(``socialbot``, ``situated``, ``agent_assist``, ``large_pool``, ``bank``; see ``scenarios.py``),
and checks every answer (``checks.py``): a 200 with a wrong body is a failure with its reason, a
429 is the failure ``shed load: 429 overloaded``. At the end the SLO gate (``slo.py``) sets the
exit code.

The ``bank`` scenario ranks against a bank the service serves (``--bank-name``, default
``loadtest``): start it with ``ranker serve --bank loadtest=FILE``, the FILE made by
``python -m loadtests.bank``, or turn the scenario off with ``--weight-bank 0``.

Load shapes live in ``shapes/``, one per file, because Locust uses the first shape class it
finds: add the one wanted after this file, or none for plain ``--users``/``--spawn-rate``::

    locust -f loadtests/locustfile.py,loadtests/shapes/step.py --headless --host http://127.0.0.1:8000 \\
        --users 16 --spawn-rate 4 --run-time 2m --weight-large-pool 0 --slo-p95-ms-socialbot 500

Every option below is also an environment variable (``LOADTEST_...``); ``make loadtest`` wraps it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from locust import FastHttpUser, events, task
from locust.env import Environment
from locust.runners import WorkerRunner

# Locust puts only the working directory and this file's folder on sys.path; the project root
# makes ``loadtests`` (and ``training`` for the SUGAR loader) importable from anywhere.
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from loadtests.bank import (  # noqa: E402
    DEFAULT_BANK_NAME,
    DEFAULT_TOPICAL_CHAT,
    Conversation,
    read_bank_file,
    read_conversations,
    served_bank_size,
)
from loadtests.checks import Problem, check_rank_body, check_status  # noqa: E402
from loadtests.expected import BankInfo, Expected, Guidelines  # noqa: E402
from loadtests.scenarios import DEFAULT_WEIGHTS, SCENARIOS, Traffic, load_situated  # noqa: E402
from loadtests.slo import Slo, evaluate  # noqa: E402

logger = logging.getLogger(__name__)

DEFAULT_SUGAR = REPO_ROOT.parent / "shared" / "data" / "sugar" / "sugar.jsonl"
#: The SLO gate's p95 limit per scenario, in milliseconds (docs/guides/load-tests.md, "SLO gate").
DEFAULT_SLO_P95_MS = {
    "socialbot": 1000,
    "situated": 1000,
    "agent_assist": 1000,
    "large_pool": 4000,
    "bank": 2500,
}
#: Details of the same failure reason logged per process at most this many times (the stats
#: count them all; the log only has to show what went wrong).
DETAILS_LOGGED_PER_REASON = 3

# flag -> (type, default, help). Each is also the environment variable LOADTEST_<FLAG>.
OPTIONS: dict[str, tuple[type, Any, str]] = {
    **{
        f"weight-{name.replace('_', '-')}": (int, weight, f"Relative weight of {name} requests.")
        for name, weight in DEFAULT_WEIGHTS.items()
    },
    "sugar-path": (
        str,
        "",
        f"SUGAR JSONL for situated requests (default {DEFAULT_SUGAR} if present, else built-in samples).",
    ),
    "guidelines": (
        str,
        "",
        "A guideline file (intent -> actions); default: ask the service (GET /v1/guidelines).",
    ),
    "target-rps": (float, 0.0, "Requests/s of this Locust process, paced across its users (0: think time)."),
    "wait-min-s": (float, 0.5, "Shortest think time between a user's requests (when not paced)."),
    "wait-max-s": (float, 2.0, "Longest think time between a user's requests (when not paced)."),
    "bank-name": (
        str,
        DEFAULT_BANK_NAME,
        "The served bank the bank scenario names (ranker serve --bank NAME=FILE).",
    ),
    "bank-file": (
        str,
        "",
        "That bank's JSONL: the answers' bank ids, echoes and masks are checked against it "
        "(default: their form only).",
    ),
    "topical-chat": (
        str,
        "",
        f"Topical-Chat conversations for the bank scenario's contexts (default {DEFAULT_TOPICAL_CHAT} "
        "if present, else the built-in chats).",
    ),
    "slo-max-error-ratio": (
        float,
        0.01,
        "SLO: most failed requests / requests (429 included), over the run and in each scenario.",
    ),
    "slo-p95-ms": (float, 0.0, "SLO: highest p95 latency over all requests together, ms (0: no limit)."),
    **{
        f"slo-p95-ms-{name.replace('_', '-')}": (
            float,
            limit,
            f"SLO: highest p95 of {name} requests, ms (0: none).",
        )
        for name, limit in DEFAULT_SLO_P95_MS.items()
    },
    "slo-report": (str, "", "Also write the SLO verdict and the figures behind it to this JSON file."),
    "seed": (int, None, "Seed of the request generator (default: a new sequence each run)."),
}


def _env_var(flag: str) -> str:
    return "LOADTEST_" + flag.upper().replace("-", "_")


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_kwargs: Any) -> None:
    for flag, (kind, default, text) in OPTIONS.items():
        parser.add_argument(f"--{flag}", type=kind, default=default, env_var=_env_var(flag), help=text)


class RankClient(FastHttpUser):
    """A client of the service: each request is one ``POST /rank`` of a scenario drawn by weight."""

    # Set from the options when Locust initialises (configure()).
    traffic: Traffic
    scenario_deck: list[str] = list(SCENARIOS)
    target_rps = 0.0
    think_time_s = (0.5, 2.0)
    details_logged: Counter[str] = Counter()  # per process: failure details logged so far
    #: Per process: successful bank answers, bank responses they ranked, and the distinct ids.
    bank_seen: Counter[str] = Counter()
    bank_ids: set[str] = set()

    def on_start(self) -> None:
        self._next_start = time.monotonic()
        self._deck: list[str] = []

    @task
    def next_request(self) -> None:
        """One request, of the next scenario in this user's shuffled deck."""
        if not self._deck:
            # Dealt from a shuffled deck rather than drawn at random: the mix is exact every
            # deck's length of requests, so even a short run sees every scenario with a weight.
            self._deck = random.sample(self.scenario_deck, len(self.scenario_deck))
        self.rank(self._deck.pop())

    def wait_time(self) -> float:
        """Think time, or the wait that keeps this process at ``target_rps`` requests/s."""
        if self.target_rps <= 0:
            return random.uniform(*self.think_time_s)
        # Each user owes one request every users/rate seconds; the request's own duration is
        # part of that interval (Locust's constant_throughput, with the rate shared by the
        # users running now, so ramps and steps keep the total fixed).
        interval = max(self.environment.runner.user_count, 1) / self.target_rps
        now = time.monotonic()
        wait = max(0.0, self._next_start + interval - now)
        self._next_start = now + wait
        return wait

    def rank(self, scenario: str) -> None:
        """Send one request of ``scenario`` and judge the answer."""
        body = self.traffic.builder(scenario)()
        expected = Expected.of(body, self.traffic.guidelines, self.traffic.bank)
        with self.client.post("/rank", json=body, name=f"rank:{scenario}", catch_response=True) as response:
            status = response.status_code
            # A request that got no response has no content to read.
            content = response.content if status else None
            problem = check_status(status, content, error=getattr(response, "error", None))
            if problem is None:
                problem = check_rank_body(content or b"", expected)
            if problem is None:
                response.success()
                if expected.bank is not None:
                    self._count_bank_answer(content or b"")
            else:
                self._log_problem(scenario, problem)
                response.failure(problem.reason)

    def _count_bank_answer(self, content: bytes) -> None:
        ranked = [e["id"] for e in json.loads(content)["ranking"] if e["bank"] is not None]
        self.bank_seen["answers"] += 1
        self.bank_seen["answers with bank ids"] += bool(ranked)
        self.bank_seen["bank responses ranked"] += len(ranked)
        self.bank_ids.update(ranked)

    def _log_problem(self, scenario: str, problem: Problem) -> None:
        key = f"{scenario}: {problem.reason}"
        self.details_logged[key] += 1
        if self.details_logged[key] <= DETAILS_LOGGED_PER_REASON and problem.detail:
            logger.warning("rank:%s failed: %s (%s)", scenario, problem.reason, problem.detail)


def _options(environment: Environment) -> argparse.Namespace:
    if environment.parsed_options is not None:
        return environment.parsed_options
    # Locust used as a library: no command line, so the declared defaults.
    defaults = {flag.replace("-", "_"): default for flag, (_, default, _) in OPTIONS.items()}
    return argparse.Namespace(**defaults)


def configure(options: argparse.Namespace, host: str | None = None) -> str:
    """Set the users' traffic, weights and pacing from the options; a line saying what runs.

    The guidelines come from ``--guidelines`` when given, else from the service at ``host``.

    Raises:
        ValueError: a weight is negative, all are zero, the think times are reversed, or the
            guidelines or the SUGAR file cannot be read.
    """
    weights = {name: getattr(options, f"weight_{name}") for name in SCENARIOS}
    if any(w < 0 for w in weights.values()) or not any(weights.values()):
        raise ValueError(f"scenario weights must be >= 0 with one above 0, got {weights}")
    if not 0 <= options.wait_min_s <= options.wait_max_s:
        raise ValueError("need 0 <= --wait-min-s <= --wait-max-s")
    # An explicit path must exist; the default one may be absent (then the built-in samples).
    sugar = Path(options.sugar_path) if options.sugar_path else None
    if sugar is None and DEFAULT_SUGAR.is_file():
        sugar = DEFAULT_SUGAR
    situated, source = load_situated(sugar)
    if options.guidelines:
        guidelines = Guidelines.from_file(options.guidelines)
    elif host:
        guidelines = Guidelines.from_service(host)
    else:
        raise ValueError("no --guidelines file and no --host to ask for them")
    bank: BankInfo | None = None
    conversations: list[Conversation] = []
    bank_line = ""
    if weights["bank"]:
        bank, conversations, bank_line = _bank(options, host)
    RankClient.traffic = Traffic(
        guidelines=guidelines, situated=situated, seed=options.seed, bank=bank, conversations=conversations
    )
    # A scenario's share is its number of cards; the common divisor keeps the deck short.
    divisor = math.gcd(*weights.values())
    RankClient.scenario_deck = [name for name, weight in weights.items() for _ in range(weight // divisor)]
    RankClient.target_rps = options.target_rps
    RankClient.think_time_s = (options.wait_min_s, options.wait_max_s)
    total = sum(weights.values())
    mix = ", ".join(f"{name} {100 * w / total:.0f}%" for name, w in weights.items())
    return f"traffic mix: {mix}; situated requests from {source} ({len(situated)} examples){bank_line}"


def _bank(options: argparse.Namespace, host: str | None) -> tuple[BankInfo, list[Conversation], str]:
    """The served bank (its size from the service), its file when given, the contexts' conversations.

    Raises:
        ValueError: the service does not serve the bank or it is not ready, the bank file is not
            the one served, or a conversations file cannot be read.
    """
    name = options.bank_name
    if not host:
        raise ValueError("the bank scenario asks the service for its bank: give --host (or --weight-bank 0)")
    size = served_bank_size(host, name)
    responses = None
    if options.bank_file:
        responses = read_bank_file(Path(options.bank_file))
        if len(responses) != size:
            raise ValueError(
                f"--bank-file {options.bank_file} holds {len(responses)} responses and the bank {name!r} "
                f"served at {host} {size}: not the file the service serves"
            )
    path = Path(options.topical_chat) if options.topical_chat else None
    if path is None and DEFAULT_TOPICAL_CHAT.is_file():
        path = DEFAULT_TOPICAL_CHAT
    conversations = read_conversations(path) if path is not None else []
    contexts = f"Topical-Chat ({path}, {len(conversations)} conversations)" if path else "built-in chats"
    checked = "checked against its file" if responses is not None else "no --bank-file: bank ids unchecked"
    return (
        BankInfo(name, size, responses),
        conversations,
        f"; bank {name!r} ({size} responses, {checked}), contexts from {contexts}",
    )


@events.init.add_listener
def _on_init(environment: Environment, **_kwargs: Any) -> None:
    try:
        logger.info(configure(_options(environment), environment.host))
    except (OSError, ValueError) as e:
        # Locust logs and carries on after an exception in a listener; a load test with a wrong
        # configuration must not run, so leave at once with the reason.
        raise SystemExit(f"loadtests: {e}") from e


@events.quitting.add_listener
def _slo_gate(environment: Environment, **_kwargs: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return  # the master judges the stats of all workers
    options = _options(environment)
    slo = Slo(
        max_error_ratio=options.slo_max_error_ratio,
        max_p95_ms=options.slo_p95_ms,
        scenario_p95_ms={f"rank:{name}": getattr(options, f"slo_p95_ms_{name}") for name in SCENARIOS},
    )
    verdict = evaluate(environment.stats, slo, target_rps=options.target_rps)
    for line in verdict.summary:
        logger.info("SLO %s", line)
    if RankClient.bank_seen["answers"]:
        seen = RankClient.bank_seen
        logger.info(
            "bank: %d answers, %d with bank ids, %d bank responses ranked, %d distinct ids",
            seen["answers"], seen["answers with bank ids"], seen["bank responses ranked"],
            len(RankClient.bank_ids),
        )  # fmt: skip
    if options.slo_report:
        report = {
            **verdict.figures,
            "bank": {**RankClient.bank_seen, "distinct ids": len(RankClient.bank_ids)},
            "bank_ids_sample": sorted(RankClient.bank_ids)[:20],
        }
        Path(options.slo_report).parent.mkdir(parents=True, exist_ok=True)
        Path(options.slo_report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if not verdict.passed:
        logger.error("SLO gate FAILED: %s", "; ".join(verdict.breaches))
        environment.process_exit_code = 1
    elif environment.runner is not None and environment.runner.exceptions:
        # Within the SLO, but the locustfile itself raised: leave Locust's own non-zero code.
        logger.error("SLO gate passed, but the load test raised exceptions (see above)")
    else:
        # Within the SLO: failures under the allowed ratio must not fail the run, which Locust
        # would otherwise do on any failure at all.
        logger.info("SLO gate passed")
        environment.process_exit_code = 0
