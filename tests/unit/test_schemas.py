from __future__ import annotations

import pytest
from pydantic import ValidationError

from dialogue_ranker.serving.api.schemas import RankRequest, build_rank_request
from dialogue_ranker.serving.ranking import MaskMode
from dialogue_ranker.serving.settings import LimitsSettings


def error_locs(model: type[RankRequest], body: dict) -> list[tuple]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return [e["loc"] for e in caught.value.errors()]


def test_plain_strings_become_a_user_turn_and_candidates_with_position_ids() -> None:
    query = RankRequest.model_validate(
        {"context": "hi", "candidates": ["a", {"text": "b", "id": "x"}]}
    ).to_query()
    assert [(t.speaker, t.text) for t in query.turns] == [("user", "hi")]
    assert [c.id for c in query.candidates] == ["0", "x"]
    assert query.mask_mode is MaskMode.HARD


def test_duplicate_ids_are_refused_naming_candidates() -> None:
    body = {"context": "hi", "candidates": [{"id": "1", "text": "a"}, "b"]}
    assert error_locs(RankRequest, body) == [("candidates",)]


def test_empty_candidates_are_refused() -> None:
    assert error_locs(RankRequest, {"context": "hi", "candidates": []}) == [("candidates",)]


def test_blank_texts_are_refused_with_their_path() -> None:
    locs = error_locs(RankRequest, {"context": "hi", "candidates": ["ok", "  "], "situations": [""]})
    assert ("candidates", 1, "text") in locs and ("situations", 0) in locs


@pytest.mark.parametrize(
    ("field", "value"), [("min_score", 1.5), ("min_score", -0.1), ("top_k", 0), ("mask_mode", "sometimes")]
)
def test_out_of_range_values_are_refused(field: str, value: object) -> None:
    assert error_locs(RankRequest, {"context": "hi", "candidates": ["a"], field: value}) == [(field,)]


def test_unknown_fields_are_refused() -> None:
    assert error_locs(RankRequest, {"context": "hi", "candidates": ["a"], "candidate": []}) == [
        ("candidate",)
    ]


def test_configured_limits_are_enforced_and_shown_in_the_schema() -> None:
    model = build_rank_request(LimitsSettings(max_candidates=2, max_text_chars=5))
    assert error_locs(model, {"context": "hi", "candidates": ["a", "b", "c"]}) == [("candidates",)]
    assert error_locs(model, {"context": "hi", "candidates": ["toolong"]}) == [("candidates", 0, "text")]
    assert error_locs(model, {"context": "toolong", "candidates": ["a"]}) == [("context", 0, "text")]
    schema = model.model_json_schema()
    assert schema["properties"]["candidates"]["maxItems"] == 2


def test_rank_and_rerank_take_their_size_limits_from_the_same_settings() -> None:
    from dialogue_ranker.serving.api.rerank import build_rerank_request

    limits = LimitsSettings(max_candidates=2, max_text_chars=5, max_situations=1, max_turns=2)
    rank, rerank = build_rank_request(limits), build_rerank_request(limits)
    long, many = "x" * 6, ["a", "b", "c"]
    assert error_locs(rank, {"context": long, "candidates": ["a"]}) == [("context", 0, "text")]
    assert error_locs(rerank, {"query": long, "documents": ["a"]}) == [("query",)]
    assert error_locs(rank, {"context": "hi", "candidates": many}) == [("candidates",)]
    assert error_locs(rerank, {"query": "hi", "documents": many}) == [("documents",)]
    assert error_locs(rank, {"context": "hi", "candidates": ["a"], "situations": ["s", "t"]}) == [
        ("situations",)
    ]
    assert error_locs(rerank, {"query": "hi", "documents": ["a"], "situations": ["s", "t"]}) == [
        ("situations",)
    ]
    # The query is the last turn: a rerank request's context holds one turn fewer.
    turns = [{"text": "a"}, {"text": "b"}]
    assert error_locs(rerank, {"query": "hi", "documents": ["a"], "context": turns}) == [("context",)]
    # One limited turn class for both routes (one OpenAPI component).
    rank_turn = rank.model_fields["context"].annotation.__args__[0]
    assert rerank.model_fields["context"].annotation.__args__[0] is rank_turn
