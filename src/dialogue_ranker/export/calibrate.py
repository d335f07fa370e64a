r"""``ranker calibrate``: a bundle's calibration map and threshold fitted on a team's own lists.

    ranker calibrate --lists my-lists.jsonl --model models/dialogue-minilm-l6 --out models/mine

No training: the bundle's graph scores the lists (ranking-data format,
``docs/guides/ranking-data.md``) under every runtime the service may serve it with (ONNX Runtime,
OpenVINO f32, and OpenVINO bf16 where the CPU computes bf16 natively; ``--runtimes`` narrows it),
as ``ranker evaluate`` and the service score them (:class:`evaluation.domains.ListScorer`, with
the bundle's context views); a runtime whose logits agree with ONNX Runtime's on a parity sample
(:data:`SHARED_MAP_TOLERANCE`) shares its map instead of scoring every list again. On each
runtime's own logits it fits the map (``--method``: Platt by default) and chooses the abstention
threshold that maximises abstention accuracy, on all lists but a held-out share of groups
(``--holdout``, a stable hash of ``group``), and prints ECE and abstention before (the bundle's
map for that runtime) and after, on that held-out part.

One map cannot fit every base rate: the shipped map, fitted on SUGAR and Topical-Chat, gives
DailyDialog++ an ECE of about 0.15, because a third of its candidates are appropriate. A
deployment that knows its own traffic's mix fits its own here.

``--out`` is a new, complete bundle: a copy of ``--model`` (graph, tokenizer, samples, retriever)
with the new maps in ``metadata.json`` (``calibration`` and ``threshold``: ONNX Runtime's;
``calibration_by_runtime``: each runtime's) and ``calibrated_by``: the lists file's name, SHA-256
and list count, the date, the method, the held-out figures. A copy rather than an overlay or
symbolic links: 23 MB of graph is cheap, and a bundle that is one directory survives a Docker
``COPY`` or a Kubernetes volume, where links break. ``GET /v1/models`` shows ``calibrated_by``;
the model card (rewritten) says what calibrated it. The base's ``eval-*.json`` files are left out:
their ECE and abstention figures are the old map's (rerun ``ranker evaluate --out``).
A runtime this host cannot run gets no entry: the service falls back to the bundle's own map
(ONNX Runtime's, refitted here) for it, and the command says so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.feedback_logs import lists_digest, read_lists_or_logs
from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error
from dialogue_ranker.evaluation import calibration, metrics
from dialogue_ranker.evaluation.domains import ListScorer, group_bucket, held_out
from dialogue_ranker.export.card import write_card
from dialogue_ranker.export.runtime_calibration import ENTRY, Runtime, machine, runtimes
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.model_bundle import METADATA_FILE, ModelBundle, load_bundle
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR

#: What ``metadata.json`` records about the calibration (``/v1/models`` and the card show it).
CALIBRATED_BY = "calibrated_by"


def split_by_group(
    lists: Sequence[RankingList], holdout: float
) -> tuple[list[RankingList], list[RankingList]]:
    """(fit, held out): a list is held out when its group's stable hash falls below ``holdout``.

    The hash is :func:`evaluation.domains.group_split`'s (SHA-1 of the group), so the held-out part
    holds the groups that ``--split test`` reads (the lowest 15%) and never cuts a dialogue.
    """
    fit, held = [], []
    for x in lists:
        (held if group_bucket(x.group) < holdout else fit).append(x)
    return fit, held


def fit_map(
    method: str, lists: Sequence[RankingList], logits: Sequence[np.ndarray]
) -> tuple[Calibrator, float]:
    """The map (``platt`` or ``isotonic``) and the abstention threshold that is best with it.

    Raises:
        SystemExit: the lists' logits cannot be fitted (one class only, or a decreasing Platt map).
    """
    flat = np.concatenate(logits)
    outcomes = np.asarray([int(c.appropriate) for x in lists for c in x.candidates])
    if outcomes.min() == outcomes.max():
        raise SystemExit("the lists to fit on have only one kind of candidate: label good and bad ones")
    try:
        fitted = calibration.fit(method, flat, outcomes)
    except ValueError as e:
        raise SystemExit(f"cannot fit a {method} map on these lists: {e}") from e
    threshold, _ = metrics.best_abstention_threshold(
        [fitted(z) for z in logits], [[int(c.appropriate) for c in x.candidates] for x in lists]
    )
    return fitted, threshold


def figures(
    lists: Sequence[RankingList], logits: Sequence[np.ndarray], mapping: Calibrator, threshold: float
) -> dict[str, float]:
    """ECE, abstention accuracy and the share of lists abstained on, with ``mapping`` at ``threshold``."""
    probs = [np.asarray(mapping(z)) for z in logits]
    labels = [[int(c.appropriate) for c in x.candidates] for x in lists]
    flat = np.concatenate(probs)
    return {
        "ece": round(metrics.expected_calibration_error(flat, [y for ys in labels for y in ys]), 4),
        "abstention_accuracy": round(
            metrics.abstention_accuracy([p.tolist() for p in probs], labels, threshold), 4
        ),
        "abstained": round(float(np.mean([p.max() < threshold for p in probs])), 4),
    }


#: A runtime whose logits on :data:`PARITY_LISTS` of the lists are within :data:`SHARED_MAP_TOLERANCE`
#: of the first runtime's (ONNX Runtime's) takes that runtime's map and threshold instead of scoring
#: every list again: an fp32 graph under OpenVINO f32 agrees with ONNX Runtime to about 1e-5, and
#: a map fitted on logits 0.05 apart moves a probability by at most about 0.01. Scoring is the whole
#: cost of the command, so this cuts it to about a third for such graphs.
PARITY_LISTS = 24
SHARED_MAP_TOLERANCE = 0.05


def scored(bundle: ModelBundle, runtime: Runtime, lists: list[RankingList], threads: int) -> list[np.ndarray]:
    """Each list's logits under ``runtime``, scored as the service scores them (every view)."""
    scorer = ListScorer(bundle, threads=threads, backend=runtime.backend, precision=runtime.precision)
    logits = scorer.logits(lists)
    del scorer  # its sessions go before the next runtime's
    return logits


def runtime_entry(
    bundle: ModelBundle,
    runtime: Runtime,
    parts: tuple[list[RankingList], list[RankingList]],
    args: argparse.Namespace,
    logits: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """One runtime's ``calibration_by_runtime`` entry: its own map and threshold, and held-out figures.

    ``logits``: the runtime's logits of ``fit`` then ``held``, where already scored.
    """
    fit, held = parts
    if logits is None:
        logits = scored(bundle, runtime, [*fit, *held], args.threads)
    fit_logits, held_logits = logits[: len(fit)], logits[len(fit) :]
    mapping, threshold = fit_map(args.method, fit, fit_logits)
    name = Path(args.lists).name
    entry: dict[str, Any] = {
        "calibration": mapping.to_dict(),
        "threshold": threshold,
        "calibration_fitted_on": [name],
        "threshold_fitted_on": [name],
        "split": f"all groups but the held-out {args.holdout:g}",
        "lists": {name: len(fit)},
    }
    if held:
        base = bundle.for_runtime(runtime.key)
        entry["held_out"] = {
            "lists": len(held),
            "before": figures(held, held_logits, base.calibration, base.threshold),
            "after": figures(held, held_logits, mapping, threshold),
        }
    return entry


def largest_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """The largest absolute difference between two runtimes' logits of the same lists."""
    return max((float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True) if x.size), default=0.0)


def runtime_entries(
    bundle: ModelBundle,
    chosen: list[Runtime],
    parts: tuple[list[RankingList], list[RankingList]],
    args: argparse.Namespace,
) -> dict[str, dict[str, Any]]:
    """Every chosen runtime's entry: the first fitted on its own logits, the others too or shared.

    A runtime whose logits on a parity sample agree with the first's (within
    ``args.share_map_within``, by default :data:`SHARED_MAP_TOLERANCE`) takes its map; the others
    score every list.

    A shared entry says so (``shared_with``, and the parity sample's size and largest difference).
    """
    lists = [*parts[0], *parts[1]]
    first, *others = chosen
    print(f"{first.key}: scoring {len(lists)} lists", flush=True)
    reference = scored(bundle, first, lists, args.threads)
    entries = {first.key: runtime_entry(bundle, first, parts, args, reference)}
    sample = min(PARITY_LISTS, len(lists))
    within = getattr(args, "share_map_within", SHARED_MAP_TOLERANCE)
    for runtime in others:
        parity = None
        if within > 0:
            parity = largest_difference(
                scored(bundle, runtime, lists[:sample], args.threads), reference[:sample]
            )
        if parity is not None and parity <= within:
            print(
                f"{runtime.key}: logits within {parity:.2g} of {first.key}'s on {sample} lists: its map",
                flush=True,
            )
            shared = {
                "shared_with": first.key,
                "parity": {"lists": sample, "max_abs_logit": round(parity, 6)},
            }
            entries[runtime.key] = {**entries[first.key], **shared}
            continue
        why = (
            "fitted alone" if parity is None else f"logits {parity:.2g} from {first.key}'s on {sample} lists"
        )
        print(f"{runtime.key}: {why}: scoring {len(lists)} lists", flush=True)
        entries[runtime.key] = runtime_entry(bundle, runtime, parts, args)
    return entries


def table(entries: dict[str, dict[str, Any]]) -> str:
    """Held-out ECE and abstention of every runtime, before (the base bundle's map) and after."""
    rows = [
        "| runtime | held-out lists | ECE before | ECE after | abstention acc. before | after "
        "| lists abstained before | after |",
        "|" + " --- |" * 8,
    ]
    for key, entry in entries.items():
        held = entry.get("held_out")
        if not held:
            continue
        before, after = held["before"], held["after"]
        cells = [before["ece"], after["ece"], before["abstention_accuracy"], after["abstention_accuracy"]]
        cells += [before["abstained"], after["abstained"]]
        rows.append(f"| {key} | {held['lists']} | " + " | ".join(f"{v:.4f}" for v in cells) + " |")
    return "\n".join(rows)


def write_bundle(
    base: Path,
    out: Path,
    entries: dict[str, dict[str, Any]],
    calibrated_by: dict[str, Any],
    args: argparse.Namespace,
) -> Path:
    """``out``: a copy of ``base`` with the fitted maps in ``metadata.json`` and its card rewritten."""
    refuse_foreign_out(out)
    if out.exists():
        shutil.rmtree(out)
    # eval-*.json hold the old map's ECE and abstention: they would describe another bundle.
    shutil.copytree(base, out, ignore=shutil.ignore_patterns("eval-*.json", "eval-*.md"))
    metadata = json.loads((base / METADATA_FILE).read_text())
    onnx = entries["onnx"]
    metadata.update(
        {
            **({"name": args.name} if args.name else {}),
            **({"version": args.version} if args.version else {}),
            "calibration": onnx["calibration"],
            "calibration_alternatives": {args.method: onnx["calibration"]},
            "threshold": onnx["threshold"],
            "calibration_fitted_on": onnx["calibration_fitted_on"],
            "threshold_fitted_on": onnx["threshold_fitted_on"],
            # Only the runtimes fitted here: another's old entry would serve the base's calibration.
            ENTRY: {key: {**entry, "machine": calibrated_by["machine"]} for key, entry in entries.items()},
            CALIBRATED_BY: calibrated_by,
        }
    )
    (out / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
    write_card(out)
    return out


def refuse_foreign_out(out: Path) -> None:
    """Exit when ``out`` exists and is not a bundle this command wrote: it is never overwritten."""
    meta = out / METADATA_FILE
    if out.exists() and (not meta.is_file() or CALIBRATED_BY not in json.loads(meta.read_text())):
        raise SystemExit(f"--out {out} exists and is not a bundle ranker calibrate wrote: choose another")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lists", required=True, type=Path, help="ranking lists (JSONL) with your labels")
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="the base bundle")
    p.add_argument("--out", required=True, type=Path, help="the calibrated bundle to write (a new directory)")
    p.add_argument(
        "--holdout", type=float, default=0.2, help="share of groups held out for the before/after figures"
    )
    p.add_argument("--method", choices=("platt", "isotonic"), default="platt", help="the map fitted")
    p.add_argument(
        "--max-lists",
        type=int,
        default=0,
        metavar="N",
        help="score a seeded sample of N lists (--seed), before the held-out split: a two-parameter "
        "Platt map needs a few hundred lists, and scoring is the whole cost (default 0: every list)",
    )
    p.add_argument("--seed", type=int, default=0, help="the --max-lists sample's seed")
    p.add_argument(
        "--runtimes",
        default=None,
        help="comma-separated runtimes to fit (onnx always; default: every one this host can run: "
        "onnx, openvino-f32, openvino-bf16)",
    )
    p.add_argument(
        "--share-map-within",
        type=float,
        default=SHARED_MAP_TOLERANCE,
        metavar="LOGIT",
        help="a runtime whose logits on a parity sample are at most this far from ONNX Runtime's takes its "
        f"map instead of scoring every list (default {SHARED_MAP_TOLERANCE:g}; 0: fit each runtime alone)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--name", default=None, help="the new bundle's name (default: the base's)")
    p.add_argument("--version", default=None, help="the new bundle's version (default: the base's)")
    args = p.parse_args(argv)
    if args.max_lists < 0:
        p.error(f"--max-lists {args.max_lists} is negative")
    if not 0.0 <= args.holdout < 1.0:
        p.error(f"--holdout {args.holdout} is not in [0, 1)")
    if args.share_map_within < 0:
        p.error(f"--share-map-within {args.share_map_within:g} is negative")
    if args.out.resolve() == args.model.resolve():
        p.error("--out is the base bundle: calibrate writes a new bundle beside it")
    return args


def calibrated_by_record(
    command: str,
    args: argparse.Namespace,
    bundle: ModelBundle,
    *,
    list_count: int,
    parts: tuple[list[RankingList], list[RankingList]],
    entries: dict[str, dict[str, Any]],
    clock: tuple[float, float],
) -> dict[str, Any]:
    """``calibrated_by``: what fitted the maps (``GET /v1/models`` and the card show it).

    ``args`` names the lists file, the holdout and the method; ``list_count`` is the file's lists,
    ``parts`` the (fitted, held-out) lists scored; ``clock`` the wall and CPU clocks at the start.
    """
    fit, held = parts
    started, cpu_started = clock
    return {
        "command": command,
        "lists": Path(args.lists).name,
        "sha256": lists_digest(args.lists),
        "list_count": list_count,
        "sampled_lists": len(fit) + len(held),
        "fitted_on_lists": len(fit),
        "held_out_lists": len(held),
        "holdout": args.holdout,
        "method": args.method,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "base": bundle.model_id,
        "runtimes": list(entries),
        "held_out": {key: entry["held_out"] for key, entry in entries.items() if "held_out" in entry},
        "seconds": round(time.perf_counter() - started, 1),
        # Every thread's CPU time: on a shared or busy host, what the wall-clock seconds cannot say.
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "machine": machine(),
    }


def chosen_runtimes(text: str | None) -> list[Runtime]:
    """``--runtimes`` as runtimes this host can run, ONNX Runtime first and always; says what is skipped."""
    known = {r.key: r for r in runtimes()}
    names = ["onnx", *(n for n in (text.split(",") if text else known) if n != "onnx")]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"--runtimes {','.join(unknown)}: no such runtime (have: {', '.join(known)})")
    kept = []
    for name in names:
        why_not = known[name].unavailable()
        if why_not:
            print(f"{name}: not fitted ({why_not}); served with the bundle's own map there", flush=True)
        else:
            kept.append(known[name])
    return kept


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Fit every runtime's map and threshold on ``--lists`` and write ``--out``; returns ``calibrated_by``."""
    args = parse_args(argv)
    started, cpu_started = time.perf_counter(), time.process_time()
    refuse_foreign_out(args.out)  # before minutes of scoring, not after
    bundle = load_bundle(args.model)
    every = read_lists_or_logs(args.lists)
    lists = held_out(every, "all", args.max_lists, args.seed)
    if len(lists) < len(every):
        print(f"--max-lists {args.max_lists}: {len(lists)} of the {len(every)} lists, seed {args.seed}")
    fit, held = split_by_group(lists, args.holdout)
    if not fit:
        raise SystemExit(f"--holdout {args.holdout} leaves no list of {args.lists} to fit on")
    print(f"{len(lists)} lists: fitting on {len(fit)}, holding out {len(held)} (by group)", flush=True)
    entries = runtime_entries(bundle, chosen_runtimes(args.runtimes), (fit, held), args)
    for key, entry in entries.items():
        print(json.dumps({key: {k: entry[k] for k in ("calibration", "threshold")}}))
    print(table(entries))
    calibrated_by = calibrated_by_record(
        "ranker calibrate", args, bundle, list_count=len(every), parts=(fit, held), entries=entries,
        clock=(started, cpu_started),
    )  # fmt: skip
    out = write_bundle(bundle.directory, args.out, entries, calibrated_by, args)
    print(
        f"wrote {out} in {calibrated_by['seconds']} s ({calibrated_by['cpu_seconds']} s of CPU); "
        f"serve it: ranker serve --model {out}"
    )
    return calibrated_by


if __name__ == "__main__":
    exit_on_data_error(main)
