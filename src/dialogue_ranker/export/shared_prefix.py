"""Export a shared-prefix training run (``ranker train``) to the shipped model directory.

    ranker export --run runs/ranker --out models/dialogue-minilm-l6

(``ranker export`` sends a shared-prefix run here.) Under ``--build`` it writes the fp32 ONNX
graph, dynamic int8 (per-channel weights) and static int8 (QDQ, MatMul only) variants, then
measures each side by side on the run's dev lists, run as the service runs them (one request's
sequence per call, two threads): logit error against fp32, whether a candidate's probability
moves with the other candidates in its sequence, speed on situated requests with every
statement (any dev lists where none has 8 statements), and dev P@1 / nDCG@3 per file. It ships
the fastest variant whose dev P@1 is within ``--max-p1-loss`` of fp32 on every file, and re-fits
the calibration map and abstention threshold on the pooled dev lists with that very graph.
``export_report.json`` keeps the table.
``--last-turn-weight`` makes the bundle score multi-turn requests with their last turn alone too
(:mod:`serving.context_views`); the calibration map and threshold are fitted on scores so made.
A run fine-tuned from a bundle (``ranker train --init-bundle``) takes that bundle's context views
unless the flags say otherwise (:mod:`export.base_serving`; ``--serving-from BUNDLE`` names one).
A graph that misses the accuracy rule fails the export, its table printed, unless
``--accept-loss`` (:mod:`export.variant_choice`); a fitting graph may need ``--max-mb 100`` (fp32).
Last, ``samples.json``: a few of the run's dev sequences with the fp32 logits of the shipped
weights, which ``--backend auto`` checks each runtime against (:mod:`export.samples`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from dialogue_ranker.data.machine import describe_for_report, read_cpu
from dialogue_ranker.evaluation.scoring import session
from dialogue_ranker.export.base_serving import resolve_views
from dialogue_ranker.export.calibration_choice import (
    every_stage_dev_lists,
    fit_shipped_calibration,
    served_dev_logits,
)
from dialogue_ranker.export.export_args import build_parser, variants_to_build
from dialogue_ranker.export.export_model import export_encoder, load_run_model, with_similarity
from dialogue_ranker.export.graph_checks import list_requests, measure_variants, situated_requests
from dialogue_ranker.export.graph_variants import build_variants
from dialogue_ranker.export.samples import add_to_export as add_samples
from dialogue_ranker.export.shared_prefix_bundle import write_shared_prefix_bundle
from dialogue_ranker.export.variant_choice import choose_shipped
from dialogue_ranker.training.dev_scoring import calibrated_report, run_dev_lists


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``ranker export``'s arguments (:mod:`export.export_args`), with this module's docstring as help."""
    return build_parser(__doc__).parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    run = Path(args.run)
    build = Path(args.build or Path("build") / run.name)
    build.mkdir(parents=True, exist_ok=True)
    config = json.loads((run / "config.json").read_text())
    encoder = export_encoder(run, config, similarity=args.similarity)
    dev = run_dev_lists(config if args.dev_lists is None else {**config, "dev_lists": args.dev_lists})
    model, config = load_run_model(run, config, args)
    variants = variants_to_build(args.variants)
    serving_from = resolve_views(args, config)
    # Earlier stages' files are read only when a flag names lists beyond the run's own.
    held = every_stage_dev_lists(config, dev) if args.threshold_on or args.similarity else dev
    similarity = None
    if args.similarity:
        model, similarity = with_similarity(args, run, dev, held, encoder)
    dev_requests = {name: list_requests(encoder, lists) for name, lists in dev.items()}
    situated = situated_requests(dev_requests, args.speed_requests)

    started = time.time()
    paths = build_variants(model, variants, build, encoder, situated, max_mb=args.max_mb)
    report: dict[str, Any] = {
        "build_seconds": round(time.time() - started, 1),
        # int8 scores and speeds depend on the CPU's instruction sets: say which machine measured them.
        "machine": describe_for_report(read_cpu()),
        "variants": {},
        **({"serving_from": serving_from} if serving_from else {}),
    }
    logits_by_variant = measure_variants(report, model, paths, encoder, dev, dev_requests, situated)
    shipped = choose_shipped(report, paths, args)
    report["shipped"] = shipped
    print("shipping", shipped, flush=True)
    shipped_sess = session(paths[shipped])
    views, shipped_logits = served_dev_logits(
        report, shipped_sess, encoder, dev, logits_by_variant[shipped], args
    )
    fitted = fit_shipped_calibration(args, dev, held, shipped_logits, shipped_sess, encoder, views)
    calibrated = calibrated_report(dev, shipped_logits, fitted)
    (build / "export_report.json").write_text(json.dumps(report, indent=2))
    out = write_shared_prefix_bundle(
        Path(args.out),
        args=args,
        graph=paths[shipped],
        precision=shipped,
        encoder=encoder,
        run=run,
        config=config,
        fitted=fitted,
        dev=calibrated,
        report=report,
        similarity=similarity,
        inputs=model.input_names,
        views=views,
    )
    add_samples(out, dev)
    print("dev (shipped graph, calibrated):", json.dumps(calibrated), flush=True)
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
