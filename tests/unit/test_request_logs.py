"""The service's side of the request logs: files, the writer thread, the recent requests, the lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialogue_ranker.serving.errors import Overloaded, UnknownCandidate
from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.rank_query import Candidate, RankedCandidate, RankQuery, RankResult
from dialogue_ranker.serving.request_logs import LogsError, RequestLogs, check_logs
from dialogue_ranker.serving.request_logs.files import RotatingJsonl, log_files
from dialogue_ranker.serving.request_logs.lines import digest, label_of_reward, timestamp
from dialogue_ranker.serving.request_logs.recent import RecentRequests
from dialogue_ranker.serving.settings import LogsSettings
from dialogue_ranker.serving.tokenization import Turn

CANDIDATES = [Candidate("a", "sure"), Candidate("b", "no")]
QUERY = RankQuery(turns=[Turn("user", "hi there")], candidates=CANDIDATES, top_k=1, request_id="r1")
RESULT = RankResult("tiny@1", [RankedCandidate("b", 0.8, 1.4, None, None)], [], abstain=False, threshold=0.5)


def logs_in(directory: Path, **settings) -> tuple[RequestLogs, Metrics]:
    metrics = Metrics()
    logs = RequestLogs.start(LogsSettings(dir=directory, **settings), metrics)
    assert logs is not None
    return logs, metrics


def lines(directory: Path, kind: str) -> list[dict]:
    return [json.loads(line) for path in log_files(directory, kind) for line in path.read_text().splitlines()]


def counter(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_files_rotate_before_passing_max_bytes_and_keep_the_newest_max_files(tmp_path: Path) -> None:
    files = RotatingJsonl(tmp_path, "requests", max_bytes=25, max_files=2)
    for n in range(5):
        files.write(f'{{"n": {n}, "pad": "xx"}}\n'.encode())  # 21 bytes: one a file
    files.close()
    kept = log_files(tmp_path, "requests")
    assert [json.loads(p.read_text())["n"] for p in kept] == [3, 4]
    assert all(p.stat().st_size <= 25 for p in kept) and kept == sorted(kept)


def test_logging_is_off_without_a_directory() -> None:
    assert RequestLogs.start(LogsSettings(), Metrics()) is None


def test_a_directory_that_cannot_be_written_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(LogsError, match="--logs.dir .*file/logs: cannot be written"):
        check_logs(LogsSettings(dir=tmp_path / "file" / "logs"))


def test_a_ranked_request_is_one_line_every_candidate_with_its_place_in_the_answer(tmp_path: Path) -> None:
    logs, metrics = logs_in(tmp_path, texts=True)
    logs.ranked(QUERY, CANDIDATES, [None, None], RESULT)
    logs.close()
    (line,) = lines(tmp_path, "requests")
    assert line["request_id"] == "r1" and line["group"] == "r1" and line["model"] == "tiny@1"
    assert line["context"] == [{"speaker": "user", "text": "hi there"}]
    a, b = line["candidates"]
    assert (a["id"], a["text"], a["rank"], a["score"]) == ("a", "sure", None, None)  # past top_k
    assert (b["id"], b["text"], b["rank"], b["score"], b["logit"]) == ("b", "no", 1, 0.8, 1.4)
    assert "label" not in a and counter(metrics, "ranker_log_lines_total", kind="requests") == 1


def test_a_hard_masked_candidate_is_logged_with_its_reason_and_no_place(tmp_path: Path) -> None:
    logs, _ = logs_in(tmp_path, texts=True)
    query = RankQuery(turns=QUERY.turns, candidates=CANDIDATES, request_id="r1", conversation_id="chat-2")
    logs.ranked(query, CANDIDATES, [MaskReason.NOT_ALLOWED_FOR_INTENT, None], RESULT)
    logs.close()
    (line,) = lines(tmp_path, "requests")
    masked = line["candidates"][0]
    assert (masked["masked"], masked["rank"], masked["score"]) == (
        "action_not_allowed_for_intent",
        None,
        None,
    )
    assert line["group"] == line["conversation_id"] == "chat-2"


def test_without_texts_every_text_is_its_digest(tmp_path: Path) -> None:
    logs, _ = logs_in(tmp_path)
    logs.ranked(QUERY, CANDIDATES, [None, None], RESULT)
    logs.close()
    text = log_files(tmp_path, "requests")[0].read_text()
    line = json.loads(text)
    assert "sure" not in text and "hi there" not in text and line["texts"] is False
    assert line["context"][0]["sha256"] == digest("hi there") and line["candidates"][1]["sha256"] == digest(
        "no"
    )


def test_a_full_queue_drops_the_request_line_and_never_waits(tmp_path: Path) -> None:
    metrics = Metrics()
    logs = RequestLogs(
        LogsSettings(queue_lines=1), tmp_path, metrics
    )  # the writer not started: nothing drains
    logs.ranked(QUERY, CANDIDATES, [None, None], RESULT)
    logs.ranked(
        RankQuery(turns=QUERY.turns, candidates=CANDIDATES, request_id="r2"), CANDIDATES, [None, None], RESULT
    )
    assert counter(metrics, "ranker_log_lines_dropped_total", kind="requests", reason="queue_full") == 1
    assert logs.recent.candidates("r2") is None  # a dropped request is no feedback target
    with pytest.raises(Overloaded):
        logs.feedback(request_id="r1", candidate_id="a", label=1, reward=None)
    assert counter(metrics, "ranker_feedback_total", outcome="overloaded") == 1


def test_a_sample_of_zero_logs_no_request(tmp_path: Path) -> None:
    logs, _ = logs_in(tmp_path, sample=0.0)
    logs.ranked(QUERY, CANDIDATES, [None, None], RESULT)
    logs.close()
    assert log_files(tmp_path, "requests") == [] and logs.recent.candidates("r1") is None


def test_feedback_is_checked_against_the_recent_requests_and_written(tmp_path: Path) -> None:
    logs, metrics = logs_in(tmp_path)
    logs.ranked(QUERY, CANDIDATES, [None, None], RESULT)
    assert logs.feedback(request_id="r1", candidate_id="a", label=2, reward=None) is True
    assert logs.feedback(request_id="elsewhere", candidate_id="a", label=None, reward=-0.5) is False
    with pytest.raises(UnknownCandidate, match="candidate_id: request 'r1' had no candidate 'z'.*'a', 'b'"):
        logs.feedback(request_id="r1", candidate_id="z", label=1, reward=None)
    logs.close()
    first, second = lines(tmp_path, "feedback")
    assert (first["label"], first["matched"], "reward" in first) == (2, True, False)
    assert (second["reward"], second["matched"], "label" in second) == (-0.5, False, False)
    assert [counter(metrics, "ranker_feedback_total", outcome=o) for o in ("matched", "unmatched",
            "unknown_candidate")] == [1, 1, 1]  # fmt: skip


def test_the_recent_requests_forget_the_oldest_past_their_capacity() -> None:
    recent = RecentRequests(2)
    for request_id in ("r1", "r2", "r3"):
        recent.add(request_id, ["a"])
    assert recent.candidates("r1") is None and recent.candidates("r3") == ("a",) and len(recent) == 2
    none = RecentRequests(0)
    none.add("r1", ["a"])
    assert none.candidates("r1") is None


def test_a_reward_is_a_probability_and_times_are_utc_milliseconds() -> None:
    assert [label_of_reward(r) for r in (-1.0, 0.0, 0.5, 1.0)] == [0.0, 0.5, 0.75, 1.0]
    assert timestamp(0.1234) == "1970-01-01T00:00:00.123Z"
