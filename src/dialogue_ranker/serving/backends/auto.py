"""``--backend auto``: try each in-process runtime at start, serve the fastest whose scores hold.

Every candidate (a runtime at one precision: ONNX Runtime on the graph as exported, OpenVINO in
bf16 where the CPU has native bf16, OpenVINO in f32) is started and scores the bundle's sample
sequences once (:mod:`dialogue_ranker.serving.samples`): it is refused when its calibrated scores
are out of tolerance of the fp32 reference logits stored with them (top-1 agreement below
``min_top1_agreement`` or mean absolute difference above ``max_mean_abs_diff``). That checking
pass is also each runtime's warm-up (OpenVINO prepares its kernels for each new shape on first
sight), so it is not timed. The accepted ones are then timed in turns, ``ROUNDS`` rounds of
``probe_s / ROUNDS`` each with as many concurrent calls as the batcher will run, and each keeps
its best round: a busy host only ever slows a round down, so the best is the least disturbed and
every runtime is measured under the same conditions, not one after another minutes apart. The
one that scored the most candidates per second serves (of those within ``TIE_MARGIN`` of it, the
one nearest fp32); the others are closed. A trial that has spent ``max_trial_s`` tries no further
runtime (the reason says which were left out). When none is accepted (or the bundle has no
samples) ONNX Runtime serves, as before there was a choice, and the reason says so. With a cache
(:mod:`dialogue_ranker.serving.backends.choice_cache`) a restart on the same machine, bundle,
runtime versions and settings serves the stored choice without a trial. The choice is logged,
reported by ``/v1/models`` and in ``ranker_model_info``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dialogue_ranker.serving.backends.base import AnyBackend, Backend
from dialogue_ranker.serving.backends.choice_cache import ChoiceCache
from dialogue_ranker.serving.calibration import Calibrator, runtime_key
from dialogue_ranker.serving.errors import BackendError, BackendUnavailable
from dialogue_ranker.serving.list_encoding import ListBatch
from dialogue_ranker.serving.samples import SampleSet, agreement, load_samples
from dialogue_ranker.serving.tokenization import Batch

logger = logging.getLogger(__name__)

#: Accepted runtimes whose rates are within this share of the fastest's are a tie (timing noise on
#: a busy host is about this large): the one nearest the fp32 reference of them serves.
TIE_MARGIN = 0.05
#: Timing rounds: the accepted runtimes take turns, so a burst of other work on the host slows
#: one round of each rather than the whole of one runtime's timing.
ROUNDS = 3


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
        """Every check these scores fail, joined ('' when they are accepted).

        Both are named when both fail: an operator who loosens one should know the other holds too.
        """
        failed = []
        if top1 < self.min_top1_agreement:
            failed.append(f"top-1 agreement {top1:.3f} < {self.min_top1_agreement}")
        if mean_abs_diff > self.max_mean_abs_diff:
            failed.append(f"mean abs. difference {mean_abs_diff:.4f} > {self.max_mean_abs_diff}")
        return ", ".join(failed)


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
        max_trial_s: float = float("inf"),
        cache: ChoiceCache | None = None,
    ) -> None:
        if not options or options[0].build is None:
            raise ValueError("auto needs a first option that can always be built (ONNX Runtime)")
        self.options = list(options)
        self.samples_path = samples
        self.calibration = calibration
        self.tolerance = tolerance
        self.probe_s = probe_s
        self.concurrency = max(1, concurrency)
        self.max_trial_s = max_trial_s
        self.cache = cache
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
        elif not self._start_cached():
            option = self._choose(samples, deadline=started + self.max_trial_s)
            if self.cache is not None and self.choice is not None:
                self.cache.store(option.runtime, self.choice.to_dict())
        assert self.choice is not None
        self.name, self.precision = self.choice.backend, self.choice.precision
        logger.info(
            "backend chosen backend=%s precision=%s reason=%r rates=%r seconds=%.1f",
            self.choice.backend, self.choice.precision, self.choice.reason, self.choice.rates(),
            time.perf_counter() - started,
        )  # fmt: skip

    def _start_cached(self) -> bool:
        """Serve the choice a trial made earlier on this machine, bundle and settings, if one is stored."""
        stored = self.cache.load() if self.cache is not None else None
        if stored is None:
            return False
        try:
            trials = tuple(Trial(**t) for t in stored.choice["trials"])
            choice = BackendChoice(**{**stored.choice, "trials": trials})
        except (KeyError, TypeError) as e:
            logger.warning("backend choice cache of another form, a new trial follows: %s", e)
            return False
        wanted = (stored.runtime, choice.precision)
        option = next((o for o in self.options if (o.runtime, o.precision) == wanted), None)
        if option is None or option.build is None:
            return False
        self._chosen = self._start(option)
        reason = f"stored choice of the trial at {stored.made_at} on this machine: {choice.reason}"
        self.choice = replace(choice, reason=reason)
        return True

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

    def _choose(self, samples: SampleSet, *, deadline: float) -> Option:
        """Check and time the options, start the chosen one; returns it."""
        checked: list[tuple[Trial, Option, Backend | None]] = []
        for option in self.options:
            if checked and time.perf_counter() >= deadline:
                note = f"not tried: the trial's {self.max_trial_s:g} s (auto.max-trial-s) were spent"
                checked.append((Trial(option.runtime, option.precision, False, note), option, None))
            else:
                trial, backend = self._check(option, samples)
                checked.append((trial, option, backend))
        running = [i for i, (_, _, backend) in enumerate(checked) if backend is not None]
        rates = self._time(samples, [checked[i][2] for i in running])  # type: ignore[misc]
        for i, (rate, failure) in zip(running, rates, strict=True):
            trial, option, backend = checked[i]
            if failure:
                assert backend is not None
                backend.close()
                checked[i] = (replace(trial, accepted=False, note=failure), option, None)
            else:
                checked[i] = (replace(trial, candidates_per_s=round(rate, 1)), option, backend)
        trials = [trial for trial, _, _ in checked]
        accepted = [(t, o, b) for t, o, b in checked if b is not None]
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
        return option

    def _check(self, option: Option, samples: SampleSet) -> tuple[Trial, Backend | None]:
        """Start one option and check its scores; the backend is returned only when accepted."""
        if option.build is None:
            return Trial(option.runtime, option.precision, False, option.unavailable), None
        try:
            backend = self._start(option)
        except BackendUnavailable as e:
            return Trial(option.runtime, option.precision, False, f"cannot start: {e}"), None
        try:
            backend.infer(samples.batches[0])  # the cold call (first allocations)
            logits, _, _ = self._score(backend, samples.batches)
            measured = agreement(logits, samples, self.calibration)
        except (BackendError, BackendUnavailable) as e:
            backend.close()
            return Trial(option.runtime, option.precision, False, f"failed on the samples: {e}"), None
        refused = self.tolerance.refuses(measured.top1_agreement, measured.mean_abs_diff)
        if refused:
            backend.close()
        trial = Trial(
            option.runtime,
            option.precision,
            accepted=not refused,
            note=refused,
            top1_agreement=round(measured.top1_agreement, 4),
            mean_abs_diff=round(measured.mean_abs_diff, 5),
            max_abs_diff=round(measured.max_abs_diff, 5),
        )
        return trial, None if refused else backend

    def _time(self, samples: SampleSet, backends: Sequence[Backend]) -> list[tuple[float, str]]:
        """Each backend's candidates per second, its best of ``ROUNDS`` turns of ``probe_s / ROUNDS``.

        The turns start from a different backend each round, so none is always timed first. Beside
        each rate: why the backend failed while timed ('' when it did not).
        """
        best = [0.0] * len(backends)
        failures = [""] * len(backends)
        # One runtime has nothing to be compared with: a single round only reports its rate.
        for round_ in range(ROUNDS if len(backends) > 1 else 1):
            for step in range(len(backends)):
                index = (round_ + step) % len(backends)
                if failures[index]:
                    continue
                try:
                    rate = self._rate(backends[index], samples, self.probe_s / ROUNDS)
                except (BackendError, BackendUnavailable) as e:
                    failures[index] = f"failed while timed: {e}"
                    continue
                best[index] = max(best[index], rate)
        return list(zip(best, failures, strict=True))

    def _rate(self, backend: Backend, samples: SampleSet, seconds: float) -> float:
        """Candidates per second of round-robin calls over the samples for ``seconds``."""
        _, taken, scored = self._score(backend, samples.batches, until=time.perf_counter() + seconds)
        return scored / taken if taken > 0 else 0.0

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
