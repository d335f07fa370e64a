"""The banks' embedding cache: a restart reads it; a new text or encoder embeds, and only what is new."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from bank_helpers import (
    SUPPORT_BANK,
    fake_bundle_with_retriever,
    require_retriever,
    wait_banks_ready,
    write_bank,
)
from helpers import serve_in_process, write_fake_bundle

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks.cache import SUFFIX
from dialogue_ranker.serving.banks.encoder import file_sha256
from dialogue_ranker.serving.model_bundle import BundleError
from dialogue_ranker.serving.settings import Settings

QUERY = {"context": "Where is my parcel?", "bank": "support", "retrieve_k": 3}


async def start_once(bundle: Path, bank: Path, **overrides) -> tuple[dict, list[tuple[str, float]]]:
    """Serve the bank once: its /v1/banks entry and the ids and cosines the query draws."""
    settings = Settings(backend="fake", model=bundle, bank=[f"support={bank}"], **overrides)
    async with serve_in_process(create_app(settings)) as client:
        listed = (await wait_banks_ready(client))["data"][0]
        ranking = (await client.post("/rank", json=QUERY)).json()["ranking"]
    return listed, sorted((r["id"], round(r["retrieval_score"], 6)) for r in ranking)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return fake_bundle_with_retriever(tmp_path / "bundle")


def other_encoder(directory: Path) -> Path:
    """A bundle whose retriever is the shipped one with another graph digest (the same weights)."""
    onnx = pytest.importorskip("onnx")
    bundle = write_fake_bundle(directory)
    retriever = shutil.copytree(require_retriever(), bundle / "retriever")
    graph = onnx.load(str(retriever / "retriever.onnx"))
    graph.doc_string = "re-exported"
    onnx.save(graph, str(retriever / "retriever.onnx"))
    meta = json.loads((retriever / "retriever.json").read_text())
    meta["sha256"] = file_sha256(retriever / "retriever.onnx")
    (retriever / "retriever.json").write_text(json.dumps(meta))
    return bundle


def cache_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob(f"*{SUFFIX}"))


async def test_a_restart_with_the_same_texts_reads_the_vectors_from_the_cache(
    bundle: Path, tmp_path: Path
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    first, drawn = await start_once(bundle, bank)
    assert first["from_cache"] is False and len(cache_files(tmp_path)) == 1  # next to the bank file
    # Ids and actions are not what the vectors depend on: edited, the cache still holds.
    write_bank(bank, [{**row, "id": f"v2-{row['id']}"} for row in SUPPORT_BANK])
    second, drawn_again = await start_once(bundle, bank)
    assert second["from_cache"] is True
    assert [(f"v2-{i}", c) for i, c in drawn] == drawn_again


async def test_a_changed_text_embeds_only_that_text_and_rewrites_the_one_file(
    bundle: Path, tmp_path: Path
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    await start_once(bundle, bank)
    (cached,) = tmp_path.glob(f"*{SUFFIX}")
    before = cached.read_bytes()
    edited = [*SUPPORT_BANK[:-1], {"id": "coffee", "text": "Your parcel is at the post office."}]
    listed, drawn = await start_once(bundle, write_bank(bank, edited))
    assert listed["from_cache"] is False and "coffee" in dict(drawn)
    assert (listed["last_load"]["embedded"], listed["last_load"]["reused"]) == (1, len(SUPPORT_BANK) - 1)
    assert cache_files(tmp_path) == [cached.name] and cached.read_bytes() != before
    again, _ = await start_once(bundle, bank)
    assert again["from_cache"] is True and again["last_load"]["embedded"] == 0


async def test_a_reordered_file_reuses_every_vector(bundle: Path, tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    _, drawn = await start_once(bundle, bank)
    listed, drawn_again = await start_once(bundle, write_bank(bank, SUPPORT_BANK[::-1]))
    assert listed["from_cache"] is True and listed["last_load"]["reused"] == len(SUPPORT_BANK)
    assert drawn_again == drawn


async def test_a_file_of_the_former_layout_is_replaced(bundle: Path, tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    former = tmp_path / f"support-{'0' * 24}{SUFFIX}"  # keyed by the texts, without digests
    former.write_bytes(b"an older layout")
    listed, _ = await start_once(bundle, bank)
    assert listed["from_cache"] is False and not former.exists() and len(cache_files(tmp_path)) == 1


async def test_another_encoder_embeds_again(bundle: Path, tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    await start_once(bundle, bank)
    listed, _ = await start_once(other_encoder(tmp_path / "other"), bank)
    assert listed["from_cache"] is False and listed["encoder"] != ""
    shipped, _ = await start_once(bundle, bank)
    assert shipped["from_cache"] is False  # one file per bank: the other encoder's replaced it


async def test_a_retriever_whose_graph_is_not_its_digest_stops_the_start(tmp_path: Path) -> None:
    bundle = write_fake_bundle(tmp_path / "bundle")
    retriever = shutil.copytree(require_retriever(), bundle / "retriever")
    meta = json.loads((retriever / "retriever.json").read_text())
    (retriever / "retriever.json").write_text(json.dumps({**meta, "sha256": "0" * 64}))
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    with pytest.raises(
        BundleError, match=r"retriever\.onnx: sha256 .* is not retriever\.json's 000000000000"
    ):
        await start_once(bundle, bank)


async def test_the_cache_directory_setting_is_used(bundle: Path, tmp_path: Path) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    await start_once(bundle, bank, banks={"cache_dir": tmp_path / "cache"})
    listed, _ = await start_once(bundle, bank, banks={"cache_dir": tmp_path / "cache"})
    assert listed["from_cache"] is True
    assert cache_files(tmp_path) == [] and len(cache_files(tmp_path / "cache")) == 1


async def test_an_unwritable_cache_costs_only_the_cache(
    bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    with caplog.at_level(logging.WARNING):
        listed, drawn = await start_once(bundle, bank, banks={"cache_dir": not_a_directory})
    assert listed["ready"] is True and len(drawn) == 3
    assert "bank cache not written bank=support" in caplog.text


async def test_a_cache_file_that_does_not_fit_is_embedded_again(
    bundle: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    await start_once(bundle, bank)
    (cached,) = tmp_path.glob(f"*{SUFFIX}")
    cached.write_bytes(b"not a numpy archive")
    with caplog.at_level(logging.WARNING):
        listed, _ = await start_once(bundle, bank)
    assert listed["from_cache"] is False and "bank cache unreadable bank=support" in caplog.text
