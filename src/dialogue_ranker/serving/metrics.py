"""Every Prometheus metric of the service, prefix ``ranker_``, on a registry of its own.

Each app gets its own :class:`Metrics` (and so its own ``CollectorRegistry``), so several apps
in one process (tests) never clash. Label values come from small fixed sets: HTTP status,
backend name, served model name, mask reason, the configured bank names, and generator names
capped to the configured list (anything else is ``other``). Never request text or ids.

Two words are kept apart: a *candidate* is what a client sent (one logit each); a *sequence* is
what a runtime computes (a (context, candidate) pair, or a shared-prefix sequence holding many
candidates). Backend calls are recorded through one recorder
(:class:`dialogue_ranker.serving.batching.call_metrics.CallRecorder`) on every batching path.

Deprecated (removed in the next release; see docs/changelog.md): the ``*_pairs*`` names, kept
as aliases with their old ``role`` label (always ``ranker``), recorded beside their new names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

PREFIX = "ranker"
OTHER_GENERATOR = "other"
UNKNOWN_GENERATOR = "none"

# Explicit buckets, in base units. Latency buckets cover sub-millisecond batches up to the 10 s
# request timeout; pair counts follow powers of two up to the largest batch setting.
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
WAIT_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0)
COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
RATIO_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
#: Paths timed under their own ``route`` label; any other path is ``other`` (label values stay few).
ROUTES = frozenset(
    {
        "/rank",
        "/v2/rerank",
        "/v1/rerank",
        "/v1/guidelines",
        "/v1/banks",
        "/v1/feedback",
        "/healthz",
        "/readyz",
        "/metrics",
        "/docs",
        "/openapi.json",
    }
)
SCORE_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST


#: Routes with a path parameter: the pattern of their paths -> their label (the route's template).
TEMPLATED_ROUTES = (
    (re.compile(r"/v1/banks/[^/]+"), "/v1/banks/{name}"),
    (re.compile(r"/v1/banks/[^/]+/reload"), "/v1/banks/{name}/reload"),
)


def route_label(path: str) -> str:
    """The ``route`` label value of a request path: the known route (its template), else ``other``."""
    if path in ROUTES:
        return path
    return next((label for pattern, label in TEMPLATED_ROUTES if pattern.fullmatch(path)), "other")


class Metrics:
    """The service's metric objects, registered on one registry."""

    def __init__(self, *, generators: Iterable[str] = (), registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.generators = frozenset(generators)
        r = self.registry
        p = PREFIX
        self.request_duration = Histogram(
            f"{p}_request_duration_seconds",
            "HTTP request duration by route and status code.",
            ["route", "status"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.requests_in_flight = Gauge(f"{p}_requests_in_flight", "HTTP requests being served.", registry=r)
        self.errors = Counter(f"{p}_errors_total", "Error responses by error type.", ["type"], registry=r)
        self.candidates = Histogram(
            f"{p}_request_candidates",
            "Candidates per ranking request.",
            ["model"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.batch_sequences = Histogram(
            f"{p}_batch_sequences",
            "Sequences per batch the gateway formed (with a remote backend: per call), a sequence being a "
            "pair or a shared-prefix sequence holding many candidates.",
            ["model"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.batch_candidates = Histogram(
            f"{p}_batch_candidates",
            "Candidates per batch the gateway formed (with a remote backend: per call), one logit each.",
            ["model"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.logit_cache = Counter(
            f"{p}_logit_cache_lookups_total",
            "Candidate logits a ranking request needed, by whether the logit cache held them (hit) or "
            "they were computed (miss).",
            ["model", "result"],
            registry=r,
        )
        self.logit_cache_entries = Gauge(
            f"{p}_logit_cache_entries",
            "Candidate logits the logit cache holds (ranking.logit_cache_entries at most).",
            ["model"],
            registry=r,
        )
        self.computed_sequences = Counter(
            f"{p}_computed_sequences_total",
            "Sequences sent to backend calls (isolation retries included).",
            ["model"],
            registry=r,
        )
        self.computed_candidates = Counter(
            f"{p}_computed_candidates_total",
            "Candidates whose logits backend calls computed (isolation retries included).",
            ["model"],
            registry=r,
        )
        self.batch_tokens = Histogram(
            f"{p}_batch_tokens",
            "Tokens per backend call, padding included.",
            ["model"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.padding_ratio = Histogram(
            f"{p}_batch_padding_ratio",
            "Share of a backend call's tokens that are padding.",
            ["model"],
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            f"{p}_queue_wait_seconds",
            "Time a sequence waits before its batch starts.",
            ["model"],
            buckets=WAIT_BUCKETS_S,
            registry=r,
        )
        self.queue_sequences = Gauge(
            f"{p}_queue_sequences",
            "Sequences waiting for a batch (with a remote backend: in flight to it).",
            ["model"],
            registry=r,
        )
        self.batch_failures = Counter(
            f"{p}_batch_failures_total",
            "Backend calls that failed (isolation retries included).",
            ["model"],
            registry=r,
        )
        self.failed_sequences = Counter(
            f"{p}_failed_sequences_total",
            "Sequences that failed even in a backend call of their own (with a remote backend: every "
            "sequence of a failed call).",
            ["model"],
            registry=r,
        )
        self.dropped_sequences = Counter(
            f"{p}_dropped_sequences_total",
            "Queued sequences never computed: their request was cancelled (client gone) or expired.",
            ["model", "reason"],
            registry=r,
        )
        self.backlog = Gauge(
            f"{p}_backlog_seconds",
            "Estimated backend seconds of the requests admitted and not yet answered (admission).",
            ["model"],
            registry=r,
        )
        self.breaker_open = Gauge(
            f"{p}_circuit_open",
            "1 while the backend's circuit breaker is open.",
            ["model"],
            registry=r,
        )
        self.connections = Gauge(f"{p}_open_connections", "Open HTTP connections.", registry=r)
        self.client_disconnects = Counter(
            f"{p}_client_disconnects_total",
            "Requests cancelled because the client went away before the response.",
            registry=r,
        )
        self.tokenization_duration = Histogram(
            f"{p}_tokenization_duration_seconds",
            "Encoding time per request (its candidates into sequences).",
            ["backend", "model"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.inference_duration = Histogram(
            f"{p}_inference_duration_seconds",
            "Backend time per call (padding included).",
            ["backend", "model"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.masked = Counter(
            f"{p}_masked_candidates_total", "Masked candidates by reason.", ["model", "reason"], registry=r
        )
        self.abstentions = Counter(
            f"{p}_abstentions_total",
            "Requests where no candidate reached the threshold.",
            ["model"],
            registry=r,
        )
        self.top1 = Counter(
            f"{p}_top1_selections_total",
            "Top-ranked candidates (not abstained) by generator.",
            ["model", "generator"],
            registry=r,
        )
        self.scores = Histogram(
            f"{p}_candidate_score",
            "Calibrated candidate scores by generator.",
            ["model", "generator"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.bank_responses = Gauge(
            f"{p}_bank_responses", "Responses in each bank (--bank).", ["bank"], registry=r
        )
        self.bank_embedded = Gauge(
            f"{p}_bank_embedded_responses",
            "Responses of each bank whose vectors are ready (read from the cache or computed); equal to "
            "ranker_bank_responses once the bank is ready.",
            ["bank"],
            registry=r,
        )
        self.bank_ready = Gauge(
            f"{p}_bank_ready",
            "1 once a bank's vectors are in memory and requests may name it.",
            ["bank"],
            registry=r,
        )
        self.bank_load = Gauge(
            f"{p}_bank_load_seconds",
            "Seconds a bank's vectors took at start, by source: `cache` (every vector read from disk) or "
            "`computed` (some texts embedded).",
            ["bank", "source"],
            registry=r,
        )
        self.bank_version = Info(
            f"{p}_bank_version",
            "The version each bank serves: the SHA-256 of its file's records (id, text, generator, action).",
            ["bank"],
            registry=r,
        )
        self.bank_loads = Counter(
            f"{p}_bank_loads_total",
            "Loads of a bank's file by trigger (`start`, `api`: POST /v1/banks/{name}/reload, `signal`: "
            "SIGHUP, `watch`: banks.watch-interval-s) and outcome (`ok`, or `failed`: the old version "
            "stays served).",
            ["bank", "trigger", "outcome"],
            registry=r,
        )
        self.bank_last_load = Gauge(
            f"{p}_bank_last_load_timestamp_seconds",
            "When a bank's file was last loaded (at start or by a reload), by outcome: Unix time.",
            ["bank", "outcome"],
            registry=r,
        )
        self.bank_embedded_texts = Counter(
            f"{p}_bank_embedded_texts_total",
            "Bank texts embedded by the retrieval encoder (at start and by reloads): the new texts only.",
            ["bank"],
            registry=r,
        )
        self.bank_reused_texts = Counter(
            f"{p}_bank_reused_texts_total",
            "Bank responses whose vector was reused by its text's digest (from memory or the cache) rather "
            "than embedded, at start and by reloads.",
            ["bank"],
            registry=r,
        )
        self.retrieval_duration = Histogram(
            f"{p}_retrieval_duration_seconds",
            "A bank request's retrieval by stage: `embed` (the request's query) and `search` (every "
            "response scored, the nearest kept).",
            ["bank", "stage"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.log_lines = Counter(
            f"{p}_log_lines_total",
            "Lines written to the request and feedback logs (--logs.dir), by kind: `requests` or `feedback`.",
            ["kind"],
            registry=r,
        )
        self.log_lines_dropped = Counter(
            f"{p}_log_lines_dropped_total",
            "Log lines not written, by kind and reason: `queue_full` (the writer was behind; the request "
            "was answered unlogged) or `write_error` (the file could not be written; the log says why).",
            ["kind", "reason"],
            registry=r,
        )
        self.feedback = Counter(
            f"{p}_feedback_total",
            "POST /v1/feedback by outcome: `matched` (written; its request is among the recent ones logged "
            "here), `unmatched` (written; its request is not: older, another replica, or not logged), "
            "`unknown_candidate` (404), `logging_off` (409) or `overloaded` (429, the writer was behind).",
            ["outcome"],
            registry=r,
        )
        self.model_info = Info(
            f"{p}_model",
            "Each served model's bundle and backend: its precision, how it was chosen (auto or forced), "
            "why, the candidates per second each runtime scored at start, and the calibration map in "
            "force (`bundle`, or the runtime whose own map the bundle carries).",
            ["model"],
            registry=r,
        )

        self._deprecated_aliases(r)

    def _deprecated_aliases(self, r: CollectorRegistry) -> None:
        """The old ``*_pairs*`` names, recorded beside their new ones for one release."""
        p = PREFIX
        self.batch_pairs = Histogram(
            f"{p}_batch_pairs",
            "Deprecated: use ranker_batch_sequences (removed in the next release).",
            ["model", "role"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.computed_pairs = Counter(
            f"{p}_computed_pairs_total",
            "Deprecated: use ranker_computed_candidates_total, which it equals (removed in the next "
            "release).",
            ["model", "role"],
            registry=r,
        )
        self.queue_pairs = Gauge(
            f"{p}_queue_pairs",
            "Deprecated: use ranker_queue_sequences (removed in the next release).",
            ["model", "role"],
            registry=r,
        )
        self.failed_pairs = Counter(
            f"{p}_failed_pairs_total",
            "Deprecated: use ranker_failed_sequences_total (removed in the next release).",
            ["model", "role"],
            registry=r,
        )
        self.dropped_pairs = Counter(
            f"{p}_dropped_pairs_total",
            "Deprecated: use ranker_dropped_sequences_total (removed in the next release).",
            ["model", "role", "reason"],
            registry=r,
        )

    def generator_label(self, generator: str | None) -> str:
        """The label value for a generator name: itself if configured, else ``other``/``none``."""
        if generator is None:
            return UNKNOWN_GENERATOR
        return generator if generator in self.generators else OTHER_GENERATOR

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
