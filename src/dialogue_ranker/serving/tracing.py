"""Optional OpenTelemetry traces, off unless the standard ``OTEL_*`` variables ask for them.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
set, or ``OTEL_TRACES_EXPORTER`` names ``otlp`` or ``console`` (and ``OTEL_SDK_DISABLED`` is not
``true``); the exporter then reads its address, headers, protocol and the service's resource
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) from the same variables, as every OTel SDK
does. Off, the tracer is OpenTelemetry's no-op one.

Spans of one ranking request: the server span (``POST /rank``..., continuing an incoming W3C
``traceparent``), ``encode sequences``, ``queue wait`` and ``score``; a ``backend call`` span
per call links to the requests whose sequences it ran (one call serves several requests, so it
cannot be a child of one). Counts say ``sequences`` (what the runtime computes) and
``candidates`` (what the client sent: a logit each) apart. Attributes are counts, names and statuses:
never request text, ids or keys.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

SERVICE_NAME = "ranking-service"
INSTRUMENTATION = "ranking-service"

# Attribute names (OpenTelemetry semantic conventions where one exists).
#: What a runtime computes: one sequence holds one candidate (a pair) or many (a shared prefix).
SEQUENCES = "ranker.sequences"
TOKENS = "ranker.tokens"
PADDED_TOKENS = "ranker.padded_tokens"
MODEL = "ranker.model"
BACKEND = "ranker.backend"
CANDIDATES = "ranker.candidates"


def tracing_requested(env: Mapping[str, str] = os.environ) -> bool:
    """True when the standard variables configure a trace exporter."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter in {"otlp", "console"}:
        return True
    if exporter == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def provider_from_env(env: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """A tracer provider exporting as the variables say, or None when tracing is not requested."""
    if not tracing_requested(env):
        return None
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    # Resource.create merges OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over this default.
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def tracer_of(provider: trace.TracerProvider | None) -> trace.Tracer:
    """The service's tracer from ``provider``, or a no-op tracer."""
    if provider is None:
        return trace.NoOpTracer()
    return provider.get_tracer(INSTRUMENTATION)
