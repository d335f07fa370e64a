"""``--backend auto``: try each in-process runtime at start, serve the fastest whose scores hold.

Every candidate (a runtime at one precision: ONNX Runtime on the graph as exported, OpenVINO in
bf16 where the CPU has native bf16, OpenVINO in f32) is started, scores the bundle's sample
sequences once (:mod:`dialogue_ranker.serving.samples`), and is refused when its calibrated scores
are out of tolerance of the fp32 reference logits stored with them: top-1 agreement below
``min_top1_agreement`` or mean absolute difference above ``max_mean_abs_diff``. Each accepted one
is then timed for ``probe_s`` with as many concurrent calls as the batcher will run, and the one
that scored the most candidates per second serves (of those within ``TIE_MARGIN`` of it, the one
nearest fp32); the others are closed. When none is accepted
(or the bundle has no samples) ONNX Runtime serves, as before there was a choice, and the reason
says so. The choice is logged, reported by ``/v1/models`` and in ``ranker_model_info``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dialogue_ranker.serving.backends.base import AnyBackend, Backend
from dialogue_ranker.serving.calibration import Calibrator, runtime_key
from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.samples import SampleSet, agreement, load_samples
from dialogue_ranker.serving.tokenization import Batch

logger = logging.getLogger(__name__)

#: Accepted runtimes whose rates are within this share of the fastest's are a tie (timing noise on
#: a busy host is about this large): the one nearest the fp32 reference of them serves.
TIE_MARGIN = 0.05


@dataclass(frozen=True)
class Option:
    """One candidate: a runtime at a precision, built on demand (or why it cannot be tried here)."""

    runtime: str
    precision: str
    build: Callable[[], Backend] | None
    #: Why it is not tried (``build`` is None): not installed, no native bf16...
    unavailable: str = ""

    @property
    def label(self) -> str:
        """``runtime/precision``, as logs and metrics print it."""
        return f"{self.runtime}/{self.precision}"


@dataclass(frozen=True)
class Tolerance:
    """How close to the fp32 reference a runtime's calibrated scores must be to serve."""

    min_top1_agreement: float
    max_mean_abs_diff: float

    def refuses(self, top1: float, mean_abs_diff: float) -> str:
        """Why scores with this agreement are refused ('' when they are accepted)."""
        if top1 < self.min_top1_agreement:
            return f"top-1 agreement {top1:.3f} < {self.min_top1_agreement}"
        if mean_abs_diff > self.max_mean_abs_diff:
            return f"mean abs. difference {mean_abs_diff:.4f} > {self.max_mean_abs_diff}"
        return ""


@dataclass(frozen=True)
class Trial:
    """What one candidate did at start."""

    runtime: str
    precision: str
    accepted: bool
    #: Why it was refused or not tried ('' when accepted).
    note: str = ""
    candidates_per_s: float | None = None
    top1_agreement: float | None = None
    mean_abs_diff: float | None = None
    max_abs_diff: float | None = None

    @property
    def label(self) -> str:
        """``runtime/precision``, as logs and metrics print it."""
        return f"{self.runtime}/{self.precision}"


@dataclass(frozen=True)
class BackendChoice:
    """Which runtime serves a graph, how it was chosen, and what every candidate measured."""

    mode: Literal["auto", "forced"]
    backend: str
    precision: str
    reason: str
    trials: tuple[Trial, ...] = field(default_factory=tuple)

    @property
    def runtime(self) -> str:
        """The chosen runtime as ``calibration_by_runtime`` names it: ``onnx``, ``openvino-bf16``..."""
        return runtime_key(self.backend, self.precision)

    def rates(self) -> str:
        """``runtime/precision=candidates per second`` of each timed candidate, space-separated."""
        return " ".join(
            f"{t.label}={t.candidates_per_s:.1f}" for t in self.trials if t.candidates_per_s is not None
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``/v1/models`` reports."""
        return asdict(self)


def choice_of(backend: AnyBackend) -> BackendChoice:
    """How ``backend`` came to serve: its auto choice, or the backend the settings forced."""
    if isinstance(backend, AutoBackend) and backend.choice is not None:
        return backend.choice
    precision = str(getattr(backend, "precision", "")) or "-"
    return BackendChoice("forced", backend.name, precision, f"--backend {backend.name}")


class AutoBackend:
    """Chooses among ``options`` at :meth:`start`, then runs every call on the chosen backend."""

    def __init__(
        self,
        options: Sequence[Option],
        *,
        samples: Path | None,
        calibration: Calibrator,
        tolerance: Tolerance,
        probe_s: float,
        concurrency: int,
    ) -> None:
        if not options or options[0].build is None:
            raise ValueError("auto needs a first option that can always be built (ONNX Runtime)")
        self.options = list(options)
        self.samples_path = samples
        self.calibration = calibration
        self.tolerance = tolerance
        self.probe_s = probe_s
        self.concurrency = max(1, concurrency)
        self.choice: BackendChoice | None = None
        self._chosen: Backend | None = None
        #: The chosen backend's name and precision once started (metric labels use the name).
        self.name = "auto"
        self.precision = "-"

    def start(self) -> None:
        """Try the options, keep the fastest accepted one. Raises BackendUnavailable when none starts."""
        started = time.perf_counter()
        samples = self._samples()
        if samples is None:
            fallback = self.options[0]
            self._chosen = self._start(fallback)
            unchecked = ", ".join(o.label for o in self.options[1:])
            reason = f"the bundle has no sample sequences to check {unchecked} on: {fallback.label}"
            self.choice = BackendChoice("auto", self._chosen.name, fallback.precision, reason)
        else:
            self._choose(samples)
        assert self.choice is not None
        self.name, self.precision = self.choice.backend, self.choice.precision
        logger.info(
            "backend chosen backend=%s precision=%s reason=%r rates=%r seconds=%.1f",
            self.choice.backend, self.choice.precision, self.choice.reason, self.choice.rates(),
            time.perf_counter() - started,
        )  # fmt: skip

    def _samples(self) -> SampleSet | None:
        if self.samples_path is None:
            return None
        try:
            return load_samples(self.samples_path)
        except ValueError as e:
            logger.warning("sample sequences unusable, auto cannot compare runtimes: %s", e)
            return None

    def _start(self, option: Option) -> Backend:
        assert option.build is not None
        backend = option.build()
        backend.start()
        return backend

    def _choose(self, samples: SampleSet) -> None:
        trials: list[Trial] = []
        accepted: list[tuple[Trial, Option, Backend]] = []
        for option in self.options:
            trial, backend = self._try(option, samples)
            trials.append(trial)
            if backend is not None:
                accepted.append((trial, option, backend))
        if accepted:
            fastest = max(t.candidates_per_s or 0.0 for t, _, _ in accepted)
            # Rates a few percent apart are noise: of those, the one nearest fp32 serves, so that
            # restarts on one machine choose alike.
            near = [a for a in accepted if (a[0].candidates_per_s or 0.0) >= (1 - TIE_MARGIN) * fastest]
            chosen, option, self._chosen = min(near, key=lambda a: a[0].mean_abs_diff or 0.0)
            for _, _, backend in accepted:
                if backend is not self._chosen:
                    backend.close()
            others = [t for t in trials if t is not chosen]
            if not others:
                reason = "the only runtime tried"
            elif chosen.candidates_per_s == fastest:
                reason = f"fastest of the runtimes within tolerance ({_summary(others)})"
            else:
                reason = f"within {TIE_MARGIN:.0%} of the fastest and nearer fp32 ({_summary(others)})"
        else:
            option = self.options[0]
            self._chosen = self._start(option)
            reason = f"no runtime within tolerance ({_summary(trials)}): {option.label}, the export's own"
            logger.warning("backend auto: %s", reason)
        self.choice = BackendChoice("auto", self._chosen.name, option.precision, reason, tuple(trials))

    def _try(self, option: Option, samples: SampleSet) -> tuple[Trial, Backend | None]:
        """Start, check and time one option; the backend is returned only when accepted."""
        if option.build is None:
            return Trial(option.runtime, option.precision, False, option.unavailable), None
        try:
            backend = self._start(option)
        except BackendUnavailable as e:
            return Trial(option.runtime, option.precision, False, f"cannot start: {e}"), None
        try:
            backend.infer(samples.batches[0])  # the cold call (first allocations) is not timed
            logits, seconds, _ = self._score(backend, samples.batches)
            measured = agreement(logits, samples, self.calibration)
            refused = self.tolerance.refuses(measured.top1_agreement, measured.mean_abs_diff)
            rate = None if refused else self._rate(backend, samples, seconds)
        except (BackendError, BackendUnavailable) as e:
            backend.close()
            return Trial(option.runtime, option.precision, False, f"failed on the samples: {e}"), None
        if refused:
            backend.close()
        trial = Trial(
            option.runtime,
            option.precision,
            accepted=not refused,
            note=refused,
            candidates_per_s=None if rate is None else round(rate, 1),
            top1_agreement=round(measured.top1_agreement, 4),
            mean_abs_diff=round(measured.mean_abs_diff, 5),
            max_abs_diff=round(measured.max_abs_diff, 5),
        )
        return trial, None if refused else backend

    def _score(
        self, backend: Backend, batches: Sequence[Batch | ListBatch], until: float | None = None
    ) -> tuple[list[np.ndarray], float, int]:
        """Each batch's logits (in order), seconds taken and candidates scored, ``concurrency`` calls at once.

        With ``until`` (a ``perf_counter`` time), the batches are run round and round until then
        (no logits kept). The first error raised by a call is raised here.
        """
        out: list[np.ndarray | None] = [None] * len(batches)
        taken = scored = 0
        errors: list[Exception] = []
        lock = threading.Lock()

        def work() -> None:
            nonlocal taken, scored
            while True:
                with lock:
                    index = taken
                    taken += 1
                if errors or (until is None and index >= len(batches)):
                    return
                if until is not None and time.perf_counter() >= until:
                    return
                try:
                    logits = backend.infer(batches[index % len(batches)])
                except Exception as e:  # re-raised in the caller's thread
                    errors.append(e)
                    return
                with lock:
                    scored += len(logits)
                if until is None:
                    out[index] = logits

        started = time.perf_counter()
        threads = [threading.Thread(target=work, daemon=True) for _ in range(self.concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return [z for z in out if z is not None], time.perf_counter() - started, scored

    def _rate(self, backend: Backend, samples: SampleSet, seconds: float) -> float:
        """Candidates per second: the checking pass, then round-robin calls until ``probe_s`` is spent."""
        candidates = samples.candidates
        if seconds < self.probe_s:
            until = time.perf_counter() + self.probe_s - seconds
            _, more_seconds, more = self._score(backend, samples.batches, until=until)
            candidates, seconds = candidates + more, seconds + more_seconds
        return candidates / seconds

    def close(self) -> None:
        """Close the chosen backend."""
        if self._chosen is not None:
            self._chosen.close()

    def health(self) -> bool:
        """The chosen backend's probe."""
        return self._chosen is not None and self._chosen.health()

    def infer(self, batch: Batch | ListBatch) -> np.ndarray:
        """Logits from the chosen backend.

        Raises:
            BackendUnavailable: not started.
            BackendError: the chosen backend failed on this batch.
        """
        if self._chosen is None:
            raise BackendUnavailable("auto backend is not started")
        return self._chosen.infer(batch)


def _summary(trials: Sequence[Trial]) -> str:
    return "; ".join(
        f"{t.label} {t.candidates_per_s:.1f}/s" if t.accepted else f"{t.label} refused: {t.note}"
        for t in trials
    )
