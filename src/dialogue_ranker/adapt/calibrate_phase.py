"""The calibration phase: each runtime's map and threshold fitted on the team's dev lists.

``ranker calibrate``'s own functions (:mod:`dialogue_ranker.export.calibrate`): the exported graph
scores the team's dev sample under every runtime this host runs (``--runtimes`` narrows it), a Platt
map and the abstention threshold are fitted on each runtime's logits (a runtime whose logits agree
with ONNX Runtime's on a parity sample shares its map: no second scoring), and ``bundle/`` is written as
a copy of the exported bundle with those maps and ``calibrated_by``. Nothing is held out here: the
team's test lists, which the comparison reads, were never in the dev part.
"""

from __future__ import annotations

import argparse
import shutil
import time
from typing import Any

from dialogue_ranker.adapt.layout import Layout
from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.export.calibrate import (
    calibrated_by_record,
    chosen_runtimes,
    runtime_entries,
    write_bundle,
)
from dialogue_ranker.serving.model_bundle import load_bundle

METHOD = "platt"


def run_calibration(args: argparse.Namespace, layout: Layout) -> dict[str, Any]:
    """Fit every runtime's map on the team's dev sample and write ``layout.bundle``.

    Returns each runtime's map and threshold, and the lists they were fitted on.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    lists = read_lists(layout.team_dev)
    exported = load_bundle(layout.exported)
    # The options runtime_entries and calibrated_by_record read: threads, map, lists file, holdout.
    options = argparse.Namespace(
        threads=args.threads, method=METHOD, lists=layout.team_dev, holdout=0.0, name=None, version=None
    )
    split = {"split": "the team's dev part (group hash), a seeded sample"}
    entries = runtime_entries(exported, chosen_runtimes(args.runtimes), (lists, []), options)
    entries = {key: {**entry, **split} for key, entry in entries.items()}
    calibrated_by = calibrated_by_record(
        "ranker adapt", options, exported, list_count=len(lists), parts=(lists, []), entries=entries,
        clock=(started, cpu_started),
    )  # fmt: skip
    if layout.bundle.exists():  # a copy a kill interrupted: this phase's own, never the user's
        shutil.rmtree(layout.bundle)
    write_bundle(layout.exported, layout.bundle, entries, calibrated_by, options)
    return {
        "runtimes": {
            k: {
                "calibration": e["calibration"],
                "threshold": e["threshold"],
                "shared_with": e.get("shared_with"),
            }
            for k, e in entries.items()
        },
        "lists": len(lists),
    }
