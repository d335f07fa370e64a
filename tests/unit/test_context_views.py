"""The last-turn view: which contexts a request is scored with, and how their logits combine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import write_fake_bundle

from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights, combine, views
from dialogue_ranker.serving.model_bundle import BundleError, load_bundle
from dialogue_ranker.serving.tokenization import Turn

TURNS = ("I am cold.", "Shall I close the window?", "No, it is stuck.")


def test_a_multi_turn_context_gets_its_last_turn_as_a_second_view() -> None:
    assert views(TURNS, 0.5) == [TURNS, TURNS[-1:]]


@pytest.mark.parametrize(("turns", "weight"), [(TURNS[:1], 0.5), (TURNS, 0.0)])
def test_one_turn_or_no_weight_is_one_view(turns: tuple[str, ...], weight: float) -> None:
    assert views(turns, weight) == [turns]


def test_the_views_logits_are_averaged_at_the_weight() -> None:
    full, last = np.array([2.0, -1.0, 0.5]), np.array([-1.0, 3.0, 0.5])
    combined = combine(np.concatenate([full, last]), 2, 0.5)
    np.testing.assert_allclose(combined, (full + 0.5 * last) / 1.5, rtol=1e-6)
    # Equal logits in both views give the same logit back: one-turn calibration still fits.
    np.testing.assert_allclose(combine(np.concatenate([full, full]), 2, 0.5), full, rtol=1e-6)
    assert combine(full, 1, 0.5) is full


def test_logits_that_do_not_split_into_the_views_are_refused() -> None:
    with pytest.raises(ValueError, match="3 logits do not split into 2 views"):
        combine(np.zeros(3), 2, 0.5)


def test_the_reply_s_prior_is_a_third_view_of_one_bare_turn_by_the_last_speaker() -> None:
    turns = (Turn("user", "I am cold."), Turn("bot", "Shall I close the window?"))
    weights = ViewWeights(last_turn=0.5, prior=0.2, prior_centre=-2.0)
    assert views(turns, weights) == [turns, turns[-1:], [Turn("bot", ".")]]
    assert views(turns[:1], weights) == [turns[:1]]


def test_the_prior_enters_as_its_difference_from_the_centre() -> None:
    full, last, prior = np.array([2.0, -1.0]), np.array([-1.0, 3.0]), np.array([-2.0, -4.0])
    weights = ViewWeights(last_turn=0.5, prior=0.2, prior_centre=-3.0)
    combined = combine(np.concatenate([full, last, prior]), 3, weights)
    np.testing.assert_allclose(combined, (full + 0.5 * last + 0.2 * (prior + 3.0)) / 1.5, rtol=1e-6)
    # A prior at its centre moves nothing: the scale the calibration map was fitted for stays.
    at_centre = np.full(2, -3.0)
    np.testing.assert_allclose(
        combine(np.concatenate([full, last, at_centre]), 3, weights),
        combine(np.concatenate([full, last]), 2, 0.5),
        rtol=1e-6,
    )


def test_three_views_without_a_prior_weight_are_refused() -> None:
    with pytest.raises(ValueError, match="6 logits do not split into 3 views"):
        combine(np.zeros(6), 3, 0.5)


def test_view_weights_round_trip_through_the_bundle_metadata() -> None:
    weights = ViewWeights(last_turn=0.5, prior=0.2, prior_centre=-2.5)
    assert ViewWeights.from_dict(weights.to_dict()) == weights
    assert ViewWeights(last_turn=0.5).to_dict() == {"last_turn_weight": 0.5}
    assert ViewWeights.from_dict(None) == ViewWeights()


@pytest.mark.parametrize(
    ("views_meta", "field"),
    [
        ({"last_turn_weight": -0.5}, "views.last_turn_weight"),
        ({"last_turn_weight": float("NaN")}, "views.last_turn_weight"),
        ({"last_turn_weight": 0.5, "prior_weight": -0.2}, "views.prior_weight"),
        ({"last_turn_weight": 0.5, "prior_weight": 0.2, "prior_centre": float("inf")}, "views.prior_centre"),
        ({"last_turn_weight": "heavy"}, "views.last_turn_weight 'heavy' is not a number"),
    ],
)
def test_a_bundle_with_bad_view_weights_is_refused_by_field(
    tmp_path: Path, views_meta: dict, field: str
) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["views"] = views_meta
    (bundle / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match=field):
        load_bundle(bundle)


def test_a_bundle_without_views_has_one(tmp_path: Path) -> None:
    assert load_bundle(write_fake_bundle(tmp_path / "bundle")).views == ONE_VIEW
