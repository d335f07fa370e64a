"""What a ``POST /rank`` answer must hold, derived from its request: the expectations the checks read.

:class:`Expected` is built from a request body, the guidelines (:class:`Guidelines`, read from the
service or a file) and the bank (:class:`BankInfo`); :mod:`loadtests.checks` compares a response
with it. The masking rules are written again here from the guideline file rather than imported
from ``service``: a check that reused the service's own code would agree with its bugs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

NOT_ALLOWED_FOR_INTENT = "action_not_allowed_for_intent"
UNKNOWN_ACTION = "unknown_action"
REPEATS_A_TURN = "repeats_a_turn"
MASK_REASONS = frozenset({NOT_ALLOWED_FOR_INTENT, UNKNOWN_ACTION, REPEATS_A_TURN})


def repeat_key(text: str) -> str:
    """The text as the repeat mask compares it: case-folded, punctuation dropped, spaces collapsed."""
    kept = "".join(ch if ch.isalnum() else " " for ch in text.casefold())
    return " ".join(kept.split())


@dataclass(frozen=True)
class BankResponse:
    """One bank response, as the bank's file gives it (``loadtests.bank.read_bank_file``)."""

    text: str
    generator: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class BankInfo:
    """A served bank as the suite knows it: its size (``GET /v1/banks``) and, when given, its file."""

    name: str
    size: int
    #: id -> response, from the bank's file; None: ids, echoes and masks of bank entries unchecked.
    responses: Mapping[str, BankResponse] | None = None


@dataclass(frozen=True)
class Guidelines:
    """Intent -> allowed agent actions, read from the same ABCD-format file the service loads."""

    allowed: Mapping[str, frozenset[str]]

    @property
    def actions(self) -> frozenset[str]:
        """Every action some intent allows."""
        return frozenset().union(*self.allowed.values())

    @classmethod
    def from_service(cls, host: str) -> Guidelines:
        """Ask a running service (``GET /v1/guidelines``) which intents and actions it knows.

        Raises:
            ValueError: the service does not answer or its answer is not a guideline listing.
        """
        try:
            response = requests.get(f"{host.rstrip('/')}/v1/guidelines", timeout=10)
            response.raise_for_status()
            intents = response.json()["intents"]
        except (requests.RequestException, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"cannot read guidelines from {host}/v1/guidelines: {e}") from e
        return cls.from_mapping(intents, source=f"{host}/v1/guidelines")

    @classmethod
    def from_file(cls, path: str | Path) -> Guidelines:
        """Read a ``kb.json``-format file.

        Raises:
            ValueError: the file is missing, not JSON or not an object of action lists.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read guidelines {path}: {e}") from e
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def from_mapping(cls, data: Any, *, source: str) -> Guidelines:
        """Intent -> list of actions, checked.

        Raises:
            ValueError: not a non-empty object of action lists.
        """
        if not isinstance(data, dict) or not data:
            raise ValueError(f"{source}: expected a non-empty object of intent -> list of actions")
        allowed: dict[str, frozenset[str]] = {}
        for intent, actions in data.items():
            if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
                raise ValueError(f"{source}: intent {intent!r} must map to a list of action names")
            allowed[intent] = frozenset(actions)
        return cls(allowed)

    def mask_reason(self, intent: str, action: str | None) -> str | None:
        """Why the service must mask ``action`` under ``intent``; None when it may rank it."""
        if action is None or action in self.allowed[intent]:
            return None
        return NOT_ALLOWED_FOR_INTENT if action in self.actions else UNKNOWN_ACTION


@dataclass(frozen=True)
class Expected:
    """What the answer to one request must satisfy."""

    ids: tuple[str, ...]
    echoes: Mapping[str, tuple[str | None, str | None]]
    mask_reasons: Mapping[str, str]
    mask_mode: str
    top_k: int | None
    min_score: float | None
    situations: int
    #: The bank the request names (None: no bank), and how many of its responses it asks for
    #: (None: the service's ``banks.retrieve-k``, which the suite does not know).
    bank: BankInfo | None = None
    retrieve_k: int | None = None
    intent: str | None = None
    guidelines: Guidelines | None = None
    #: The context's turns as the repeat mask compares them.
    turn_keys: frozenset[str] = frozenset()

    @classmethod
    def of(cls, body: Mapping[str, Any], guidelines: Guidelines, bank: BankInfo | None = None) -> Expected:
        """The expectations of a request body as the load test sends it (candidates as objects).

        ``bank``: what the suite knows of the bank the body names (required when it names one).
        """
        candidates = body.get("candidates", [])
        ids = tuple(c.get("id") or str(i) for i, c in enumerate(candidates))
        intent, mode = body.get("intent"), body.get("mask_mode", "hard")
        turn_keys = frozenset(k for k in (repeat_key(t["text"]) for t in body["context"]) if k)
        reasons: dict[str, str] = {}
        if mode != "off":
            for cid, c in zip(ids, candidates, strict=True):
                reason = mask_reason(guidelines, intent, c.get("action"), c["text"], turn_keys)
                if reason is not None:
                    reasons[cid] = reason
        if body.get("bank") is not None and (bank is None or bank.name != body["bank"]):
            raise ValueError(f"the request names bank {body['bank']!r}, which the suite was not told of")
        return cls(
            ids=ids,
            echoes={
                cid: (c.get("generator"), c.get("action")) for cid, c in zip(ids, candidates, strict=True)
            },
            mask_reasons=reasons,
            mask_mode=mode,
            top_k=body.get("top_k"),
            min_score=body.get("min_score"),
            situations=len(body.get("situations", ())),
            bank=bank if body.get("bank") is not None else None,
            retrieve_k=body.get("retrieve_k"),
            intent=intent,
            guidelines=guidelines,
            turn_keys=turn_keys,
        )

    def bank_mask_reason(self, response: BankResponse) -> str | None:
        """Why the service must mask this bank response for this request (None: rank it)."""
        if self.mask_mode == "off" or self.guidelines is None:
            return None
        return mask_reason(self.guidelines, self.intent, response.action, response.text, self.turn_keys)


def mask_reason(
    guidelines: Guidelines, intent: str | None, action: str | None, text: str, turn_keys: frozenset[str]
) -> str | None:
    """A candidate's mask reason when the mask mode is not off: a guideline's first, else a repeat."""
    if intent is not None and (reason := guidelines.mask_reason(intent, action)) is not None:
        return reason
    key = repeat_key(text)
    return REPEATS_A_TURN if key and key in turn_keys else None
