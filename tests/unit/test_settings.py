from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import CliApp

from dialogue_ranker.serving.settings import REPO_ROOT, Settings


def test_defaults_point_into_the_repository() -> None:
    settings = Settings()
    assert settings.served_models() == [(None, REPO_ROOT / "models" / "dialogue-minilm-l6")]
    assert settings.guidelines.is_file()
    assert (settings.host, settings.port, settings.backend) == ("127.0.0.1", 8000, "auto")


def test_environment_variables_set_nested_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKER_PORT", "9001")
    monkeypatch.setenv("RANKER_BATCHING__MAX_PAIRS", "7")
    settings = Settings()
    assert settings.port == 9001 and settings.batching.max_pairs == 7
    assert settings.batching.max_wait_s == Settings().batching.max_wait_s


def test_cli_flags_come_from_the_same_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKER_PORT", "9001")
    settings = CliApp.run(
        Settings,
        cli_args=[
            "--host",
            "0.0.0.0",
            "--backend",
            "fake",
            "--model",
            "/m",
            "--guidelines",
            "/g.json",
            "--batching.max-wait-s",
            "0.01",
        ],
    )
    assert settings.host == "0.0.0.0" and settings.port == 9001 and settings.backend == "fake"
    assert settings.served_models() == [(None, Path("/m"))] and settings.guidelines == Path("/g.json")
    assert settings.batching.max_wait_s == 0.01


def test_out_of_range_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        Settings(port=70000)


def test_a_negative_logit_cache_size_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKER_RANKING__LOGIT_CACHE_ENTRIES", "-1")
    with pytest.raises(ValidationError, match="ranking.logit_cache_entries"):
        Settings()


def test_model_aliases_come_from_repeated_flags_or_one_comma_separated_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flags = ["--model-alias", "rerank-v3.5=dialogue-minilm-l6", "--model-alias", "ranker=control"]
    from_flags = CliApp.run(Settings, cli_args=flags)
    monkeypatch.setenv("RANKER_MODEL_ALIAS", "rerank-v3.5=dialogue-minilm-l6, ranker=control")
    from_env = Settings()
    expected = {"rerank-v3.5": "dialogue-minilm-l6", "ranker": "control"}
    assert from_flags.model_aliases() == from_env.model_aliases() == expected
    assert Settings(model_alias=[]).model_aliases() == {}


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        (["rerank-v3.5"], "not ALIAS=NAME"),
        (["=dialogue-minilm-l6"], "not ALIAS=NAME"),
        (["a b=dialogue-minilm-l6"], "not ALIAS=NAME"),
        (["x=dialogue-minilm-l6", "x=other"], "'x' is given twice"),
    ],
)
def test_malformed_model_aliases_are_refused_naming_the_setting(aliases: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=f"model_alias(.|\n)*--model-alias .*{message}"):
        Settings(model_alias=aliases)
