"""Shared-prefix encoding: layout, budgets, deterministic chunks, the readout, CPU sizing."""

from pathlib import Path

import numpy as np
import pytest
from helpers import tiny_list_encoder

from dialogue_ranker.serving.cpu import MAX_WORKERS, available_cpus, batch_workers, intra_op_threads
from dialogue_ranker.serving.list_encoding import PAD_SEGMENT, ListEncoder, candidate_logits
from dialogue_ranker.serving.tokenization import Turn


@pytest.fixture
def encoder(tmp_path: Path) -> ListEncoder:
    return tiny_list_encoder(tmp_path)


TURNS = [Turn("user", "hi"), Turn("bot", "hello"), Turn("user", "could you make some coffee")]


def test_prefix_once_then_each_candidate_restarts_its_positions(encoder):
    (seq,) = encoder.encode_request(TURNS, ["the machine is sorry"], ["sure", "no thanks"])
    prefix = seq.segment_ids.count(0)
    assert seq.candidates == 2
    assert seq.input_ids[0] == encoder.cls_id and seq.input_ids[prefix - 1] == encoder.sep_id
    assert seq.position_ids[:prefix] == list(range(prefix))
    for k in (1, 2):
        where = [i for i, s in enumerate(seq.segment_ids) if s == k]
        assert [seq.position_ids[i] for i in where] == list(range(prefix, prefix + len(where)))
        assert all(seq.token_type_ids[i] == 1 for i in where)
        assert seq.input_ids[where[-1]] == encoder.sep_id


def test_each_candidate_reads_the_prefix_and_its_own_segment(encoder):
    """What a candidate's logit reads (rerank ``usage``): the same whichever sequence holds it."""
    (seq,) = encoder.encode_request(TURNS, [], ["sure", "no thanks"])
    prefix = seq.segment_ids.count(0)
    assert seq.output_tokens() == [prefix + 2, prefix + 3]  # sure [SEP], no thanks [SEP]
    alone = [encoder.encode_request(TURNS, [], [text])[0].output_tokens() for text in ("sure", "no thanks")]
    assert alone == [[prefix + 2], [prefix + 3]]


def test_prefix_budget_keeps_latest_turn_then_statements_then_older_turns(encoder):
    (seq,) = encoder.encode_request(TURNS, ["the machine is sorry", "tea is now"], ["sure"])
    assert seq.segment_ids.count(0) <= 16
    assert seq.turns_kept == 1  # the latest turn (7 tokens) and a statement fill the prefix
    assert seq.statements_kept == 1


def test_long_candidates_are_cut_and_lists_split_deterministically(encoder):
    candidates = ["sure " * 10, "no", "yes", "tea", "coffee"]
    first = encoder.encode_request(TURNS, [], candidates)
    again = encoder.encode_request(TURNS, [], candidates)
    assert first == again
    assert [s.candidates for s in first] == [3, 2]  # at most 3 candidates a sequence
    longest = max(first[0].segment_ids.count(k) for k in (1, 2, 3))
    assert longest == 6  # max_candidate_tokens, [SEP] included
    cut = encoder.encode_request(TURNS, [], candidates, max_candidate_tokens=2)
    assert max(cut[0].segment_ids.count(k) for k in (1, 2, 3)) == 3


def test_without_the_similarity_term_there_is_no_second_sequence(encoder):
    (seq,) = encoder.encode_request(TURNS, [], ["sure"])
    assert seq.similarity_ids == () and encoder.pad([seq]).similarity is None
    assert "similarity" not in encoder.budgets()
    with pytest.raises(KeyError):
        encoder.pad([seq]).as_feeds(["similarity_input_ids"])


def test_similarity_blocks_are_the_latest_turn_then_each_chunks_candidates(tmp_path):
    encoder = tiny_list_encoder(tmp_path, similarity=1)
    assert encoder.budgets()["similarity"] == 1
    candidates = ["sure " * 10, "no", "yes", "tea", "coffee"]
    sequences = encoder.encode_request(TURNS, ["the machine is sorry"], candidates)
    assert [s.candidates for s in sequences] == [3, 2]
    turn = [
        encoder.cls_id,
        *encoder.tokenizer.encode("could you make some coffee", add_special_tokens=False).ids,
    ]
    for seq, texts in zip(sequences, (candidates[:3], candidates[3:]), strict=True):
        blocks: dict[int, list[int]] = {}
        for token, position, segment in zip(
            seq.similarity_ids, seq.similarity_positions, seq.similarity_segments, strict=True
        ):
            assert position == len(blocks.setdefault(segment, []))  # positions restart in each block
            blocks[segment].append(token)
        assert sorted(blocks) == list(range(len(texts) + 1))  # block k is the sequence's candidate k
        assert blocks[0] == [*turn, encoder.sep_id]  # the turn's text alone: no speaker, no statement
        for k, text in enumerate(texts, start=1):
            ids = encoder.tokenizer.encode(text, add_special_tokens=False).ids[:4]  # cut like the candidate
            assert blocks[k] == [encoder.cls_id, *ids, encoder.sep_id]
    batch = encoder.pad(sequences)
    ids, positions, segments = batch.similarity
    assert ids.shape == (2, max(len(s.similarity_ids) for s in sequences))
    short = min(len(s.similarity_ids) for s in sequences)
    assert (segments[1, short:] == PAD_SEGMENT).all() and (ids[1, short:] == encoder.pad_id).all()
    assert set(batch.as_feeds(["similarity_segment_ids", "segment_ids"])) == {
        "similarity_segment_ids",
        "segment_ids",
    }


def test_readout_is_each_candidates_mean_token_logit(encoder):
    seqs = encoder.encode_request(TURNS, [], ["sure", "no thanks", "yes"]) + encoder.encode_request(
        TURNS[:1], [], ["tea"]
    )
    batch = encoder.pad(seqs)
    assert (batch.segment_ids[1, len(seqs[1]) :] == PAD_SEGMENT).all()
    rng = np.random.default_rng(0)
    token_logits = rng.normal(size=batch.shape).astype(np.float32)
    got = batch.readout(token_logits)
    expected = [
        token_logits[row][batch.segment_ids[row] == k].mean()
        for row, s in enumerate(seqs)
        for k in range(1, s.candidates + 1)
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert candidate_logits(token_logits, batch.segment_ids).shape == (4,)


def test_cpu_quota_bounds_the_threads(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert available_cpus(tmp_path) == min(2, available_cpus(tmp_path / "absent"))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert available_cpus(tmp_path) == available_cpus(tmp_path / "absent")
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert available_cpus(v1) == 1
    assert intra_op_threads(4, v1) == 1
    assert batch_workers(0, v1) == 2  # one CPU: two one-thread calls, one fills the other's gaps
    assert intra_op_threads(0, v1) == 1
    assert batch_workers(3, v1) == 3  # an explicit setting wins
    (tmp_path / "cpu.max").write_text("400000 100000\n")
    if available_cpus(tmp_path / "absent") >= 2:
        assert batch_workers(0, tmp_path) == 2 * available_cpus(tmp_path)
        assert intra_op_threads(0, tmp_path) == 1
        assert intra_op_threads(1, tmp_path) == available_cpus(tmp_path)
    (tmp_path / "cpu.max").write_text("100000000 100000\n")  # a 1,000-CPU quota: capped by the host
    assert batch_workers(0, tmp_path) == min(MAX_WORKERS, 2 * available_cpus(tmp_path))
