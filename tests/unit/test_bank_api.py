"""Banks through the HTTP API: the fake ranker backend, the shipped retrieval encoder, real files."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from bank_helpers import SUPPORT_BANK, fake_bundle_with_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process, write_fake_bundle
from test_api import assert_error

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks import BankError
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.model_bundle import load_retriever
from dialogue_ranker.serving.settings import Settings

PASSWORD = {"context": "I forgot my password and cannot log in.", "bank": "support"}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return fake_bundle_with_retriever(tmp_path / "bundle")


@pytest.fixture
def bank_file(tmp_path: Path) -> Path:
    return write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)


def settings(bundle: Path, *banks: str, **overrides) -> Settings:
    return Settings(backend="fake", model=bundle, bank=list(banks), **overrides)


async def test_a_request_ranks_its_candidates_with_the_bank_nearest_responses(
    bundle: Path, bank_file: Path
) -> None:
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        await wait_banks_ready(client)
        body = {**PASSWORD, "retrieve_k": 2, "candidates": [{"id": "own", "text": "One moment please."}]}
        response = await client.post("/rank", json=body)
    assert response.status_code == 200, response.text
    ranking = response.json()["ranking"]
    drawn = {r["id"]: r for r in ranking if r["bank"] == "support"}
    # The two password replies are the bank's nearest to the context; the request's own candidate stays.
    assert set(drawn) == {"reset-link", "reset-steps"}
    assert [r["id"] for r in ranking if r["bank"] is None] == ["own"]
    assert drawn["reset-link"]["generator"] == "template"
    assert all(0.3 < r["retrieval_score"] <= 1.0 for r in drawn.values())
    # The request's own candidate gets its cosine only where the retriever's fusion weighs it.
    own = next(r for r in ranking if r["id"] == "own")["retrieval_score"]
    if load_retriever(bundle / "retriever").fusion.active:
        assert own is not None and -1.0 <= own <= 1.0
    else:
        assert own is None
    scores = [r["score"] for r in ranking]
    assert scores == sorted(scores, reverse=True)


async def test_a_bank_alone_is_a_request(bundle: Path, bank_file: Path) -> None:
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        await wait_banks_ready(client)
        default_k = (await client.post("/rank", json=PASSWORD)).json()
        capped = (await client.post("/rank", json={**PASSWORD, "retrieve_k": 3})).json()
    # The default (banks.retrieve_k 50) holds this bank of 8 whole; retrieve_k takes the 3 nearest.
    assert len(default_k["ranking"]) == len(SUPPORT_BANK) and len(capped["ranking"]) == 3


async def test_the_default_retrieve_k_leaves_room_for_the_request_own_candidates(
    bundle: Path, bank_file: Path
) -> None:
    app = create_app(settings(bundle, f"support={bank_file}", limits={"max_candidates": 5}))
    async with serve_in_process(app) as client:
        await wait_banks_ready(client)
        body = (await client.post("/rank", json={**PASSWORD, "candidates": ["a", "b"]})).json()
    assert len(body["ranking"]) == 5 and sum(r["bank"] == "support" for r in body["ranking"]) == 3


async def test_guideline_masks_apply_to_an_action_bank(bundle: Path, bank_file: Path) -> None:
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        await wait_banks_ready(client)
        body = {"context": "Please cancel my order.", "bank": "support", "intent": "cancel_order"}
        hard = (await client.post("/rank", json=body)).json()
        soft = (await client.post("/rank", json={**body, "mask_mode": "soft"})).json()
    # cancel_order allows cancel-order and issue-refund; share-tracking-link is another intent's action.
    assert {(m["id"], m["reason"], m["bank"]) for m in hard["masked"]} == {
        ("tracking", "action_not_allowed_for_intent", "support"),
        ("teleport", "unknown_action", "support"),
    }
    kept = {r["id"] for r in hard["ranking"]}
    assert {"cancel", "refund", "reset-link"} <= kept and not kept & {"tracking", "teleport"}
    flagged = {r["id"]: r["mask_reason"] for r in soft["ranking"] if r["masked"]}
    assert flagged == {"tracking": "action_not_allowed_for_intent", "teleport": "unknown_action"}


async def test_the_answer_abstains_when_no_bank_response_reaches_the_threshold(
    bundle: Path, bank_file: Path
) -> None:
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        await wait_banks_ready(client)
        answer = (await client.post("/rank", json={**PASSWORD, "min_score": 1.0})).json()
    assert (
        answer["abstain"] is True
        and answer["threshold"] == 1.0
        and len(answer["ranking"]) == len(SUPPORT_BANK)
    )


async def test_banks_are_listed_with_their_size_encoder_and_state(bundle: Path, bank_file: Path) -> None:
    other = write_bank(bank_file.parent / "chat.jsonl", [{"id": "hi", "text": "Hi there!"}])
    app = create_app(settings(bundle, f"support={bank_file}", f"chat={other}"))
    async with serve_in_process(app) as client:
        listed = (await wait_banks_ready(client))["data"]
        metrics = (await client.get("/metrics")).text
    assert [b["name"] for b in listed] == ["support", "chat"]
    support = listed[0]
    assert (support["file"], support["size"], support["embedded"]) == ("support.jsonl", 8, 8)
    assert support["state"] == "ready" and support["ready"] is True and support["error"] is None
    encoder = load_retriever(bundle / "retriever").name
    assert support["encoder"].startswith(f"{encoder} (int8") and support["from_cache"] is False
    assert support["memory_bytes"] == 8 * (384 + 4)
    assert support["loaded_at"] <= support["embedded_at"]
    assert 'ranker_bank_ready{bank="support"} 1.0' in metrics
    assert 'ranker_bank_embedded_responses{bank="chat"} 1.0' in metrics
    assert 'ranker_bank_load_seconds{bank="support",source="computed"}' in metrics


async def test_a_service_without_banks_lists_none(fake_bundle: Path) -> None:
    async with serve_in_process(create_app(Settings(backend="fake", model=fake_bundle))) as client:
        listed = (await client.get("/v1/banks")).json()
        response = await client.post("/rank", json={"context": "hi", "bank": "support"})
    assert listed == {"object": "list", "data": []}
    assert_error(response, 422, "unknown_bank", "bank", "'support'", "--bank")


async def test_an_unknown_bank_is_a_422_naming_the_field(bundle: Path, bank_file: Path) -> None:
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        await wait_banks_ready(client)
        response = await client.post("/rank", json={**PASSWORD, "bank": "faq"})
    assert_error(response, 422, "unknown_bank", "bank: unknown bank 'faq'", "served: 'support'")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"context": "hi"}, ("candidates", "no bank")),
        ({"context": "hi", "candidates": []}, ("candidates", "no bank")),
        ({"context": "hi", "candidates": ["a"], "retrieve_k": 2}, ("retrieve_k", "needs a bank")),
        ({**PASSWORD, "retrieve_k": 0}, ("retrieve_k", "greater than or equal to 1")),
        ({**PASSWORD, "retrieve_k": "5"}, ("retrieve_k",)),
        ({**PASSWORD, "retrieve_k": 3, "candidates": ["a", "b", "c"]}, ("retrieve_k 3", "limit of 5")),
        ({**PASSWORD, "bank": " "}, ("bank",)),
    ],
)  # fmt: skip
async def test_a_bad_bank_request_is_a_422_naming_the_field(
    bundle: Path, bank_file: Path, body: dict, words: tuple[str, ...]
) -> None:
    app = create_app(settings(bundle, f"support={bank_file}", limits={"max_candidates": 5}))
    async with serve_in_process(app) as client:
        await wait_banks_ready(client)
        response = await client.post("/rank", json=body)
    assert_error(response, 422, "invalid_input", *words)


async def test_readiness_waits_for_every_bank(
    bundle: Path, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    embed_all = TextEncoder.embed_all

    def held(self: TextEncoder, *args, **kwargs):
        release.wait(30)  # the embedding thread waits; the event loop must not
        return embed_all(self, *args, **kwargs)

    monkeypatch.setattr(TextEncoder, "embed_all", held)
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        not_ready = await client.get("/readyz")
        ranked = await client.post("/rank", json=PASSWORD)
        plain = await client.post("/rank", json={"context": "hi", "candidates": ["hello"]})
        listed = (await client.get("/v1/banks")).json()["data"][0]
        release.set()
        await wait_banks_ready(client)
        after = await client.post("/rank", json=PASSWORD)
    assert_error(not_ready, 503, "not_ready", "bank 'support' is embedding (0 of 8 responses)")
    assert_error(ranked, 503, "not_ready", "bank: bank 'support' is embedding")
    assert plain.status_code == 200  # requests without a bank are served meanwhile
    assert (listed["state"], listed["ready"], listed["embedded_at"]) == ("embedding", False, None)
    assert after.status_code == 200


async def test_a_bank_that_fails_to_embed_keeps_the_service_not_ready_and_says_why(
    bundle: Path, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: TextEncoder, *args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(TextEncoder, "embed_all", broken)
    async with serve_in_process(create_app(settings(bundle, f"support={bank_file}"))) as client:
        for _ in range(200):
            listed = (await client.get("/v1/banks")).json()["data"][0]
            if listed["state"] == "failed":
                break
            await asyncio.sleep(0.02)
        ready = await client.get("/readyz")
    assert listed["error"] == "RuntimeError: disk on fire"
    assert_error(ready, 503, "not_ready", "bank 'support' failed: RuntimeError: disk on fire")


async def test_a_bank_without_a_retrieval_encoder_stops_the_start(tmp_path: Path, bank_file: Path) -> None:
    app = create_app(settings(write_fake_bundle(tmp_path / "plain"), f"support={bank_file}"))
    with pytest.raises(BankError, match="has none .*ranker export-retriever"):
        async with serve_in_process(app):
            pass
