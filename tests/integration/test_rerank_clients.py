"""Real rerank clients against a real server: the official ``cohere`` SDK and a Jina-shaped request."""

from __future__ import annotations

import json
from collections.abc import Iterator

import cohere
import httpx
import pytest
from helpers import launch_service, real_model_dir, stop_process, wait_ready, write_fake_bundle

pytestmark = pytest.mark.integration

API_KEY = "rk-5c1e0a9b7d3f4e21"
QUERY = "It is so hot in here, can you help?"
DOCUMENTS = [
    "Shall I open the window for you?",
    "Pizza is great.",
    "I do not know.",
    "I can turn on the fan in the closet for you.",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A service (the real model when present, else the fake) with an API key; its URL and model name."""
    tmp = tmp_path_factory.mktemp("rerank")
    model = real_model_dir()
    args = (
        ["--model", str(model)]
        if model
        else ["--backend", "fake", "--model", str(write_fake_bundle(tmp / "b"))]
    )
    (tmp / "keys").write_text(API_KEY + "\n")
    process, url = launch_service([*args, "--auth.api-keys-file", str(tmp / "keys")], cwd=tmp)
    try:
        wait_ready(url, process)
        name = json.loads(((model or tmp / "b") / "metadata.json").read_text())["name"]
        yield url, name
    finally:
        stop_process(process)


def rank_scores(url: str, query: str = QUERY) -> dict[int, float]:
    response = httpx.post(
        f"{url}/rank",
        json={"context": query, "candidates": DOCUMENTS},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert response.status_code == 200, response.text
    return {int(r["id"]): r["score"] for r in response.json()["ranking"]}


def test_the_cohere_sdk_reranks_with_the_services_calibrated_scores(served: tuple[str, str]) -> None:
    url, name = served
    client = cohere.ClientV2(api_key=API_KEY, base_url=url)
    response = client.rerank(model=name, query=QUERY, documents=DOCUMENTS)
    scores = [r.relevance_score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    expected = rank_scores(url)
    assert {r.index: r.relevance_score for r in response.results} == pytest.approx(expected, abs=1e-6)
    top = client.rerank(model=name, query=QUERY, documents=DOCUMENTS, top_n=2)
    assert [r.index for r in top.results] == [r.index for r in response.results[:2]]


def test_the_cohere_sdk_gets_the_services_errors(served: tuple[str, str]) -> None:
    url, name = served
    with pytest.raises(cohere.UnauthorizedError):
        cohere.ClientV2(api_key="wrong", base_url=url).rerank(model=name, query=QUERY, documents=DOCUMENTS)
    with pytest.raises(cohere.UnprocessableEntityError) as error:
        cohere.ClientV2(api_key=API_KEY, base_url=url).rerank(
            model="rerank-v3.5", query=QUERY, documents=DOCUMENTS
        )
    assert (
        error.value.body["error"]["type"] == "invalid_input"
        and "model" in error.value.body["error"]["message"]
    )


def test_a_jina_shaped_request_gets_documents_and_usage(served: tuple[str, str]) -> None:
    """``usage`` counts the tokens the request computed: none when the logit cache answers it."""
    url, name = served
    query = "It is hot in here, could you help me?"  # a query no other test sends: nothing is kept
    request = {"model": name, "query": query, "documents": DOCUMENTS, "top_n": 3, "return_documents": True}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    response = httpx.post(f"{url}/v1/rerank", json=request, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["results"]) == 3 and body["usage"]["total_tokens"] > 0
    expected = rank_scores(url, query)
    for result in body["results"]:
        assert result["document"]["text"] == DOCUMENTS[result["index"]]
        assert result["relevance_score"] == pytest.approx(expected[result["index"]], abs=1e-6)
    again = httpx.post(f"{url}/v1/rerank", json=request, headers=headers).json()
    assert again["results"] == body["results"] and again["usage"]["total_tokens"] == 0
