"""Everything a started app holds: executor, guidelines, and each served model's components.

Several models can be served at once (``--model NAME=DIR``, repeated; the first is the default),
each with its own backends and batchers, sharing the executor and the guidelines: a request picks
one by name, so two rankers can be A/B-tested behind one endpoint. ``--model-alias ALIAS=NAME``
gives a served model a second name (the fixed model name a client sends). The response banks
(``--bank NAME=FILE``) are the service's, not a model's: every served model ranks from them. Built
in the app's lifespan and closed at shutdown. Loading blocks (files, ONNX sessions), so it runs on
the executor; the banks' vectors are made in the background after the start. The request logs
(``--logs.dir``) are the service's too: every served model's ranker writes to them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from opentelemetry import trace

from dialogue_ranker.serving.backends import AnyBackend, BackendChoice, build_backend, choice_of, is_remote
from dialogue_ranker.serving.banks import Bank, BankSet
from dialogue_ranker.serving.batching import Batcher, DirectScorer, Scorer
from dialogue_ranker.serving.context_views import ONE_VIEW
from dialogue_ranker.serving.cpu import serial_tokenizers
from dialogue_ranker.serving.encoding import OffLoopEncoder
from dialogue_ranker.serving.errors import InvalidInput
from dialogue_ranker.serving.guidelines import Guidelines
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.serving.metrics import Metrics
from dialogue_ranker.serving.model_bundle import (
    METADATA_FILE,
    AnyEncoder,
    BundleError,
    ModelBundle,
    OnnxModelSpec,
    load_bundle,
)
from dialogue_ranker.serving.ranking import Ranker
from dialogue_ranker.serving.ranking.candidates import CandidateGatherer
from dialogue_ranker.serving.ranking.reading import ScoreReader
from dialogue_ranker.serving.ranking.scorer import LogitScorer
from dialogue_ranker.serving.request_logs import RequestLogs
from dialogue_ranker.serving.settings import Settings

logger = logging.getLogger(__name__)

#: Builds a backend for one ONNX graph (tests pass fakes).
BackendFactory = Callable[[Settings, OnnxModelSpec], AnyBackend]


@dataclass
class ServedModel:
    """One model bundle with its ranker, its backend and the batching path in front of it."""

    name: str
    bundle: ModelBundle
    ranker: Ranker
    backend: AnyBackend
    batcher: Scorer

    @property
    def backend_name(self) -> str:
        """The backend's name."""
        return self.backend.name

    @property
    def backend_choice(self) -> BackendChoice:
        """How the backend was chosen (``--backend auto``) or forced, and what was measured."""
        return choice_of(self.backend)


@dataclass
class Runtime:
    """The started service components: the served models (the first is the default)."""

    settings: Settings
    executor: ThreadPoolExecutor
    models: dict[str, ServedModel]
    guidelines: Guidelines
    #: Alias -> the served model's name (``--model-alias``), checked at start.
    aliases: dict[str, str] = field(default_factory=dict)
    #: The response banks (``--bank``), shared by every served model; None when none is served.
    banks: BankSet | None = None
    #: The request and feedback logs (``--logs.dir``); None when off.
    logs: RequestLogs | None = None

    @property
    def default(self) -> ServedModel:
        """The model a request that names none gets."""
        return next(iter(self.models.values()))

    @property
    def ranker(self) -> Ranker:
        """The default model's ranker."""
        return self.default.ranker

    @property
    def bundle(self) -> ModelBundle:
        """The default model's bundle."""
        return self.default.bundle

    @property
    def backend_name(self) -> str:
        """The default ranker's backend name."""
        return self.default.backend_name

    @property
    def backends(self) -> list[AnyBackend]:
        """Every backend, the default model's first."""
        return [model.backend for model in self.models.values()]

    @property
    def batchers(self) -> list[Scorer]:
        """Every batcher, the default model's first."""
        return [model.batcher for model in self.models.values()]

    def model(self, name: str | None) -> ServedModel:
        """The served model called ``name``, or aliased so (None: the default).

        Raises:
            InvalidInput: no model is served or aliased under that name (422 naming the field).
        """
        if name is None:
            return self.default
        served = self.models.get(self.aliases.get(name, name))
        if served is None:
            known = ", ".join(repr(n) for n in self.models)
            aliases = f"; aliases: {', '.join(repr(a) for a in self.aliases)}" if self.aliases else ""
            raise InvalidInput(f"model: unknown model {name!r}; served: {known}{aliases}")
        return served

    @classmethod
    async def start(
        cls,
        settings: Settings,
        metrics: Metrics,
        *,
        backend_factory: BackendFactory = build_backend,
        tracer: trace.Tracer | None = None,
        banks: Sequence[Bank] | None = None,
    ) -> Runtime:
        """Load the guidelines and every bundle, start their backends and batchers, and the banks.

        The banks' vectors are made in the background: this returns before they are ready.
        ``banks``: the ``--bank`` files already read (else they are read here).

        Raises:
            BankError: a bank file is malformed, or no retrieval encoder is there for the banks.
            LogsError: the logs directory cannot be written.
            BundleError, GuidelineError: a file is missing or malformed, or two models share a name.
            AliasError: a ``--model-alias`` names no served model, or a served model's own name.
            BackendUnavailable: a backend cannot start.
        """
        serial_tokenizers()
        executor = ThreadPoolExecutor(settings.executor_threads, thread_name_prefix="ranker")
        loop = asyncio.get_running_loop()
        models: dict[str, ServedModel] = {}
        backends: list[AnyBackend] = []
        batchers: list[Scorer] = []
        bank_set: BankSet | None = None
        logs: RequestLogs | None = None
        try:
            logs = await loop.run_in_executor(executor, RequestLogs.start, settings.logs, metrics)
            guidelines = await loop.run_in_executor(executor, Guidelines.from_file, settings.guidelines)
            bank_set = await BankSet.start(settings, metrics, executor, banks)
            for name, directory in settings.served_models():
                bundle = await loop.run_in_executor(executor, load_bundle, directory)
                name = name or bundle.name
                if name in models:
                    raise BundleError(f"two models are served as {name!r}: name them with --model NAME=DIR")
                starter = _ModelStarter(
                    settings, metrics, backend_factory, tracer, executor, name, bundle, bank_set, logs
                )
                try:
                    served = await starter.start(guidelines)
                finally:
                    backends.extend(starter.backends)
                    batchers.extend(starter.batchers)
                models[name] = served
                choice = served.backend_choice
                metrics.model_info.labels(name).info(
                    {"name": bundle.name, "version": bundle.version, "backend": served.backend_name,
                     "precision": choice.precision, "backend_selection": choice.mode,
                     "backend_reason": choice.reason, "backend_rates": choice.rates(),
                     "calibration": served.bundle.calibration_in_force}
                )  # fmt: skip
                logger.info(
                    "model ready name=%s model=%s backend=%s precision=%s calibration=%s",
                    name, bundle.model_id, served.backend_name, choice.precision,
                    served.bundle.calibration_in_force,
                )  # fmt: skip
            aliases = _checked_aliases(settings.model_aliases(), models)
            if bank_set is not None:
                bank_set.embed_in_background()  # after the models: auto timed its runtimes alone
        except BaseException:
            await _close(batchers, backends, executor, bank_set, logs)
            raise
        return cls(settings, executor, models, guidelines, aliases, bank_set, logs)

    def waiting(self) -> str | None:
        """What keeps the service from being ready other than its backends: banks still embedding."""
        return None if self.banks is None else self.banks.waiting()

    async def healthy(self) -> bool:
        """True when every bank is ready, no circuit breaker is open and every backend answers its probe."""
        if self.waiting() is not None:
            return False
        if not all(batcher.available() for batcher in self.batchers):
            return False
        loop = asyncio.get_running_loop()
        for backend in self.backends:
            if is_remote(backend):
                healthy = await backend.health()
            else:
                healthy = await loop.run_in_executor(self.executor, backend.health)
            if not healthy:
                return False
        return True

    async def close(self) -> None:
        """Stop batchers (failing waiters with NotReady), the banks' embedding, backends, executor, logs.

        The logs write the lines still queued before they close.
        """
        await _close(self.batchers, self.backends, self.executor, self.banks, self.logs)


@dataclass
class _ModelStarter:
    """Starts one bundle's backend and batching path, listing what it started even if a step fails."""

    settings: Settings
    metrics: Metrics
    backend_factory: BackendFactory
    tracer: trace.Tracer | None
    executor: ThreadPoolExecutor
    name: str
    bundle: ModelBundle
    banks: BankSet | None = None
    logs: RequestLogs | None = None
    backends: list[AnyBackend] = field(default_factory=list)
    batchers: list[Scorer] = field(default_factory=list)

    async def start(self, guidelines: Guidelines) -> ServedModel:
        settings, bundle = self.settings, self.bundle
        encoder = bundle.pair_encoder()
        batcher = await self._component(bundle.ranker, encoder)
        # Scores are calibrated with the map fitted on the chosen runtime's logits, where there is one.
        backend = self.backends[0]
        bundle = self.bundle = bundle.for_runtime(choice_of(backend).runtime)
        ranking, metrics, name = settings.ranking, self.metrics, self.name
        # A request's three steps (serving/ranking/): its candidates, their logits, their reading.
        ranker = Ranker(
            candidates=CandidateGatherer(
                guidelines=guidelines, banks=self.banks, mask_repeats=ranking.mask_repeats
            ),
            scorer=LogitScorer(
                encoder=OffLoopEncoder(
                    encoder, executor=self.executor, metrics=metrics, backend=backend.name, model=name
                ),
                batcher=batcher,
                views=bundle.views if ranking.last_turn_view else ONE_VIEW,
                cache_entries=ranking.logit_cache_entries,
                metrics=metrics,
                model=name,
                admission_margin=settings.batching.admission_margin,
                tracer=self.tracer,
            ),
            reader=ScoreReader(
                model_id=bundle.model_id,
                calibration=bundle.calibration,
                threshold=bundle.threshold,
                bank_fusion=None if self.banks is None else self.banks.fusion,
                soft_mask_penalty=ranking.soft_mask_penalty,
                metrics=metrics,
                model=name,
            ),
            settings=ranking,
            request_timeout_s=settings.limits.request_timeout_s,
            logs=self.logs,
        )
        return ServedModel(self.name, bundle, ranker, backend, batcher)

    async def _component(self, spec: OnnxModelSpec, encoder: AnyEncoder) -> Scorer:
        """The batching path of the ranker's graph; ``encoder`` pads its sequences and bounds their length."""
        settings, bundle = self.settings, self.bundle
        backend = self.backend_factory(settings, spec)
        pad = encoder.pad
        batcher: Scorer
        if is_remote(backend):  # it batches itself: no gateway queue in front of it
            await backend.start()
            self.backends.append(backend)
            batcher = DirectScorer(
                backend=backend, pad=pad, metrics=self.metrics, model=self.name,
                max_in_flight_pairs=settings.batching.queue_max_pairs, tracer=self.tracer,
            )  # fmt: skip
        else:
            await asyncio.get_running_loop().run_in_executor(self.executor, backend.start)
            self.backends.append(backend)
            batching = settings.batching
            if batching.sub_batch_pairs == 0 and bundle.serving_sub_batch_pairs:
                # The model's scores depend on batch-mates unless run this many pairs a call.
                batching = batching.model_copy(update={"sub_batch_pairs": bundle.serving_sub_batch_pairs})
            batcher = Batcher(
                backend=backend, pad=pad, settings=batching, metrics=self.metrics,
                model=self.name, max_length=encoder.max_length, breaker=settings.breaker,
                tracer=self.tracer,
                warm_up_item=encoder.synthetic() if isinstance(encoder, ListEncoder) else None,
            )  # fmt: skip
        await batcher.start(warm_up=isinstance(batcher, Batcher))
        self.batchers.append(batcher)
        return batcher


class AliasError(ValueError):
    """A ``--model-alias`` (``RANKER_MODEL_ALIAS``) names no served model, or takes a served model's name."""


def check_aliases(settings: Settings) -> None:
    """Refuse a bad ``--model-alias`` before anything loads, the served names read from the bundles.

    A bundle whose metadata cannot be read is left for the start to report (as a BundleError).

    Raises:
        AliasError: an alias names no served model, or a served model's own name.
    """
    names = []
    for name, directory in settings.served_models():
        if name is None:
            try:
                name = str(json.loads((directory / METADATA_FILE).read_text())["name"])
            except (OSError, ValueError, KeyError, TypeError):
                return
        names.append(name)
    _checked_aliases(settings.model_aliases(), names)


def _checked_aliases(aliases: dict[str, str], served: Collection[str]) -> dict[str, str]:
    """``aliases`` once every target is a served model and no alias hides one.

    Checked once the models are loaded too, not with the settings: a plain ``--model DIR`` is
    served under its bundle's name.
    """
    names = ", ".join(repr(n) for n in served)
    for alias, target in aliases.items():
        if alias in served:
            raise AliasError(f"--model-alias {alias}={target}: {alias!r} is already a served model's name")
        if target not in served:
            raise AliasError(
                f"--model-alias {alias}={target}: no served model is called {target!r} (served: {names})"
            )
    return aliases


async def _close(
    batchers: list[Scorer],
    backends: list[AnyBackend],
    executor: ThreadPoolExecutor,
    banks: BankSet | None,
    logs: RequestLogs | None = None,
) -> None:
    if banks is not None:
        await banks.close()
    for batcher in batchers:
        await batcher.close()
    for backend in backends:
        if is_remote(backend):
            await backend.close()
        else:
            backend.close()
    executor.shutdown(wait=False, cancel_futures=True)
    if logs is not None:  # after the batchers: no request is ranked any more
        await asyncio.to_thread(logs.close)
