"""The load tests' response checks for bank answers, their bank, and the per-scenario SLO gate."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from loadtests.bank import make_bank, read_bank_file, read_conversations, topical_chat_bank
from loadtests.checks import check_rank_body
from loadtests.expected import BankInfo, BankResponse, Expected, Guidelines
from loadtests.scenarios import BANK_RETRIEVE_K, Traffic, load_situated
from loadtests.slo import Slo, evaluate

GUIDELINES = Guidelines.from_mapping({"reset_login": ["send-reset-link"]}, source="test")
BANK = BankInfo(
    "faq",
    5,
    {
        "hi": BankResponse("Hi there!", "template"),
        "pets": BankResponse("Do you have any pets?", "retrieval"),
        "dog": BankResponse("I have a dog called Rex.", "retrieval"),
        "cat": BankResponse("Cats are great.", None),
        "reset": BankResponse("I'll send a reset link.", None, "send-reset-link"),
    },
)
CONTEXT = [{"speaker": "user", "text": "Hello!"}, {"speaker": "bot", "text": "do you have any PETS"}]


def entry(cid: str, score: float, *, bank: str | None = "faq", **fields: Any) -> dict[str, Any]:
    response = BANK.responses[cid] if bank and BANK.responses and cid in BANK.responses else None
    out = {
        "id": cid,
        "score": score,
        "logit": 0.0,
        "generator": response.generator if response else None,
        "action": response.action if response else None,
        "masked": False,
        "mask_reason": None,
        "bank": bank,
        "retrieval_score": 0.5 if bank else None,
    }
    return {**out, **fields}


def answer(ranking: list[dict], masked: list[dict] | None = None) -> bytes:
    return json.dumps(
        {
            "model": "m@1",
            "ranking": ranking,
            "masked": masked or [],
            "abstain": False,
            "threshold": 0.1,
            "statements_used": [],
        }
    ).encode()


def masked_pets() -> list[dict]:
    return [{"id": "pets", "action": None, "reason": "repeats_a_turn", "bank": "faq"}]


REQUEST = {"context": CONTEXT, "bank": "faq", "retrieve_k": 3, "candidates": [{"id": "hi", "text": "Hey."}]}


def test_a_bank_answer_with_the_request_own_candidate_passes() -> None:
    # The bank's "hi" and the request's own "hi" are told apart by their bank.
    body = answer(
        [entry("dog", 0.9), entry("hi", 0.5, bank=None), entry("hi", 0.4)],
        masked_pets(),  # "Do you have any pets?" repeats the bot's turn
    )
    assert check_rank_body(body, Expected.of(REQUEST, GUIDELINES, BANK)) is None


@pytest.mark.parametrize(
    ("ranking", "masked", "reason"),
    [
        ([entry("dog", 0.9), entry("hi", 0.5, bank=None), entry("x", 0.4)], None, "bank id not in the bank"),
        (
            [entry("dog", 0.9), entry("hi", 0.5, bank=None), entry("hi", 0.4, bank="other")],
            None,
            "another bank",
        ),
        ([entry("dog", 0.9, retrieval_score=None), entry("hi", 0.5, bank=None)], None, "retrieval score"),
        ([entry("dog", 0.9), entry("hi", 0.5, bank=None)], None, "wrong number of bank responses"),
        (
            [entry("dog", 0.9), entry("pets", 0.6), entry("hi", 0.5, bank=None)],
            [],
            "bank response not masked",
        ),
        ([entry("dog", 0.9, generator="llm"), entry("hi", 0.5, bank=None), entry("hi", 0.4)], None, "echoed"),
        ([entry("dog", 0.9), entry("hi", 0.4)], None, "wrong number of ranked candidates"),
    ],
)
def test_a_broken_bank_answer_fails_with_its_reason(ranking: list[dict], masked: Any, reason: str) -> None:
    problem = check_rank_body(
        answer(ranking, masked if masked is not None else masked_pets()),
        Expected.of(REQUEST, GUIDELINES, BANK),
    )
    assert problem is not None and reason in problem.reason, problem


def test_a_masked_bank_response_that_repeats_nothing_fails() -> None:
    masked = [{"id": "dog", "action": None, "reason": "repeats_a_turn", "bank": "faq"}]
    body = answer([entry("cat", 0.9), entry("hi", 0.5, bank=None), entry("hi", 0.4)], masked)
    problem = check_rank_body(body, Expected.of(REQUEST, GUIDELINES, BANK))
    assert problem is not None and problem.reason == "valid candidate masked", problem


def test_without_the_bank_file_only_the_form_of_bank_entries_is_checked() -> None:
    unknown = BankInfo("faq", 5)
    body = answer([entry("x", 0.9), entry("hi", 0.5, bank=None), entry("y", 0.4)], masked_pets())
    assert check_rank_body(body, Expected.of(REQUEST, GUIDELINES, unknown)) is None


def test_the_service_default_retrieve_k_and_top_k_bound_the_count() -> None:
    request = {"context": CONTEXT, "bank": "faq", "top_k": 2}
    two = answer([entry("dog", 0.9), entry("hi", 0.4)], masked_pets())
    assert check_rank_body(two, Expected.of(request, GUIDELINES, BANK)) is None
    three = answer([entry("dog", 0.9), entry("hi", 0.4), entry("cat", 0.3)], masked_pets())
    problem = check_rank_body(three, Expected.of(request, GUIDELINES, BANK))
    assert problem is not None and problem.reason == "wrong number of ranked candidates"


def test_an_agent_action_in_a_bank_is_masked_by_the_intent() -> None:
    request = {"context": CONTEXT, "bank": "faq", "retrieve_k": 2, "intent": "reset_login"}
    # reset_login allows send-reset-link: ranked; soft mode flags the repeat in place.
    soft = {**request, "mask_mode": "soft"}
    flagged = entry("pets", 0.2, masked=True, mask_reason="repeats_a_turn")
    assert (
        check_rank_body(answer([entry("reset", 0.9), flagged]), Expected.of(soft, GUIDELINES, BANK)) is None
    )
    unflagged = answer([entry("reset", 0.9), entry("pets", 0.2)])
    problem = check_rank_body(unflagged, Expected.of(soft, GUIDELINES, BANK))
    assert problem is not None and problem.reason == "wrong mask reason", problem


def test_bank_entries_in_the_answer_to_a_request_without_a_bank_fail() -> None:
    request = {"context": CONTEXT, "candidates": [{"id": "hi", "text": "Hey."}]}
    problem = check_rank_body(
        answer([entry("hi", 0.5, bank=None), entry("dog", 0.4)]), Expected.of(request, GUIDELINES)
    )
    assert problem is not None and "without a bank" in problem.reason


def test_an_own_candidate_that_repeats_a_turn_must_be_masked() -> None:
    request = {
        "context": CONTEXT,
        "candidates": [{"id": "a", "text": "Do you have any pets?"}, {"id": "b", "text": "Ok"}],
    }
    right = answer(
        [entry("b", 0.5, bank=None)], [{"id": "a", "action": None, "reason": "repeats_a_turn", "bank": None}]
    )
    assert check_rank_body(right, Expected.of(request, GUIDELINES)) is None
    leaked = answer([entry("a", 0.9, bank=None), entry("b", 0.5, bank=None)])
    assert check_rank_body(leaked, Expected.of(request, GUIDELINES)) is not None


def test_the_bank_scenario_names_the_bank_with_and_without_own_candidates(tmp_path: Path) -> None:
    conversations = tmp_path / "c.json"
    turns = [{"agent": f"agent_{1 + i % 2}", "message": f"turn {i} of the chat"} for i in range(8)]
    conversations.write_text(json.dumps({"c1": {"content": turns}, "c2": {"content": turns[:3]}}))
    size, _ = make_bank(tmp_path / "bank.jsonl", source="topical-chat", topical_chat=conversations)
    assert size == 11 and set(read_bank_file(tmp_path / "bank.jsonl")) >= {"tc-0000-00", "tc-0001-02"}
    traffic = Traffic(
        guidelines=GUIDELINES,
        situated=load_situated(None)[0],
        seed=1,
        bank=BankInfo("loadtest", size),
        conversations=read_conversations(conversations),
    )
    bodies = [traffic.bank_request() for _ in range(200)]
    assert all(b["bank"] == "loadtest" and 1 <= len(b["context"]) <= 6 for b in bodies)
    assert {len(b.get("candidates", [])) for b in bodies} == {0, 1, 2, 3}
    assert {b.get("retrieve_k") for b in bodies} == set(BANK_RETRIEVE_K)
    # The context ends on the partner's turn: the bot answers it.
    assert all(b["context"][-1]["speaker"] == "user" for b in bodies)


def test_the_sample_bank_needs_no_data(tmp_path: Path) -> None:
    size, where = make_bank(tmp_path / "b.jsonl", source="samples")
    assert size > 200 and "sample" in where
    assert len(set(read_bank_file(tmp_path / "b.jsonl"))) == size
    assert topical_chat_bank([(("a", "x"), ("b", "y"))])[1]["id"] == "tc-0000-01"


class Entry:
    """What the gate reads of a Locust stats entry (importing locust here would patch the stdlib)."""

    def __init__(self, name: str, calls: list[tuple[float, bool]]) -> None:
        self.name = name
        self.times = sorted(ms for ms, _ in calls)
        self.num_requests = len(calls)
        self.num_failures = sum(not ok for _, ok in calls)
        self.fail_ratio = self.num_failures / max(self.num_requests, 1)
        self.max_response_time = max(self.times, default=0.0)
        self.total_rps = 1.0

    def get_response_time_percentile(self, q: float) -> float:
        return self.times[min(len(self.times) - 1, int(q * len(self.times)))]


class Error:
    def __init__(self, occurrences: int) -> None:
        self.error, self.occurrences = "shed load: 429 overloaded", occurrences


class Stats:
    def __init__(self, requests: dict[str, list[tuple[float, bool]]]) -> None:
        self.entries = {name: Entry(name, calls) for name, calls in requests.items()}
        self.total = Entry("Aggregated", [c for calls in requests.values() for c in calls])
        self.errors = {"shed": Error(self.total.num_failures)} if self.total.num_failures else {}


def stats_with(requests: dict[str, list[tuple[float, bool]]]) -> Any:
    return Stats(requests)


def test_the_gate_judges_each_scenario_by_its_own_p95_and_error_ratio() -> None:
    rng = random.Random(0)
    fast = [(rng.uniform(50, 300), True) for _ in range(200)]
    slow = [(rng.uniform(1000, 3000), True) for _ in range(20)]
    slo = Slo(max_error_ratio=0.01, scenario_p95_ms={"rank:socialbot": 1000, "rank:large_pool": 4000})
    verdict = evaluate(stats_with({"rank:socialbot": fast, "rank:large_pool": slow}), slo)
    # The p95 of all requests is a large pool's (over 1 s); each scenario is within its own limit.
    assert verdict.passed, verdict.breaches
    assert verdict.figures["total"]["p95_ms"] > 1000
    assert verdict.figures["scenarios"]["rank:large_pool"]["p95_limit_ms"] == 4000

    # One large pool shed in 20: 0.5% of the run, 5% of the scenario; a fast 429 also lowers its p95.
    shed = [*slow[:19], (20.0, False)]
    verdict = evaluate(stats_with({"rank:socialbot": fast, "rank:large_pool": shed}), slo)
    assert not verdict.passed
    assert verdict.breaches == ["rank:large_pool: error ratio 0.0500 > 0.01 (1 of 20)"]

    tight = Slo(max_error_ratio=0.01, scenario_p95_ms={"rank:large_pool": 1000})
    verdict = evaluate(stats_with({"rank:socialbot": fast, "rank:large_pool": slow}), tight)
    assert len(verdict.breaches) == 1 and verdict.breaches[0].startswith("rank:large_pool: p95")
