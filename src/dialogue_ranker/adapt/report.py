"""``report.md``: what ``ranker adapt`` did and how the adapted bundle compares with the base.

Written from the state file's facts and ``comparison.json``: the time per phase against its share
of the budget, the team's lists and split, the guard and its verdict, both bundles on the team's
test lists and on the regression suite (each metric's values, the difference and its paired
bootstrap interval), the graph shipped and why, and the serving settings carried over.
"""

from __future__ import annotations

import math
from typing import Any

WHAT = {
    "prepare": "read and split the lists, probe the scoring rate and a few training steps of each kind, plan",
    "train": "ranker train from the base bundle",
    "export": "ranker export: graphs built, checked, one shipped",
    "calibrate": "each runtime's map and threshold on the team's dev lists",
    "evaluate": "both bundles on the team's test lists and the regression suite",
}


def number(value: float | None) -> str:
    """A metric's value, or ``-`` where there is none."""
    return "-" if value is None else f"{value:.3f}"


def comparison_table(rows: list[dict[str, Any]], *, base: str, adapted: str, level: str) -> str:
    """A row per set and metric: both values, the difference, its interval and the verdict."""
    lines = [
        f"| set | metric | items | base `{base}` | adapted `{adapted}` | adapted - base | {level} interval "
        "| verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        span = "-" if r["low"] is None else f"[{r['low']:+.3f}, {r['high']:+.3f}]"
        metric = r["metric"] + ("" if r["higher_is_better"] else " (lower is better)")
        lines.append(
            f"| {r['set']} | {metric} | {r['items']} | {number(r['base'])} | {number(r['adapted'])} "
            f"| {r['difference']:+.3f} | {span} | {r['verdict']} |"
        )
    return "\n".join(lines)


def views_text(views: dict[str, float]) -> str:
    """A bundle's context views in words."""
    if not views:
        return "one view (the full context)"
    names = {
        "last_turn_weight": "last-turn weight",
        "prior_weight": "prior weight",
        "prior_centre": "prior centre",
    }
    return ", ".join(f"{names.get(k, k)} {v:.4g}" for k, v in views.items())


def suite_cut_text(fraction: float) -> str:
    """A caution where the budget cut the suite's sampled sets (empty: it scored them whole)."""
    if fraction >= 1:
        return ""
    return (
        f"**The budget held {fraction:.0%} of each sampled set's lists** (a short `--minutes` on this host): "
        "the rows below are noisier than the suite's own; a longer budget scores the whole suite."
    )


def fitted_views_text(fit: dict | None) -> str:
    """How the views' weights were chosen on the team's dev lists (empty: they were not)."""
    if not fit:
        return ""
    rows = ", ".join(
        f"{r['last_turn_weight']:g} / {r['prior_weight']:g}: {r['precision_at_1']:.3f}"
        + ("" if r.get("held", True) else " (lowers the replay)")
        for r in fit["grid"]
    )
    chosen, hold = fit["chosen"], fit.get("hold")
    held = (
        f", leaving out a point that lowers a replay file's dev P@1 ({', '.join(hold['files'])}) by more "
        f"than {hold['max_drop']:g}"
        if hold
        else ""
    )
    return (
        f"The weights were chosen on {fit['lists']} of the team's dev lists by P@1{held} (last-turn / prior: "
        f"{rows}): {chosen['last_turn_weight']:g} / {chosen['prior_weight']:g}. "
    )


def graph_note(base_precision: str | None, shipped: str) -> str:
    """A caution where the two bundles' graphs differ in precision (their numerics differ too)."""
    adapted = shipped.split("_")[0]
    if not base_precision or base_precision == adapted:
        return ""
    return (
        f"The base's graph is {base_precision}, the adapted one's {adapted}: part of a difference here is "
        "the graphs' numerics, not the training (the export's table below shows how far int8 and fp32 "
        "of the adapted weights part on the dev lists).\n"
    )


def time_table(phases: dict[str, dict[str, Any]], plan: dict[str, Any], budget_s: float) -> str:
    """Each phase's planned share and the seconds it took."""
    lines = ["| phase | share | planned s | took s | what |", "| --- | ---: | ---: | ---: | --- |"]
    planned_total = sum(plan["seconds"].values())
    for name, facts in phases.items():
        seconds = plan["seconds"].get(name)
        share = "-" if seconds is None else f"{seconds / planned_total:.0%}"
        planned = "-" if seconds is None else f"{seconds:.0f}"
        lines.append(f"| {name} | {share} | {planned} | {facts['seconds']:.0f} | {WHAT.get(name, '')} |")
    total = sum(f["seconds"] for f in phases.values())
    lines.append(f"| all | 100% | {budget_s:.0f} | {total:.0f} | the budget, --minutes |")
    return "\n".join(lines)


def guard_text(guard: dict[str, Any], verdict: dict[str, Any]) -> str:
    """The guard used, and whether the regression suite's ranking held within its limit."""
    replay = ", ".join(f"`{r['file']}` (weight {r['weight']:g}, {r['license']})" for r in guard["replay"])
    used = f"Guard `{guard['kind']}`" + (
        f" (asked: `{guard['asked']}`)" if guard["asked"] != guard["kind"] else ""
    )
    used += f": replay {replay or 'none'}" + (f"; teacher `{guard['teacher']}`." if guard["teacher"] else ".")
    if verdict["held"] is None:
        return used + " **Not checked**: no set of the regression suite is present."
    limit, items = verdict["max_drop"], verdict.get("resolving_items")
    rule = f"no ranking metric of the regression suite dropped by more than {limit:g}" + (
        f" (a set of fewer than {items} items, where one item moves a share by more than {1 / items:g}:"
        " none worse beyond its interval)"
        if items
        else ""
    )
    if verdict["held"]:
        return used + f" **Held**: {rule}."
    return used + f" **Broken** ({rule}): {', '.join(verdict['broken'])}."


def chosen_by(state: dict[str, Any]) -> str:
    """How the run chose its best epoch (``--select-on``), from its recorded command line."""
    argv = state.get("train_argv") or []
    if "--select-on" in argv:
        return ", chosen by the team's dev nDCG@3"
    return ", chosen by the mean dev nDCG@3 of the team's and the replay's lists"


def fitted_on(entry: dict[str, Any]) -> str:
    """Whose logits a runtime's map was fitted on: its own, or another runtime's it agreed with."""
    shared = entry.get("shared_with")
    return f"{shared}'s (logits agree)" if shared else "its own logits"


def replanned(trained: dict[str, Any]) -> str:
    """Where ``ranker train --replan`` cut the schedule to the run's own rate, the length it ran to."""
    schedule = trained.get("schedule_steps", trained["planned_steps"])
    cut = schedule < trained["planned_steps"]
    return f", the schedule cut to {schedule} by the run's own rate" if cut else ""


def render(state: dict[str, Any], comparison: dict[str, Any], adapted_by: dict[str, Any], *, out: str) -> str:
    """The whole report."""
    phases = state["phases"]
    prepared, trained, exported, calibrated = (phases[p] for p in ("prepare", "train", "export", "calibrate"))
    base, adapted = adapted_by["base"]["id"], f"{exported['name']}@{exported['version']}"
    level = f"{comparison['suite']['confidence']:.0%}"
    sources = "\n".join(
        f"| `{s['file']}` | {s['sha256'][:12]}... | {s['lists']} | {s['groups']} |"
        for s in prepared["sources"]
    )
    split = "\n".join(
        f"| {p} | {c['lists']} | {c['groups']} |" for p, c in prepared["split"]["counts"].items()
    )
    graphs = "\n".join(
        f"| {v} | {g['mb']:.1f} | {g['requests_per_s']:.1f} | {g['max_abs_logit_vs_fp32']:.4f} "
        f"| {g['worst_dev_p1_change']:+.4f} |"
        for v, g in exported["graphs"].items()
    )
    maps = "\n".join(
        f"| {k} | {m['calibration'].get('a', math.nan):.3f} | {m['calibration'].get('b', math.nan):.3f} "
        f"| {m['threshold']:.3f} | {fitted_on(m)} |"
        for k, m in calibrated["runtimes"].items()
    )
    absent = comparison["suite"]["absent"]
    served_views = exported.get("views") or {}
    centre_note = " (the prior's centre re-fitted on the run's dev lists)" * ("prior_weight" in served_views)
    steps_per_s = trained["steps"] / max(trained["train_seconds"], 1e-9)
    probe = prepared.get("step_probe")
    probed = (
        f"The step probes measured {probe['measured_seconds_per_step']:.2f} s a step of the team's lists"
        + (
            f" and {probe['replay_seconds_per_step']:.2f} s of the replay's"
            if "replay_seconds_per_step" in probe
            else ""
        )
        + f" ({probe['seconds_per_step']:.2f} s planned at the replay's share, aimed high; "
        f"the probes took "
        f"{probe['probe_seconds']:.0f} s); the run's own steps took "
        f"{trained.get('seconds_per_step') or math.nan:.2f} s."
        if probe
        else "Steps set by --max-steps (no step probe)."
    )
    chosen = chosen_by(state)
    return f"""# ranker adapt: `{adapted}` from `{base}`

{adapted_by["date"]}. The adapted bundle is `{out}/bundle` (`ranker serve --model {out}/bundle`);
this report compares it with the base on the team's test lists and on what the base knew.

## Time per phase

{time_table(phases, prepared["plan"], state["budget_s"])}

Training: {trained["steps"]} of {trained["planned_steps"]} planned steps{replanned(trained)}
({steps_per_s:.3f} steps/s over {trained["train_seconds"]:.0f} s, loading and dev checks included), stopped
by {trained["stopped_by"]};
best epoch {(trained["best_epoch"] or {}).get("epoch", "-")} of {trained["epochs"]} dev checks{chosen}.
{probed}

## The team's lists

| lists | SHA-256 | lists | groups |
| --- | --- | ---: | ---: |
{sources}

Split by group ({prepared["split"]["rule"]}): the test part is read only here.

| part | lists | groups |
| --- | ---: | ---: |
{split}

## Forgetting guard

{guard_text(adapted_by["guard"], comparison["guard"])}

## The team's test lists

{comparison_table(comparison["team"], base=base, adapted=adapted, level=level)}

## Regression suite: what the base knew

`{comparison["suite"]["file"]}`: {", ".join(comparison["suite"]["sets"]) or "no set present"}.
{("Absent (not scored): " + ", ".join(absent) + ".") if absent else ""}
{suite_cut_text(comparison["suite"].get("fraction", 1.0))}

{comparison_table(comparison["regression"], base=base, adapted=adapted, level=level)}

{graph_note(prepared["base"].get("precision"), exported["shipped"])}
Paired bootstrap: {comparison["suite"]["resamples"]} resamples, seed {comparison["suite"]["seed"]}, {level}
intervals of adapted - base; under {comparison["suite"]["min_items"]} items no interval is drawn.
A verdict of worse or better means the whole interval is on that side of zero.

## Export

Shipped **{exported["shipped"]}**: {exported["why"]}.

| graph | MB | requests/s | max abs logit vs fp32 | worst dev P@1 change |
| --- | ---: | ---: | ---: | ---: |
{graphs}

## Serving settings

Carried over from the base: {views_text(adapted_by["serving_settings_from_base"])}; trained with the
last-turn view. {fitted_views_text(exported.get("views_fit"))}Served with
{views_text(served_views)}{centre_note}.
Calibration (Platt) and the abstention threshold per runtime, fitted on {calibrated["lists"]} of the
team's dev lists:

| runtime | a | b | threshold | fitted on |
| --- | ---: | ---: | ---: | --- |
{maps}

![base against adapted](report.png)
"""
