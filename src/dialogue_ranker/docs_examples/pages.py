"""The example regions of the pages: rendering them, finding them, rewriting them."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dialogue_ranker.docs_examples.compare import compact_json, rounded
from dialogue_ranker.docs_examples.registry import EXAMPLES, FILES, NULL_FIELDS, PAGES, Example

# -- rendering -----------------------------------------------------------------------------------


def render_json(value: Any, indent: str = "") -> str:
    """JSON as the pages show it: an object's keys one a line, a long list's items one a line."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{compact_json(k)}: {render_json(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and value and len(compact_json(value)) > 60:
        items = [f"{inner}{compact_json(v)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return compact_json(value)


def render_request(example: Example) -> str:
    """The example as a curl command against ``make serve``'s address."""
    url = f"localhost:8000{example.path}"
    if example.body is None:
        return f"```sh\ncurl -s {url}\n```"
    return f"```sh\ncurl -s {url} -H 'content-type: application/json' -d '{render_json(example.body)}'\n```"


def shown_answer(answer: Any) -> Any:
    """The answer as the pages show it: null ``NULL_FIELDS`` of ranked and masked entries left out."""
    if isinstance(answer, dict):
        return {k: shown_answer(v) for k, v in answer.items() if not (k in NULL_FIELDS and v is None)}
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
    r"^<!-- example:(?P<name>[\w-]+) (?P<kind>request|answer|file)"
    r"(?: runtime=(?P<runtime>[\w-]+))?(?: kernels=(?P<kernels>[\w-]+))? -->\n"
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
    #: For a bf16 runtime, the CPU's bf16 kernels that answered (``amx`` or ``avx512-bf16``): the
    #: two round differently, so the same runtime on the other kind is another runtime's figures.
    kernels: str | None = None


def regions(pages: Sequence[Path] = PAGES) -> Iterator[Region]:
    """Every marked region of ``pages``, in page order."""
    for page in pages:
        for match in REGION.finditer(page.read_text()):
            body = match["body"].removesuffix("\n")
            yield Region(page, match["name"], match["kind"], match["runtime"], body, match["kernels"])


def documented_answer(region: Region) -> Any:
    """The JSON of an answer region."""
    block = re.search(r"```json\n(.*?)\n```", region.body, re.DOTALL)
    if block is None:
        raise ValueError(f"{region.page.name}: example {region.name}: no json block in its answer")
    return json.loads(block[1])


def marker_attributes(runtime: str | None, kernels: str | None = None) -> str:
    """An answer marker's attributes: the runtime that answered and, for bf16, the CPU's kernels."""
    return "".join(f" {k}={v}" for k, v in (("runtime", runtime), ("kernels", kernels)) if v)


def rewrite(text: str, replace: Mapping[tuple[str, str], tuple[str, str]]) -> str:
    """``text`` with each (name, kind) region's marker attributes and body replaced.

    The attributes are :func:`marker_attributes`' text ("" for a request or file region).
    """

    def one(match: re.Match[str]) -> str:
        key = (match["name"], match["kind"])
        if key not in replace:
            return match[0]
        suffix, body = replace[key]
        return f"<!-- example:{match['name']} {match['kind']}{suffix} -->\n{body}\n<!-- /example -->"

    return REGION.sub(one, text)


def render_file(lines: Sequence[Mapping[str, Any]]) -> str:
    """A JSONL file's lines as a block."""
    return "```json\n" + "\n".join(compact_json(line) for line in lines) + "\n```"


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
            (r.name, r.kind): ("", text) for r in regions([page]) if (text := _text_regions(r)) is not None
        }
        page.write_text(rewrite(page.read_text(), replace))
