"""The request/answer examples of the README and the docs, produced by the code so they cannot drift.

Each example is declared once here (:data:`EXAMPLES`: route, body). The pages hold regions between
markers that this module writes:

    <!-- example:hot-room request -->   the curl command (text; `ranker docs` rewrites it)
    <!-- /example -->
    <!-- example:hot-room answer runtime=openvino-bf16 -->   the live answer and who gave it
    <!-- /example -->

``ranker docs`` rewrites the request regions (no model needed) and ``--check`` fails on an edited
one; ``ranker docs --examples`` also sends every example to the shipped model through a real
``ranker serve`` on loopback at its defaults (``--backend auto``) and writes the answers, with the
model, the runtime ``auto`` chose and the CPU in a caption. The suite
(``tests/integration/test_docs_examples.py``) sends each documented request again and fails when a
documented figure differs from the live answer beyond :data:`SAME_RUNTIME` (the documented runtime
forced, where this host can run it) or :data:`OTHER_RUNTIME` (elsewhere: each runtime has its own
calibration map, so their scores differ slightly).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogue_ranker.serving.backends.openvino import openvino_available
from dialogue_ranker.serving.calibration import runtime_key
from dialogue_ranker.serving.cpu import amx_bf16, cpu_model, native_bf16
from dialogue_ranker.serving.settings import REPO_ROOT

#: The pages that hold example regions.
PAGES = (
    REPO_ROOT / "README.md",
    REPO_ROOT / "docs" / "getting-started.md",
    REPO_ROOT / "docs" / "guides" / "rerank-clients.md",
    REPO_ROOT / "docs" / "guides" / "banks.md",
)
#: The bank the bank examples name, as its file's lines.
SUPPORT_BANK = (
    {"id": "reset-link", "text": "I can send you a password reset link right now.", "generator": "template"},
    {"id": "tracking", "text": "Your package is on its way; here is the tracking link.",
     "action": "share-tracking-link"},
    {"id": "refund", "text": "I have issued a refund to your card.", "action": "issue-refund"},
)  # fmt: skip
#: Files the pages show, by region name.
FILES = {"support-bank": SUPPORT_BANK}
#: Answer fields left out of the pages when null (the README says so), per ranked entry.
NULL_FIELDS = ("action", "mask_reason", "bank", "retrieval_score")
#: Answer fields that differ from call to call by nature (ids, clocks): shown, never compared.
VOLATILE = frozenset({"id", "loaded_at", "embedded_at", "embed_seconds"})


@dataclass(frozen=True)
class Example:
    """One documented request: its route and JSON body (None: a GET)."""

    name: str
    path: str
    body: Mapping[str, Any] | None = None


HOT_ROOM = {
    "context": [{"speaker": "user", "text": "It is so hot in here, can you help?"}],
    "situations": ["The window is closed.", "There is a fan in the closet."],
    "candidates": [
        {"id": "window", "text": "Shall I open the window for you?", "generator": "retrieval"},
        {"id": "pizza", "text": "Pizza is great.", "generator": "llm"},
        {"id": "idk", "text": "I do not know.", "generator": "template"},
    ],
}
EXAMPLES = {
    e.name: e
    for e in (
        Example("hot-room", "/rank", HOT_ROOM),
        Example("first-request", "/rank", {
            "context": [{"speaker": "customer", "text": "I forgot my password."}],
            "candidates": [
                {"id": "a", "text": "Let me pull up your account.", "action": "look-up-account",
                 "generator": "retrieval"},
                {"id": "b", "text": "I can cancel that order for you.", "action": "cancel-order",
                 "generator": "llm"},
                "One moment please.",
            ],
            "intent": "reset_login",
        }),
        Example("rerank-curl", "/v2/rerank", {
            "model": "dialogue-minilm-l6", "query": "It is so hot in here, can you help?",
            "documents": ["Shall I open the window for you?", "Pizza is great.", "I do not know."],
            "top_n": 2,
        }),
        Example("rerank-context", "/v2/rerank", {
            "model": "dialogue-minilm-l6",
            "context": [{"speaker": "user", "text": "Hi there."},
                        {"speaker": "bot", "text": "Hello! How can I help?"}],
            "query": "It is so hot in here, can you help?",
            "situations": ["The window is closed.", "There is a fan in the closet."],
            "documents": ["Shall I open the window for you?", "Pizza is great."],
            "min_score": 0.3,
        }),
        Example("rerank-litellm", "/v2/rerank", {
            "model": "dialogue-minilm-l6", "query": "It is so hot in here, can you help?",
            "documents": ["Shall I open the window for you?", "Pizza is great.", "I do not know.",
                          "I can turn on the fan in the closet for you."],
            "top_n": 2,
        }),
        Example("bank-query", "/rank", {
            "context": "I forgot my password and cannot log in.",
            "bank": "support",
            "retrieve_k": 20,
            "candidates": [{"id": "own", "text": "One moment please."}],
        }),
        Example("banks-list", "/v1/banks"),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Tolerance:
    """How far a documented figure may be from the live one."""

    score: float
    logit: float
    threshold: float


#: The documented runtime forced on this host: scores of one runtime on one graph differ only by the
#: CPU's kernels (int8 or fp32 weights in OpenVINO bf16 on AMX).
SAME_RUNTIME = Tolerance(score=0.01, logit=0.05, threshold=0.001)
#: Another runtime (the documented one cannot run here): each has its own calibration map.
OTHER_RUNTIME = Tolerance(score=0.04, logit=0.25, threshold=0.03)


# -- rendering -----------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_json(value: Any, indent: str = "") -> str:
    """JSON as the pages show it: an object's keys one a line, a long list's items one a line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{_compact(k)}: {render_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and len(_compact(value)) > 60:
        items = [f"{inner}{_compact(v)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return _compact(value)


def render_request(example: Example) -> str:
    """The example as a curl command against ``make serve``'s address."""
    url = f"localhost:8000{example.path}"
    if example.body is None:
        return f"```sh\ncurl -s {url}\n```"
    return f"```sh\ncurl -s {url} -H 'content-type: application/json' -d '{render_json(example.body)}'\n```"


def shown_answer(answer: Any) -> Any:
    """The answer as the pages show it: null ``NULL_FIELDS`` of ranked and masked entries left out."""
    if isinstance(answer, dict):
        return {
            k: shown_answer(v) for k, v in answer.items() if not (k in NULL_FIELDS and v is None)
        }
    if isinstance(answer, list):
        return [shown_answer(v) for v in answer]
    return answer


def render_answer(answer: Any, *, model: str, runtime: str, machine: str) -> str:
    """The answer block and its caption: which model, runtime and CPU gave it."""
    caption = (
        f"Answered by `{model}` on `{runtime}`: the runtime `--backend auto` chose on {machine} when "
        "`ranker docs --examples` wrote this. Each runtime has its own calibration map, so where `auto` "
        "chooses another, scores differ slightly (about 0.01)."
    )
    block = render_json(rounded(shown_answer(answer)))
    return f"```json\n{block}\n```\n\n" + "\n".join(textwrap.wrap(caption, width=100))


# -- the regions in the pages --------------------------------------------------------------------

#: A region: its opening marker's line, its body (whole lines, possibly none) and the closing line.
REGION = re.compile(
    r"^<!-- example:(?P<name>[\w-]+) (?P<kind>request|answer|file)(?: runtime=(?P<runtime>[\w-]+))? -->\n"
    r"(?P<body>(?:(?!<!-- /?example).*\n)*?)"
    r"<!-- /example -->$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Region:
    """One marked region of a page."""

    page: Path
    name: str
    kind: str
    runtime: str | None
    body: str


def regions(pages: Sequence[Path] = PAGES) -> Iterator[Region]:
    """Every marked region of ``pages``, in page order."""
    for page in pages:
        for match in REGION.finditer(page.read_text()):
            body = match["body"].removesuffix("\n")
            yield Region(page, match["name"], match["kind"], match["runtime"], body)


def documented_answer(region: Region) -> Any:
    """The JSON of an answer region."""
    block = re.search(r"```json\n(.*?)\n```", region.body, re.DOTALL)
    if block is None:
        raise ValueError(f"{region.page.name}: example {region.name}: no json block in its answer")
    return json.loads(block[1])


def rewrite(text: str, replace: Mapping[tuple[str, str], tuple[str | None, str]]) -> str:
    """``text`` with each (name, kind) region's marker runtime and body replaced."""

    def one(match: re.Match[str]) -> str:
        key = (match["name"], match["kind"])
        if key not in replace:
            return match[0]
        runtime, body = replace[key]
        suffix = f" runtime={runtime}" if runtime else ""
        return f"<!-- example:{match['name']} {match['kind']}{suffix} -->\n{body}\n<!-- /example -->"

    return REGION.sub(one, text)


def render_file(lines: Sequence[Mapping[str, Any]]) -> str:
    """A JSONL file's lines as a block."""
    return "```json\n" + "\n".join(_compact(line) for line in lines) + "\n```"


def _text_regions(region: Region) -> str | None:
    """What a request or file region should hold (None for an answer region)."""
    if region.kind == "file":
        return render_file(FILES[region.name])
    if region.kind == "request":
        return render_request(EXAMPLES[region.name])
    return None


def stale_requests(pages: Sequence[Path] = PAGES) -> list[str]:
    """Request and file regions whose text differs from what this module renders (or unknown names)."""
    stale = []
    for region in regions(pages):
        if region.name not in (FILES if region.kind == "file" else EXAMPLES):
            stale.append(f"{region.page.name}: unknown example {region.name!r}")
        elif region.kind != "answer" and region.body != _text_regions(region):
            stale.append(f"{region.page.name}: example {region.name} {region.kind}")
    return stale


def write_requests(pages: Sequence[Path] = PAGES) -> None:
    """Rewrite every request and file region."""
    for page in pages:
        replace = {
            (r.name, r.kind): (None, text) for r in regions([page]) if (text := _text_regions(r)) is not None
        }
        page.write_text(rewrite(page.read_text(), replace))


# -- live answers --------------------------------------------------------------------------------


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


def machine() -> str:
    """The CPU, as a caption names it."""
    kind = "AMX" if amx_bf16() else "AVX-512 BF16" if native_bf16() else "no native bf16"
    return f"{cpu_model()} ({kind})"


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
def live_service(flags: Sequence[str] = (), *, port: int, startup_s: float = 180) -> Iterator[LiveService]:
    """``ranker serve`` with the shipped model, the examples' bank and ``flags``, until the block ends."""
    with tempfile.TemporaryDirectory() as scratch:
        bank = Path(scratch) / "support.jsonl"
        bank.write_text("".join(json.dumps(line) + "\n" for line in SUPPORT_BANK))
        command = [
            sys.executable, "-m", "dialogue_ranker.serving", "--port", str(port), "--log-level", "warning",
            "--bank", f"support={bank}", "--banks.cache-dir", scratch, *flags,
        ]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        service = LiveService(f"http://127.0.0.1:{port}")
        try:
            _wait_ready(service, process, startup_s)
            yield service
        finally:
            process.terminate()
            process.wait(timeout=30)


def _wait_ready(service: LiveService, process: subprocess.Popen[bytes], startup_s: float) -> None:
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            assert process.stderr is not None
            raise RuntimeError(f"ranker serve exited: {process.stderr.read().decode()[-2000:]}")
        try:
            service.get("/readyz")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise RuntimeError(f"ranker serve was not ready within {startup_s:g} s")


def write_answers(service: LiveService, pages: Sequence[Path] = PAGES) -> None:
    """Send every example to ``service`` and write its answer regions."""
    model, runtime = service.served()
    where = machine()
    for page in pages:
        names = {r.name for r in regions([page]) if r.kind == "answer"}
        replace = {
            (n, "answer"): (runtime, render_answer(service.answer(EXAMPLES[n]), model=model, runtime=runtime,
                                                   machine=where))
            for n in names
        }  # fmt: skip
        page.write_text(rewrite(page.read_text(), replace))


# -- comparing -----------------------------------------------------------------------------------


def differences(documented: Any, live: Any, tolerance: Tolerance, where: str = "") -> list[str]:
    """Where the live answer differs from the documented one beyond ``tolerance`` (empty: none)."""
    if isinstance(documented, dict):
        if not isinstance(live, dict):
            return [f"{where}: documented an object, got {_compact(live)[:80]}"]
        found = []
        for key, value in documented.items():
            if key in VOLATILE:
                continue
            if key not in live:
                found.append(f"{where}.{key}: documented, absent from the live answer")
                continue
            found += differences(value, live[key], tolerance, f"{where}.{key}")
        return found
    if isinstance(documented, list):
        if not isinstance(live, list) or len(live) != len(documented):
            return [f"{where}: documented {len(documented)} items, got {_compact(live)[:120]}"]
        return [d for i, (a, b) in enumerate(zip(documented, live, strict=True))
                for d in differences(a, b, tolerance, f"{where}[{i}]")]  # fmt: skip
    if isinstance(documented, float) and isinstance(live, int | float):
        key = where.rsplit(".", 1)[-1]
        limit = {"logit": tolerance.logit, "threshold": tolerance.threshold}.get(key, tolerance.score)
        if abs(documented - live) > limit:
            return [f"{where}: documented {documented}, live {live:.4f} (tolerance {limit})"]
        return []
    if documented != live:
        return [f"{where}: documented {_compact(documented)}, live {_compact(live)}"]
    return []


def rounded(value: Any, places: int = 3) -> Any:
    """Floats rounded to ``places`` for the pages (the answers' own precision is noise past it)."""
    if isinstance(value, float):
        return round(value, places)
    if isinstance(value, dict):
        return {k: rounded(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, places) for v in value]
    return value
