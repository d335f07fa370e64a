"""``ranker bank-cache`` with the real retrieval encoder: it writes the cache a starting service reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bank_helpers import SUPPORT_BANK, require_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process

from dialogue_ranker.serving import bank_cache
from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    require_retriever()
    return write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)


@pytest.fixture
def no_ranker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the arguments: a RANKER_* variable of the test environment must not leak in.
    for name in [n for n in os.environ if n.upper().startswith("RANKER_")]:
        monkeypatch.delenv(name)


def _args(model: Path, bank: Path, cache: Path) -> list[str]:
    return ["--model", str(model), "--bank", f"support={bank}", "--banks.cache-dir", str(cache)]


def _must_not_embed(self: TextEncoder, *args: object, **kwargs: object) -> None:
    raise AssertionError("the service embedded a bank that ranker bank-cache had cached")


@pytest.mark.usefixtures("no_ranker_env")
async def test_a_service_started_on_the_cache_it_wrote_embeds_nothing(
    model_dir: Path, bank: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "dialogue_ranker.cli", "bank-cache", *_args(model_dir, bank, cache)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (written,) = cache.iterdir()
    assert "bank cache filled banks=1" in done.stderr and str(written) in done.stderr
    before = written.stat().st_mtime_ns

    # The service's start with the same settings: an embedding would fail the bank (and this test).
    monkeypatch.setattr(TextEncoder, "embed_all", _must_not_embed)
    settings = Settings(backend="onnx", model=[str(model_dir)], bank=[f"support={bank}"],
                        banks={"cache_dir": cache})  # fmt: skip
    async with serve_in_process(create_app(settings)) as client:
        listed = await wait_banks_ready(client)
    (served,) = listed["data"]
    assert (served["state"], served["from_cache"], served["embedded"]) == ("ready", True, len(SUPPORT_BANK))
    assert list(cache.iterdir()) == [written] and written.stat().st_mtime_ns == before


@pytest.mark.usefixtures("no_ranker_env")
def test_a_rerun_on_a_filled_cache_only_reads_it(model_dir: Path, bank: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    args = _args(model_dir, bank, tmp_path / "c")
    bank_cache.main(args)
    (written,) = (tmp_path / "c").iterdir()
    before = written.stat().st_mtime_ns
    monkeypatch.setattr(TextEncoder, "embed_all", _must_not_embed)
    bank_cache.main(args)
    assert written.stat().st_mtime_ns == before


@pytest.mark.usefixtures("no_ranker_env")
def test_a_bad_bank_exits_1_naming_its_file_line_and_field(model_dir: Path, tmp_path: Path) -> None:
    require_retriever()
    bad = write_bank(tmp_path / "support.jsonl", [SUPPORT_BANK[0], {"id": "no-text"}])
    with pytest.raises(SystemExit) as exit_:
        bank_cache.main(_args(model_dir, bad, tmp_path / "cache"))
    assert exit_.value.code == f"bank 'support': {bad}:2: text: Field required"
    assert not (tmp_path / "cache").exists()


@pytest.mark.usefixtures("no_ranker_env")
def test_a_cache_directory_that_cannot_be_written_fails_before_any_embedding(
    model_dir: Path, bank: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "a-file" / "cache"
    monkeypatch.setattr(TextEncoder, "embed_all", _must_not_embed)
    with pytest.raises(SystemExit) as exit_:
        bank_cache.main(_args(model_dir, bank, cache))
    assert str(exit_.value.code).startswith(f"the bank cache cannot be written in {cache}: ")


@pytest.mark.usefixtures("no_ranker_env")
def test_no_bank_exits_1_saying_how_to_name_one(model_dir: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        bank_cache.main(["--model", str(model_dir)])
    assert "name one with --bank NAME=FILE" in str(exit_.value.code)
