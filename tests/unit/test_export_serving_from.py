"""The export's context views for a run fine-tuned from a bundle (export/base_serving.py)."""

import argparse

import pytest

from dialogue_ranker.export.base_serving import recorded_bundle, resolve_views
from dialogue_ranker.serving.model_bundle import load_bundle


def _args(**given) -> argparse.Namespace:
    flags = {"last_turn_weight": None, "prior_weight": None, "serving_from": None}
    return argparse.Namespace(**{**flags, **given})


def _run_from(bundle) -> dict:
    """A run's config as ranker train --init-bundle writes it (its first stage names the bundle)."""
    first = {"data": [], "bundle": {"path": str(bundle), "version": "v"}}
    data = [{"file": "x.jsonl", "name": "x", "weight": 1.0}]
    return {"data": data, "init": {"run": str(bundle), "config": first}}


def test_a_run_fine_tuned_from_a_bundle_takes_its_views_unless_a_flag_says_otherwise(model_dir):
    views = load_bundle(model_dir).views
    assert recorded_bundle(_run_from(model_dir)) == model_dir
    args = _args(prior_weight=0.0)
    recorded = resolve_views(args, _run_from(model_dir))
    assert (args.last_turn_weight, args.prior_weight) == (views.last_turn, 0.0)
    assert recorded["taken"] == {"last_turn_weight": views.last_turn}


def test_a_run_from_no_bundle_keeps_one_view_and_serving_from_names_one(model_dir):
    args = _args()
    assert resolve_views(args, {"data": []}) is None
    assert (args.last_turn_weight, args.prior_weight, args.base_prior_centre) == (0.0, 0.0, None)
    args = _args(serving_from=str(model_dir))
    resolve_views(args, {"data": []})
    views = load_bundle(model_dir).views
    assert (args.last_turn_weight, args.prior_weight) == (views.last_turn, views.prior)
    assert args.base_prior_centre == views.prior_centre


def test_a_recorded_bundle_that_has_moved_is_named_with_the_flags_that_stand_in(tmp_path):
    with pytest.raises(SystemExit, match="--serving-from BUNDLE, or --last-turn-weight and --prior-weight"):
        resolve_views(_args(), _run_from(tmp_path / "gone"))
