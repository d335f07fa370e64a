"""Export a training run to the model directory the service ships.

    python -m export --run runs/sugar --out models/sugar-minilm-l6

A shared-prefix run (``python -m training.train``) goes to :mod:`export.shared_prefix`; what
follows is the pairwise SUGAR run's export (``python -m training.train_sugar``).

Builds under ``--build`` (not committed): fp32 ONNX of ranker and selector, the ORT-optimised
fp32 graph, an fp16 graph for GPU, dynamic (per-channel) and static int8. Measures parity with
PyTorch, batch invariance, speed and dev accuracy side by side and writes them to
``export_report.json``; copies the serving variants (dynamic int8 ranker and selector, run one
pair per call) and the tokenizer into ``--out`` with ``metadata.json``; then re-fits calibration
and thresholds on the dev split with those very graphs (``export/recalibrate.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from export import checks, onnx_graph, quantize
from export.bundle import write_bundle, write_card
from export.recalibrate import recalibrate
from service.calibration import Calibrator
from service.tokenization import PairEncoder
from training.ranker import ranking_metrics
from training.sugar import load_sugar, select

#: Pairs per call the shipped (dynamic int8) graphs need for batch-invariant scores.
SERVING_SUB_BATCH_PAIRS = 1
SERVING_PRECISION = "int8 (dynamic, per-channel weights; run one pair per call)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="training run directory (python -m training.train --out)")
    p.add_argument("--out", required=True, help="model directory to write (e.g. models/sugar-minilm-l6)")
    p.add_argument("--build", default=None, help="where intermediate graphs go (default build/<run name>)")
    p.add_argument("--name", default="sugar-minilm-l6")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--data", default=None, help="SUGAR JSONL (default: the file the run was trained on)")
    p.add_argument(
        "--calibration-examples", type=int, default=120, help="dev examples for static int8 ranges"
    )
    p.add_argument("--check-pairs", type=int, default=96, help="pairs for the parity and invariance checks")
    return p.parse_args(argv)


def build_graphs(run: Path, build: Path, calibration_batches: list) -> dict[str, Path]:
    """Every ONNX variant of the ranker, and the selector's fp32 and serving graphs."""
    paths = {
        "fp32": onnx_graph.export_fp32(run / "ranker", build / "ranker.fp32.onnx"),
        "selector_fp32": onnx_graph.export_fp32(run / "selector", build / "selector.fp32.onnx"),
    }
    paths["optimized"] = onnx_graph.optimize(
        paths["fp32"], build / "ranker.opt.onnx", checkpoint=run / "ranker"
    )
    paths["fp16"] = onnx_graph.to_fp16(paths["fp32"], build / "ranker.fp16.onnx", checkpoint=run / "ranker")
    paths["int8_dynamic"] = quantize.dynamic_int8(paths["fp32"], build / "ranker.int8-dynamic.onnx")
    paths["int8_static"] = quantize.static_int8(
        paths["fp32"],
        build / "ranker.int8-static.onnx",
        calibration_batches=calibration_batches,
        input_names=onnx_graph.INPUT_NAMES,
        work_dir=build / "tmp-ranker",
    )
    paths["selector_int8_dynamic"] = quantize.dynamic_int8(
        paths["selector_fp32"], build / "selector.int8-dynamic.onnx"
    )
    return paths


def measure_variant(
    path: Path, encoder: PairEncoder, pairs, fp32_logits, calibrator, dev, dev_flat, served_batch
):
    """Size, error against fp32, batch (in)variance, speed and dev accuracy of one graph."""
    sess = checks.session(path)
    logits = checks.score(sess, encoder, pairs, batch_size=served_batch)
    dev_scores = np.split(checks.score(sess, encoder, dev_flat, batch_size=served_batch), len(dev))
    return {
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "served_pairs_per_call": served_batch,
        "max_abs_logit_vs_fp32": float(np.max(np.abs(logits - fp32_logits))),
        "mean_abs_logit_vs_fp32": float(np.mean(np.abs(logits - fp32_logits))),
        "batch_invariance_in_batches_of_16": checks.batch_invariance(sess, encoder, pairs, calibrator),
        "pairs_per_s": {
            f"batch_{b}": round(checks.throughput(sess, encoder, pairs, batch_size=b), 1) for b in (1, 8, 32)
        },
        "dev_u+S1": ranking_metrics(dev_scores, dev),
    }


def main(argv: list[str] | None = None) -> dict:
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--run")
    given = peek.parse_known_args(argv)[0].run
    config = Path(given or ".") / "config.json"
    if given and not config.is_file():
        # A run directory is complete only when training ends (config.json is written last).
        sys.exit(f"{given}: not a finished training run (no config.json)")
    kind = json.loads(config.read_text()).get("encoding", {}).get("kind") if config.is_file() else None
    if kind == "pair-design-run":
        sys.exit(f"{config.parent}: a per-pair design run (training.train --layout pair) is not exported")
    if kind == "shared-prefix":
        from export import shared_prefix  # a run of training.train: its own graphs and bundle

        return shared_prefix.main(argv)
    args = parse_args(argv)
    run = Path(args.run)
    build = Path(args.build or Path("build") / run.name)
    build.mkdir(parents=True, exist_ok=True)
    config = json.loads((run / "config.json").read_text())
    calibration = json.loads((run / "calibration.json").read_text())
    split = json.loads((run / "split.json").read_text())
    dev = select(load_sugar(args.data or split["data"]), split["dev"])
    ranker_cal = Calibrator.from_dict(calibration["maps"][calibration["method"]])
    selector_cal = Calibrator.from_dict(calibration["selector"]["calibration"])
    ranker_enc = PairEncoder.from_file(run / "ranker", max_length=config["max_length"])
    selector_enc = PairEncoder.from_file(run / "ranker", max_length=calibration["selector"]["max_length"])

    def ranker_pairs(examples, setting):
        return [
            p
            for e in examples
            for p in ranker_enc.encode_request(e.turns, e.statements_for(setting), e.candidates)
        ]

    # Check inputs: dev requests with all statements and with the gold ones, so lengths vary.
    check_pairs = (ranker_pairs(dev[:40], "u+S") + ranker_pairs(dev[40:80], "u+S1"))[: args.check_pairs]
    selector_pairs = [
        p for e in dev[:20] for p in selector_enc.encode_request(e.turns, [], list(e.statements))
    ]
    calib = dev[-args.calibration_examples :]
    calibration_batches = [
        ranker_enc.pad(ranker_pairs(calib[i : i + 4], s))
        for i in range(0, len(calib), 4)
        for s in ("u+S", "u+S1")
    ]
    dev_flat = ranker_pairs(dev, "u+S1")

    started = time.time()
    paths = build_graphs(run, build, calibration_batches)
    report: dict = {"build_seconds": round(time.time() - started, 1), "ranker": {}, "selector": {}}
    report["ranker"]["torch_parity_max_abs_logit"] = checks.torch_parity(
        run / "ranker", paths["fp32"], ranker_enc, check_pairs
    )
    report["selector"]["torch_parity_max_abs_logit"] = checks.torch_parity(
        run / "selector", paths["selector_fp32"], selector_enc, selector_pairs[: args.check_pairs]
    )
    fp32_logits = checks.score(checks.session(paths["fp32"]), ranker_enc, check_pairs)
    for variant in ("fp32", "optimized", "int8_static", "int8_dynamic"):
        served = SERVING_SUB_BATCH_PAIRS if variant == "int8_dynamic" else 16
        report["ranker"][variant] = measure_variant(
            paths[variant], ranker_enc, check_pairs, fp32_logits, ranker_cal, dev, dev_flat, served
        )
        print(variant, json.dumps(report["ranker"][variant]), flush=True)
    sel_fp32 = checks.score(checks.session(paths["selector_fp32"]), selector_enc, selector_pairs)
    sel_int8 = checks.score(
        checks.session(paths["selector_int8_dynamic"]), selector_enc, selector_pairs, batch_size=1
    )
    report["selector"]["int8_dynamic"] = {
        "file_mb": round(paths["selector_int8_dynamic"].stat().st_size / 2**20, 1),
        "max_abs_prob_vs_fp32": float(np.max(np.abs(selector_cal(sel_int8) - selector_cal(sel_fp32)))),
        "mean_abs_prob_vs_fp32": float(np.mean(np.abs(selector_cal(sel_int8) - selector_cal(sel_fp32)))),
    }
    print("selector", json.dumps(report["selector"]), flush=True)
    (build / "export_report.json").write_text(json.dumps(report, indent=2))

    out = Path(args.out)
    write_bundle(
        out,
        name=args.name,
        version=args.version,
        ranker_onnx=paths["int8_dynamic"],
        ranker_precision=SERVING_PRECISION,
        selector_onnx=paths["selector_int8_dynamic"],
        selector_precision=SERVING_PRECISION,
        tokenizer=run / "ranker" / "tokenizer.json",
        run_config=config,
        calibration=calibration,
        split=split,
        metrics={
            "dev (training run, PyTorch fp32, u+S via selector)": json.loads(
                (run / "metrics.json").read_text()
            )["dev"]
        },
        export_report=report,
        serving={"sub_batch_pairs": SERVING_SUB_BATCH_PAIRS},
    )
    dev_metrics = recalibrate(out, dev)
    write_card(out, json.loads((out / "metadata.json").read_text()))
    print("dev (shipped graphs):", json.dumps(dev_metrics), flush=True)
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
