"""The logs' reader: request and feedback lines, written in the service's own format, joined into lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dialogue_ranker.data.feedback_logs import join_logs, lists_from_logs, read_lists_or_logs
from dialogue_ranker.data.ranking_data import DataError, RankingList, write_lists
from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.rank_query import Candidate, RankedCandidate, RankQuery, RankResult
from dialogue_ranker.serving.request_logs.files import RotatingJsonl
from dialogue_ranker.serving.request_logs.lines import FEEDBACK, REQUESTS, feedback_line, request_line
from dialogue_ranker.serving.tokenization import Turn

HOT = [Candidate("window", "Shall I open the window?"), Candidate("pizza", "Pizza is great."),
       Candidate("idk", "I do not know.", generator="template")]  # fmt: skip


def request(
    request_id: str,
    *,
    candidates: list[Candidate] = HOT,
    conversation_id: str | None = None,
    texts: bool = True,
) -> dict[str, Any]:
    query = RankQuery(
        turns=[Turn("user", "It is so hot in here.")],
        candidates=candidates,
        statements=["The window is closed."],
        request_id=request_id,
        conversation_id=conversation_id,
    )
    ranking = [RankedCandidate(c.id, 0.5, 0.0, c.generator, c.action) for c in candidates]
    result = RankResult("tiny@1", ranking, [], abstain=False, threshold=0.4)
    reasons: list[MaskReason | None] = [None] * len(candidates)
    return request_line(query, candidates, reasons, result, request_id=request_id, time_s=0.0, texts=texts)


def judgement(
    request_id: str,
    candidate_id: str,
    *,
    label: float | None = None,
    reward: float | None = None,
    at_s: float = 0,
) -> dict[str, Any]:
    return feedback_line(
        request_id=request_id,
        candidate_id=candidate_id,
        label=label,
        reward=reward,
        matched=True,
        time_s=at_s,
    )


def write(directory: Path, kind: str, lines: list[dict[str, Any]], *, max_bytes: int = 1_000_000) -> None:
    """The lines as the service writes them (its own rotating files)."""
    files = RotatingJsonl(directory, kind, max_bytes=max_bytes, max_files=100)
    for line in lines:
        files.write((json.dumps(line) + "\n").encode())
    files.close()


def test_a_judged_request_becomes_a_list_of_its_judged_candidates(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1"), request("r2")])
    write(tmp_path, FEEDBACK, [judgement("r1", "window", label=2), judgement("r1", "idk", label=0)])
    (only,) = lists_from_logs(tmp_path)
    assert [(c.text, c.label, c.generator) for c in only.candidates] == [
        ("Shall I open the window?", 2, None),
        ("I do not know.", 0, "template"),
    ]  # pizza was not judged: left out, not called bad; r2 had no feedback: no list
    assert only.context == (Turn("user", "It is so hot in here."),)
    assert only.situations == ("The window is closed.",) and only.group == "r1"
    assert only.origin.endswith(":1")


def test_the_last_judgement_of_a_candidate_wins_across_files(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1")])
    # A tiny size: each judgement gets a file of its own, so "last" is the order of the files.
    write(
        tmp_path,
        FEEDBACK,
        [judgement("r1", "pizza", label=2), judgement("r1", "pizza", label=0)],
        max_bytes=1,
    )
    assert len(list(tmp_path.glob("feedback-*.jsonl"))) == 2
    assert [c.label for c in lists_from_logs(tmp_path)[0].candidates] == [0]


def test_replicas_directories_are_joined_from_their_parent_and_the_latest_judgement_wins(
    tmp_path: Path,
) -> None:
    write(tmp_path / "pod-a", REQUESTS, [request("r1")])
    write(tmp_path / "pod-a", FEEDBACK, [judgement("r1", "window", label=2, at_s=20)])
    # Written after pod-a's file, but judged earlier: the time decides, not the order of the files.
    write(tmp_path / "pod-b", FEEDBACK, [judgement("r1", "window", label=0, at_s=10)])
    (only,) = lists_from_logs(tmp_path)
    assert [c.label for c in only.candidates] == [2]


def test_a_reward_is_joined_as_the_probability_half_of_reward_plus_one(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1")])
    write(
        tmp_path,
        FEEDBACK,
        [judgement("r1", "window", reward=1.0), judgement("r1", "pizza", reward=-1.0),
         judgement("r1", "idk", reward=0.0)],
    )  # fmt: skip
    labels = [c.label for c in lists_from_logs(tmp_path)[0].candidates]
    assert labels == [1.0, 0.0, 0.5] and all(isinstance(label, float) for label in labels)


def test_the_group_is_the_conversation_when_the_request_named_one(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1", conversation_id="chat-7"), request("r2")])
    write(tmp_path, FEEDBACK, [judgement("r1", "window", label=1), judgement("r2", "window", label=1)])
    assert [lst.group for lst in lists_from_logs(tmp_path)] == ["chat-7", "r2"]


def test_feedback_matching_no_logged_request_or_candidate_is_counted_not_joined(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1")])
    write(
        tmp_path,
        FEEDBACK,
        [judgement("gone", "window", label=1), judgement("r1", "nope", label=1),
         judgement("r1", "window", label=1)],
    )  # fmt: skip
    joined = join_logs(tmp_path)
    assert (joined.requests, joined.judgements, joined.unmatched, len(joined.lists)) == (1, 3, 2, 1)


def test_a_judged_request_logged_without_texts_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r0"), request("r1", texts=False)])
    write(tmp_path, FEEDBACK, [judgement("r1", "window", label=2)])
    line = json.loads(next(tmp_path.glob("requests-*.jsonl")).read_text().splitlines()[1])
    assert "text" not in line["candidates"][0] and len(line["candidates"][0]["sha256"]) == 64
    with pytest.raises(DataError, match=r"requests-\d{8}T\d{12}Z\.jsonl:2: .*without texts.*--logs\.texts"):
        lists_from_logs(tmp_path)


def test_a_directory_without_feedback_is_refused_saying_what_it_holds(tmp_path: Path) -> None:
    write(tmp_path, REQUESTS, [request("r1")])
    with pytest.raises(DataError, match="no logged request has feedback .1 request lines, 0 feedback"):
        lists_from_logs(tmp_path)


def test_a_broken_line_is_refused_with_its_file_and_line_and_a_line_cut_short_is_skipped(
    tmp_path: Path,
) -> None:
    write(tmp_path, REQUESTS, [request("r1")])
    write(tmp_path, FEEDBACK, [judgement("r1", "window", label=1)])
    path = next(tmp_path.glob("feedback-*.jsonl"))
    with path.open("a") as out:
        out.write('{"format": 1, "request_id": "r1", "candid')  # a crash in mid-line: no newline
    assert len(lists_from_logs(tmp_path)) == 1
    with path.open("a") as out:
        out.write('\n{"format": 1, "request_id": "r1", "candidate_id": "idk", "time": "x", "label": 7}\n')
    with pytest.raises(DataError, match=rf"{path.name}:2: not JSON"):
        lists_from_logs(tmp_path)
    path.write_text('{"format": 1, "request_id": "r1", "candidate_id": "idk", "time": "x", "label": 7}\n')
    with pytest.raises(DataError, match=rf"{path.name}:1: label"):
        lists_from_logs(tmp_path)


def test_read_lists_or_logs_reads_a_file_as_before_and_a_directory_by_the_join(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write(logs, REQUESTS, [request("r1")])
    write(logs, FEEDBACK, [judgement("r1", "pizza", label=0.25)])
    from_logs = read_lists_or_logs(logs)
    write_lists(tmp_path / "lists.jsonl", from_logs)
    from_file = read_lists_or_logs(tmp_path / "lists.jsonl")
    assert from_file == from_logs and isinstance(from_file[0], RankingList)
    assert from_file[0].candidates[0].label == 0.25
