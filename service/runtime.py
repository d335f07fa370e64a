"""Everything a started app holds: executor, model bundle, guidelines, backends, batchers, ranker.

Built in the app's lifespan and closed at shutdown. Loading blocks (files, ONNX sessions), so
it runs on the executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from opentelemetry import trace

from service.backends import AnyBackend, build_backend, is_remote
from service.batching import Batcher, DirectScorer, Scorer
from service.encoding import OffLoopEncoder
from service.guidelines import Guidelines
from service.metrics import Metrics
from service.model_bundle import ModelBundle, OnnxModelSpec, load_bundle
from service.ranking import Ranker
from service.selection import StatementSelector
from service.settings import Settings

logger = logging.getLogger(__name__)

#: Builds a backend for one ONNX graph (tests pass fakes).
BackendFactory = Callable[[Settings, OnnxModelSpec], AnyBackend]


@dataclass
class Runtime:
    """The started service components."""

    settings: Settings
    executor: ThreadPoolExecutor
    bundle: ModelBundle
    ranker: Ranker
    backends: list[AnyBackend] = field(default_factory=list)
    batchers: list[Scorer] = field(default_factory=list)

    @property
    def backend_name(self) -> str:
        """The ranker's backend name."""
        return self.backends[0].name

    @classmethod
    async def start(
        cls,
        settings: Settings,
        metrics: Metrics,
        *,
        backend_factory: BackendFactory = build_backend,
        tracer: trace.Tracer | None = None,
    ) -> Runtime:
        """Load the bundle and guidelines, start backends and batchers.

        Raises:
            BundleError, GuidelineError: a file is missing or malformed.
            BackendUnavailable: a backend cannot start.
        """
        tracer = tracer or trace.NoOpTracer()
        executor = ThreadPoolExecutor(settings.executor_threads, thread_name_prefix="ranker")
        loop = asyncio.get_running_loop()
        backends: list[AnyBackend] = []
        batchers: list[Scorer] = []
        try:
            bundle = await loop.run_in_executor(executor, load_bundle, settings.model)
            guidelines = await loop.run_in_executor(executor, Guidelines.from_file, settings.guidelines)

            async def component(spec: OnnxModelSpec, model: str, encoder_max: int) -> Scorer:
                backend = backend_factory(settings, spec)
                encoder = bundle.pair_encoder()
                batcher: Scorer
                if is_remote(backend):  # it batches itself: no gateway queue in front of it
                    await backend.start()
                    backends.append(backend)
                    batcher = DirectScorer(
                        backend=backend, pad=encoder.pad, metrics=metrics, model=model,
                        max_in_flight_pairs=settings.batching.queue_max_pairs, tracer=tracer,
                    )  # fmt: skip
                else:
                    await loop.run_in_executor(executor, backend.start)
                    backends.append(backend)
                    batching = settings.batching
                    if batching.sub_batch_pairs == 0 and bundle.serving_sub_batch_pairs:
                        # The model's scores depend on batch-mates unless run this many pairs a call.
                        need = bundle.serving_sub_batch_pairs
                        batching = batching.model_copy(update={"sub_batch_pairs": need})
                    batcher = Batcher(
                        backend=backend, pad=encoder.pad, settings=batching, executor=executor,
                        metrics=metrics, model=model, max_length=encoder_max, breaker=settings.breaker,
                        tracer=tracer,
                    )  # fmt: skip
                await batcher.start(warm_up=isinstance(batcher, Batcher))
                batchers.append(batcher)
                return batcher

            ranker_batcher = await component(bundle.ranker, "ranker", bundle.ranker.max_length)
            selector = None
            selector_encoder = bundle.selector_encoder()
            if bundle.selector is not None and selector_encoder is not None:
                selector_batcher = await component(
                    bundle.selector.model, "selector", bundle.selector.model.max_length
                )
                selector = StatementSelector(
                    bundle.selector,
                    encoder=OffLoopEncoder(
                        selector_encoder, executor=executor, metrics=metrics, backend=backends[-1].name,
                        model="selector",
                    ),
                    batcher=selector_batcher,
                    metrics=metrics,
                )  # fmt: skip
            ranker = Ranker(
                bundle=bundle,
                encoder=OffLoopEncoder(
                    bundle.pair_encoder(),
                    executor=executor,
                    metrics=metrics,
                    backend=backends[0].name,
                    model="ranker",
                ),
                batcher=ranker_batcher,
                guidelines=guidelines,
                metrics=metrics,
                settings=settings.ranking,
                request_timeout_s=settings.limits.request_timeout_s,
                selector=selector,
                admission_margin=settings.batching.admission_margin,
                tracer=tracer,
            )
        except BaseException:
            await _close(batchers, backends, executor)
            raise
        metrics.model_info.info(
            {"name": bundle.name, "version": bundle.version, "backend": backends[0].name,
             "selector": str(selector is not None).lower()}
        )  # fmt: skip
        logger.info(
            "model ready model=%s backend=%s selector=%s",
            bundle.model_id,
            backends[0].name,
            selector is not None,
        )
        return cls(settings, executor, bundle, ranker, backends, batchers)

    async def healthy(self) -> bool:
        """True when no circuit breaker is open and every backend answers its probe."""
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
        """Stop batchers (failing waiters with NotReady), close backends and the executor."""
        await _close(self.batchers, self.backends, self.executor)


async def _close(batchers: list[Scorer], backends: list[AnyBackend], executor: ThreadPoolExecutor) -> None:
    for batcher in batchers:
        await batcher.close()
    for backend in backends:
        if is_remote(backend):
            await backend.close()
        else:
            backend.close()
    executor.shutdown(wait=False, cancel_futures=True)
