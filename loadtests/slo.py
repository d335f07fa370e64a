"""The SLO gate: a run passes when its error ratios and its p95 latencies stay within the limits.

The limits are per scenario (Locust's request name ``rank:<scenario>``), because the scenarios
cost different amounts of work: a socialbot turn ranks 5 to 10 candidates, a large pool 100. One
p95 over all requests would be the latency of whichever heavy scenario makes up the slowest 5%
of the mix, so it would say little about either kind. The error ratio (429s included) applies
to the whole run and to each scenario on its own, so a scenario that is shed cannot hide in a
mix that mostly succeeds, nor keep a low p95 through fast 429s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadtests.checks import SHED_LOAD

if TYPE_CHECKING:  # importing locust patches the standard library (gevent): only where it runs
    from locust.stats import RequestStats, StatsEntry


@dataclass(frozen=True)
class Slo:
    """The limits a run must keep (a p95 limit of 0: none)."""

    max_error_ratio: float
    #: p95 over all requests together.
    max_p95_ms: float = 0.0
    #: Request name (``rank:<scenario>``) -> the p95 limit of that scenario's requests.
    scenario_p95_ms: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """The gate's outcome: what was measured, and every limit that was broken."""

    summary: list[str]
    breaches: list[str] = field(default_factory=list)
    #: The figures, for a report (``--slo-report``): totals, per request name, limits.
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no limit was broken."""
        return not self.breaches


def _p(entry: StatsEntry, q: float) -> float:
    return float(entry.get_response_time_percentile(q)) if entry.num_requests else 0.0


def _figures(entry: StatsEntry) -> dict[str, Any]:
    return {
        "requests": entry.num_requests,
        "failures": entry.num_failures,
        "error_ratio": round(entry.fail_ratio, 4),
        "p50_ms": _p(entry, 0.5),
        "p95_ms": _p(entry, 0.95),
        "p99_ms": _p(entry, 0.99),
        "max_ms": round(entry.max_response_time or 0.0, 1),
        "rps": round(entry.total_rps, 3),
    }


def evaluate(stats: RequestStats, slo: Slo, *, target_rps: float = 0.0) -> Verdict:
    """Judge a finished run's stats against ``slo``: all request names together, and each one."""
    total = stats.total
    p95_ms = _p(total, 0.95)
    shed = sum(e.occurrences for e in stats.errors.values() if SHED_LOAD in str(e.error))
    overall_limit = f"limit {slo.max_p95_ms:g} ms" if slo.max_p95_ms > 0 else "no limit"
    summary = [
        f"{total.num_requests} requests, {total.num_failures} failed "
        f"(error ratio {total.fail_ratio:.4f}, limit {slo.max_error_ratio:g}), of which {shed} shed (429)",
        f"p95 {p95_ms:.0f} ms over all requests ({overall_limit})",
    ]
    breaches = []
    if total.num_requests == 0:
        breaches.append("no requests were made")
    if total.fail_ratio > slo.max_error_ratio:
        breaches.append(f"error ratio {total.fail_ratio:.4f} > {slo.max_error_ratio:g}")
    if slo.max_p95_ms > 0 and p95_ms > slo.max_p95_ms:
        breaches.append(f"p95 {p95_ms:.0f} ms > {slo.max_p95_ms:g} ms")
    scenarios: dict[str, Any] = {}
    for entry in sorted(stats.entries.values(), key=lambda e: e.name):
        figures = _figures(entry)
        limit = slo.scenario_p95_ms.get(entry.name, 0.0)
        figures["p95_limit_ms"] = limit or None
        scenarios[entry.name] = figures
        shown = f"limit {limit:g} ms" if limit > 0 else "no limit"
        summary.append(
            f"  {entry.name}: {entry.num_requests} requests, {entry.num_failures} failed, "
            f"p50 {figures['p50_ms']:.0f} ms, p95 {figures['p95_ms']:.0f} ms ({shown}), "
            f"p99 {figures['p99_ms']:.0f} ms"
        )
        if entry.num_requests and entry.fail_ratio > slo.max_error_ratio:
            breaches.append(
                f"{entry.name}: error ratio {entry.fail_ratio:.4f} > {slo.max_error_ratio:g} "
                f"({entry.num_failures} of {entry.num_requests})"
            )
        if limit > 0 and figures["p95_ms"] > limit:
            breaches.append(f"{entry.name}: p95 {figures['p95_ms']:.0f} ms > {limit:g} ms")
    if target_rps > 0:
        # Locust users are a closed loop: when requests take longer than users / rate, the rate
        # falls short, and the fix is more users, not a faster service.
        achieved = total.total_rps
        summary.append(f"throughput {achieved:.2f} requests/s (target {target_rps:g})")
        if achieved < 0.9 * target_rps:
            summary.append("  below 90% of the target: the users cannot keep the rate; add users")
    figures = {
        "total": {**_figures(total), "shed_429": shed},
        "scenarios": scenarios,
        "failures": {str(e.error): e.occurrences for e in stats.errors.values()},
        "limits": {
            "max_error_ratio": slo.max_error_ratio,
            "max_p95_ms": slo.max_p95_ms or None,
            "scenario_p95_ms": dict(slo.scenario_p95_ms),
        },
        "breaches": breaches,
        "passed": not breaches,
    }
    return Verdict(summary, breaches, figures)
