"""Test helpers for response banks: bank files, a bundle with the shipped retriever, readiness."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import SHIPPED_MODEL, write_fake_bundle

SHIPPED_RETRIEVER = SHIPPED_MODEL / "retriever"

#: A support team's macros: replies, and agent actions the default guidelines know (and one they do not).
SUPPORT_BANK = [
    {"id": "reset-link", "text": "I can send you a password reset link right now.", "generator": "template"},
    {"id": "reset-steps", "text": "To reset your password, click 'Forgot password' on the login page."},
    {"id": "tracking", "text": "Your package is on its way; here is the tracking link.",
     "action": "share-tracking-link"},
    {"id": "refund", "text": "I have issued a refund to your card.", "action": "issue-refund"},
    {"id": "cancel", "text": "I have cancelled your order.", "action": "cancel-order"},
    {"id": "teleport", "text": "I will teleport the parcel to you.", "action": "teleport"},
    {"id": "weather", "text": "It will be sunny all week."},
    {"id": "coffee", "text": "The coffee machine is in the kitchen."},
]  # fmt: skip


def write_bank(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    """A bank file: each row a JSON object, or a raw line written as it is."""
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def require_retriever() -> Path:
    """The shipped retrieval encoder, or a skip saying why."""
    if not (SHIPPED_RETRIEVER / "retriever.json").is_file():
        pytest.skip(f"no retrieval encoder at {SHIPPED_RETRIEVER} (ranker export-retriever --bundle ...)")
    return SHIPPED_RETRIEVER


def fake_bundle_with_retriever(directory: Path) -> Path:
    """The fake backend's bundle, with the shipped retriever as its retriever/ folder (a link)."""
    bundle = write_fake_bundle(directory)
    (bundle / "retriever").symlink_to(require_retriever(), target_is_directory=True)
    return bundle


async def wait_banks_ready(client: httpx.AsyncClient, *, timeout_s: float = 60) -> dict[str, Any]:
    """Poll ``/readyz`` until 200 (the banks embedded); the ``/v1/banks`` answer then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if (await client.get("/readyz")).status_code == 200:
            return (await client.get("/v1/banks")).json()
        await asyncio.sleep(0.05)
    raise AssertionError(f"banks not ready: {(await client.get('/readyz')).text}")
