"""Agent guidelines: which actions each customer intent allows (ABCD ``kb.json`` format).

The file maps an intent (an ABCD subflow such as ``recover_password``) to the list of agent
actions its guidelines use. Given an intent, a candidate whose action is not in that list is
masked; a candidate without an action is a plain reply and is never masked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from dialogue_ranker.serving.errors import UnknownIntent


class GuidelineError(ValueError):
    """The guideline file is missing or not in the ``kb.json`` format."""


class MaskReason(StrEnum):
    """Why a candidate was masked (a metric label: keep the set small)."""

    #: The action exists in the guidelines but not for this intent.
    NOT_ALLOWED_FOR_INTENT = "action_not_allowed_for_intent"
    #: No intent in the guidelines uses this action.
    UNKNOWN_ACTION = "unknown_action"
    #: The candidate says a turn of the conversation again (dialogue_ranker.serving.repeats; not a guideline).
    REPEATS_A_TURN = "repeats_a_turn"


@dataclass(frozen=True)
class Guidelines:
    """Intent -> allowed actions."""

    allowed: Mapping[str, frozenset[str]]
    source: str = "<memory>"

    @property
    def actions(self) -> frozenset[str]:
        """Every action some intent allows."""
        return frozenset().union(*self.allowed.values()) if self.allowed else frozenset()

    @classmethod
    def from_mapping(cls, data: object, *, source: str = "<memory>") -> Guidelines:
        """Build from the parsed JSON object.

        Raises:
            GuidelineError: it is not an object of string lists.
        """
        if not isinstance(data, dict) or not data:
            raise GuidelineError(f"{source}: expected a non-empty object of intent -> list of actions")
        allowed: dict[str, frozenset[str]] = {}
        for intent, actions in data.items():
            if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
                raise GuidelineError(f"{source}: intent {intent!r} must map to a list of action names")
            allowed[str(intent)] = frozenset(actions)
        return cls(allowed=allowed, source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> Guidelines:
        """Read an ABCD-format ``kb.json``.

        Raises:
            GuidelineError: the file is missing, not JSON, or not in the format.
        """
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise GuidelineError(f"cannot read guidelines {path}: {e}") from e
        return cls.from_mapping(data, source=str(path))

    def check_intent(self, intent: str) -> frozenset[str]:
        """The actions ``intent`` allows.

        Raises:
            UnknownIntent: the intent is not in the guidelines.
        """
        try:
            return self.allowed[intent]
        except KeyError:
            raise UnknownIntent(intent) from None

    def mask_reason(self, intent: str, action: str | None) -> MaskReason | None:
        """Why ``action`` is masked under ``intent``, or None when it is allowed or absent.

        Raises:
            UnknownIntent: the intent is not in the guidelines.
        """
        allowed = self.check_intent(intent)
        if action is None or action in allowed:
            return None
        if action in self.actions:
            return MaskReason.NOT_ALLOWED_FOR_INTENT
        return MaskReason.UNKNOWN_ACTION
