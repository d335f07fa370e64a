from __future__ import annotations

from pathlib import Path

import pytest

from dialogue_ranker.serving.errors import UnknownIntent
from dialogue_ranker.serving.guidelines import GuidelineError, Guidelines, MaskReason
from dialogue_ranker.serving.settings import DEFAULT_GUIDELINES


def test_the_default_guidelines_load() -> None:
    guidelines = Guidelines.from_file(DEFAULT_GUIDELINES)
    assert "track_order" in guidelines.allowed
    assert "share-tracking-link" in guidelines.actions


def test_the_abcd_reference_kb_parses(abcd_kb: Path) -> None:
    guidelines = Guidelines.from_file(abcd_kb)
    assert len(guidelines.allowed) == 55
    assert guidelines.check_intent("recover_password") == {
        "pull-up-account",
        "enter-details",
        "make-password",
    }


def test_mask_reasons_with_the_abcd_reference(abcd_kb: Path) -> None:
    guidelines = Guidelines.from_file(abcd_kb)
    assert guidelines.mask_reason("recover_password", "make-password") is None
    assert guidelines.mask_reason("recover_password", "offer-refund") is MaskReason.NOT_ALLOWED_FOR_INTENT
    assert guidelines.mask_reason("recover_password", "teleport") is MaskReason.UNKNOWN_ACTION


def test_a_candidate_without_action_is_never_masked() -> None:
    guidelines = Guidelines.from_mapping({"a": ["x"]})
    assert guidelines.mask_reason("a", None) is None


def test_an_unknown_intent_raises() -> None:
    with pytest.raises(UnknownIntent, match="nope"):
        Guidelines.from_mapping({"a": ["x"]}).check_intent("nope")


@pytest.mark.parametrize("content", ["not json", "[]", '{"a": "x"}', '{"a": [1]}', "{}"])
def test_a_malformed_guideline_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "kb.json"
    path.write_text(content)
    with pytest.raises(GuidelineError):
        Guidelines.from_file(path)
