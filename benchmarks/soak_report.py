"""The soak's minute-by-minute table, its verdict, and its files (``benchmarks/soak.py`` runs it).

The verdict: resident memory grows less than ``MAX_RSS_GROWTH`` over the last ``RSS_WINDOW_MIN``
minutes, the p99 of the last ``P99_WINDOW_MIN`` minutes is within ``MAX_P99_GROWTH`` of the
first's, and no request fails but with 429 (shed load: expected near saturation); every bank
reload answers 200. A run shorter than a window compares what it has, and says so.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.machine import KERNEL_FLAGS, read_cpu

MAX_RSS_GROWTH = 0.05
RSS_WINDOW_MIN = 15
MAX_P99_GROWTH = 0.20
P99_WINDOW_MIN = 5


def _ms(seconds: list[float], q: float) -> float | None:
    return round(1000 * float(np.percentile(seconds, q)), 1) if seconds else None


def _failure(outcome: dict[str, Any]) -> str:
    """A failed request's name: its status and, for a 200 or no answer (0), what was wrong."""
    return (
        f"{outcome['status']}"
        if outcome["status"] not in (0, 200)
        else f"{outcome['status']} {outcome['problem']}"
    )


def per_minute(run: dict[str, Any]) -> list[dict[str, Any]]:
    """One row a minute of the soak: requests, right answers, 429s, failures by status, p50, p99, server."""
    outcomes, samples = run["outcomes"], {s["minute"]: s for s in run["samples"]}
    minutes = max(1, int(np.ceil(float(run["args"]["minutes"]))))
    reloads = Counter(int(np.ceil(r["minute"])) for r in run["reloads"])
    rows = []
    for minute in range(1, minutes + 1):
        mine = [o for o in outcomes if minute - 1 <= o["sent_s"] / 60 < minute]
        answered = [o["seconds"] for o in mine if o["status"] == 200]
        failed = Counter(_failure(o) for o in mine if o["problem"] is not None and o["status"] != 429)
        server = samples.get(minute, {})
        rows.append({
            "minute": minute, "requests": len(mine), "right": sum(o["problem"] is None for o in mine),
            "shed_429": sum(o["status"] == 429 for o in mine), "failures": dict(failed),
            "p50_ms": _ms(answered, 50), "p99_ms": _ms(answered, 99),
            "rss_mb": server.get("rss_mb"), "open_fds": server.get("open_fds"),
            "logit_cache_entries": server.get("logit_cache_entries"), "reloads": reloads.get(minute, 0),
        })  # fmt: skip
    return rows


def verdict(run: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The three criteria, each with what was measured, and whether the run passed."""
    rss = {s["minute"]: s["rss_mb"] for s in run["samples"]}
    last = max(rss)
    start = max(min(rss), last - RSS_WINDOW_MIN)
    growth = (rss[last] - rss[start]) / rss[start]
    window = min(P99_WINDOW_MIN, max(1, len(rows) // 2))
    seconds = [(o["sent_s"] / 60, o["seconds"]) for o in run["outcomes"] if o["status"] == 200]
    first = _ms([s for m, s in seconds if m < window], 99)
    final = _ms([s for m, s in seconds if m >= len(rows) - window], 99)
    failed = Counter(_failure(o) for o in run["outcomes"] if o["problem"] is not None and o["status"] != 429)
    bad_reloads = [r for r in run["reloads"] if r["status"] != 200]
    checks = {
        "rss": {"from_minute": start, "to_minute": last, "growth": round(growth, 4),
                "passed": growth < MAX_RSS_GROWTH, "full_window": last - start >= RSS_WINDOW_MIN},
        "p99": {"window_minutes": window, "first_ms": first, "last_ms": final,
                "passed": first is not None and final is not None and final <= (1 + MAX_P99_GROWTH) * first,
                "full_window": window == P99_WINDOW_MIN},
        "failures": {"requests": dict(failed), "reloads": len(bad_reloads),
                     "shed_429": sum(o["status"] == 429 for o in run["outcomes"]),
                     "passed": not failed and not bad_reloads},
    }  # fmt: skip
    return {"passed": all(c["passed"] for c in checks.values()), **checks}


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table; None cells empty, the first column's alignment left, the others right."""
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    rule = ["---"] + ["---:"] * (len(header) - 1)
    return ["| " + " | ".join(row) + " |" for row in (header, rule, *cells)]


def _count(value: float | None) -> int | None:
    return None if value is None else int(value)


def _verdict_rows(judged: dict[str, Any]) -> list[list[Any]]:
    rss, p99, failed = judged["rss"], judged["p99"], judged["failures"]
    short = " (shorter than the window: what the run has)"
    result = {True: "pass", False: "FAIL"}
    rss_short, p99_short = ("" if rss["full_window"] else short), ("" if p99["full_window"] else short)
    return [
        [f"RSS growth, minute {rss['from_minute']} to {rss['to_minute']}{rss_short}",
         f"{rss['growth']:+.1%}", f"< {MAX_RSS_GROWTH:.0%}", result[rss["passed"]]],
        [f"p99, last {p99['window_minutes']} min vs first{p99_short}",
         f"{p99['last_ms']} vs {p99['first_ms']} ms", f"within {MAX_P99_GROWTH:.0%}", result[p99["passed"]]],
        [f"failures other than 429 ({failed['shed_429']} shed)",
         f"{failed['requests'] or 0}; reloads failed: {failed['reloads']}", "none", result[failed["passed"]]],
    ]  # fmt: skip


def markdown(
    run: dict[str, Any], rows: list[dict[str, Any]], judged: dict[str, Any], cpu: dict[str, Any]
) -> str:
    """The report: verdict, machine, load, the minute table, the reloads and the criteria."""
    args, saturation = run["args"], run["saturation"]
    how = "given"
    if saturation:
        how = (f"{float(args['share']):.0%} of saturation: {saturation['rate']:.2f} right answers/s with "
               f"{saturation['clients']} clients for {saturation['seconds']:g} s")  # fmt: skip
    minutes = [
        [r["minute"], r["requests"], r["right"], r["shed_429"],
         ", ".join(f"{k}: {v}" for k, v in r["failures"].items()) or "0", r["p50_ms"], r["p99_ms"],
         r["rss_mb"], r["open_fds"], _count(r["logit_cache_entries"]), r["reloads"]]
        for r in rows
    ]  # fmt: skip
    reloads = [[r["minute"], r["status"], r["version"], r["embedded"], r["reused"], r["bank_s"], r["wall_s"]]
               for r in run["reloads"]]  # fmt: skip
    return "\n".join([
        f"# Soak: {'PASSED' if judged['passed'] else 'FAILED'}",
        "",
        f"{run['finished_at']}; {cpu['model']}, {cpu['usable_cpus']} CPUs; kernel flags: "
        f"{', '.join(cpu['kernel_flags']) or 'none'}; load average before {run['load_average_before']}.",
        f"The default traffic mix at {float(args['rate']):.2f} requests/s ({how}) for {args['minutes']} "
        f"minutes; a bank reload every {args['reload_every']} minutes, alternating two versions "
        f"({run['changed_texts']} texts differ). Service ready in {run['ready_s']:.1f} s; serve args: "
        f"{' '.join(args['serve_arg']) or 'none (the defaults)'}.",
        "",
        *_table(["minute", "requests", "right", "429", "failures", "p50 ms", "p99 ms", "RSS MB", "fds",
                 "logit cache", "reloads"], minutes),
        "",
        *_table(["reload at minute", "status", "version", "embedded", "reused", "bank s", "wall s"], reloads),
        "",
        *_table(["criterion", "measured", "limit", "result"], _verdict_rows(judged)),
        "",
        f"CPU flags (lscpu): {' '.join(cpu['flags'])}",
        "",
    ])  # fmt: skip


def plot(rows: list[dict[str, Any]], run: dict[str, Any], path: Path) -> None:
    """Resident memory and p99 a minute, the reloads marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = run["samples"]
    figure, (memory, latency) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    memory.plot([s["minute"] for s in samples], [s["rss_mb"] for s in samples], marker="o")
    memory.set_ylabel("server RSS (MB)")
    latency.plot([r["minute"] for r in rows], [r["p99_ms"] for r in rows], marker="o", color="tab:red")
    latency.set_ylabel("p99 (ms)")
    latency.set_xlabel("minute (memory at its end; p99 of the minute before)")
    for reload in run["reloads"]:
        for axis in (memory, latency):
            axis.axvline(reload["minute"], color="grey", linestyle="--", linewidth=0.8)
    memory.set_title("Soak: the default mix with bank reloads (dashed)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write(run: dict[str, Any], stem: Path) -> dict[str, Any]:
    """``stem``.json, .md and .png; the verdict."""
    cpu_info = read_cpu()
    cpu = {"model": cpu_info.model, "usable_cpus": cpu_info.usable_cpus, "flags": sorted(cpu_info.flags),
           "kernel_flags": [f for f in KERNEL_FLAGS if f in cpu_info.flags]}  # fmt: skip
    run = {**run, "finished_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()}
    rows = per_minute(run)
    judged = verdict(run, rows)
    stem.parent.mkdir(parents=True, exist_ok=True)
    document = {k: v for k, v in run.items() if k != "outcomes"}
    document |= {"machine": cpu, "minutes": rows, "verdict": judged, "requests": len(run["outcomes"])}
    stem.with_suffix(".json").write_text(json.dumps(document, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(run, rows, judged, cpu))
    plot(rows, run, stem.with_suffix(".png"))
    return judged
