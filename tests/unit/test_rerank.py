"""Rerank routes (Cohere v2, Jina/vLLM v1) and guideline discovery, on the fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process, write_fake_bundle
from test_logit_cache import prior_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

QUERY = "could you make some coffee"
DOCUMENTS = ["sure", "no", "i will make tea", "one moment please"]


def app_for(bundle: Path, **overrides):
    return create_app(Settings(backend="fake", model=bundle, **overrides))


async def test_v2_rerank_scores_equal_rank_scores_best_first(fake_bundle: Path) -> None:
    async with serve_in_process(app_for(fake_bundle)) as client:
        rank = (await client.post("/rank", json={"context": QUERY, "candidates": DOCUMENTS})).json()
        rerank = await client.post(
            "/v2/rerank", json={"model": "tiny-fake", "query": QUERY, "documents": DOCUMENTS}
        )
    assert rerank.status_code == 200, rerank.text
    body = rerank.json()
    by_index = {r["index"]: r["relevance_score"] for r in body["results"]}
    assert by_index == {int(r["id"]): r["score"] for r in rank["ranking"]}
    scores = [r["relevance_score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert body["meta"]["api_version"]["version"] == "2" and body["id"]
    assert body["model"] == "tiny-fake@1" and body["abstain"] == rank["abstain"]


async def test_top_n_object_documents_and_context_extras(fake_bundle: Path) -> None:
    request = {
        "query": QUERY,
        "documents": [{"text": d} for d in DOCUMENTS],
        "top_n": 2,
        "context": [{"speaker": "agent", "text": "hello"}],
    }
    async with serve_in_process(app_for(fake_bundle)) as client:
        body = (await client.post("/v2/rerank", json=request)).json()
        rank = await client.post(
            "/rank",
            json={"context": [{"speaker": "agent", "text": "hello"}, {"speaker": "user", "text": QUERY}],
                  "candidates": DOCUMENTS, "top_k": 2},
        )  # fmt: skip
    assert [r["index"] for r in body["results"]] == [int(r["id"]) for r in rank.json()["ranking"]]
    assert len(body["results"]) == 2


async def test_v1_rerank_gives_documents_only_when_asked_and_counts_tokens(fake_bundle: Path) -> None:
    async with serve_in_process(app_for(fake_bundle)) as client:
        bare = (await client.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})).json()
        full = (
            await client.post(
                "/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS, "return_documents": True}
            )
        ).json()
        cut = (
            await client.post(
                "/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS, "max_tokens_per_doc": 1}
            )
        ).json()
    assert all(r["document"]["text"] == DOCUMENTS[r["index"]] for r in full["results"])
    assert all("document" not in r for r in bare["results"])
    assert full["usage"]["total_tokens"] > cut["usage"]["total_tokens"] > 0
    assert full["model"] == "tiny-fake@1"


async def test_v2_rerank_takes_return_documents_as_litellm_sends_it(fake_bundle: Path) -> None:
    request = {"model": "tiny-fake", "query": QUERY, "documents": DOCUMENTS, "top_n": 2}
    async with serve_in_process(app_for(fake_bundle)) as client:
        asked = await client.post("/v2/rerank", json={**request, "return_documents": True})
        plain = (await client.post("/v2/rerank", json=request)).json()
    assert asked.status_code == 200, asked.text
    results = asked.json()["results"]
    assert [r["document"]["text"] for r in results] == [DOCUMENTS[r["index"]] for r in results]
    assert [r["index"] for r in results] == [r["index"] for r in plain["results"]]
    assert all("document" not in r for r in plain["results"])


async def test_a_repeated_request_reports_the_same_total_tokens(fake_bundle: Path) -> None:
    """``total_tokens`` counts the request's input whether or not the logit cache answered it;
    ``computed_tokens`` what the backend ran (one-turn requests, per-pair bundle: the same pairs)."""
    request = {"query": QUERY, "documents": DOCUMENTS}
    async with serve_in_process(app_for(fake_bundle)) as client:
        first = (await client.post("/v1/rerank", json=request)).json()["usage"]
        again = (await client.post("/v1/rerank", json=request)).json()["usage"]
        some = (await client.post("/v1/rerank", json={**request, "documents": [*DOCUMENTS, "yes"]})).json()
    assert first["total_tokens"] == first["computed_tokens"] > 0
    assert again == {"total_tokens": first["total_tokens"], "computed_tokens": 0}
    new_pair = some["usage"]["computed_tokens"]
    assert 0 < new_pair < first["total_tokens"]
    assert some["usage"]["total_tokens"] == first["total_tokens"] + new_pair


async def test_total_tokens_count_the_full_context_pairs_of_a_multi_turn_request(tmp_path: Path) -> None:
    """Its last-turn and prior views are work, not input: in computed_tokens only."""
    bundle = prior_bundle(tmp_path / "b")
    request = {"query": QUERY, "documents": DOCUMENTS[:2], "context": [{"speaker": "agent", "text": "hello"}]}
    async with serve_in_process(app_for(bundle)) as client:
        first = (await client.post("/v1/rerank", json=request)).json()["usage"]
        again = (await client.post("/v1/rerank", json=request)).json()["usage"]
    async with serve_in_process(app_for(write_fake_bundle(tmp_path / "one"))) as client:
        one_view = (await client.post("/v1/rerank", json=request)).json()["usage"]
    assert first["total_tokens"] == one_view["total_tokens"] == one_view["computed_tokens"]
    assert first["computed_tokens"] > first["total_tokens"]
    assert again == {"total_tokens": first["total_tokens"], "computed_tokens": 0}


async def test_rerank_masks_documents_by_action_for_an_intent(fake_bundle: Path) -> None:
    documents = [{"text": "sure", "action": "cancel-order"}, {"text": "one moment please"}]
    async with serve_in_process(app_for(fake_bundle)) as client:
        intents = (await client.get("/v1/guidelines")).json()["intents"]
        intent = next(i for i, actions in intents.items() if "cancel-order" not in actions)
        body = (
            await client.post("/v2/rerank", json={"query": QUERY, "documents": documents, "intent": intent})
        ).json()
    assert [r["index"] for r in body["results"]] == [1]
    assert body["masked"][0]["index"] == 0


async def test_a_document_repeating_a_turn_is_masked_without_an_action_as_the_schema_allows(
    fake_bundle: Path,
) -> None:
    app = app_for(fake_bundle)
    async with serve_in_process(app) as client:
        masked_v2 = (await client.post("/v2/rerank", json={"documents": [QUERY], "query": QUERY})).json()
        masked_v1 = (await client.post("/v1/rerank", json={"documents": [QUERY], "query": QUERY})).json()
        schema = (await client.get("/openapi.json")).json()["components"]["schemas"]["MaskedDocumentOut"]
    # Null fields are left out of rerank answers, so the schema may not require one that can be null.
    assert masked_v2["masked"] == masked_v1["masked"] == [{"index": 0, "reason": "repeats_a_turn"}]
    assert set(schema["required"]) == {"index", "reason"}
    assert masked_v2["results"] == [] and masked_v1["results"] == []


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({"query": QUERY, "documents": []}, "documents"),
        ({"query": "\u200b", "documents": DOCUMENTS}, "query"),
        ({"query": QUERY, "documents": DOCUMENTS, "top_n": True}, "top_n"),
        ({"query": QUERY, "documents": DOCUMENTS, "top_n": 1.5}, "top_n"),
        ({"query": QUERY, "documents": DOCUMENTS, "max_tokens_per_doc": "8"}, "max_tokens_per_doc"),
        ({"query": QUERY, "documents": DOCUMENTS, "model": "rerank-v3.5"}, "model"),
        ({"query": QUERY, "documents": DOCUMENTS, "relevant_spans": {}}, "relevant_spans"),
        ({"query": QUERY, "documents": DOCUMENTS, "intent": "nope"}, "intent"),
    ],
)
async def test_bad_rerank_requests_are_a_422_naming_the_field(
    fake_bundle: Path, request_body: dict, field: str
) -> None:
    async with serve_in_process(app_for(fake_bundle)) as client:
        response = await client.post("/v2/rerank", json=request_body)
    assert response.status_code == 422, response.text
    assert field in response.json()["error"]["message"]


async def test_rerank_takes_the_configured_limits(fake_bundle: Path) -> None:
    async with serve_in_process(app_for(fake_bundle, limits={"max_candidates": 2})) as client:
        response = await client.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS})
    assert response.status_code == 422 and "documents" in response.json()["error"]["message"]


async def test_guidelines_are_discoverable(fake_bundle: Path, abcd_kb: Path) -> None:
    import json

    async with serve_in_process(app_for(fake_bundle, guidelines=abcd_kb)) as client:
        body = (await client.get("/v1/guidelines")).json()
    expected = json.loads(abcd_kb.read_text())
    assert body["source"] == "kb.json"
    assert body["intents"] == {intent: sorted(actions) for intent, actions in expected.items()}
