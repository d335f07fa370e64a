"""An answer marker records the bf16 kernels that answered; the tolerance follows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from dialogue_ranker import docs_examples
from dialogue_ranker.docs_examples import live
from dialogue_ranker.docs_examples.pages import marker_attributes, regions, rewrite

PAGE = """# A page

<!-- example:hot-room answer runtime=openvino-bf16 kernels=avx512-bf16 -->
old answer
<!-- /example -->

<!-- example:hot-room request -->
curl
<!-- /example -->
"""


def test_the_kernels_are_read_from_the_marker_and_written_back(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    answer, request = regions([page])
    assert (answer.runtime, answer.kernels, answer.body) == ("openvino-bf16", "avx512-bf16", "old answer")
    assert (request.runtime, request.kernels) == (None, None)
    page.write_text(
        rewrite(PAGE, {("hot-room", "answer"): (marker_attributes("openvino-bf16", "amx"), "new")})
    )
    (answer, _) = regions([page])
    assert (answer.runtime, answer.kernels, answer.body) == ("openvino-bf16", "amx", "new")
    page.write_text(
        rewrite(page.read_text(), {("hot-room", "answer"): (marker_attributes("onnx"), "onnx's")})
    )
    assert "<!-- example:hot-room answer runtime=onnx -->\nonnx's\n" in page.read_text()


@pytest.mark.parametrize(
    ("here", "written", "expected"),
    [
        ("avx512-bf16", "avx512-bf16", docs_examples.SAME_RUNTIME),
        ("amx", "avx512-bf16", docs_examples.OTHER_RUNTIME),  # AMX rounds bf16 otherwise
        ("amx", None, docs_examples.SAME_RUNTIME),  # a marker from before the kernels were recorded
    ],
)
def test_bf16_figures_are_held_to_the_same_runtime_s_tolerance_only_on_the_same_kernels(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, here: str, written: str | None, expected
) -> None:
    monkeypatch.setattr(live, "bf16_kernels", lambda: here)
    monkeypatch.setattr(live, "runtime_flags", lambda runtime: ["--backend", "openvino"])
    page = tmp_path / "page.md"
    page.write_text(
        rewrite(PAGE, {("hot-room", "answer"): (marker_attributes("openvino-bf16", written), "a")})
    )
    (answer, _) = regions([page])
    assert live.tolerance_for(answer) == expected


def test_a_runtime_this_host_cannot_run_gets_the_other_runtime_s_tolerance(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(live, "runtime_flags", lambda runtime: None)
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    (answer, _) = regions([page])
    assert live.tolerance_for(answer) == docs_examples.OTHER_RUNTIME


def test_clock_fields_are_shown_but_never_compared_and_figures_are() -> None:
    """A bank's ``last_load`` says when and how long: another run differs there, not in the rest."""
    documented = {
        "name": "support",
        "last_load": {"at": "2026-12-06T20:48:41Z", "seconds": 0.063, "embedded": 3},
    }
    live_answer = {
        "name": "support",
        "last_load": {"at": "2026-12-06T22:10:28Z", "seconds": 0.57, "embedded": 3},
    }
    assert docs_examples.differences(documented, live_answer, docs_examples.SAME_RUNTIME) == []
    live_answer["last_load"]["embedded"] = 2
    assert docs_examples.differences(documented, live_answer, docs_examples.SAME_RUNTIME) == [
        ".last_load.embedded: documented 3, live 2"
    ]
