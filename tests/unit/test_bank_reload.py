"""Live bank updates through the HTTP API: the fake ranker backend, the shipped retrieval encoder."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest
from bank_helpers import SUPPORT_BANK, fake_bundle_with_retriever, wait_banks_ready, write_bank
from helpers import serve_in_process
from test_api import assert_error

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.banks.encoder import TextEncoder
from dialogue_ranker.serving.settings import Settings

PARCEL = {"context": "Where is my parcel?", "bank": "support", "retrieve_k": 3}
#: The support bank with its last two texts changed (ids kept).
EDITED = [
    *SUPPORT_BANK[:-2],
    {"id": "weather", "text": "Your parcel is waiting for you at the post office."},
    {"id": "coffee", "text": "Your parcel left our warehouse this morning."},
]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return fake_bundle_with_retriever(tmp_path / "bundle")


@pytest.fixture
def bank_file(tmp_path: Path) -> Path:
    return write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)


def settings(bundle: Path, bank_file: Path, **overrides) -> Settings:
    return Settings(backend="fake", model=bundle, bank=[f"support={bank_file}"], **overrides)


def replace_file(path: Path, rows: list) -> None:
    """Write the new file beside the old and rename it into place, as the docs advise."""
    write_bank(path.with_suffix(".new"), rows)
    os.replace(path.with_suffix(".new"), path)


async def test_an_unchanged_file_reloads_with_nothing_embedded_and_ranks_byte_for_byte_the_same(
    bundle: Path, bank_file: Path
) -> None:
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        before = (await wait_banks_ready(client))["data"][0]
        ranked = (await client.post("/rank", json=PARCEL)).json()["ranking"]
        reloaded = await client.post("/v1/banks/support/reload")
        ranked_again = (await client.post("/rank", json=PARCEL)).json()["ranking"]
    assert reloaded.status_code == 200, reloaded.text
    after = reloaded.json()
    assert after["version"] == before["version"] and len(after["version"]) == 64
    assert after["last_load"]["trigger"] == "api" and after["last_load"]["outcome"] == "ok"
    assert (after["last_load"]["embedded"], after["last_load"]["reused"]) == (0, len(SUPPORT_BANK))
    assert json.dumps(ranked_again).encode() == json.dumps(ranked).encode()


async def test_a_reload_embeds_exactly_the_changed_texts_and_serves_them(
    bundle: Path, bank_file: Path
) -> None:
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        first = (await wait_banks_ready(client))["data"][0]
        replace_file(bank_file, EDITED)
        reloaded = (await client.post("/v1/banks/support/reload")).json()
        ranking = (await client.post("/rank", json=PARCEL)).json()["ranking"]
        metrics = (await client.get("/metrics")).text
    assert first["last_load"]["trigger"] == "start" and first["last_load"]["embedded"] == len(SUPPORT_BANK)
    assert (reloaded["last_load"]["embedded"], reloaded["last_load"]["reused"]) == (2, len(SUPPORT_BANK) - 2)
    assert reloaded["version"] != first["version"] and reloaded["from_cache"] is False
    texts = {r["id"] for r in ranking}
    assert {"weather", "coffee"} <= texts  # the two new parcel replies are now the nearest
    assert 'ranker_bank_loads_total{bank="support",outcome="ok",trigger="api"} 1.0' in metrics
    assert f'ranker_bank_version_info{{bank="support",version="{reloaded["version"]}"}} 1.0' in metrics
    assert f'ranker_bank_embedded_texts_total{{bank="support"}} {len(SUPPORT_BANK) + 2}.0' in metrics
    assert 'ranker_bank_last_load_timestamp_seconds{bank="support",outcome="ok"}' in metrics


async def test_a_bad_file_is_a_422_naming_file_line_and_field_and_the_old_version_stays(
    bundle: Path, bank_file: Path
) -> None:
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        before = (await wait_banks_ready(client))["data"][0]
        ranked = (await client.post("/rank", json=PARCEL)).json()["ranking"]
        replace_file(bank_file, [*EDITED, {"id": "late", "txt": "Sorry for the delay."}])
        refused = await client.post("/v1/banks/support/reload")
        listed = (await client.get("/v1/banks/support")).json()
        ranked_after = (await client.post("/rank", json=PARCEL)).json()["ranking"]
        ready = await client.get("/readyz")
        metrics = (await client.get("/metrics")).text
    line = len(EDITED) + 1
    assert_error(
        refused, 422, "invalid_bank_file", f"bank 'support': {bank_file}:{line}: text: Field required"
    )
    assert listed["version"] == before["version"] and listed["state"] == "ready"
    assert listed["last_load"]["outcome"] == "failed" and f":{line}: text" in listed["last_load"]["error"]
    assert ranked_after == ranked and ready.status_code == 200
    assert 'ranker_bank_loads_total{bank="support",outcome="failed",trigger="api"} 1.0' in metrics


async def test_an_unknown_bank_is_a_404_naming_it(bundle: Path, bank_file: Path, fake_bundle: Path) -> None:
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        await wait_banks_ready(client)
        reload = await client.post("/v1/banks/faq/reload")
        get = await client.get("/v1/banks/faq")
    async with serve_in_process(create_app(Settings(backend="fake", model=fake_bundle))) as client:
        none = await client.post("/v1/banks/faq/reload")
    assert_error(reload, 404, "bank_not_found", "no bank 'faq'", "served: 'support'")
    assert_error(get, 404, "bank_not_found", "no bank 'faq'")
    assert_error(none, 404, "bank_not_found", "no bank 'faq'", "--bank")


async def test_the_reload_route_needs_an_api_key_when_keys_are_on(
    bundle: Path, bank_file: Path, tmp_path: Path
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("s3cret\n")
    app = create_app(settings(bundle, bank_file, auth={"api_keys_file": keys}))
    async with serve_in_process(app) as client:
        while (await client.get("/readyz")).status_code != 200:
            await asyncio.sleep(0.05)
        without = await client.post("/v1/banks/support/reload")
        wrong = await client.post("/v1/banks/support/reload", headers={"Authorization": "Bearer nope"})
        allowed = await client.post("/v1/banks/support/reload", headers={"Authorization": "Bearer s3cret"})
    assert_error(without, 401, "unauthorized", "authorization")
    assert_error(wrong, 401, "unauthorized", "not valid")
    assert allowed.status_code == 200, allowed.text


async def test_two_reloads_at_once_run_one_after_the_other(bundle: Path, bank_file: Path) -> None:
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        await wait_banks_ready(client)
        replace_file(bank_file, EDITED)
        first, second = await asyncio.gather(
            client.post("/v1/banks/support/reload"), client.post("/v1/banks/support/reload")
        )
    loads = [first.json()["last_load"], second.json()["last_load"]]
    # The second waited for the first, then found every text known: the two new ones embedded once.
    assert sorted(load["embedded"] for load in loads) == [0, 2]


async def test_a_reload_before_the_first_load_is_done_is_a_503(
    bundle: Path, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    embed_all = TextEncoder.embed_all

    def held(self: TextEncoder, *args, **kwargs):
        release.wait(30)
        return embed_all(self, *args, **kwargs)

    monkeypatch.setattr(TextEncoder, "embed_all", held)
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        early = await client.post("/v1/banks/support/reload")
        listed = (await client.get("/v1/banks/support")).json()
        release.set()
        await wait_banks_ready(client)
    assert_error(early, 503, "not_ready", "bank 'support' is embedding", "first load")
    assert listed["version"] is None and listed["last_load"] is None


async def test_a_bank_whose_first_load_failed_recovers_by_a_reload(
    bundle: Path, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {"on": True}
    embed_all = TextEncoder.embed_all

    def flaky(self: TextEncoder, *args, **kwargs):
        if broken["on"]:
            raise RuntimeError("disk on fire")
        return embed_all(self, *args, **kwargs)

    monkeypatch.setattr(TextEncoder, "embed_all", flaky)
    async with serve_in_process(create_app(settings(bundle, bank_file))) as client:
        for _ in range(200):
            if (await client.get("/v1/banks/support")).json()["state"] == "failed":
                break
            await asyncio.sleep(0.02)
        broken["on"] = False
        reloaded = (await client.post("/v1/banks/support/reload")).json()
        ready = await client.get("/readyz")
    assert reloaded["state"] == "ready" and reloaded["error"] is None and ready.status_code == 200


async def test_the_watch_reloads_a_changed_file(bundle: Path, bank_file: Path) -> None:
    app = create_app(settings(bundle, bank_file, banks={"watch_interval_s": 0.05}))
    async with serve_in_process(app) as client:
        first = (await wait_banks_ready(client))["data"][0]
        replace_file(bank_file, EDITED)
        for _ in range(400):
            listed = (await client.get("/v1/banks/support")).json()
            if listed["version"] != first["version"]:
                break
            await asyncio.sleep(0.05)
    assert listed["version"] != first["version"]
    assert listed["last_load"]["trigger"] == "watch" and listed["last_load"]["embedded"] == 2
