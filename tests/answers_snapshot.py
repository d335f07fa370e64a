"""Write the service's answers to a fixed set of requests, to compare two versions byte for byte.

Run from the repository root before and after a refactoring of the request path, then ``cmp``:

    PYTHONPATH=src:tests python tests/answers_snapshot.py /tmp/before
    PYTHONPATH=src:tests python tests/answers_snapshot.py /tmp/after
    cmp /tmp/before/answers.jsonl /tmp/after/answers.jsonl

The requests: every hand-made ``/rank`` case of ``tests/integration/test_handmade_requests.py``,
a few variants of one (soft mask with an intent, ``top_k``, ``min_score``), ``/v2/rerank`` and
``/v1/rerank`` answers, and bank requests (the shipped retriever and its fusion, with and without
candidates of the request's own), all on the shipped model with ``--backend onnx``, in process.
Each line holds one request's name, status and response body exactly as sent, but for the
random per-request ids (an error body's ``request_id``, a rerank answer's ``id``), replaced by ``-``;
no body carries a timing.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from bank_helpers import require_retriever, wait_banks_ready, write_bank
from helpers import SHIPPED_MODEL, serve_in_process
from integration.test_bank_fusion_served import CHAT_BANK, CONCERT
from integration.test_banks import HOME_BANK, HOT
from integration.test_handmade_requests import CASES

from dialogue_ranker.serving.app import create_app
from dialogue_ranker.serving.settings import Settings

HOT_ROOM = {
    "context": "It is so hot in here, can you help?",
    "candidates": [
        {"id": "w", "text": "Shall I open the window for you?", "action": "open-window"},
        {"id": "p", "text": "Pizza is great.", "generator": "llm"},
        {"id": "r", "text": "It is so hot in here, can you help?"},
        {"id": "d", "text": "I do not know.", "generator": "template"},
    ],
    "situations": ["The window is closed.", "There is a fan in the closet."],
}
VARIANTS = {
    "soft-mask-intent": {**HOT_ROOM, "mask_mode": "soft", "intent": "track_order"},
    "hard-mask-intent": {**HOT_ROOM, "intent": "track_order"},
    "mask-off-top-k": {**HOT_ROOM, "mask_mode": "off", "top_k": 2},
    "min-score": {**HOT_ROOM, "min_score": 0.99},
}
RERANK = {
    "model": "dialogue-minilm-l6",
    "query": "It is so hot in here, can you help?",
    "documents": ["Shall I open the window for you?", "Pizza is great.", {"text": "I do not know."}],
    "situations": ["The window is closed."],
    "top_n": 2,
    "return_documents": True,
}


async def _answers(model_dir: Path, tmp: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    async def post(client: Any, name: str, path: str, body: dict[str, Any]) -> None:
        response = await client.post(path, json=body)
        text = response.content.decode()
        # The fields that differ between runs by nature: ids drawn per request.
        text = re.sub(r'"(request_id|id)":"[0-9a-f]{32}"', r'"\1":"-"', text)
        out.append({"name": name, "status": response.status_code, "body": text})

    require_retriever()
    banks = [
        f"chat={write_bank(tmp / 'chat.jsonl', CHAT_BANK)}",
        f"home={write_bank(tmp / 'home.jsonl', HOME_BANK)}",
    ]
    settings = Settings(model=model_dir, backend="onnx", bank=banks)
    async with serve_in_process(create_app(settings)) as client:
        await wait_banks_ready(client)
        for param in CASES:
            (body, _pick), name = param.values, param.id
            await post(client, name, "/rank", body)
        for name, body in VARIANTS.items():
            await post(client, name, "/rank", body)
        await post(client, "v2-rerank", "/v2/rerank", RERANK)
        await post(client, "v1-rerank", "/v1/rerank", {**RERANK, "return_documents": False})
        await post(client, "unknown-bank", "/rank", {**CONCERT, "bank": "nowhere"})
        await post(client, "bank-concert", "/rank", CONCERT)
        await post(client, "bank-hot-room", "/rank", HOT)
        await post(
            client, "bank-hot-room-soft", "/rank", {**HOT, "mask_mode": "soft", "intent": "track_order"}
        )
        # The same requests again: the second answers come from the logit cache.
        await post(client, "bank-concert-cached", "/rank", CONCERT)
        await post(client, "hot-room-cached", "/rank", CASES[0].values[0])
    return out


def main(argv: list[str]) -> int:
    """Write ``answers.jsonl`` under the folder ``argv[0]``."""
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "banks"
    tmp.mkdir(exist_ok=True)
    answers = asyncio.run(_answers(SHIPPED_MODEL, tmp))
    (folder / "answers.jsonl").write_text("".join(json.dumps(a, sort_keys=True) + "\n" for a in answers))
    print(f"{len(answers)} answers -> {folder / 'answers.jsonl'}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
