"""OpenTelemetry spans of a ranking request, caught by an in-memory exporter."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import serve_in_process, write_fake_bundle
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dialogue_ranker.serving import tracing
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

SECRET_WORDS = ("coffee", "kitchen", "sister")
BODY = {
    "context": "could you make some coffee",
    "situations": ["the kitchen is open", "my sister is here"],
    "candidates": ["sure", "no", "i will make tea"],
}


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def test_a_request_is_traced_from_server_span_to_backend_calls(tmp_path: Path, spans) -> None:
    provider, exporter = spans
    bundle = write_fake_bundle(tmp_path / "b")
    app = create_app(Settings(backend="fake", model=bundle), tracer_provider=provider)
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with serve_in_process(app) as client:
        response = await client.post("/rank", json=BODY, headers={"traceparent": traceparent})
    assert response.status_code == 200
    finished = exporter.get_finished_spans()
    by_name: dict[str, list] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    server = by_name["POST /rank"][0]
    assert server.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C, (
        "the incoming traceparent is continued"
    )
    assert server.attributes["http.response.status_code"] == 200
    request_spans = [s for s in finished if s.context.trace_id == server.context.trace_id]
    names = {s.name for s in request_spans}
    assert {"encode sequences", "score", "queue wait"} <= names
    encode = by_name["encode sequences"][0]
    # A per-pair bundle: one sequence per candidate.
    assert encode.attributes[tracing.SEQUENCES] == encode.attributes[tracing.CANDIDATES] == 3
    assert encode.attributes[tracing.TOKENS] > 0
    calls = by_name["backend call"]
    assert sum(s.attributes[tracing.SEQUENCES] for s in calls) == 3
    assert sum(s.attributes[tracing.CANDIDATES] for s in calls) == 3
    # A backend call serves several requests: it links to them instead of being a child of one.
    assert all(any(link.context.trace_id == server.context.trace_id for link in s.links) for s in calls)
    for span in finished:
        text = " ".join(str(v) for v in span.attributes.values())
        assert not any(word in text for word in SECRET_WORDS), (span.name, span.attributes)


def test_tracing_is_off_unless_the_standard_variables_ask_for_it() -> None:
    assert not tracing.tracing_requested({})
    assert tracing.tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not tracing.tracing_requested({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert tracing.provider_from_env({}) is None
