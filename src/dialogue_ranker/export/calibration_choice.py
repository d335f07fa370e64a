"""The calibration map and abstention threshold fitted with the graph that ships.

Which graph ships is :mod:`dialogue_ranker.export.variant_choice`'s. Its
dev logits are made as the bundle will serve them (with the last-turn view and the reply's prior
when ``--last-turn-weight`` and ``--prior-weight`` ask), then the map is fitted on the files of
``--calibrate-on`` and the threshold chosen on those of ``--threshold-on``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.calibration import UnorderedLogits
from dialogue_ranker.evaluation.scoring import score_lists, view_logits
from dialogue_ranker.export import view_fit
from dialogue_ranker.export.graph_checks import views_speed
from dialogue_ranker.export.run_stages import training_stages
from dialogue_ranker.serving.context_views import ViewWeights
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training.dev_scoring import fit_calibration, run_dev_lists


def served_dev_logits(
    report: dict[str, Any],
    sess,
    encoder: ListEncoder,
    dev: dict[str, list[RankingList]],
    logits: dict[str, list[np.ndarray]],
    args: argparse.Namespace,
) -> tuple[ViewWeights, dict[str, list[np.ndarray]]]:
    """The bundle's views and the shipped graph's dev logits as it will serve them.

    ``logits``: the graph's one-view dev logits, returned as they are when the bundle adds no view.
    Otherwise each view is scored once, the prior centred on the dev lists (``report["views"]``),
    and the views' speed measured (``report["last_turn_view_speed"]``). With ``--fit-views-on``
    the weights are first chosen on those files' dev lists (:mod:`dialogue_ranker.export.view_fit`;
    ``report["views_fit"]``), the flags' (or the base bundle's) kept on a tie, and no point chosen
    that lowers a ``--views-hold`` file's dev P@1 beyond the fit's drop.
    """
    views = ViewWeights(last_turn=args.last_turn_weight, prior=args.prior_weight)
    fit_on = args.fit_views_on.split(",") if args.fit_views_on else []
    if not views.adds_views and not fit_on:
        return views, logits
    if fit_on:
        hold = args.views_hold.split(",") if args.views_hold else []
        refuse_unknown_files("--fit-views-on", fit_on, dev)
        refuse_unknown_files("--views-hold", hold, dev)
        per_view = views_logits(sess, encoder, dev, view_fit.scoring_weights(views))
        views, report["views_fit"] = view_fit.fit(fit_on, dev, per_view, views, hold=hold)
        print("views fitted:", json.dumps(report["views_fit"]), flush=True)
        if not views.adds_views:
            return views, logits
    else:
        per_view = views_logits(sess, encoder, dev, views)
    if views.prior > 0:
        centre = prior_centre(per_view, fallback=getattr(args, "base_prior_centre", None))
        views = dataclasses.replace(views, prior_centre=centre)
        report["views"] = views.to_dict()
    combined = {name: [view_fit.served(v, views) for v in lists] for name, lists in per_view.items()}
    multi_turn = [x for lists in dev.values() for x in lists if len(x.context) > 1]
    multi_turn = random.Random(0).sample(multi_turn, min(args.speed_requests, len(multi_turn)))
    if multi_turn:  # single-turn dev lists (SUGAR's) have one view: nothing to time
        report["last_turn_view_speed"] = views_speed(sess, encoder, multi_turn, views)
        print("views", json.dumps(report["last_turn_view_speed"]), flush=True)
    return views, combined


def fit_shipped_calibration(
    args: argparse.Namespace,
    dev: dict[str, list[RankingList]],
    held: dict[str, list[RankingList]],
    logits: dict[str, list[np.ndarray]],
    sess,
    encoder: ListEncoder,
    views: ViewWeights,
) -> dict[str, Any]:
    """The map fitted on ``--calibrate-on``'s files, the threshold on ``--threshold-on``'s.

    ``logits``: the shipped graph's dev logits as served; ``held``: every stage's dev lists
    (:func:`every_stage_dev_lists`) when ``--threshold-on`` may name an earlier stage's file.
    ``--threshold-from BUNDLE`` keeps that bundle's threshold instead (:func:`threshold_from`).
    """
    fitted = calibrate_on(args.calibrate_on, dev, logits)
    if args.threshold_from:
        if args.threshold_on:
            raise SystemExit("--threshold-from keeps a threshold, --threshold-on chooses one: give one")
        return threshold_from(fitted, Path(args.threshold_from))
    if not args.threshold_on:
        return fitted
    return threshold_on(
        fitted,
        args.threshold_on.split(","),
        held,
        sess,
        encoder,
        views=views,
        # The run's own dev lists are scored already; an earlier stage's file is scored here.
        scored={name: logits[name] for name in dev if held.get(name) is dev[name]},
    )


def threshold_from(fitted: dict, bundle: Path) -> dict:
    """``fitted`` with ``bundle``'s abstention threshold, and the bundle it came from.

    The threshold is a calibrated probability, so it means the same under a new map: a candidate
    that keeps the shipped model's keeps the operating point its users tuned ``min_score`` against.
    Chosen afresh it follows whichever set has the most dev lists (model 2.11.19: 0.395 on SUGAR's
    and Topical-Chat's, 0.754 on SUGAR's alone), winning that set's abstention and losing others'.
    """
    metadata = json.loads((bundle / "metadata.json").read_text())
    threshold = float(metadata["threshold"])
    source = f"{metadata['name']}@{metadata['version']}"
    return {**fitted, "threshold": threshold, "threshold_on": [], "threshold_from": source}


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
    """The dev lists of every stage's files (``dev``: the run's own, already read); earliest wins.

    A stage started from a shipped bundle (``ranker train --init-bundle``) looks no further back:
    the bundle's own stages read files of the machine it was built on, and their splits may differ
    (the situation stage splits SUGAR by request, 2.8.0's stages by example).
    """
    lists: dict[str, list[RankingList]] = {}
    *earlier, _ = training_stages(config)
    bundles = [i for i, stage in enumerate(earlier) if "bundle" in stage]
    earlier = earlier[bundles[-1] + 1 :] if bundles else earlier
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
    try:
        fitted = fit_calibration({n: dev[n] for n in chosen}, {n: logits[n] for n in chosen})
    except UnorderedLogits as e:  # a map that falls as the logit rises: nothing to ship
        lists = sum(len(dev[n]) for n in chosen)
        candidates = sum(len(x.candidates) for n in chosen for x in dev[n])
        raise SystemExit(
            f"calibration on {', '.join(chosen)} ({lists} dev lists, {candidates} candidates): {e}. "
            "The exported graph ranks these lists no better than chance, so nothing is exported: "
            "train longer, or calibrate on more lists (--calibrate-on, --dev-lists)."
        ) from None
    return {**fitted, "calibrated_on": chosen}


def views_logits(
    sess, encoder: ListEncoder, dev: dict[str, list[RankingList]], views: ViewWeights
) -> dict[str, list[list[np.ndarray]]]:
    """Each dev list's candidate logits view by view, as the service encodes them.

    The weights decide only which views there are (their logits are combined later).
    """
    return {name: [view_logits(sess, encoder, x, views) for x in lists] for name, lists in dev.items()}


def prior_centre(logits: dict[str, list[list[np.ndarray]]], fallback: float | None = None) -> float:
    """The reply's-prior view's mean logit over the multi-turn lists of :func:`views_logits`.

    The prior's logits run well below the other views' (about -2.5 against -1 on model 2.7.0), so
    the service adds their difference from this mean: the ranking of a plain weighted mean, at the
    scale the calibration map and threshold are fitted for. ``fallback`` (a base bundle's centre) is
    returned when there is no multi-turn list.
    """
    prior = [views[2] for lists in logits.values() for views in lists if len(views) == 3]
    if not prior and fallback is not None:
        # A one-turn request never reads the prior: a base bundle's centre serves as well as any.
        print(f"prior centre: no multi-turn dev list; the base bundle's {fallback:.4f} kept", flush=True)
        return fallback
    if not prior:
        raise SystemExit("--prior-weight: the dev lists have no multi-turn request to centre the prior on")
    return float(np.mean(np.concatenate(prior)))
