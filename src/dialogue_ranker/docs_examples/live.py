"""The examples answered live: a real ``ranker serve`` on loopback, and the answers written."""

from __future__ import annotations

import json
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dialogue_ranker.bench.load import start_service
from dialogue_ranker.docs_examples.compare import OTHER_RUNTIME, SAME_RUNTIME, Tolerance
from dialogue_ranker.docs_examples.pages import Region, marker_attributes, regions, render_answer, rewrite
from dialogue_ranker.docs_examples.registry import EXAMPLES, PAGES, SUPPORT_BANK, Example
from dialogue_ranker.serving.backends.openvino import openvino_available
from dialogue_ranker.serving.calibration import runtime_key
from dialogue_ranker.serving.cpu import amx_bf16, cpu_model, native_bf16


def runtime_flags(runtime: str) -> list[str] | None:
    """``ranker serve`` flags that force ``runtime``, or None when this host cannot run it."""
    if runtime == "onnx":
        return ["--backend", "onnx"]
    precision = runtime.removeprefix("openvino-")
    if not runtime.startswith("openvino-") or not openvino_available():
        return None
    if precision == "bf16" and not native_bf16():
        return None
    return ["--backend", "openvino", "--openvino.precision", precision]


def bf16_kernels() -> str | None:
    """The bf16 kernels this CPU runs: ``amx``, ``avx512-bf16``, or None (no native bf16)."""
    return "amx" if amx_bf16() else "avx512-bf16" if native_bf16() else None


def machine() -> str:
    """The CPU, as a caption names it."""
    kind = {"amx": "AMX", "avx512-bf16": "AVX-512 BF16", None: "no native bf16"}[bf16_kernels()]
    return f"{cpu_model()} ({kind})"


def tolerance_for(region: Region) -> Tolerance:
    """How far ``region``'s figures may be from this host's live answer.

    :data:`SAME_RUNTIME` where this host runs the documented runtime on the same kernels. Else
    :data:`OTHER_RUNTIME`: another runtime, or bf16 on the other kind of kernels (an AMX Xeon's
    OpenVINO bf16 scored the README's example 0.204 where the AVX-512 BF16 EPYC that wrote it
    scored 0.224).
    """
    if runtime_flags(region.runtime or "") is None:
        return OTHER_RUNTIME
    if region.kernels is not None and region.kernels != bf16_kernels():
        return OTHER_RUNTIME
    return SAME_RUNTIME


class LiveService:
    """A real ``ranker serve`` on loopback with the examples' bank; answers examples over HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str) -> Any:
        """A GET's JSON answer."""
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return json.load(response)

    def answer(self, example: Example) -> Any:
        """The example's JSON answer (a non-200 raises urllib's HTTPError)."""
        if example.body is None:
            return self.get(example.path)
        request = urllib.request.Request(
            self.url + example.path,
            data=json.dumps(example.body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)

    def served(self) -> tuple[str, str]:
        """The default model's ``name@version`` and the runtime that computes its logits."""
        model = self.get("/v1/models")["data"][0]
        return model["model"], runtime_key(model["backend"], model["precision"])


@contextmanager
def live_service(flags: Sequence[str] = (), *, startup_s: float = 180) -> Iterator[LiveService]:
    """``ranker serve`` with the shipped model, the examples' bank and ``flags``, until the block ends."""
    with tempfile.TemporaryDirectory() as scratch:
        bank = Path(scratch) / "support.jsonl"
        bank.write_text("".join(json.dumps(line) + "\n" for line in SUPPORT_BANK))
        bank_flags = ["--bank", f"support={bank}", "--banks.cache-dir", scratch]
        service = start_service("the docs' examples", [*bank_flags, *flags], startup_s=startup_s)
        try:
            yield LiveService(f"http://127.0.0.1:{service.port}")
        finally:
            service.stop()


def write_answers(service: LiveService, pages: Sequence[Path] = PAGES) -> None:
    """Send every example to ``service`` and write its answer regions."""
    model, runtime = service.served()
    where = machine()
    attributes = marker_attributes(runtime, bf16_kernels() if runtime.endswith("bf16") else None)
    for page in pages:
        names = {r.name for r in regions([page]) if r.kind == "answer"}
        replace = {
            (n, "answer"): (
                attributes,
                render_answer(service.answer(EXAMPLES[n]), model=model, runtime=runtime, machine=where),
            )
            for n in names
        }
        page.write_text(rewrite(page.read_text(), replace))
