"""Which graph ships: the fastest within ``--max-mb`` that holds the accuracy rule, or none.

The accuracy rule: dev P@1 within ``--max-p1-loss`` of fp32 on every file and, when
``--max-logit-error`` is given, no logit further than that from fp32's. A graph that misses it
never ships silently: with no graph both small enough and accurate, the export prints the table
of variants and fails, naming each graph's loss and the flag that would ship an accurate one
(``--max-mb``) or the lossy one anyway (``--accept-loss``). A persona fine-tune of 2.10.0 lost
0.075 dev P@1 in int8 (4.54 logits off fp32) and used to ship with a warning only.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np


def accuracy_misses(report: dict[str, Any], variant: str, args: argparse.Namespace) -> list[str]:
    """How ``variant`` misses the accuracy rule, one phrase per miss ([] when it holds)."""
    fp32 = report["variants"]["fp32"]["dev"]
    measured = report["variants"][variant]
    misses = []
    for name, result in measured["dev"].items():
        lost = fp32[name]["precision_at_1"] - result["precision_at_1"]
        if lost > args.max_p1_loss:
            misses.append(
                f"{name} dev P@1 {result['precision_at_1']:.4f} against fp32's "
                f"{fp32[name]['precision_at_1']:.4f} ({lost:.4f} lost > --max-p1-loss {args.max_p1_loss:g})"
            )
    limit = getattr(args, "max_logit_error", None)
    if limit is not None and measured["max_abs_logit_vs_fp32"] > limit:
        misses.append(
            f"logits up to {measured['max_abs_logit_vs_fp32']:.4f} off fp32's (> --max-logit-error {limit:g})"
        )
    return misses


def variants_table(report: dict[str, Any], args: argparse.Namespace) -> str:
    """Every graph measured: size, whether it fits, logit error, worst P@1 change, speed, accuracy."""
    rows = [
        "| graph | MB | within --max-mb | max abs logit vs fp32 | worst dev P@1 change | requests/s "
        "| accuracy |",
        "|" + " --- |" * 7,
    ]
    fp32 = report["variants"]["fp32"]["dev"]
    for variant, measured in report["variants"].items():
        worst = min(r["precision_at_1"] - fp32[n]["precision_at_1"] for n, r in measured["dev"].items())
        misses = accuracy_misses(report, variant, args)
        fits = "yes" if measured["file_mb"] <= args.max_mb else "no"
        rows.append(
            f"| {variant} | {measured['file_mb']:.1f} | {fits} "
            f"| {measured['max_abs_logit_vs_fp32']:.4f} | {worst:+.4f} "
            f"| {measured['situated_requests_per_s']:.1f} | {'holds' if not misses else 'LOSES'} |"
        )
    return "\n".join(rows)


def choose_shipped(report: dict[str, Any], paths: dict[str, Path], args: argparse.Namespace) -> str:
    """The graph to ship: the fastest within ``--max-mb`` that holds the accuracy rule.

    When none does, the most accurate graph within ``--max-mb`` ships only with ``--accept-loss``
    (its loss printed and kept in the report as ``accepted_loss``).

    Raises:
        SystemExit: no graph within ``--max-mb`` holds accuracy and ``--accept-loss`` is not given;
            the message names the loss and the ``--max-mb`` that would ship an accurate graph.
    """
    table = variants_table(report, args)
    print(table, flush=True)
    sizes = {v: report["variants"][v]["file_mb"] for v in paths}
    fits = [v for v in paths if sizes[v] <= args.max_mb]
    holding = [v for v in paths if not accuracy_misses(report, v, args)]
    shippable = [v for v in fits if v in holding]
    if shippable:
        return max(shippable, key=lambda v: report["variants"][v]["situated_requests_per_s"])
    best = max(
        fits,
        key=lambda v: (
            np.mean([r["precision_at_1"] for r in report["variants"][v]["dev"].values()]),
            -report["variants"][v]["max_abs_logit_vs_fp32"],
        ),
    )
    loss = "; ".join(accuracy_misses(report, best, args))
    if args.accept_loss:
        print(f"WARNING: shipping {best} with its accuracy loss (--accept-loss): {loss}", flush=True)
        report["accepted_loss"] = {"variant": best, "misses": accuracy_misses(report, best, args)}
        return best
    accurate = min(holding, key=lambda v: sizes[v])  # fp32 always holds: it is the reference
    raise SystemExit(
        f"no graph within --max-mb {args.max_mb:g} holds accuracy; the best, {best}, loses: {loss}.\n"
        f"{accurate} holds it at {sizes[accurate]:.1f} MB: pass --max-mb {math.ceil(sizes[accurate])} "
        f"to ship it, or --accept-loss to ship {best} with that loss.\n{table}"
    )
