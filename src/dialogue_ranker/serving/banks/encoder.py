"""The retrieval encoder at serving time: texts -> L2-normalised vectors, with ONNX Runtime on CPU.

Two sessions of the one graph: a bulk session with every CPU of the quota, which embeds the banks
at start (nothing else runs then: ``/readyz`` is not ready), opened only when a bank is not in the
cache and dropped once the banks are ready; and a query session with the ranker's per-call
threads (``onnx.intra_op_threads``), which embeds one request's context beside the ranker's calls
without asking the CPUs for more threads than they have, and a reload's new texts while requests
are served. The retrieval query is made of the
request's last turns (:func:`retrieval_query`), mixed with its last turn alone where the retriever
says so (:meth:`TextEncoder.embed_queries`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.model_bundle import BundleError, RetrieverSpec
from dialogue_ranker.serving.tokenization import Turn

logger = logging.getLogger(__name__)

#: Texts per bulk call. Texts are sorted by length first, so a call pads little; 64 short replies
#: keep a call near 100 ms on 2 cores, often enough for progress and for a stop at shutdown.
BULK_BATCH_TEXTS = 64
#: Called after each bulk call with the texts embedded so far.
Progress = Callable[[int], None]


class EmbeddingStopped(Exception):
    """The bulk embedding was asked to stop (the service is shutting down)."""


def retrieval_query(turns: Sequence[Turn], *, last_turns: int = 1) -> str:
    """The text a request retrieves bank responses with: its last ``last_turns`` turns, oldest first.

    One turn (the default) is what the untrained sentence encoder was measured with (issue #43:
    the last turn alone beat the whole context for all-MiniLM-L6-v2); a dialogue-trained encoder
    declares its own in ``retriever.json`` (``query.turns``). Turns are joined by newlines, without
    speakers: a sentence encoder reads plain text.
    """
    return "\n".join(turn.text for turn in turns[-last_turns:])


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file, read in blocks."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class TextEncoder:
    """Runs a :class:`RetrieverSpec`'s graph: a batch of texts in, float32 unit vectors out."""

    def __init__(self, spec: RetrieverSpec, *, query_threads: int = 1, bulk_threads: int = 1) -> None:
        self.spec = spec
        self.query_threads = query_threads
        self.bulk_threads = bulk_threads
        self._tokenizer: Tokenizer | None = None
        self._query: ort.InferenceSession | None = None
        self._bulk: ort.InferenceSession | None = None
        #: A digest of what the vectors depend on: graph, tokenizer, max length (set by ``start``).
        self.identity = ""

    @property
    def dim(self) -> int:
        """The vectors' length."""
        return self.spec.dim

    def start(self) -> None:
        """Check the graph against its digest, load the tokenizer and the query session; blocking.

        Raises:
            BundleError: the graph is not the one ``retriever.json`` describes.
            BackendUnavailable: the graph does not load.
        """
        actual = file_sha256(self.spec.path)
        if actual != self.spec.sha256:
            expected = self.spec.sha256[:12]
            raise BundleError(f"{self.spec.path}: sha256 {actual[:12]}... is not retriever.json's {expected}")
        self.identity = hashlib.sha256(
            f"{actual}/{file_sha256(self.spec.tokenizer_path)}/{self.spec.max_length}".encode()
        ).hexdigest()
        tokenizer = Tokenizer.from_file(str(self.spec.tokenizer_path))
        tokenizer.no_padding()  # padded here, to each call's longest text
        tokenizer.enable_truncation(self.spec.max_length)
        self._tokenizer = tokenizer
        self._query = self._load(self.query_threads)
        missing = set(self.spec.input_names) - {i.name for i in self._query.get_inputs()}
        if missing:
            raise BackendUnavailable(f"{self.spec.path.name} lacks inputs {sorted(missing)}")
        logger.info(
            "retriever loaded file=%s dim=%d query_threads=%d bulk_threads=%d",
            self.spec.path, self.dim, self.query_threads, self.bulk_threads,
        )  # fmt: skip

    def _load(self, threads: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            return ort.InferenceSession(str(self.spec.path), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise BackendUnavailable(f"cannot load {self.spec.path.name}: {e}") from e

    def release_bulk(self) -> None:
        """Drop the bulk session once the banks are embedded (its memory is not needed again)."""
        self._bulk = None

    def _bulk_session(self) -> ort.InferenceSession | None:
        if self._bulk is None and self._query is not None:
            same = self.bulk_threads == self.query_threads
            self._bulk = self._query if same else self._load(self.bulk_threads)
        return self._bulk

    def close(self) -> None:
        """Drop the sessions."""
        self._query = self._bulk = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One request's texts (its retrieval query) on the query session: (texts, dim) float32."""
        return self._run(self._query, texts)

    def embed_queries(self, contexts: Sequence[Sequence[Turn]], *, bulk: bool = False) -> np.ndarray:
        """The retrieval query vector of each context: (contexts, dim) float32.

        ``(1 - w) x`` the embedding of its last ``query_turns`` turns ``+ w x`` that of its last
        turn alone, ``w`` the spec's ``last_turn_weight``: a response's cosine with it is the same
        mix of its cosines with the two (not renormalised, so it stays that mix). The turns before
        give the reply's topic, the last turn what it answers; on the dev banks the mix ranks better
        than either (``docs/research/2026-11-27-last-turn-query.md``). A context of one turn, or a
        weight of 0, has the one embedding. ``bulk``: on the bulk session (evaluation, many
        contexts), else on the query session (one request).
        """
        spec = self.spec
        texts = [retrieval_query(turns, last_turns=spec.query_turns) for turns in contexts]
        mixed = [
            i for i, turns in enumerate(contexts)
            if spec.last_turn_weight > 0 and spec.query_turns > 1 and len(turns) > 1
        ]  # fmt: skip
        lasts = [retrieval_query(contexts[i], last_turns=1) for i in mixed]
        if bulk:
            vectors = self.embed_all([*texts, *lasts])
        else:
            vectors = self.embed([*texts, *lasts])
        out = vectors[: len(texts)]
        if mixed:
            w = np.float32(spec.last_turn_weight)
            out[mixed] = (1 - w) * out[mixed] + w * vectors[len(texts) :]
        return out

    def embed_all(
        self,
        texts: Sequence[str],
        *,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        batch_texts: int = BULK_BATCH_TEXTS,
        bulk: bool = True,
    ) -> np.ndarray:
        """Every text, shortest first (little padding), back in the given order.

        ``bulk``: on the bulk session (every CPU: the start, when nothing else runs), else on the
        query session (a reload, beside the requests being served: no more threads than a call's).

        Raises:
            EmbeddingStopped: ``stop`` was set between two calls.
            BackendError: ONNX Runtime failed on a call.
        """
        tokenizer = self._require_tokenizer()
        lengths = np.array([len(e.ids) for e in tokenizer.encode_batch(list(texts))], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_texts):
            if stop is not None and stop.is_set():
                raise EmbeddingStopped
            rows = order[start : start + batch_texts]
            session = self._bulk_session() if bulk else self._query
            out[rows] = self._run(session, [texts[i] for i in rows])
            if progress is not None:
                progress(min(start + batch_texts, len(texts)))
        return out

    def _require_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise BackendUnavailable("the retrieval encoder is not started")
        return self._tokenizer

    def _run(self, session: ort.InferenceSession | None, texts: Sequence[str]) -> np.ndarray:
        tokenizer = self._require_tokenizer()
        if session is None:
            raise BackendUnavailable("the retrieval encoder is not started")
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        encoded = tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            types[row, : len(e.ids)] = e.type_ids
            mask[row, : len(e.ids)] = 1
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        try:
            (vectors,) = session.run(
                [self.spec.output_name], {name: arrays[name] for name in self.spec.input_names}
            )
        except Exception as e:  # onnxruntime raises its own untyped errors
            raise BackendError(f"the retrieval encoder failed on {len(texts)} texts") from e
        vectors = np.asarray(vectors, dtype=np.float32)
        # The graph normalises already; again here so that a graph exported without it still
        # gives cosines (a no-op on unit vectors).
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)
