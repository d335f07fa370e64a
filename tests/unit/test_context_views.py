"""The last-turn view: which contexts a request is scored with, and how their logits combine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import write_fake_bundle

from service.context_views import combine, views
from service.model_bundle import BundleError, load_bundle

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


@pytest.mark.parametrize("weight", [-0.5, "NaN"])
def test_a_bundle_with_a_bad_last_turn_weight_is_refused(tmp_path: Path, weight: float | str) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    meta = json.loads((bundle / "metadata.json").read_text())
    meta["views"] = {"last_turn_weight": float(weight)}
    (bundle / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="views.last_turn_weight"):
        load_bundle(bundle)


def test_a_bundle_without_views_has_one(tmp_path: Path) -> None:
    assert load_bundle(write_fake_bundle(tmp_path / "bundle")).last_turn_weight == 0.0
