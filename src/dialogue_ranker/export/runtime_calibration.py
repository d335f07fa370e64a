r"""A calibration map and abstention threshold per runtime: a bundle's ``calibration_by_runtime``.

    ranker calibrate-runtimes models/dialogue-minilm-l6 \
        --lists sugar=runs/data/sugar.jsonl --lists topical-chat=runs/data/topical-chat.jsonl --split dev

The export fits the bundle's map and threshold on ONNX Runtime's logits. ``--backend auto`` may
serve the graph with OpenVINO (in f32, or in bf16 where the CPU has native bf16), whose logits
differ slightly (bf16: about 0.08 on average), enough to move ECE and the threshold's abstention
accuracy by about 0.01. This command scores the dev lists under every runtime the auto backend may
pick on any host, as ``ranker evaluate`` and the service score them, fits the bundle's map method
on each runtime's own logits with the export's fitting code (:func:`calibration_choice.calibrate_on`
on the files of ``--calibrate-on``, by default those the export fitted on: give the same dev lists,
and ONNX Runtime's logits give back the bundle's map exactly) and writes into ``metadata.json``:

    "calibration_by_runtime": {
        "onnx": {"calibration": <the bundle's own map>, "threshold": ..., "dev": {...}},
        "openvino-bf16": {"calibration": {"method": "platt", "a": ..., "b": ...}, "threshold": ...,
                          "dev": {"sugar": {"own_map": {"ece": ..., "abstention_accuracy": ...},
                                            "onnx_map": {...}}, ...}, ...},
        ...
    }

The threshold: by default (``--threshold bundle``) each runtime keeps the bundle's, a calibrated
probability, on its own map, so that it stays the operating point the export chose. ``--threshold
refit`` chooses it again on each runtime's logits (:func:`calibration_choice.threshold_on` on the
files of ``--threshold-on``): only sound on the export's own lists, as the threshold moves more
with the lists' sample than with the runtime (model 2.8.0: ONNX Runtime itself gives 0.470 on
another sample of Topical-Chat dev lists against the bundle's 0.438, OpenVINO bf16 0.490; on the
test lists the refitted thresholds cost 0.026 of Topical-Chat abstention accuracy, the bundle's
costs nothing; docs/guides/backends.md).

ONNX Runtime's entry is the bundle's own map and threshold, unchanged (with ``refit_here``: what
the same fitting gives on ONNX Runtime's logits of these lists, not served). ``dev`` holds each file's
ECE and abstention accuracy under that runtime with its own map and with the bundle's (ONNX
Runtime's); the table printed at the end shows them. The service calibrates with the entry of the
runtime it chose (``/v1/models`` says which in ``calibration_in_force``), ``ranker evaluate
--backend openvino`` with the entry of the runtime it scores with. A runtime this host cannot run
(OpenVINO not installed, bf16 without native bf16) keeps the entry it had; a rerun replaces the
others.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.machine import describe_for_report, read_cpu
from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation.domains import ListScorer, evaluate, held_out
from dialogue_ranker.export.calibration_choice import calibrate_on, threshold_on
from dialogue_ranker.serving.backends.openvino import openvino_available
from dialogue_ranker.serving.calibration import Calibrator, RuntimeCalibration, runtime_key
from dialogue_ranker.serving.cpu import native_bf16
from dialogue_ranker.serving.model_bundle import METADATA_FILE, ModelBundle, load_bundle
from dialogue_ranker.serving.settings_groups import AUTO_RUNTIMES

#: The metadata entry this command writes.
ENTRY = "calibration_by_runtime"
#: CPU flags that decide whether and how OpenVINO computes in bf16.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile")
#: How far (in a or b) a Platt map refitted on ONNX Runtime's logits may land from the bundle's
#: before the lists are said to differ from the export's (the same lists give the same map to 1e-9).
MAP_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Runtime:
    """One runtime the auto backend may serve with: ONNX Runtime, or OpenVINO at a precision."""

    backend: str
    precision: str

    @property
    def key(self) -> str:
        """Its name in ``calibration_by_runtime`` (``onnx``, ``openvino-bf16``...)."""
        return runtime_key(self.backend, "" if self.backend == "onnx" else self.precision)

    def unavailable(self) -> str:
        """Why this host cannot run it ('' when it can)."""
        if self.backend == "openvino" and not openvino_available():
            return "openvino is not installed"
        if self.precision == "bf16" and not native_bf16():
            return "this CPU has no native bf16 (AVX-512 BF16, AMX)"
        return ""


def runtimes() -> list[Runtime]:
    """ONNX Runtime (at the graph's own precision), then each runtime ``--auto.runtimes`` may try."""
    return [Runtime("onnx", "auto")] + [Runtime(*name.split("-", 1)) for name in AUTO_RUNTIMES]


def fit_runtime(
    bundle: ModelBundle,
    lists: dict[str, list[RankingList]],
    logits: dict[str, list[np.ndarray]],
    *,
    calibrate_names: list[str],
    threshold_names: list[str],
) -> RuntimeCalibration:
    """The bundle's map method and the abstention threshold, fitted on one runtime's ``logits``.

    The export's own fitting (:mod:`dialogue_ranker.export.calibration_choice`): the maps on the
    lists of ``calibrate_names``, the threshold on those of ``threshold_names`` with the Platt map.
    """
    fitted = calibrate_on(",".join(calibrate_names), lists, logits)
    fitted = threshold_on(fitted, threshold_names, lists, None, None, scored=logits)
    return RuntimeCalibration(fitted["maps"][bundle.calibration.method], float(fitted["threshold"]))


def dev_figures(
    lists: dict[str, list[RankingList]],
    logits: dict[str, list[np.ndarray]],
    maps: dict[str, RuntimeCalibration],
) -> dict[str, dict[str, dict[str, float]]]:
    """Each file's ECE and abstention accuracy with each of ``maps`` (by name), at its threshold."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, held in lists.items():
        out[name] = {}
        for label, fitted in maps.items():
            probs = [np.asarray(fitted.calibration(z)) for z in logits[name]]
            result = evaluate(held, probs, fitted.threshold)
            out[name][label] = {k: float(result[k] or 0.0) for k in ("ece", "abstention_accuracy")}
    return out


def runtime_entry(
    bundle: ModelBundle,
    runtime: Runtime,
    lists: dict[str, list[RankingList]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One runtime's ``calibration_by_runtime`` entry: its map and threshold, and the dev figures."""
    scorer = ListScorer(bundle, threads=args.threads, backend=runtime.backend, precision=runtime.precision)
    logits = {name: scorer.logits(held) for name, held in lists.items()}
    del scorer  # its sessions go before the next runtime's
    onnx_map = RuntimeCalibration(bundle.calibration, bundle.threshold)
    fitted = fit_runtime(
        bundle, lists, logits, calibrate_names=args.calibrate_on, threshold_names=args.threshold_on
    )
    onnx = runtime.key == "onnx"
    if onnx:
        own = onnx_map
    elif args.threshold == "bundle":  # the operating point the export chose, on this runtime's own map
        own = RuntimeCalibration(fitted.calibration, bundle.threshold)
    else:
        own = fitted
    maps = {"own_map": own, "onnx_map": onnx_map}
    entry: dict[str, Any] = {
        "calibration": own.calibration.to_dict(),
        "threshold": own.threshold,
        "calibration_fitted_on": None if onnx else args.calibrate_on,
        "threshold_fitted_on": None if onnx or args.threshold == "bundle" else args.threshold_on,
        "split": args.split,
        "lists": {name: len(held) for name, held in lists.items()},
    }
    if onnx:
        # Not served: the export's fitting on these lists and ONNX Runtime's own logits. How far
        # it lands from the bundle's map and threshold is what the lists alone account for.
        entry["refit_here"] = {"calibration": fitted.calibration.to_dict(), "threshold": fitted.threshold}
        maps["refit_here"] = fitted
        warn_on_other_lists(bundle.calibration, fitted.calibration)
    entry["dev"] = dev_figures(lists, logits, maps)
    return entry


def warn_on_other_lists(bundle_map: Calibrator, refit: Calibrator) -> None:
    """Say so when ONNX Runtime's logits give another map here than the bundle's: other lists."""
    if bundle_map.method != "platt" or refit.method != "platt":
        return
    gap = max(abs(float(bundle_map.params[k]) - float(refit.params[k])) for k in ("a", "b"))
    if gap > MAP_TOLERANCE:
        print(
            f"NOTE: ONNX Runtime's logits give a Platt map {gap:.4f} away from the bundle's on these "
            "lists: they are not the lists the export fitted on (--calibrate-on), and every runtime's "
            "map here carries that difference too",
            flush=True,
        )


def machine() -> dict[str, Any]:
    """The CPU the entries were measured on (bf16 results depend on how the CPU computes bf16)."""
    cpu = read_cpu()
    described = describe_for_report(cpu)
    described["bf16_flags"] = [f for f in BF16_FLAGS if f in cpu.flags]
    if openvino_available():
        import openvino

        described["openvino"] = openvino.__version__.split("-")[0]
    return described


def table(entries: dict[str, dict[str, Any]]) -> str:
    """The dev figures of every runtime: ECE and abstention accuracy with the ONNX map and its own."""
    head = (
        "| runtime | dataset | lists | threshold | ECE, ONNX map | ECE, own map |"
        " abstention acc., ONNX map | abstention acc., own map |"
    )
    rows = [head, "|" + " --- |" * 8]
    for key, entry in entries.items():
        refit = entry.get("refit_here")
        labelled = [(key, "own_map", entry["threshold"])]
        if refit:
            labelled.append((f"{key}, refit here (not served)", "refit_here", refit["threshold"]))
        for label, own_key, threshold in labelled:
            for name, figures in entry.get("dev", {}).items():
                onnx, own = figures["onnx_map"], figures[own_key]
                cells = [onnx["ece"], own["ece"], onnx["abstention_accuracy"], own["abstention_accuracy"]]
                rows.append(
                    f"| {label} | {name} | {entry['lists'][name]} | {threshold:.3f} | "
                    + " | ".join(f"{v:.4f}" for v in cells)
                    + " |"
                )
    return "\n".join(rows) + "\n"


def write_entries(directory: Path, entries: dict[str, dict[str, Any]], measured_on: dict[str, Any]) -> Path:
    """``metadata.json`` with ``entries`` in place of the same runtimes' old ones (others kept).

    Written to a temporary file and renamed over the old one, so a reader never sees half a file.
    """
    path = directory / METADATA_FILE
    meta = json.loads(path.read_text())
    merged = dict(meta.get(ENTRY) or {})
    for key, entry in entries.items():
        merged[key] = {**entry, "machine": measured_on}
    order = [r.key for r in runtimes()]
    meta[ENTRY] = dict(sorted(merged.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def fitted_on(bundle: ModelBundle, given: str | None, key: str, lists: dict[str, Any]) -> list[str]:
    """``--calibrate-on``/``--threshold-on``'s files, by default those the export fitted on (``key``)."""
    names = given.split(",") if given else list(bundle.metadata.get(key) or lists)
    missing = [n for n in names if n not in lists]
    if missing:
        flag = "--calibrate-on" if key == "calibration_fitted_on" else "--threshold-on"
        source = "" if given else f" (the bundle's {key}; name others with {flag})"
        raise SystemExit(f"{flag}: no --lists named {', '.join(missing)}{source}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", type=Path, help="the bundle directory; its metadata.json is rewritten")
    parser.add_argument("--lists", action="append", required=True, help="NAME=FILE (repeatable)")
    parser.add_argument("--split", choices=["train", "dev", "test", "all"], default="dev")
    parser.add_argument(
        "--max-lists", type=int, default=0, help="a seeded sample of this many lists per file (0: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calibrate-on", help="NAME,... the map is fitted on (default: the export's)")
    parser.add_argument("--threshold-on", help="NAME,... the threshold is chosen on (default: the export's)")
    parser.add_argument(
        "--threshold",
        choices=("bundle", "refit"),
        default="bundle",
        help="bundle (default): each runtime keeps the bundle's threshold, on its own map; refit: chosen "
        "again on each runtime's logits of --threshold-on's lists (only where they are the export's)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="print the table, write nothing")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Fit and write every runtime's entry this host can run; returns the entries written."""
    args = parse_args(argv)
    lists: dict[str, list[RankingList]] = {}
    for spec in args.lists:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--lists takes NAME=FILE, got {spec!r}")
        lists[name] = held_out(read_lists(path), args.split, args.max_lists, args.seed)
    # The bundle's own map and threshold, whatever entries it already has.
    bundle = load_bundle(args.model)
    if bundle.calibration.method != "platt":
        raise SystemExit(f"{args.model}: the threshold is chosen with a Platt map; this bundle's is "
                         f"{bundle.calibration.method}")  # fmt: skip
    args.calibrate_on = fitted_on(bundle, args.calibrate_on, "calibration_fitted_on", lists)
    args.threshold_on = fitted_on(bundle, args.threshold_on, "threshold_fitted_on", lists)
    entries = {}
    for runtime in runtimes():
        why_not = runtime.unavailable()
        if why_not:
            print(f"{runtime.key}: not measured here ({why_not}); its entry, if any, is kept", flush=True)
            continue
        print(f"{runtime.key}: scoring {sum(map(len, lists.values()))} lists", flush=True)
        entries[runtime.key] = runtime_entry(bundle, runtime, lists, args)
        print(json.dumps({runtime.key: {k: entries[runtime.key][k] for k in ("calibration", "threshold")}}))
    print(table(entries))
    if not args.dry_run:
        print(f"wrote {ENTRY} ({', '.join(entries)}) into {write_entries(args.model, entries, machine())}")
    return entries


if __name__ == "__main__":
    exit_on_data_error(main)
