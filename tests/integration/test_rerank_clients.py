"""Real rerank clients against a real server on loopback: the official ``cohere`` SDK (v2 and v1
clients), LiteLLM (``litellm.rerank`` and ``litellm.arerank``), LangChain's ``CohereRerank``, and a
Jina-shaped request.

No client may reach past loopback: LiteLLM fetches its model cost map from the internet at import
unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set, so the module sets it, and every name lookup or
connection to another host fails the module.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import cohere
import httpx
import pytest
from helpers import launch_service, real_model_dir, stop_process, wait_ready, write_fake_bundle

pytestmark = pytest.mark.integration
logger = logging.getLogger(__name__)

API_KEY = "rk-5c1e0a9b7d3f4e21"
QUERY = "It is so hot in here, can you help?"
DOCUMENTS = [
    "Shall I open the window for you?",
    "Pizza is great.",
    "I do not know.",
    "I can turn on the fan in the closet for you.",
]


#: The model name Cohere clients default to, served here as an alias of the bundle.
ALIAS = "rerank-v3.5"


def is_loopback(host: Any) -> bool:
    return host in ("localhost", "::1") or str(host).startswith("127.")


@contextmanager
def loopback_only() -> Iterator[list[Any]]:
    """Name lookups of, and connections to, any host but loopback fail and are listed."""
    attempts: list[Any] = []
    lookup, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_loopback(host):
            attempts.append(host)
            raise socket.gaierror(f"no network in the suite: {host}")
        return lookup(host, *args, **kwargs)

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address[0]):
            attempts.append(address)
            raise OSError(f"no network in the suite: {address}")
        connect(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", guarded_lookup)
        patch.setattr(socket.socket, "connect", guarded_connect)
        yield attempts


@pytest.fixture(scope="module", autouse=True)
def offline() -> Iterator[None]:
    with loopback_only() as attempts:
        yield
    assert attempts == [], f"a client reached past loopback: {attempts}"


@pytest.fixture(scope="module")
def litellm(offline: None) -> ModuleType:
    """The real ``litellm``, imported with its bundled cost map (no download at import)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm
    return litellm


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A service (the real model when present, else the fake) with an API key and the alias ``rerank-v3.5``
    of its model; its URL and model name."""
    tmp = tmp_path_factory.mktemp("rerank")
    model = real_model_dir()
    bundle = model or write_fake_bundle(tmp / "b")
    args = ["--model", str(bundle)] if model else ["--backend", "fake", "--model", str(bundle)]
    name = json.loads((bundle / "metadata.json").read_text())["name"]
    (tmp / "keys").write_text(API_KEY + "\n")
    args += ["--auth.api-keys-file", str(tmp / "keys"), "--model-alias", f"{ALIAS}={name}"]
    process, url = launch_service(args, cwd=tmp)
    try:
        wait_ready(url, process)
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
            model="rerank-english-v3.0", query=QUERY, documents=DOCUMENTS
        )
    assert (
        error.value.body["error"]["type"] == "invalid_input"
        and "model" in error.value.body["error"]["message"]
    )


def test_the_cohere_v1_client_calls_v1_rerank_and_gets_documents_when_asked(served: tuple[str, str]) -> None:
    url, name = served
    client = cohere.Client(api_key=API_KEY, base_url=url)
    asked = client.rerank(model=name, query=QUERY, documents=DOCUMENTS, top_n=2, return_documents=True)
    plain = client.rerank(model=ALIAS, query=QUERY, documents=DOCUMENTS, top_n=2)
    expected = rank_scores(url)
    assert [r.document.text for r in asked.results] == [DOCUMENTS[r.index] for r in asked.results]
    assert [r.index for r in plain.results] == [r.index for r in asked.results]
    assert all(r.document is None for r in plain.results)
    assert {r.index: r.relevance_score for r in plain.results} == pytest.approx(
        {r.index: expected[r.index] for r in plain.results}, abs=1e-6
    )


def test_a_jina_shaped_request_gets_documents_and_usage(served: tuple[str, str]) -> None:
    """``usage.total_tokens`` counts the request's input, kept logits or not; ``computed_tokens`` the work."""
    url, name = served
    query = "It is hot in here, could you help me?"  # a query no other test sends: nothing is kept
    request = {"model": name, "query": query, "documents": DOCUMENTS, "top_n": 3, "return_documents": True}
    headers = {"Authorization": f"Bearer {API_KEY}"}
    response = httpx.post(f"{url}/v1/rerank", json=request, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["results"]) == 3 and body["usage"]["total_tokens"] > 0
    assert body["usage"]["computed_tokens"] > 0
    expected = rank_scores(url, query)
    for result in body["results"]:
        assert result["document"]["text"] == DOCUMENTS[result["index"]]
        assert result["relevance_score"] == pytest.approx(expected[result["index"]], abs=1e-6)
    again = httpx.post(f"{url}/v1/rerank", json=request, headers=headers).json()
    assert again["results"] == body["results"]
    assert again["usage"] == {"total_tokens": body["usage"]["total_tokens"], "computed_tokens": 0}
    bare = httpx.post(f"{url}/v1/rerank", json={**request, "return_documents": False}, headers=headers).json()
    assert all("document" not in r for r in bare["results"])


def test_litellm_rerank_calls_v2_rerank_and_gets_the_documents_it_asks_for(
    served: tuple[str, str], litellm: ModuleType
) -> None:
    """LiteLLM's documented call: it sends ``"return_documents": true`` to ``/v2/rerank``."""
    url, name = served
    response = litellm.rerank(
        model=f"cohere/{name}", api_base=url, api_key=API_KEY, query=QUERY, documents=DOCUMENTS, top_n=2
    )
    logger.info("litellm.rerank answered %s", json.dumps(response.model_dump(), default=str))
    expected = rank_scores(url)
    best = sorted(expected, key=lambda i: -expected[i])[:2]
    assert [r["index"] for r in response.results] == best
    assert [r["relevance_score"] for r in response.results] == pytest.approx(
        [expected[i] for i in best], abs=1e-6
    )
    assert [r["document"]["text"] for r in response.results] == [DOCUMENTS[i] for i in best]
    assert response.meta["api_version"]["version"] == "2"


def test_litellm_arerank_reaches_the_alias(served: tuple[str, str], litellm: ModuleType) -> None:
    url, _ = served
    response = asyncio.run(
        litellm.arerank(
            model=f"cohere/{ALIAS}", api_base=url, api_key=API_KEY, query=QUERY, documents=DOCUMENTS, top_n=3
        )
    )
    expected = rank_scores(url)
    assert len(response.results) == 3
    assert {r["index"]: r["relevance_score"] for r in response.results} == pytest.approx(
        {r["index"]: expected[r["index"]] for r in response.results}, abs=1e-6
    )
    with pytest.raises(litellm.BadRequestError, match="model: unknown model 'rerank-english-v3.0'") as error:
        litellm.rerank(
            model="cohere/rerank-english-v3.0",
            api_base=url,
            api_key=API_KEY,
            query=QUERY,
            documents=DOCUMENTS,
        )
    assert error.value.status_code == 422


def test_langchain_cohere_rerank_compresses_documents_by_the_services_scores(
    served: tuple[str, str],
) -> None:
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    url, _ = served
    reranker = CohereRerank(cohere_api_key=API_KEY, base_url=url, model=ALIAS, top_n=2)
    kept = reranker.compress_documents(
        [Document(page_content=d, metadata={"n": i}) for i, d in enumerate(DOCUMENTS)], QUERY
    )
    expected = rank_scores(url)
    best = sorted(expected, key=lambda i: -expected[i])[:2]
    assert [d.metadata["n"] for d in kept] == best
    assert [d.metadata["relevance_score"] for d in kept] == pytest.approx(
        [expected[i] for i in best], abs=1e-6
    )
