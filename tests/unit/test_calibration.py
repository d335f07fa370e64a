"""The logit -> probability maps are monotonic and reject maps that are not."""

import numpy as np
import pytest

from dialogue_ranker.evaluation.calibration import fit_isotonic, fit_platt
from dialogue_ranker.serving.calibration import Calibrator

GRID = np.linspace(-12, 12, 2001)


def _noisy_scores(seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=600) * 3
    outcomes = (rng.random(600) < 1 / (1 + np.exp(-1.7 * logits + 0.4))).astype(int)
    return logits, outcomes


@pytest.mark.parametrize("fit", [fit_platt, fit_isotonic])
def test_fitted_calibration_is_monotonic_and_bounded(fit):
    calibrator = fit(*_noisy_scores())
    probs = calibrator(GRID)
    assert np.all(np.diff(probs) >= 0)
    assert probs.min() >= 0.0 and probs.max() <= 1.0
    assert probs[0] < 0.2 and probs[-1] > 0.8


def test_platt_fit_recovers_the_generating_slope():
    calibrator = fit_platt(*_noisy_scores())
    assert calibrator.params["a"] == pytest.approx(1.7, rel=0.3)


def test_a_platt_weight_of_two_counts_as_the_same_logit_twice():
    logits, outcomes = _noisy_scores()
    weight = np.where(np.arange(len(logits)) < 200, 2.0, 1.0)
    weighted = fit_platt(logits, outcomes, weight).params
    repeated = fit_platt(
        np.concatenate([logits, logits[:200]]), np.concatenate([outcomes, outcomes[:200]])
    ).params
    assert weighted["a"] == pytest.approx(repeated["a"], rel=1e-3)
    assert weighted["b"] == pytest.approx(repeated["b"], abs=1e-3)
    assert weighted != fit_platt(logits, outcomes).params


def test_calibration_survives_a_json_round_trip():
    calibrator = fit_isotonic(*_noisy_scores())
    again = Calibrator.from_dict(calibrator.to_dict())
    np.testing.assert_allclose(again(GRID), calibrator(GRID))


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "platt", "a": -1.0, "b": 0.0},
        {"method": "isotonic", "x": [0.0, 1.0, 0.5], "y": [0.1, 0.2, 0.3]},
        {"method": "isotonic", "x": [0.0, 1.0], "y": [0.5, 0.2]},
        {"method": "histogram"},
    ],
)
def test_calibrator_rejects_maps_that_could_reorder_a_ranking(spec):
    with pytest.raises(ValueError):
        Calibrator.from_dict(spec)


def test_shipped_model_calibration_is_monotonic(model_dir):
    from dialogue_ranker.serving.model_bundle import load_bundle

    bundle = load_bundle(model_dir)
    assert np.all(np.diff(bundle.calibration(GRID)) >= 0)


def test_the_export_refuses_a_graph_whose_logits_do_not_order_the_calibration_lists():
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.export.calibration_choice import calibrate_on
    from dialogue_ranker.serving.tokenization import Turn

    lists = [
        RankingList((Turn("user", f"Hi {i}."),), (Candidate("Right.", 1), Candidate("No.", 0)), group=f"g{i}")
        for i in range(6)
    ]
    ordered = {"team": [np.array([2.0, -1.0]) for _ in lists]}
    assert calibrate_on("team", {"team": lists}, ordered)["maps"]["platt"].params["a"] > 0
    backwards = {"team": [np.array([-1.0 - i / 10, 2.0]) for i in range(len(lists))]}  # wrong replies first
    with pytest.raises(
        SystemExit, match=r"calibration on team \(6 dev lists, 12 candidates\): .*no better than chance"
    ):
        calibrate_on("team", {"team": lists}, backwards)
