"""A bank reload that changes 1% of the texts embeds exactly those: counted and timed against a full embed.

    python -m benchmarks.bank_reload                      # 100,000 responses, 1% changed
    python -m benchmarks.bank_reload --size 5000 --out    # a smoke run, written to the results

1. the bank: the distinct responses of DailyDialog++ dev (``../shared/data/dailydialog_pp``, about
   10,000: good, adversarial and random replies), then made-up replies
   (``benchmarks.bench_banks.synthetic_bank``) up to ``--size``; the same file every run, written
   to a temporary directory, never kept;
2. ``ranker serve --bank bench=FILE`` with an empty cache: every text embedded at start (the full
   embed, on the bulk session with every CPU, hubness included);
3. ``--changed`` of the texts (1%, drawn with ``--seed``) replaced by new ones, the file renamed
   into place, ``POST /v1/banks/bench/reload``: the texts it embedded (must be exactly the changed
   ones) and its seconds; then a reload of the unchanged file (0 embedded);
4. a restart with the changed file: every vector from the cache, none embedded.

It prints a table and, with ``--out``, writes it (default ``benchmarks/results/bank_reload.txt``).
The exit code is 1 when a count is not what it must be. Run it on a quiet machine: the full embed
of 100,000 responses takes minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_banks import synthetic_bank
from benchmarks.service_load import REPO_ROOT
from dialogue_ranker.bench.load import Service, start_service
from dialogue_ranker.data.machine import KERNEL_FLAGS, read_cpu

DAILYDIALOG_PP = REPO_ROOT.parent / "shared" / "data" / "dailydialog_pp" / "dev.jsonl"
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "bank_reload.txt"
BANK = "bench"
#: Seconds a start may take: a cold 100,000-response bank embeds for minutes on 2 cores.
STARTUP_S = 3600


def dailydialog_responses(path: Path = DAILYDIALOG_PP) -> list[str]:
    """Every distinct response of DailyDialog++ dev, in file order (none when the file is absent)."""
    if not path.is_file():
        return []
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for field in ("positive_responses", "adversarial_negative_responses", "random_negative_responses"):
            for text in row.get(field, []):
                if text.strip():
                    seen.setdefault(text.strip(), None)
    return list(seen)


def bank_texts(size: int) -> tuple[list[str], str]:
    """``size`` distinct texts and where they came from."""
    real = dailydialog_responses()[:size]
    known = set(real)
    made = [t for t in synthetic_bank(size) if t not in known][: size - len(real)]
    source = f"{len(real):,} DailyDialog++ dev responses and {len(made):,} made-up replies"
    return real + made, source


def changed_texts(texts: list[str], count: int, seed: int) -> tuple[list[str], list[int]]:
    """``texts`` with ``count`` of them, drawn with ``seed``, replaced by texts the bank does not hold."""
    rows = sorted(random.Random(seed).sample(range(len(texts)), count))
    out = list(texts)
    for n, row in enumerate(rows):
        out[row] = f"{texts[row]} (revised, take {n})"
    assert len(set(out)) == len(out), "a revised text repeats another"
    return out, rows


def write_bank(path: Path, texts: list[str]) -> None:
    """The bank file, written beside and renamed into place (a reader never sees half of it)."""
    partial = path.with_suffix(".partial")
    partial.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    os.replace(partial, path)


def listed(service: Service) -> dict[str, Any]:
    """The bank as ``GET /v1/banks/bench`` describes it."""
    return service.get(f"/v1/banks/{BANK}")


def reload(service: Service) -> tuple[dict[str, Any], float]:
    """``POST /v1/banks/bench/reload``: its answer and its wall seconds."""
    started = time.perf_counter()
    response = httpx.post(f"http://127.0.0.1:{service.port}/v1/banks/{BANK}/reload", timeout=STARTUP_S)
    response.raise_for_status()
    return response.json(), time.perf_counter() - started


def row(step: str, bank: dict[str, Any], wall_s: float) -> dict[str, Any]:
    load = bank["last_load"]
    return {
        "step": step,
        "embedded": load["embedded"],
        "reused": load["reused"],
        "bank_s": load["seconds"],
        "wall_s": round(wall_s, 2),
        "version": bank["version"][:12],
    }


def measure(args: argparse.Namespace, work: Path) -> tuple[list[dict[str, Any]], int, str]:
    """The four steps' rows, the number of texts changed, and where the bank came from."""
    texts, source = bank_texts(args.size)
    changed = round(args.size * args.changed)
    new_texts, _ = changed_texts(texts, changed, args.seed)
    bank = work / "bench.jsonl"
    write_bank(bank, texts)
    flags = ["--model", str(args.model), "--backend", args.backend, "--bank", f"{BANK}={bank}",
             "--banks.cache-dir", str(work / "cache")]  # fmt: skip
    rows = []
    service = start_service("cold", flags, startup_s=STARTUP_S)
    try:
        rows.append(row("start, empty cache: every text embedded (the full embed)", listed(service),
                        service.ready_s))  # fmt: skip
        write_bank(bank, new_texts)
        answer, wall_s = reload(service)
        rows.append(row(f"reload, {changed:,} texts changed ({args.changed:.0%})", answer, wall_s))
        answer, wall_s = reload(service)
        rows.append(row("reload, unchanged file", answer, wall_s))
    finally:
        service.stop()
    service = start_service("warm", flags, startup_s=STARTUP_S)
    try:
        rows.append(row("restart, unchanged file: every vector from the cache", listed(service),
                        service.ready_s))  # fmt: skip
    finally:
        service.stop()
    return rows, changed, source


def report(
    args: argparse.Namespace, rows: list[dict[str, Any]], changed: int, source: str
) -> tuple[str, bool]:
    """The table, the checks, and whether every count is what it must be."""
    cpu = read_cpu()
    flags = ", ".join(f for f in KERNEL_FLAGS if f in cpu.flags) or "none of the int8 kernel flags"
    expected = [args.size, changed, 0, 0]
    passed = [r["embedded"] for r in rows] == expected
    full, partial = rows[0]["bank_s"], rows[1]["bank_s"]
    lines = [
        f"# python -m benchmarks.bank_reload --size {args.size} --changed {args.changed} --seed {args.seed}",
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {cpu.model}, {cpu.usable_cpus} CPUs ({flags}); "
        f"load average before {args.load_before:.2f}; backend {args.backend}",
        f"# bank: {args.size:,} responses ({source})",
        "",
        "| step | texts embedded | reused | bank seconds | wall seconds | version |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
        *(
            f"| {r['step']} | {r['embedded']:,} | {r['reused']:,} | {r['bank_s']:.2f} | {r['wall_s']:.2f} | "
            f"{r['version']} |"
            for r in rows
        ),  # fmt: skip
        "",
        f"Texts embedded by the reload: {rows[1]['embedded']:,} (changed: {changed:,}); "
        f"{'PASS' if passed else 'FAIL'}: the counts must be {expected}.",
        f"The reload took {partial:.2f} s against {full:.2f} s for the full embed at start "
        f"({full / partial if partial else float('inf'):.0f}x less). The full embed ran on the bulk session "
        "(every CPU, nothing else running); a reload embeds on the query session beside the requests, and "
        "both include the hubness of the whole bank. Bank seconds: the bank's own (file read and checked, "
        "vectors, index, hubness); wall seconds: to /readyz for a start, the request for a reload.",
    ]
    return "\n".join(lines) + "\n", passed


def main(argv: list[str] | None = None) -> int:
    """Build, serve, change, reload, restart; print (and write) the table; 1 when a count is wrong."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000, help="responses in the bank (default 100,000)")
    parser.add_argument("--changed", type=float, default=0.01, help="share of texts changed (default 0.01)")
    parser.add_argument("--seed", type=int, default=0, help="which texts change")
    parser.add_argument("--model", type=Path, default=REPO_ROOT / "models" / "dialogue-minilm-l6")
    parser.add_argument("--backend", default="onnx", help="the ranker's backend (the bank does not use it)")
    where = DEFAULT_OUT.relative_to(REPO_ROOT)
    parser.add_argument("--out", type=Path, nargs="?", const=DEFAULT_OUT, default=None,
                        help=f"write the table here (default {where})")  # fmt: skip
    args = parser.parse_args(argv)
    if not 0 < args.changed < 1 or round(args.size * args.changed) < 1:
        parser.error("--changed must leave at least one changed text and one unchanged")
    args.load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bank-reload-") as tmp:
        rows, changed, source = measure(args, Path(tmp))
    text, passed = report(args, rows, changed, source)
    print(text, end="")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
