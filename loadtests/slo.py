"""The SLO gate: a run passes when its error ratio and its p95 latency stay within the limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from locust.stats import RequestStats

from loadtests.checks import SHED_LOAD


@dataclass(frozen=True)
class Slo:
    """The limits a run must keep."""

    max_error_ratio: float
    max_p95_ms: float


@dataclass(frozen=True)
class Verdict:
    """The gate's outcome: what was measured, and every limit that was broken."""

    summary: list[str]
    breaches: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no limit was broken."""
        return not self.breaches


def evaluate(stats: RequestStats, slo: Slo, *, target_rps: float = 0.0) -> Verdict:
    """Judge a finished run's stats (all request names together) against ``slo``."""
    total = stats.total
    p95_ms = total.get_response_time_percentile(0.95) if total.num_requests else 0.0
    shed = sum(e.occurrences for e in stats.errors.values() if SHED_LOAD in str(e.error))
    summary = [
        f"{total.num_requests} requests, {total.num_failures} failed "
        f"(error ratio {total.fail_ratio:.4f}, limit {slo.max_error_ratio:g}), of which {shed} shed (429)",
        f"p95 {p95_ms:.0f} ms (limit {slo.max_p95_ms:g} ms)",
    ]
    for entry in sorted(stats.entries.values(), key=lambda e: e.name):
        p95 = entry.get_response_time_percentile(0.95) if entry.num_requests else 0.0
        summary.append(
            f"  {entry.name}: {entry.num_requests} requests, {entry.num_failures} failed, p95 {p95:.0f} ms"
        )
    if target_rps > 0:
        # Locust users are a closed loop: when requests take longer than users / rate, the rate
        # falls short, and the fix is more users, not a faster service.
        achieved = total.total_rps
        summary.append(f"throughput {achieved:.2f} requests/s (target {target_rps:g})")
        if achieved < 0.9 * target_rps:
            summary.append("  below 90% of the target: the users cannot keep the rate; add users")
    breaches = []
    if total.num_requests == 0:
        breaches.append("no requests were made")
    if total.fail_ratio > slo.max_error_ratio:
        breaches.append(f"error ratio {total.fail_ratio:.4f} > {slo.max_error_ratio:g}")
    if p95_ms > slo.max_p95_ms:
        breaches.append(f"p95 {p95_ms:.0f} ms > {slo.max_p95_ms:g} ms")
    return Verdict(summary, breaches)
