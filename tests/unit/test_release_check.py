"""``ranker release-check``'s statistics and gate: paired bootstrap intervals and the refusal rule."""

from __future__ import annotations

import numpy as np
import pytest

from dialogue_ranker.evaluation import bootstrap, release_check
from dialogue_ranker.evaluation import release_suite as rs
from dialogue_ranker.evaluation.metrics import expected_calibration_error

SUITE = rs.Suite(path=rs.Path("suite.toml"), sets=(), resamples=1000, seed=0)


def hits(p: float, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def test_the_paired_interval_of_a_better_model_is_above_zero_and_narrower_than_either_model_s_spread():
    shipped = hits(0.7, 400, seed=2)
    # The candidate gets the same items right, and 20 it got wrong (+0.05).
    candidate = shipped.copy()
    candidate[np.flatnonzero(shipped == 0)[:20]] = 1.0
    metric = bootstrap.ratio("p@1")
    interval = bootstrap.paired_interval(
        metric, bootstrap.ratio_rows(shipped), bootstrap.ratio_rows(candidate)
    )
    assert interval.shipped == pytest.approx(shipped.mean()) and interval.candidate == pytest.approx(
        candidate.mean()
    )
    assert 0 < interval.low <= interval.difference <= interval.high
    # Unpaired, each model's own 95% interval is about +-0.045 wide: far wider than the paired one.
    assert interval.high - interval.low < 2 * 1.96 * np.sqrt(0.7 * 0.3 / 400) / 2
    # Fixed seed: the same interval again; another seed, a close one.
    again = bootstrap.paired_interval(metric, bootstrap.ratio_rows(shipped), bootstrap.ratio_rows(candidate))
    assert again == interval
    other = bootstrap.paired_interval(
        metric, bootstrap.ratio_rows(shipped), bootstrap.ratio_rows(candidate), seed=7
    )
    assert abs(other.low - interval.low) < 0.01 and abs(other.high - interval.high) < 0.01


def test_identical_rows_give_a_zero_width_interval_and_rows_of_other_items_are_refused():
    rows = bootstrap.ratio_rows(hits(0.5, 50, seed=3))
    interval = bootstrap.paired_interval(bootstrap.ratio("p@1"), rows, rows.copy())
    assert (interval.low, interval.high, interval.difference) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="same items"):
        bootstrap.paired_interval(bootstrap.ratio("p@1"), rows, rows[:-1])


def test_pooled_shares_and_ece_from_rows_are_the_metrics_computed_on_the_whole_set():
    rng = np.random.default_rng(4)
    probs = [rng.random(int(rng.integers(2, 6))) for _ in range(30)]
    outcomes = [(rng.random(len(p)) < p).astype(float) for p in probs]
    rows = bootstrap.ece_rows(probs, outcomes)
    ece = bootstrap.ece_metric().value(rows.sum(axis=0))
    assert ece == pytest.approx(expected_calibration_error(np.concatenate(probs), np.concatenate(outcomes)))
    won, pairs = np.array([1.0, 0.5, 3.0]), np.array([1.0, 2.0, 4.0])
    assert bootstrap.ratio("flip").value(bootstrap.ratio_rows(won, pairs).sum(axis=0)) == pytest.approx(
        4.5 / 7
    )


def _rows_of(candidate_hits, shipped_hits, ece_shift=0.0):
    """Two sets: P@1 rows, and ECE rows whose candidate probabilities are shifted."""
    rng = np.random.default_rng(5)
    probs = [rng.random(3) for _ in range(200)]
    outcomes = [(rng.random(3) < p).astype(float) for p in probs]
    shifted = [np.clip(p + ece_shift, 0, 1) for p in probs]
    return [
        ("sugar", bootstrap.ratio("precision_at_1"), bootstrap.ratio_rows(shipped_hits),
         bootstrap.ratio_rows(candidate_hits)),
        ("topical-chat", bootstrap.ece_metric(), bootstrap.ece_rows(probs, outcomes),
         bootstrap.ece_rows(shifted, outcomes)),
    ]  # fmt: skip


def gated(sets):
    rows = [
        release_check.gate(name, metric, shipped, candidate, SUITE)
        for name, metric, shipped, candidate in sets
    ]
    return rows, release_check.markdown(rows, SUITE)


def test_an_identical_candidate_passes_every_row():
    shipped = hits(0.8, 300, seed=6)
    rows, table = gated(_rows_of(shipped.copy(), shipped))
    assert not any(r.failed for r in rows)
    assert "**worse**" not in table and table.count("| same |") == 2


def test_a_candidate_worse_on_one_set_is_refused_naming_that_set_even_when_another_is_better():
    shipped = hits(0.8, 300, seed=6)
    worse = shipped.copy()
    worse[np.flatnonzero(shipped)[:30]] = 0.0  # 30 of its right answers now wrong: -0.1 of P@1
    rows, table = gated(_rows_of(worse, shipped))
    assert [(r.set, r.failed) for r in rows] == [("sugar", True), ("topical-chat", False)]
    assert "| sugar | precision_at_1 | 300 | " in table and "**worse**" in table.splitlines()[2]
    text = release_check.report(rows, SUITE, "cand", "ship", 1.0)
    assert (
        "**Refused**" in text
        and "sugar / precision_at_1" in text
        and "topical-chat" not in text.split("Refused")[1]
    )

    # Better on P@1 cannot buy a worse calibration: the ECE row alone refuses.
    better = np.maximum(shipped, hits(0.5, 300, seed=8))
    rows, _ = gated(_rows_of(better, shipped, ece_shift=0.2))
    assert [(r.set, r.failed, r.verdict) for r in rows] == [
        ("sugar", False, "better"), ("topical-chat", True, "**worse**")]  # fmt: skip


def test_a_loss_within_the_interval_passes_and_without_an_interval_the_margin_decides():
    shipped = hits(0.8, 300, seed=6)
    slightly = shipped.copy()
    slightly[np.flatnonzero(shipped)[:2]] = 0.0  # two lists of 300: within what the set can show
    rows, _ = gated(_rows_of(slightly, shipped))
    assert rows[0].interval.difference < 0 and not rows[0].failed

    metric = bootstrap.ratio("contradicted")
    nothing = bootstrap.Interval(shipped=0.80, candidate=0.78, low=float("nan"), high=float("nan"), items=3)
    assert release_check.is_worse(metric, nothing, margin=0.01)
    assert not release_check.is_worse(metric, nothing, margin=0.05)


def test_a_suite_entry_is_refused_by_its_set_and_field(tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nmetrics = ["p1"]\n')
    with pytest.raises(rs.SuiteError, match=r"\[\[lists\]\] a: metrics: \['p1'\]"):
        rs.load_suite(suite, tmp_path)
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nsplitt = "dev"\n')
    with pytest.raises(rs.SuiteError, match="unknown field 'splitt'"):
        rs.load_suite(suite, tmp_path)
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nsplit = "dev+tset"\n')
    with pytest.raises(rs.SuiteError, match=r"\[\[lists\]\] a: split 'dev\+tset'"):
        rs.load_suite(suite, tmp_path)
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nsplit = "all+dev"\n')  # all is whole
    with pytest.raises(rs.SuiteError, match=r"split 'all\+dev'"):
        rs.load_suite(suite, tmp_path)
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nsha256 = "00"\n')
    loaded = rs.load_suite(suite, tmp_path)
    with pytest.raises(rs.SuiteError, match="a.jsonl is absent"):
        rs.check_files(loaded)
    (tmp_path / "a.jsonl").write_text("{}\n")
    with pytest.raises(rs.SuiteError, match="not the file the suite froze"):
        rs.check_files(loaded)


def test_a_metric_counted_on_too_few_items_gets_no_interval_and_the_margin_decides():
    shipped = bootstrap.ratio_rows(np.array([1.0, 1.0, 0.0]), np.array([1.0, 1.0, 1.0]))
    same = release_check.gate("tiny", bootstrap.ratio("flip"), shipped, shipped.copy(), SUITE)
    assert np.isnan(same.interval.low) and not same.failed
    worse = shipped.copy()
    worse[0, 0] = 0.0  # one of three: -0.33, more than the 0.01 margin
    row = release_check.gate("tiny", bootstrap.ratio("flip"), shipped, worse, SUITE)
    assert (
        row.failed
        and "| tiny | flip | 3 | 0.667 | 0.333 | -0.333 | - | **worse** |"
        in release_check.markdown([row], SUITE)
    )


def test_a_set_may_read_two_parts_of_the_split_and_gets_exactly_their_lists(tmp_path):
    from dialogue_ranker.data.ranking_data import Candidate, RankingList
    from dialogue_ranker.evaluation.domains import group_split, held_out
    from dialogue_ranker.serving.tokenization import Turn

    lists = [
        RankingList(context=(Turn("user", "Hi."),), candidates=(Candidate("Hello.", 1),), group=f"g{i}")
        for i in range(400)
    ]
    parts = {p: held_out(lists, p) for p in ("dev", "test", "dev+test", "test+dev")}
    assert len(parts["dev"]) > 20 and len(parts["test"]) > 20
    assert {x.group for x in parts["dev+test"]} == {x.group for x in parts["dev"] + parts["test"]}
    assert parts["dev+test"] == parts["test+dev"]  # the file's order, whichever part is named first
    assert all(group_split(x.group) != "train" for x in parts["dev+test"])
    suite = tmp_path / "s.toml"
    suite.write_text('[[lists]]\nname = "a"\nfile = "a.jsonl"\nsplit = "dev+test"\n')
    assert rs.load_suite(suite, tmp_path).sets[0].split == "dev+test"
