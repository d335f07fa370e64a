"""A long run at about 70% of saturation, with bank reloads: memory, descriptors, the logit cache, latency.

    python -m benchmarks.soak                                 # 25 minutes, a bank reload every 3
    python -m benchmarks.soak --minutes 2 --reload-every 1    # a check that it runs

1. the bank: the load tests' (``python -m loadtests.bank``: every Topical-Chat test_freq turn, or
   the suite's sample replies; written when missing), in two versions: as it is, and with
   ``--reload-share`` of its texts changed; served from ``runs/soak/bank/`` with its vectors cached
   in ``runs/soak/cache/`` (a rerun starts from the cache);
2. ``ranker serve`` (``dialogue_ranker.bench.load.start_service``) with the service's defaults,
   ``--auto.cache-dir runs/cache`` and any ``--serve-arg``;
3. saturation: ``--clients`` clients back to back for ``--saturation-s`` seconds (after a short
   warm-up), the default traffic mix (``loadtests.scenarios``: socialbot, situated, agent assist,
   large pools and the bank); or ``--rate`` requests/s given;
4. the soak: the same mix at ``--share`` (70%) of that rate, sent at a steady pace, for
   ``--minutes``; every ``--reload-every`` minutes the bank file is replaced by its other version
   and ``POST /v1/banks/soak/reload`` swaps it in. Every answer is checked as the load tests check
   it (``loadtests.checks``);
5. each minute: the server's resident memory and open file descriptors (``/proc/<pid>``), the
   logit cache's entries (``ranker_logit_cache_entries`` on ``/metrics``), requests, p50 and p99,
   and every failure by status (429, shed load, counted apart as expected);
6. the verdict: resident memory grows less than 5% over the last 15 minutes, p99 of the last 5
   minutes within 20% of the first 5, no failure but 429. ``--out-dir`` (default
   ``benchmarks/results``) gets ``soak-<date>.json``, ``.md`` (the table, the CPU and its flags)
   and ``.png`` (memory and p99 over time). The exit code is 1 when the verdict is a fail.

Run it on a quiet machine: the figures are the CPU's alone only when nothing else runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import math
import os
import random
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import soak_report
from benchmarks.service_load import REPO_ROOT
from dialogue_ranker.bench.load import Service, start_service
from loadtests.bank import DEFAULT_BANK_FILE, DEFAULT_TOPICAL_CHAT, make_bank, read_conversations
from loadtests.checks import check_rank_body, check_status
from loadtests.expected import BankInfo, Expected, Guidelines
from loadtests.scenarios import DEFAULT_WEIGHTS, Traffic, load_situated

SUGAR = REPO_ROOT.parent / "shared" / "data" / "sugar" / "sugar.jsonl"
WORK = REPO_ROOT / "runs" / "soak"
BANK = "soak"
#: What sending on a connection the server has closed raises (before any answer came).
STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
#: Seconds a start may take (a cold bank of 11,760 responses embeds for about a minute on 2 cores).
STARTUP_S = 1800
#: Seconds of traffic before saturation is measured (the logit cache and the sessions warm up).
WARM_UP_S = 10


@dataclass(frozen=True)
class Outcome:
    """One request: when it was due and sent (seconds from the start), how long it took, how it ended."""

    due_s: float
    sent_s: float
    seconds: float
    status: int
    scenario: str
    #: The failure, as the load tests name it (``shed load: 429 overloaded``...); None: a right answer.
    problem: str | None


class Mix:
    """The default traffic mix, dealt from shuffled decks so that every deck holds it exactly."""

    def __init__(self, traffic: Traffic, bank: BankInfo, guidelines: Guidelines, seed: int) -> None:
        self.traffic, self.bank, self.guidelines = traffic, bank, guidelines
        divisor = math.gcd(*DEFAULT_WEIGHTS.values())
        self.cards = [name for name, weight in DEFAULT_WEIGHTS.items() for _ in range(weight // divisor)]
        self.rng = random.Random(seed)
        self.deck: list[str] = []
        self.lock = threading.Lock()

    def deal(self) -> tuple[str, dict[str, Any], Expected]:
        """The next request: its scenario, body and what its answer must hold."""
        with self.lock:  # one generator, many client threads
            if not self.deck:
                self.deck = self.rng.sample(self.cards, len(self.cards))
            scenario = self.deck.pop()
            body = self.traffic.builder(scenario)()
        return scenario, body, Expected.of(body, self.guidelines, self.bank)


class Clients:
    """Client threads, one kept-alive connection each, that send a request and check its answer."""

    def __init__(self, port: int, started: float) -> None:
        self.port, self.started = port, started
        self.local = threading.local()

    def send(self, mix: Mix, due: float) -> Outcome:
        """One request of the mix (due at ``due``, ``time.perf_counter()``), checked."""
        scenario, body, expected = mix.deal()
        sent = time.perf_counter()
        status, content, error = self._post(json.dumps(body).encode())
        seconds = time.perf_counter() - sent
        problem = check_status(status, content, error=error)
        if problem is None:
            problem = check_rank_body(content, expected)
        return Outcome(due - self.started, sent - self.started, seconds, status, scenario,
                       None if problem is None else problem.reason)  # fmt: skip

    def _post(self, body: bytes) -> tuple[int, bytes, BaseException | None]:
        connection = getattr(self.local, "connection", None)
        reused = connection is not None
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=120
            )
        try:
            connection.request("POST", "/rank", body, {"content-type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read(), None
        except (OSError, http.client.HTTPException) as e:
            connection.close()
            self.local.connection = None
            # A kept-alive connection the server closed while it sat idle (--server.keep-alive-timeout-s;
            # at 70% of saturation a client thread idles about as long): the server never saw the
            # request, so it is sent again on a new connection, as HTTP client libraries do.
            if reused and isinstance(e, STALE_CONNECTION):
                return self._post(body)
            return 0, b"", e


def saturation(service: Service, mix: Mix, clients: int, seconds: float) -> dict[str, Any]:
    """Right answers a second with ``clients`` clients back to back, after a warm-up."""
    pool = Clients(service.port, time.perf_counter())
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    measured_from = time.perf_counter() + WARM_UP_S
    until = measured_from + seconds

    def client() -> None:
        while (now := time.perf_counter()) < until:
            outcome = pool.send(mix, now)
            if now >= measured_from:
                with lock:
                    outcomes.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    right = sum(o.problem is None for o in outcomes)
    return {"clients": clients, "seconds": seconds, "requests": len(outcomes), "right": right,
            "shed_429": sum(o.status == 429 for o in outcomes), "rate": right / seconds}  # fmt: skip


@dataclass(frozen=True)
class Sample:
    """The server at the end of a minute."""

    minute: int
    rss_mb: float
    open_fds: int
    logit_cache_entries: float


def sample(service: Service, minute: int) -> Sample:
    """The server's resident memory, open descriptors and logit-cache entries now."""
    pid = service.process.pid
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    with urllib.request.urlopen(f"http://127.0.0.1:{service.port}/metrics", timeout=30) as response:
        metrics = response.read().decode()
    entries = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("ranker_logit_cache_entries{")
    )
    return Sample(minute, round(rss_kb / 1024, 1), len(os.listdir(f"/proc/{pid}/fd")), entries)


class BankVersions:
    """The served bank file and its two versions, swapped in turn by a reload."""

    def __init__(self, source: Path, share: float, seed: int) -> None:
        self.lines = [
            json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        rows = random.Random(seed).sample(range(len(self.lines)), max(1, round(len(self.lines) * share)))
        self.other = [dict(line) for line in self.lines]
        for row in rows:
            self.other[row]["text"] = f"{self.lines[row]['text']} (revised)"[:2000]
        self.changed = len(rows)
        self.path = WORK / "bank" / f"{BANK}.jsonl"
        self.current = 0
        self.write(self.lines)

    def write(self, lines: list[dict[str, Any]]) -> None:
        """Write ``lines`` beside the served file and rename them into place."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
        )
        os.replace(partial, self.path)

    def reload(self, service: Service, minute: float) -> dict[str, Any]:
        """The other version written and reloaded; what the reload answered."""
        self.current = 1 - self.current
        self.write(self.other if self.current else self.lines)
        request = urllib.request.Request(
            f"http://127.0.0.1:{service.port}/v1/banks/{BANK}/reload", method="POST"
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                answer, status = json.load(response), response.status
        except OSError as e:  # HTTPError too: a refused reload is a failure of the run
            answer, status = {"error": str(e)}, getattr(e, "code", 0)
        load = answer.get("last_load") or {}
        return {"minute": round(minute, 2), "status": status, "version": str(answer.get("version"))[:12],
                "embedded": load.get("embedded"), "reused": load.get("reused"), "bank_s": load.get("seconds"),
                "wall_s": round(time.perf_counter() - started, 2), "error": answer.get("error")}  # fmt: skip


def soak(service: Service, mix: Mix, bank: BankVersions, args: argparse.Namespace) -> dict[str, Any]:
    """The mix at ``args.rate`` for ``args.minutes``, a reload every ``args.reload_every``; what was seen."""
    started = time.perf_counter()
    clients, end = Clients(service.port, started), started + 60 * args.minutes
    outcomes: list[Outcome] = []
    samples: list[Sample] = []
    reloads: list[dict[str, Any]] = []
    stop = threading.Event()
    samples.append(sample(service, 0))
    periodic = [
        _every(60, started, end, stop, lambda m: samples.append(sample(service, m)),
               report=_progress(samples)),
        # No reload once the traffic has stopped: each one is measured under the load.
        _every(60 * args.reload_every, started, end - 1, stop, lambda m: reloads.append(
            bank.reload(service, m * args.reload_every))),
    ]  # fmt: skip
    with ThreadPoolExecutor(args.max_in_flight, thread_name_prefix="soak-client") as pool:
        futures = []
        due, interval = started, 1 / args.rate
        while due < end:
            time.sleep(max(0.0, due - time.perf_counter()))
            futures.append(pool.submit(clients.send, mix, due))
            due += interval
        outcomes = [future.result() for future in futures]
    time.sleep(max(0.0, end + 1 - time.perf_counter()))  # the last minute's sample
    stop.set()
    for thread in periodic:
        thread.join()
    return {"outcomes": outcomes, "samples": samples, "reloads": reloads, "changed_texts": bank.changed}


def _every(period_s: float, started: float, until: float, stop: threading.Event, act: Callable[[int], None],
           report: Callable[[int], None] | None = None) -> threading.Thread:  # fmt: skip
    """A thread that calls ``act(n)`` at ``started + n * period_s`` (n = 1, 2, ...) up to ``until``."""

    def run() -> None:
        n = 1
        while started + n * period_s <= until and not stop.wait(
            max(0.0, started + n * period_s - time.perf_counter())
        ):
            act(n)
            if report is not None:
                report(n)
            n += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _progress(samples: list[Sample]) -> Callable[[int], None]:
    def report(minute: int) -> None:
        last = samples[-1]
        print(f"minute {minute}: RSS {last.rss_mb} MB, {last.open_fds} fds, "
              f"{last.logit_cache_entries:.0f} logit-cache entries", flush=True)  # fmt: skip

    return report


def prepare(args: argparse.Namespace) -> tuple[Service, Mix, BankVersions]:
    """The bank's versions, the service started with them, and the mix against it."""
    source = args.bank_file
    if not source.is_file():
        size, where = make_bank(source, topical_chat=args.topical_chat)
        print(f"wrote the load tests' bank: {size} responses from {where} to {source}")
    bank = BankVersions(source, args.reload_share, args.seed)
    flags = ["--bank", f"{BANK}={bank.path}", "--banks.cache-dir", str(WORK / "cache"),
             "--auto.cache-dir", str(REPO_ROOT / "runs" / "cache"), *args.serve_arg]  # fmt: skip
    print(f"starting ranker serve {' '.join(flags)} ...", flush=True)
    service = start_service("soak", flags, startup_s=STARTUP_S)
    print(f"ready in {service.ready_s:.1f} s (pid {service.process.pid})", flush=True)
    url = f"http://127.0.0.1:{service.port}"
    guidelines = Guidelines.from_service(url)
    situated, _ = load_situated(SUGAR if SUGAR.is_file() else None)
    conversations = read_conversations(args.topical_chat) if args.topical_chat.is_file() else []
    info = BankInfo(BANK, len(bank.lines), None)  # the texts change: the answers' form is checked
    traffic = Traffic(guidelines=guidelines, situated=situated, seed=args.seed, bank=info,
                      conversations=conversations)  # fmt: skip
    return service, Mix(traffic, info, guidelines, args.seed), bank


def main(argv: list[str] | None = None) -> int:
    """Serve, measure saturation, soak, judge; the exit code is 1 on a failed verdict."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--minutes", type=float, default=25)
    parser.add_argument("--reload-every", type=float, default=3, help="minutes between bank reloads")
    parser.add_argument(
        "--rate", type=float, default=0, help="requests/s (0: --share of the measured saturation)"
    )
    parser.add_argument("--share", type=float, default=0.7, help="of saturation (default 0.7)")
    parser.add_argument("--clients", type=int, default=8, help="clients when measuring saturation")
    parser.add_argument("--saturation-s", type=float, default=60)
    parser.add_argument("--max-in-flight", type=int, default=64, help="client threads of the soak")
    parser.add_argument("--reload-share", type=float, default=0.02, help="texts the second version changes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bank-file", type=Path, default=DEFAULT_BANK_FILE, help="written when missing")
    parser.add_argument("--topical-chat", type=Path, default=DEFAULT_TOPICAL_CHAT)
    parser.add_argument("--serve-arg", action="append", default=[], help="one more `ranker serve` argument")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    service, mix, bank = prepare(args)
    try:
        measured = None
        if args.rate <= 0:
            print(f"saturation: {args.clients} clients for {args.saturation_s:g} s ...", flush=True)
            measured = saturation(service, mix, args.clients, args.saturation_s)
            args.rate = args.share * measured["rate"]
            print(f"saturation {measured['rate']:.2f} right answers/s; soak at {args.rate:.2f}/s", flush=True)
        seen = soak(service, mix, bank, args)
    finally:
        service.stop()
    run = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
           "load_average_before": round(load_before, 2), "saturation": measured, "ready_s": service.ready_s,
           **seen, "outcomes": [asdict(o) for o in seen["outcomes"]],
           "samples": [asdict(s) for s in seen["samples"]]}  # fmt: skip
    stem = args.out_dir / f"soak-{dt.datetime.now(dt.UTC):%Y-%m-%d}"
    verdict = soak_report.write(run, stem)
    print(stem.with_suffix(".md").read_text())
    print(f"wrote {stem}.json, .md and .png")
    return 0 if verdict["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
