"""The README's and the guides' examples are what the shipped model answers (`ranker docs --examples`).

Each documented request is sent again through a real `ranker serve` on loopback, on the runtime the
page names where this host can run it (else ONNX Runtime, with the wider cross-runtime tolerance,
which a bf16 answer written on the other kind of bf16 kernels is held to as well),
and every documented figure (scores, logits, threshold, model version, ids and order) must match
the live answer within `docs_examples.SAME_RUNTIME` / `OTHER_RUNTIME`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dialogue_ranker import docs_examples
from dialogue_ranker.docs_examples import EXAMPLES, LiveService, Region

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANSWERS = [r for r in docs_examples.regions() if r.kind == "answer"]
RUNTIMES = sorted({r.runtime or "" for r in ANSWERS})


def _label(region: Region) -> str:
    return f"{region.page.name}:{region.name}"


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, LiveService]]:
    """One service per documented runtime: that runtime forced, or ONNX Runtime where it cannot run."""
    running: dict[str, LiveService] = {}
    contexts = []
    try:
        for runtime in RUNTIMES:
            flags = docs_examples.runtime_flags(runtime)
            context = docs_examples.live_service(flags or ["--backend", "onnx"])
            running[runtime] = context.__enter__()
            contexts.append(context)
        yield running
    finally:
        for context in reversed(contexts):
            context.__exit__(None, None, None)


def test_every_answer_region_names_the_runtime_that_answered_and_a_known_example() -> None:
    assert ANSWERS, "the pages hold no example answers"
    for region in ANSWERS:
        assert region.runtime, f"{_label(region)}: no runtime= in its marker (run `ranker docs --examples`)"
        assert region.name in EXAMPLES


@pytest.mark.parametrize("region", ANSWERS, ids=_label)
def test_a_documented_answer_is_what_the_shipped_model_answers(
    region: Region, services: dict[str, LiveService]
) -> None:
    service, tolerance = services[region.runtime or ""], docs_examples.tolerance_for(region)
    live = docs_examples.shown_answer(service.answer(EXAMPLES[region.name]))
    found = docs_examples.differences(docs_examples.documented_answer(region), live, tolerance)
    assert found == [], f"{_label(region)} drifted (run `ranker docs --examples`): {found}"
    model, _ = service.served()
    assert f"`{model}`" in region.body, f"{_label(region)}: the caption names another model than {model}"


def test_an_edited_figure_in_the_readme_fails_the_comparison(
    tmp_path: Path, services: dict[str, LiveService]
) -> None:
    readme = next(r for r in ANSWERS if r.page.name == "README.md")
    service, tolerance = services[readme.runtime or ""], docs_examples.tolerance_for(readme)
    live = docs_examples.shown_answer(service.answer(EXAMPLES[readme.name]))
    # Raise the first documented score by 0.05, as a hand edit (or an older model's figure) would.
    text = readme.page.read_text()
    edited_text = re.sub(r'"score": (\d\.\d+)', lambda m: f'"score": {float(m[1]) + 0.05:.3f}', text, count=1)
    copy = tmp_path / "README.md"
    copy.write_text(edited_text)
    (edited,) = [r for r in docs_examples.regions([copy]) if (r.name, r.kind) == (readme.name, "answer")]
    found = docs_examples.differences(docs_examples.documented_answer(edited), live, tolerance)
    assert found and ".ranking[0].score" in found[0]
    # A changed model version is named too.
    bumped = docs_examples.documented_answer(readme) | {"model": "dialogue-minilm-l6@9.9.9"}
    assert any(".model" in f for f in docs_examples.differences(bumped, live, tolerance))


def test_the_documented_requests_are_what_the_code_renders(tmp_path: Path) -> None:
    assert docs_examples.stale_requests() == [], "run `ranker docs`"
    page = tmp_path / "page.md"
    page.write_text(docs_examples.PAGES[0].read_text().replace("It is so hot", "It is so cold", 1))
    assert docs_examples.stale_requests([page]) == ["page.md: example hot-room request"]
