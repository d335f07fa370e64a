"""Export a training run to the model directory the service ships.

    python -m export --run runs/sugar --out models/sugar-minilm-l6

Builds under ``--build`` (not committed): fp32 ONNX of ranker and selector, the ORT-optimised
fp32 graph, an fp16 graph for GPU, dynamic and static int8. Checks parity with PyTorch, batch
invariance and speed side by side, writes ``export_report.json``, and copies the serving
variants (static int8 ranker and selector, tokenizer) with ``metadata.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from export import checks, onnx_graph, quantize
from export.bundle import write_bundle
from service.calibration import Calibrator
from service.tokenization import PairEncoder
from training.ranker import ranking_metrics
from training.sugar import load_sugar, select


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
    p.add_argument("--static-method", choices=("minmax", "percentile", "entropy"), default="minmax")
    p.add_argument("--check-pairs", type=int, default=96, help="pairs for the parity and invariance checks")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
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

    # Inputs for the checks: dev requests with all statements and with the gold ones, so
    # lengths vary as they do in traffic.
    def ranker_pairs(examples, setting):
        return [
            p
            for e in examples
            for p in ranker_enc.encode_request(e.turns, e.statements_for(setting), e.candidates)
        ]

    check_pairs = (ranker_pairs(dev[:40], "u+S") + ranker_pairs(dev[40:80], "u+S1"))[: args.check_pairs]
    selector_pairs = [
        p for e in dev[:20] for p in selector_enc.encode_request(e.turns, [], list(e.statements))
    ]
    calib_examples = dev[-args.calibration_examples :]
    ranker_calib = [
        ranker_enc.pad(ranker_pairs(calib_examples[i : i + 4], setting))
        for i in range(0, len(calib_examples), 4)
        for setting in ("u+S", "u+S1")
    ]
    selector_calib = [
        selector_enc.pad(selector_enc.encode_request(e.turns, [], list(e.statements))) for e in calib_examples
    ]

    report: dict = {"ranker": {}, "selector": {}}
    started = time.time()
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
        calibration_batches=ranker_calib,
        input_names=onnx_graph.INPUT_NAMES,
        work_dir=build / "tmp-ranker",
        method=args.static_method,
    )
    paths["selector_int8_static"] = quantize.static_int8(
        paths["selector_fp32"],
        build / "selector.int8-static.onnx",
        calibration_batches=selector_calib,
        input_names=onnx_graph.INPUT_NAMES,
        work_dir=build / "tmp-selector",
        method=args.static_method,
    )
    report["build_seconds"] = round(time.time() - started, 1)

    report["ranker"]["torch_parity_max_abs_logit"] = checks.torch_parity(
        run / "ranker", paths["fp32"], ranker_enc, check_pairs
    )
    report["selector"]["torch_parity_max_abs_logit"] = checks.torch_parity(
        run / "selector", paths["selector_fp32"], selector_enc, selector_pairs[: args.check_pairs]
    )
    fp32_logits = checks.score(checks.session(paths["fp32"]), ranker_enc, check_pairs)
    dev_gold = [ranker_enc.encode_request(e.turns, e.statements_for("u+S1"), e.candidates) for e in dev]
    dev_flat = [p for pairs in dev_gold for p in pairs]
    for variant in ("fp32", "optimized", "int8_dynamic", "int8_static"):
        sess = checks.session(paths[variant])
        logits = checks.score(sess, ranker_enc, check_pairs)
        dev_scores = np.split(checks.score(sess, ranker_enc, dev_flat), len(dev))
        report["ranker"][variant] = {
            "file_mb": round(paths[variant].stat().st_size / 2**20, 1),
            "max_abs_logit_vs_fp32": float(np.max(np.abs(logits - fp32_logits))),
            "batch_invariance": checks.batch_invariance(sess, ranker_enc, check_pairs, ranker_cal),
            "pairs_per_s": {
                f"batch_{b}": round(checks.throughput(sess, ranker_enc, check_pairs, batch_size=b), 1)
                for b in (8, 32)
            },
            "dev_u+S1": ranking_metrics(dev_scores, dev),
        }
        print(variant, json.dumps(report["ranker"][variant]))
    sel_fp32 = checks.score(checks.session(paths["selector_fp32"]), selector_enc, selector_pairs)
    sel_sess = checks.session(paths["selector_int8_static"])
    sel_int8 = checks.score(sel_sess, selector_enc, selector_pairs)
    report["selector"]["int8_static"] = {
        "file_mb": round(paths["selector_int8_static"].stat().st_size / 2**20, 1),
        "max_abs_prob_vs_fp32": float(np.max(np.abs(selector_cal(sel_int8) - selector_cal(sel_fp32)))),
        "batch_invariance": checks.batch_invariance(sel_sess, selector_enc, selector_pairs, selector_cal),
    }
    print("selector", json.dumps(report["selector"]))
    (build / "export_report.json").write_text(json.dumps(report, indent=2))

    training_metrics = json.loads((run / "metrics.json").read_text())
    write_bundle(
        Path(args.out),
        name=args.name,
        version=args.version,
        ranker_onnx=paths["int8_static"],
        ranker_precision="int8 (static, per-channel weights, QDQ)",
        selector_onnx=paths["selector_int8_static"],
        selector_precision="int8 (static, per-channel weights, QDQ)",
        tokenizer=run / "ranker" / "tokenizer.json",
        run_config=config,
        calibration=calibration,
        split=split,
        metrics={"dev (training run, u+S via selector)": training_metrics["dev"]},
        export_report=report,
    )
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
