"""``--bank NAME=FILE`` and its variable: one declaration, checked before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import CliApp

from dialogue_ranker.serving.settings import Settings


def test_banks_come_from_repeated_flags_with_their_group() -> None:
    settings = CliApp.run(
        Settings,
        cli_args=["--bank", "faq=/b/faq.jsonl", "--bank", "chat=/b/chat.jsonl", "--banks.retrieve-k", "20"],
    )
    assert settings.served_banks() == [("faq", Path("/b/faq.jsonl")), ("chat", Path("/b/chat.jsonl"))]
    assert settings.banks.retrieve_k == 20 and settings.banks.cache_dir is None


def test_banks_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKER_BANK", "faq=/b/faq.jsonl, chat=/b/chat.jsonl")
    monkeypatch.setenv("RANKER_BANKS__CACHE_DIR", "/var/cache/banks")
    settings = Settings()
    assert [name for name, _ in settings.served_banks()] == ["faq", "chat"]
    assert settings.banks.cache_dir == Path("/var/cache/banks")


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        (["faq.jsonl"], "is not NAME=FILE"),
        (["=faq.jsonl"], "is not NAME=FILE"),
        (["faq="], "is not NAME=FILE"),
        (["bad name=faq.jsonl"], "is not NAME=FILE"),
        (["faq=a.jsonl", "faq=b.jsonl"], "'faq' is given twice"),
    ],
)
def test_a_malformed_bank_flag_is_refused(entries: list[str], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        Settings(bank=entries)


def test_retrieve_k_has_bounds() -> None:
    with pytest.raises(ValidationError, match="retrieve_k"):
        Settings(banks={"retrieve_k": 0})
