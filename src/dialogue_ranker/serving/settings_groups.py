"""The groups of :class:`~dialogue_ranker.serving.settings.Settings`: one model per concern.

Each is a nested field of the one ``Settings`` object (flags ``--group.field``, variables
``RANKER_GROUP__FIELD``); they live here so the settings module stays readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from dialogue_ranker.serving.cpu import MAX_WORKERS

#: The runtimes ``--backend auto`` may try beside ONNX Runtime.
AutoRuntime = Literal["openvino-bf16", "openvino-f32"]
AUTO_RUNTIMES: tuple[AutoRuntime, ...] = ("openvino-bf16", "openvino-f32")


class BatchingSettings(BaseModel):
    """How sequences from concurrent requests are grouped into backend calls.

    A sequence is what the runtime computes: a (context, candidate) pair, or a shared-prefix
    sequence holding many candidates. The ``*_pairs`` names predate shared-prefix models: they
    count sequences.
    """

    max_pairs: int = Field(64, ge=1, le=4096, description="A batch closes when it holds this many sequences.")
    max_tokens: int = Field(
        16384, ge=16, description="A batch closes when its sequences hold this many tokens (before padding)."
    )
    max_wait_s: float = Field(
        0.002, ge=0.0, le=1.0, description="A batch closes this long after its first sequence arrived."
    )
    queue_max_pairs: int = Field(
        2048, ge=1, description="Sequences waiting at most; a request that would exceed it gets 429."
    )
    sub_batch_pairs: int = Field(
        0,
        ge=0,
        description="Run each batch as backend calls of at most this many sequences (0: as the model's "
        "metadata asks, else one call). 1 makes a dynamically quantised model's scores independent of "
        "batch composition.",
    )
    workers: int = Field(
        0,
        ge=0,
        le=MAX_WORKERS,
        description="Backend calls each batcher runs at once (0: two per CPU of the container's quota). "
        "With the ONNX backend each call gets the CPUs divided by this many threads, at least one "
        "(onnx.intra_op_threads 0), and a call that starts alone gets them all (onnx.solo_threads). More "
        "calls than CPUs keep the CPUs busy while a finished call's request is answered and the next "
        "one padded: on 2 cores 4 x 1 served the most under load (benchmarks/threads.py).",
    )
    pad_to_multiple: int = Field(
        1, ge=1, le=512, description="Pad each backend call to a multiple of this length (a length bucket)."
    )
    admission_margin: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description="A request is admitted only when the backlog of admitted work plus its own (estimated "
        "backend seconds) fits in this share of the time left to its deadline; else 429 at once.",
    )


class BreakerSettings(BaseModel):
    """Backend health: failed calls are retried in halves; a backend that keeps failing is cut off."""

    failure_threshold: int = Field(
        5,
        ge=0,
        description="Consecutive batches in which every pair failed that open the circuit breaker "
        "(0: never open it).",
    )
    cooldown_s: float = Field(
        5.0, gt=0.0, description="An open breaker answers 503 this long, then lets one trial batch through."
    )
    traceback_interval_s: float = Field(
        60.0, ge=0.0, description="At most one failure traceback in the logs per this many seconds."
    )


class ServerSettings(BaseModel):
    """Connection hygiene of the HTTP server."""

    read_timeout_s: float = Field(
        10.0,
        gt=0.0,
        le=30.0,
        description="A request whose headers or body have not arrived this long after it started gets 408 "
        "and its connection is closed.",
    )
    keep_alive_timeout_s: int = Field(
        5, ge=1, description="An idle keep-alive connection is closed after this many seconds."
    )
    max_connections: int = Field(
        1000, ge=1, description="Open connections at most; a request beyond them gets 503 and is closed."
    )
    docs: bool = Field(True, description="Serve /docs (Swagger UI from local files) and /openapi.json.")


class AuthSettings(BaseModel):
    """API keys: files of one key per line (blank lines and ``#`` comments ignored)."""

    api_keys_file: Path | None = Field(
        None,
        description="When set, /rank and every other scoring route need `Authorization: Bearer <key>` with "
        "a key of this file (401 otherwise); /healthz and /readyz stay open.",
    )
    metrics_keys_file: Path | None = Field(
        None, description="When set, /metrics needs a key of this file (a scraper's own key)."
    )


class LogsSettings(BaseModel):
    """Request and feedback logs, off unless ``dir`` is set: the labelled lists a team fine-tunes on.

    Each ranked request (/rank and the rerank routes) becomes a line of ``requests-*.jsonl`` and
    each ``POST /v1/feedback`` a line of ``feedback-*.jsonl`` in ``dir`` (docs/guides/logs-and-feedback.md).
    Lines are written by one thread from a bounded queue: a request is never delayed or failed by
    its log line.
    """

    dir: Path | None = Field(
        None,
        description="Write the request and feedback logs here (created if missing); none: nothing is "
        "logged and POST /v1/feedback answers 409.",
    )
    texts: bool = Field(
        False,
        description="Keep the texts of turns, situations and candidates in the request lines. Off: each "
        "text is replaced by its SHA-256 digest (`sha256` instead of `text`), so the lines hold ids, "
        "digests and scores, and cannot be trained on.",
    )
    max_bytes: int = Field(
        50_000_000,
        ge=1024,
        description="A log file is closed and a new one opened before a line would take it past this "
        "many bytes.",
    )
    max_files: int = Field(
        20,
        ge=1,
        description="Files kept of each kind (requests, feedback); opening one more deletes the oldest.",
    )
    sample: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Share of ranked requests logged, drawn at random (feedback is always logged).",
    )
    queue_lines: int = Field(
        10_000,
        ge=1,
        description="Lines waiting for the writer thread at most: a ranked request past it is not logged "
        "(ranker_log_lines_dropped_total), and feedback gets 429.",
    )
    recent_requests: int = Field(
        10_000,
        ge=0,
        description="Logged requests whose ids and candidate ids are kept in memory, so that POST "
        "/v1/feedback refuses a candidate id its request did not have (404) and says whether it matched; "
        "feedback for a request not held (older, another replica, not sampled) is still written.",
    )


class LimitsSettings(BaseModel):
    """Request limits, enforced by the request schema (422 naming the field) or the body reader (413)."""

    max_candidates: int = Field(256, ge=1, le=10000, description="Most candidates in one request.")
    max_turns: int = Field(64, ge=1, le=10000, description="Most context turns in one request.")
    max_situations: int = Field(64, ge=0, le=10000, description="Most situational statements in one request.")
    max_text_chars: int = Field(
        2000, ge=1, description="Most characters in one turn, statement or candidate."
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest request body accepted.")
    request_timeout_s: float = Field(
        10.0,
        gt=0,
        description="A request's deadline: waiting this long for scores gets 504. A client may shorten it "
        "with the X-Request-Timeout-S header, never lengthen it.",
    )


class BanksSettings(BaseModel):
    """Response banks (``--bank NAME=FILE``): their retrieval encoder, embedding cache and retrieval."""

    retriever: Path | None = Field(
        None,
        description="The retrieval encoder banks are embedded with: a directory holding retriever.json "
        "(`ranker export-retriever --out`), or a model bundle with a retriever/ folder (default: the "
        "default model's bundle).",
    )
    cache_dir: Path | None = Field(
        None,
        description="Where bank vectors are kept between starts, each under its text's digest and the "
        "encoder's graph and tokenizer, so a start or a reload embeds only texts it has not seen (default: "
        "next to each bank file). A directory that cannot be written costs only the cache (a warning in the "
        "log).",
    )
    retrieve_k: int = Field(
        50,
        ge=1,
        le=10000,
        description="Bank responses a request ranks when it names a bank without retrieve_k, at most "
        "limits.max-candidates less its own candidates. Each costs a ranker candidate (about 10 ms on 2 "
        "cores); all-MiniLM-L6-v2 put a good reply among the nearest 10 / 50 / 100 of 10,121 "
        "DailyDialog++ dev responses for 53% / 71% / 79% of contexts.",
    )
    watch_interval_s: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="Every this many seconds, check each bank file's modification time and size, and reload "
        "a bank whose file changed, as POST /v1/banks/{name}/reload does (0: off; SIGHUP and the route "
        "reload anyway). Write the new file beside the old and rename it into place: a file caught half "
        "written fails its check, and the old version stays served until the next change.",
    )


class OnnxSettings(BaseModel):
    """The embedded ONNX Runtime backend."""

    intra_op_threads: int = Field(
        0,
        ge=0,
        description="Threads per inference call (0: the container's CPU quota divided by batching.workers, "
        "at least 1).",
    )
    solo_threads: int = Field(
        0,
        ge=0,
        description="Threads for a call that starts while no other call runs on its graph, so a lone "
        "request gets the whole CPU quota (0: the container's CPUs). It is a second session of the same "
        "graph; set it to intra_op_threads (or lower) to keep one.",
    )
    inter_op_threads: int = Field(1, ge=0, description="Threads across graph nodes (0: ONNX Runtime picks).")


class OpenVinoSettings(BaseModel):
    """The embedded OpenVINO backend (the ``openvino`` extra)."""

    precision: Literal["auto", "bf16", "f32"] = Field(
        "auto",
        description="INFERENCE_PRECISION_HINT of the graph's unquantized parts (attention, layer norms): "
        "auto is bf16 where the CPU computes bf16 natively (AVX-512 BF16 or AMX), f32 elsewhere.",
    )
    streams: int = Field(
        0, ge=0, le=MAX_WORKERS, description="OpenVINO streams: calls that run at once (0: the quota's CPUs)."
    )
    threads_per_stream: int = Field(1, ge=1, le=MAX_WORKERS, description="Threads of each stream.")
    solo_threads: int = Field(
        0,
        ge=0,
        description="Threads for a call that starts while no other call runs on its graph, so a lone "
        "request gets the whole CPU quota (0: the container's CPUs). It is a second compilation of the "
        "graph; set it to threads-per-stream (or lower) to keep one.",
    )
    weights: Literal["auto", "int8", "fp32"] = Field(
        "auto",
        description="int8: the shipped graph's int8 weights run as int8 products over activations "
        "quantized per token; fp32: the weights are dequantized once at load and the products run at "
        "the precision (four times the weights' memory, no activation quantization); auto: fp32 for "
        "bf16 on a CPU with AMX (its bf16 tiles: 1.2-1.4x the int8 form there), int8 elsewhere.",
    )
    dynamic_quantization_group_size: int = Field(
        128,
        ge=0,
        description="Activations of the int8 matrix products are quantized per token in groups of this "
        "many values: 128, the weights' own blocks, as ONNX Runtime's MatMulNBits graph asks (0: not "
        "quantized, the products run at the precision hint; OpenVINO's own default is 32, 1.24x slower "
        "here for no better agreement with fp32).",
    )
    runtime_cache_capacity: int = Field(
        256,
        ge=0,
        description="Input shapes whose compiled kernels the CPU plugin keeps (CPU_RUNTIME_CACHE_CAPACITY), "
        "per compilation; each holds about 1 MB. OpenVINO's default, 5000, let a server under varied "
        "traffic grow by gigabytes (a soak: 2.0 to 4.8 GB in 25 minutes); 0 keeps none.",
    )


class AutoSettings(BaseModel):
    """``--backend auto``: each in-process runtime and precision is tried at start; the fastest serves.

    Each candidate (ONNX Runtime; OpenVINO in bf16 where the CPU has native bf16, and in f32)
    scores the bundle's sample sequences (``samples.json``, written by the export with their fp32
    logits); one whose calibrated scores stray from the fp32 reference past the tolerance is
    refused; the rest are timed in turns for ``probe_s`` each (best of three rounds), and the one
    that scored the most candidates per second serves. With ``cache_dir`` the choice is stored and
    a restart with the same machine, bundle, runtime versions and settings serves it at once.
    """

    probe_s: float = Field(
        0.9,
        gt=0.0,
        le=30.0,
        description="How long each accepted runtime is timed on the sample sequences, in three rounds taken "
        "in turns with the others (each keeps its best round); the checking pass before is its warm-up "
        "and is not timed.",
    )
    max_trial_s: float = Field(
        20.0,
        gt=0.0,
        le=600.0,
        description="Once the trial has taken this long, no further runtime is tried (the ones already "
        "checked are still timed); bounds the start on a host too busy to measure (on 2 idle CPUs the "
        "whole trial takes about 4 s).",
    )
    cache_dir: Path | None = Field(
        None,
        description="Where the choice is stored (backend-choice-<key>.json), so that a restart on the same "
        "machine, bundle, runtime versions and settings serves it without a trial; none: every start "
        "tries. A directory that cannot be written costs only the cache.",
    )
    min_top1_agreement: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="A runtime is accepted only when, on at least this share of the sample sequences, its "
        "best-scored candidate is the fp32 reference's.",
    )
    max_mean_abs_diff: float = Field(
        0.01,
        ge=0.0,
        le=1.0,
        description="A runtime is accepted only when its calibrated scores differ from the fp32 "
        "reference's by at most this much on average over the sample candidates.",
    )
    runtimes: list[AutoRuntime] = Field(
        default_factory=lambda: list(AUTO_RUNTIMES),
        description="The candidates beside ONNX Runtime (always tried at the graph's own precision, and "
        "what serves when no candidate is within tolerance): openvino-bf16 is tried only where the CPU "
        "has native bf16, OpenVINO only where it is installed.",
    )


class TritonSettings(BaseModel):
    """The Triton backend: a remote NVIDIA Triton Inference Server reached over gRPC.

    Triton's dynamic batcher merges only requests of equal shape, so the gateway pads each sequence
    to the smallest of ``length_buckets`` that holds it and sends the sequences of one bucket as one
    request; requests of different clients in the same bucket then share Triton batches. Buckets
    every 32 tokens cost 12% padding on SUGAR-like pairs, and 16 concurrent requests meet on 2-3
    shapes (``benchmarks/bucket_padding.py``; the README has the comparison).
    """

    url: str = Field("127.0.0.1:8001", description="Triton gRPC address (host:port).")
    ranker_model: str = Field("ranker", description="Triton model name of the ranker.")
    timeout_s: float = Field(
        8.0, gt=0, description="A Triton call without an answer after this long fails with 504."
    )
    health_timeout_s: float = Field(
        1.0, gt=0, description="Readiness probe timeout (server and model ready state)."
    )
    length_buckets: list[int] = Field(
        default_factory=lambda: [32, 64, 96, 128, 160, 192, 224, 256],
        description="Pad each sequence to the smallest of these lengths that holds it (the model's "
        "max length is always a bucket); empty: pad each request to its longest sequence.",
    )
    max_batch_pairs: int = Field(
        64, ge=1, le=4096, description="Most sequences in one Triton request (the model's max_batch_size)."
    )

    @field_validator("length_buckets")
    @classmethod
    def _sorted_positive(cls, buckets: list[int]) -> list[int]:
        if any(b < 1 for b in buckets):
            raise ValueError("length buckets must be positive")
        return sorted(set(buckets))


class FakeSettings(BaseModel):
    """The deterministic fake backend, for tests and API work without a model."""

    latency_s: float = Field(0.0, ge=0.0, description="Sleep this long in every backend call.")
    fail_every_n_batches: int = Field(0, ge=0, description="Fail every n-th backend call (0: never).")
    fail_on_text: str | None = Field(
        None, description="Fail every backend call holding a pair whose text contains this (poison pairs)."
    )


class RankingSettings(BaseModel):
    """Ranking policy."""

    soft_mask_penalty: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="In soft mask mode a masked candidate's score is multiplied by this.",
    )
    mask_repeats: bool = Field(
        True,
        description="Mask a candidate that repeats a turn of the conversation (case, punctuation aside).",
    )
    generators: list[str] = Field(
        default_factory=lambda: ["retrieval", "generative", "template", "rule", "llm"],
        description="Generator names kept as metric labels; any other is counted as 'other'.",
    )
    log_request_text: bool = Field(False, description="Log request texts (off: texts never reach the logs).")
    last_turn_view: bool = Field(
        True,
        description="Where the bundle asks for it, score a multi-turn request a second time with its last "
        "turn alone (and a third with no context, the reply's prior) and combine the logits (better "
        "against replies that echo earlier turns; off: one pass, faster on multi-turn requests).",
    )
    logit_cache_entries: int = Field(
        65536,
        ge=0,
        description="Candidate logits kept per served model for requests that repeat them (least recently "
        "used dropped first; about 230 bytes each; 0: off). A candidate's logit depends only on its view's "
        "turns, the statements, its text and token cut, so a kept one is reused exactly: the reply's prior "
        "of a fixed action list or template reply, and every logit of a retried request.",
    )
