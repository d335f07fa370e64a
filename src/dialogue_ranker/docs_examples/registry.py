"""The documented examples, declared once: their routes, bodies, the bank they name and the pages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dialogue_ranker.serving.settings import REPO_ROOT

PAGES = (
    REPO_ROOT / "README.md",
    REPO_ROOT / "docs" / "getting-started.md",
    REPO_ROOT / "docs" / "guides" / "rerank-clients.md",
    REPO_ROOT / "docs" / "guides" / "banks.md",
)
#: The bank the bank examples name, as its file's lines.
SUPPORT_BANK = (
    {"id": "reset-link", "text": "I can send you a password reset link right now.", "generator": "template"},
    {"id": "tracking", "text": "Your package is on its way; here is the tracking link.",
     "action": "share-tracking-link"},
    {"id": "refund", "text": "I have issued a refund to your card.", "action": "issue-refund"},
)  # fmt: skip
#: Files the pages show, by region name.
FILES = {"support-bank": SUPPORT_BANK}
#: Answer fields left out of the pages when null (the README says so), per ranked entry.
NULL_FIELDS = ("action", "mask_reason", "bank", "retrieval_score")
#: Answer fields that differ from call to call by nature (ids, clocks): shown, never compared.
#: (A bank's ``last_load`` says when, ``at``, and how long, ``seconds``.)
VOLATILE = frozenset({"id", "request_id", "loaded_at", "embedded_at", "embed_seconds", "at", "seconds"})


@dataclass(frozen=True)
class Example:
    """One documented request: its route and JSON body (None: a GET)."""

    name: str
    path: str
    body: Mapping[str, Any] | None = None


HOT_ROOM = {
    "context": [{"speaker": "user", "text": "It is so hot in here, can you help?"}],
    "situations": ["The window is closed.", "There is a fan in the closet."],
    "candidates": [
        {"id": "window", "text": "Shall I open the window for you?", "generator": "retrieval"},
        {"id": "pizza", "text": "Pizza is great.", "generator": "llm"},
        {"id": "idk", "text": "I do not know.", "generator": "template"},
    ],
}
EXAMPLES = {
    e.name: e
    for e in (
        Example("hot-room", "/rank", HOT_ROOM),
        Example("first-request", "/rank", {
            "context": [{"speaker": "customer", "text": "I forgot my password."}],
            "candidates": [
                {"id": "a", "text": "Let me pull up your account.", "action": "look-up-account",
                 "generator": "retrieval"},
                {"id": "b", "text": "I can cancel that order for you.", "action": "cancel-order",
                 "generator": "llm"},
                "One moment please.",
            ],
            "intent": "reset_login",
        }),
        Example("rerank-curl", "/v2/rerank", {
            "model": "dialogue-minilm-l6", "query": "It is so hot in here, can you help?",
            "documents": ["Shall I open the window for you?", "Pizza is great.", "I do not know."],
            "top_n": 2,
        }),
        Example("rerank-context", "/v2/rerank", {
            "model": "dialogue-minilm-l6",
            "context": [{"speaker": "user", "text": "Hi there."},
                        {"speaker": "bot", "text": "Hello! How can I help?"}],
            "query": "It is so hot in here, can you help?",
            "situations": ["The window is closed.", "There is a fan in the closet."],
            "documents": ["Shall I open the window for you?", "Pizza is great."],
            "min_score": 0.3,
        }),
        Example("rerank-litellm", "/v2/rerank", {
            "model": "dialogue-minilm-l6", "query": "It is so hot in here, can you help?",
            "documents": ["Shall I open the window for you?", "Pizza is great.", "I do not know.",
                          "I can turn on the fan in the closet for you."],
            "top_n": 2,
        }),
        Example("bank-query", "/rank", {
            "context": "I forgot my password and cannot log in.",
            "bank": "support",
            "retrieve_k": 20,
            "candidates": [{"id": "own", "text": "One moment please."}],
        }),
        Example("banks-list", "/v1/banks"),
    )
}  # fmt: skip
