"""A bank request's final score: the fusion's arithmetic, its entry in retriever.json, and its fit."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from dialogue_ranker.evaluation import bank_fusion
from dialogue_ranker.evaluation.bank_eval import per_dataset, write_fusion
from dialogue_ranker.evaluation.bank_fusion import Retrieved
from dialogue_ranker.serving.calibration import Calibrator
from dialogue_ranker.serving.fusion import NO_FUSION, Fusion
from dialogue_ranker.serving.model_bundle import BundleError, load_retriever

PLATT = {"method": "platt", "a": 0.5, "b": -1.0}


def test_fused_score_is_the_logit_plus_the_weighted_cosine_above_the_centre() -> None:
    fusion = Fusion(cosine_weight=10.0, cosine_centre=0.4)
    fused = fusion.fuse(np.array([1.0, -2.0, 0.5]), np.array([0.4, 0.6, 0.3]))
    assert fused.dtype == np.float32
    np.testing.assert_allclose(fused, [1.0, 0.0, -0.5], atol=1e-6)


def test_a_hub_loses_its_hubness_times_the_weight_and_a_candidate_without_one_nothing() -> None:
    fusion = Fusion(cosine_weight=10.0, cosine_centre=0.4, hubness_weight=5.0)
    fused = fusion.fuse(np.array([1.0, 1.0, 1.0]), np.array([0.4, 0.4, 0.4]), np.array([0.2, -0.1, 0.0]))
    np.testing.assert_allclose(fused, [0.0, 1.5, 1.0], atol=1e-6)
    np.testing.assert_allclose(fusion.fuse(np.array([1.0]), np.array([0.4])), [1.0], atol=1e-6)
    assert Fusion(hubness_weight=1.0).active


def test_no_fusion_gives_the_logits_back_untouched() -> None:
    logits = np.array([0.25, -1.5], dtype=np.float32)
    assert NO_FUSION.fuse(logits, np.array([0.9, 0.1])) is logits
    assert not NO_FUSION.active and Fusion(cosine_weight=1.0).active


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"cosine_weight": -1.0}, "cosine_weight -1.0 is not >= 0"),
        ({"cosine_weight": "heavy"}, "could not convert"),
        ({"cosine_weight": float("nan")}, "not finite"),
        ({"method": "product"}, "method 'product'"),
        ({"hubness_weight": -0.5}, "hubness_weight -0.5 is not >= 0"),
        ({"hubness_weight": 1.0, "hubness_neighbours": 0}, "hubness_neighbours 0 is not >= 1"),
        ({"hubness_weight": 1.0, "hubness_neighbours": 2.5}, "hubness_neighbours 2.5 is not a whole number"),
        ({"calibration": PLATT}, "calibration and threshold go together"),
        ({"calibration": PLATT, "threshold": 1.5}, "threshold 1.5 is not in [0, 1]"),
    ],
)
def test_a_malformed_fusion_is_refused(entry: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        Fusion.from_dict(entry)


def test_a_fusion_round_trips_through_its_dict() -> None:
    fusion = Fusion(5.0, 0.45, Calibrator.from_dict(PLATT), 0.3, "m@1", {"on": "ddpp"})
    assert Fusion.from_dict(fusion.to_dict()) == fusion
    with_hubness = Fusion(8.0, 0.46, hubness_weight=10.0, hubness_neighbours=5)
    assert Fusion.from_dict(with_hubness.to_dict()) == with_hubness
    assert Fusion.from_dict(None) == NO_FUSION == Fusion.from_dict({})


def retriever_dir(tmp_path: Path, **extra: object) -> Path:
    directory = tmp_path / "retriever"
    directory.mkdir()
    (directory / "retriever.onnx").write_bytes(b"")
    (directory / "tokenizer.json").write_text("{}")
    meta = {"name": "enc", "file": "retriever.onnx", "sha256": "0" * 64, "max_length": 32, "dim": 4}
    (directory / "retriever.json").write_text(json.dumps({**meta, **extra}))
    return directory


def test_retriever_json_fusion_is_read_into_the_spec(tmp_path: Path) -> None:
    entry = {
        "cosine_weight": 8.0,
        "cosine_centre": 0.5,
        "ranker": "m@1",
        "calibration": PLATT,
        "threshold": 0.2,
    }
    spec = load_retriever(retriever_dir(tmp_path, fusion=entry))
    assert spec.fusion == Fusion(8.0, 0.5, Calibrator.from_dict(PLATT), 0.2, "m@1")


def test_a_retriever_without_fusion_leaves_the_logits_alone(tmp_path: Path) -> None:
    assert load_retriever(retriever_dir(tmp_path)).fusion == NO_FUSION


def test_a_malformed_fusion_in_retriever_json_names_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"retriever\.json: fusion: cosine_weight -2.0 is not >= 0"):
        load_retriever(retriever_dir(tmp_path, fusion={"cosine_weight": -2.0}))


def test_write_fusion_keeps_the_rest_of_retriever_json(tmp_path: Path) -> None:
    directory = retriever_dir(tmp_path, query={"turns": 2})
    fitted_with = dataclasses.replace(load_retriever(directory), last_turn_weight=0.25)
    write_fusion(directory, Fusion(3.0, 0.4, ranker="m@1"), fitted_with)
    spec = load_retriever(directory)
    assert spec.fusion.cosine_weight == 3.0 and spec.query_turns == 2 and spec.name == "enc"
    assert spec.last_turn_weight == 0.25  # the query the fusion was fitted with


def retrieved(
    logits: list[list[float]],
    cosines: list[list[float]],
    hits: list[list[bool]],
    hubness: list[list[float]] | None = None,
) -> Retrieved:
    shape = np.array(logits).shape
    return Retrieved(
        np.array(cosines, dtype=np.float32),
        np.array(logits, dtype=np.float32),
        np.full((shape[0], 3, shape[1]), np.nan, dtype=np.float32),
        np.array(hits, dtype=bool),
        np.ones(shape, dtype=bool),
        np.zeros(shape, dtype=np.float32) if hubness is None else np.array(hubness, dtype=np.float32),
    )


def test_ranked_metrics_count_the_first_hit_and_a_list_without_one_as_a_miss() -> None:
    hits = np.zeros((3, 12), dtype=bool)
    hits[0, 0] = hits[1, 11] = True  # the third list retrieved none of its good replies
    scores = -np.tile(np.arange(12, dtype=np.float32), (3, 1))
    measured = bank_fusion.ranked_metrics(scores, hits)
    assert measured == {"r_at_1": pytest.approx(1 / 3, abs=1e-4), "r_at_10": pytest.approx(1 / 3, abs=1e-4),
                        "mrr": pytest.approx((1 + 1 / 12) / 3, abs=1e-4)}  # fmt: skip


def test_ties_keep_the_retrieval_order() -> None:
    hits = np.array([[False, True, False]])
    assert bank_fusion.ranked_metrics(np.zeros((1, 3)), hits)["mrr"] == 0.5


def test_the_fitted_weight_lifts_the_specific_reply_over_the_generic_one() -> None:
    # The ranker prefers the generic reply (logit 2 against 1); the cosine knows the specific one.
    r = retrieved([[2.0, 1.0, 0.0]], [[0.3, 0.7, 0.5]], [[False, True, False]])
    assert bank_fusion.ranked_metrics(r.logits, r.hits)["r_at_1"] == 0.0
    fusion, mrr = bank_fusion.fit_weights([r], centre=0.5, weights=(0.0, 1.0, 5.0, 10.0))
    # The smallest weight that ranks it first, and no hubness (all zero here).
    assert (fusion.cosine_weight, fusion.hubness_weight, mrr) == (5.0, 0.0, 1.0)


def test_the_weight_is_fitted_on_the_mean_over_datasets() -> None:
    wants_cosine = retrieved([[2.0, 1.0]], [[0.3, 0.7]], [[False, True]])
    wants_ranker = retrieved([[2.0, 1.0]], [[0.5, 0.6]], [[True, False]])
    # Up to 2.5 the first list misses; from 10 the second does; 5 gets both right.
    fusion, mrr = bank_fusion.fit_weights(
        [wants_cosine, wants_ranker], centre=0.5, weights=(0.0, 1.0, 5.0, 20.0)
    )
    assert (fusion.cosine_weight, mrr) == (5.0, 1.0)
    both = bank_fusion.pooled([wants_cosine, wants_ranker])
    assert both.queries == 2 and bank_fusion.centre_of([wants_cosine, wants_ranker]) == 0.525


def test_a_hubness_weight_is_fitted_when_the_right_reply_loses_to_a_hub() -> None:
    # The generic reply (first) has the better logit and cosine, but sits near the whole bank.
    r = retrieved([[1.0, 0.8]], [[0.6, 0.5]], [[False, True]], hubness=[[0.1, -0.05]])
    fusion, mrr = bank_fusion.fit_weights([r], centre=0.5, weights=(0.0, 10.0), ratios=(0.0, 1.0, 1.5))
    assert (fusion.cosine_weight, fusion.hubness_weight, mrr) == (10.0, 10.0, 1.0)  # the smallest that works


def test_cross_validation_ranks_each_query_with_weights_fitted_without_it() -> None:
    # The first query's hit needs a cosine weight above 2.5, the second's one below 2: no weight
    # serves both, and each alone would fit a weight that fails the other.
    wants_cosine = retrieved([[2.0, 1.0]], [[0.3, 0.7]], [[False, True]])
    wants_ranker = retrieved([[2.0, 1.0]], [[0.5, 1.0]], [[True, False]])
    both = bank_fusion.pooled([wants_cosine, wants_ranker])
    fitted, _ = bank_fusion.fit_weights([both], centre=0.5)
    assert bank_fusion.ranked_metrics(bank_fusion.fused(both, fitted), both.hits)["r_at_1"] == 0.5
    metrics, fits = bank_fusion.cross_validated({"bank": both}, ["bank"], folds=2, seed=0)
    # Each query ranked by the other's weight: both miss, where the fit on both flatters itself.
    assert metrics["bank"]["r_at_1"] == 0.0
    assert sorted(f.cosine_weight for f in fits) == [0.0, 3.0]


def test_rank_fusion_sums_reciprocal_ranks() -> None:
    r = retrieved([[0.0, 1.0]], [[0.9, 0.1]], [[True, False]])
    np.testing.assert_allclose(bank_fusion.reciprocal_rank_fusion(r), [[1 / 61 + 1 / 62, 1 / 62 + 1 / 61]])


def test_abstention_accuracy_answers_when_a_good_reply_is_retrieved_and_abstains_without() -> None:
    probs = np.array([[0.9, 0.2], [0.3, 0.8]])
    hits = np.array([[True, False], [False, False]])
    # List 1: answers (right), its wrong reply alone abstains (right). List 2: no good reply
    # retrieved, so only "abstain" counts, and 0.8 answers (wrong).
    assert bank_fusion.abstention_accuracy(probs, hits, 0.5) == pytest.approx(2 / 3)


def test_a_per_dataset_flag_defaults_to_its_first_choice_and_takes_a_dataset_own() -> None:
    choices = ("dev", "test", "all")
    assert per_dataset("--split", ["ddpp=all"], ["ddpp", "tc"], choices) == {"ddpp": "all", "tc": "dev"}
    assert per_dataset("--split", ["test"], ["ddpp", "tc"], choices) == {"ddpp": "test", "tc": "test"}
    with pytest.raises(SystemExit, match="--split 'other=all': one of dev, test, all, or NAME=that"):
        per_dataset("--split", ["other=all"], ["ddpp"], choices)
