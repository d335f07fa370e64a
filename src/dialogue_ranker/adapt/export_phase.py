"""The export phase: ``ranker export`` on the run, the graph that holds dev accuracy shipped.

The export builds fp32 and ``--variants`` (by default the base's int8 grid), checks each on the
run's dev lists (the team's and the replay files') and ships the fastest whose dev P@1 is within
0.01 of fp32's on every file (:mod:`dialogue_ranker.export.variant_choice`): int8 where it holds,
fp32 (or ``fp16_weights``, when ``--variants`` names it) where int8 loses. ``--max-mb`` is lifted
to 100 so that fp32 can ship when nothing smaller holds: a team's bundle is not held to the
repository's budget. The export takes the base bundle's context views (the run records the bundle;
:mod:`dialogue_ranker.export.base_serving`) and, unless ``--views base``, chooses their weights on
the team's dev lists (:mod:`dialogue_ranker.export.view_fit`). The base's retrieval encoder
(``retriever/``, for response banks) is copied in unchanged.
"""

from __future__ import annotations

import argparse
import json
import shutil
from typing import Any

from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.export.__main__ import main as export_main
from dialogue_ranker.export.variant_choice import accuracy_misses
from dialogue_ranker.serving.model_bundle import METADATA_FILE, RETRIEVER_DIR

#: The export's accuracy rule, as ``ranker export`` defaults it.
MAX_P1_LOSS = 0.01
MAX_MB = 100.0
#: Requests each graph is timed on (the export's default of 120 is minutes on 2 cores).
SPEED_REQUESTS = 24


def bundle_names(args: argparse.Namespace, base: dict[str, Any]) -> tuple[str, str]:
    """The adapted bundle's name and version (``--name``/``--version``, else the base's, marked)."""
    return args.name or f"{base['name']}-adapted", args.version or f"{base['version']}+adapted"


def why(report: dict[str, Any]) -> str:
    """Why the shipped graph ships: each faster-or-smaller graph it passed over, and how it lost."""
    rule = argparse.Namespace(max_p1_loss=MAX_P1_LOSS, max_logit_error=None)
    shipped = report["shipped"]
    lost = {v: accuracy_misses(report, v, rule) for v in report["variants"] if v not in ("fp32", shipped)}
    if shipped == "fp32":
        held = "fp32 is the reference the others are held to"
    else:
        held = f"{shipped} holds dev P@1 within {MAX_P1_LOSS:g} of fp32 on every file"
        held += " and is the fastest that does"
    # A graph that held the rule and did not ship was over the size limit or slower (on an AMX Xeon
    # fp32 ran faster than int8): the sentence says which, from the export's own measurements.
    measured = report["variants"]
    rate = measured[shipped]["situated_requests_per_s"]
    slower = [
        f"{v} holds it too but is over {MAX_MB:g} MB"
        if measured[v]["file_mb"] > MAX_MB
        else f"{v} holds it too but is slower ({measured[v]['situated_requests_per_s']:.1f} against "
        f"{rate:.1f} requests/s)"
        for v, m in lost.items()
        if not m
    ]
    losses = [f"{v} loses ({'; '.join(m)})" for v, m in lost.items() if m]
    return held + "".join("; " + x for x in [*slower, *losses])


def run_export(args: argparse.Namespace, layout: Layout, prepared: dict[str, Any]) -> dict[str, Any]:
    """Export the run to ``layout.exported``; returns the graph shipped, why, and the graphs' table."""
    name, version = bundle_names(args, prepared["base"])
    report = export_main(
        ["--run", str(layout.run), "--out", str(layout.exported), "--build", str(layout.build),
         "--name", name, "--version", version, "--variants", args.variants,
         "--max-mb", f"{MAX_MB:g}", "--max-p1-loss", f"{MAX_P1_LOSS:g}",
         "--dev-lists", str(prepared["plan"]["export_dev_lists"]),
         "--speed-requests", str(SPEED_REQUESTS),
         "--calibrate-on", prepared["team"]["name"],
         *(["--fit-views-on", prepared["team"]["name"]] if args.views == "fit" else []),
         *(["--views-hold", ",".join(r["name"] for r in prepared["replay"])]
           if args.views == "fit" and prepared["replay"] else [])]
    )  # fmt: skip
    retriever = args.model / RETRIEVER_DIR
    if retriever.is_dir():
        shutil.copytree(retriever, layout.exported / RETRIEVER_DIR, dirs_exist_ok=True)
    fp32 = report["variants"]["fp32"]["dev"]
    graphs = {
        v: {
            "mb": m["file_mb"],
            "requests_per_s": m["situated_requests_per_s"],
            "max_abs_logit_vs_fp32": round(m["max_abs_logit_vs_fp32"], 4),
            "worst_dev_p1_change": round(
                min(r["precision_at_1"] - fp32[f]["precision_at_1"] for f, r in m["dev"].items()), 4
            ),
        }
        for v, m in report["variants"].items()
    }
    facts = {
        "shipped": report["shipped"],
        "why": why(report),
        "graphs": graphs,
        "name": name,
        "version": version,
    }
    print("export:", json.dumps({k: facts[k] for k in ("shipped", "why")}), flush=True)
    return {
        **facts,
        "serving_from": report.get("serving_from"),
        # What the bundle serves (the fitted weights, the prior's re-fitted centre; absent: one view).
        "views": json.loads((layout.exported / METADATA_FILE).read_text()).get("views"),
        "views_fit": report.get("views_fit"),
    }
