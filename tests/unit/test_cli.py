"""The ``ranker`` command: one entry point whose subcommands are the modules' own CLIs."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from dialogue_ranker.cli import COMMANDS, main


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture) -> None:
    main(["--help"])
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"  {name} " in out


def test_an_unknown_subcommand_exits_2_and_says_which(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    assert exit_.value.code == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_names_a_module_with_main(name: str) -> None:
    module = importlib.import_module(COMMANDS[name].module)
    assert callable(module.main)


def test_serve_help_lists_the_settings_flags() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dialogue_ranker.cli", "serve", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    for flag in ("--host", "--port", "--model", "--backend", "--guidelines", "--batching.max-wait-s"):
        assert flag in result.stdout


def test_serving_alone_imports_no_torch() -> None:
    code = "import sys, dialogue_ranker.cli, dialogue_ranker.serving.app; print('torch' in sys.modules)"
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
