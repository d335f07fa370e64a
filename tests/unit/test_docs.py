"""The docs' reference pages are generated from the code and may not drift from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dialogue_ranker import docs_gen
from dialogue_ranker.serving.errors import ERROR_TABLE
from dialogue_ranker.serving.settings import Settings


def test_the_committed_reference_pages_are_what_the_code_renders() -> None:
    assert docs_gen.stale_pages() == [], "run `ranker docs` and commit docs/reference/"


def test_a_new_setting_makes_the_settings_page_stale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    docs_gen.main(["--docs-dir", str(tmp_path)])
    assert docs_gen.stale_pages(tmp_path) == []
    field = Settings.model_fields["port"]
    monkeypatch.setattr(field, "description", "A changed description.")
    assert docs_gen.stale_pages(tmp_path) == ["reference/settings.md"]


def test_every_setting_error_and_route_is_on_its_page() -> None:
    pages = docs_gen.pages()
    assert "`--batching.max-wait-s`" in pages["reference/settings.md"]
    assert "`RANKER_RANKING__LOGIT_CACHE_ENTRIES`" in pages["reference/settings.md"]
    for status, error_type in ERROR_TABLE.values():
        assert f"| {status} | `{error_type}` |" in pages["reference/errors.md"]
    for route in ("POST /rank", "POST /v2/rerank", "POST /v1/rerank", "GET /v1/models"):
        assert f"## `{route}`" in pages["reference/api.md"]
    assert "`ranker_logit_cache_lookups_total`" in pages["reference/metrics.md"]


def test_check_fails_on_a_page_edited_by_hand(tmp_path: Path) -> None:
    docs_gen.main(["--docs-dir", str(tmp_path)])
    with (tmp_path / "reference" / "errors.md").open("a") as page:
        page.write("An edit.\n")
    with pytest.raises(SystemExit, match="errors.md"):
        docs_gen.main(["--check", "--docs-dir", str(tmp_path)])


def test_the_api_reports_the_version_pyproject_declares() -> None:
    import tomllib

    from helpers import REPO_ROOT

    from dialogue_ranker.serving.app import create_app

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert create_app(Settings(backend="fake")).version == declared
