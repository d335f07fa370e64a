"""The log lines: one JSON object a ranked request, one a feedback. Plain functions, no I/O.

A request line is a ranking list of the project's format (``context``, ``situations``,
``candidates`` with ``text``, ``generator`` and ``action``, ``group``) without labels, plus what
joins feedback to it and what the service answered::

    {"format": 1, "request_id": "3f2a...", "time": "2026-11-28T10:00:00.123Z",
     "model": "dialogue-minilm-l6@2.9.0", "conversation_id": "chat-17", "group": "chat-17",
     "texts": true, "context": [{"speaker": "user", "text": "It is so hot in here."}],
     "situations": ["The window is closed."], "intent": null, "bank": null,
     "threshold": 0.45, "abstain": false,
     "candidates": [{"id": "window", "text": "Shall I open the window?", "generator": "retrieval",
                     "action": null, "bank": null, "score": 0.917, "logit": 2.264, "rank": 1,
                     "masked": null}]}

Without ``--logs.texts`` each text is replaced by its SHA-256 digest: ``"sha256": "<hex>"`` in
place of a turn's or candidate's ``text``, and ``situations_sha256`` in place of ``situations``,
so that no reader can take a digest for a text. ``rank`` is the candidate's place in the answer
(1 first); null for one the answer left out (hard-masked, or past ``top_k``), whose ``score`` and
``logit`` are null too when it was never scored. A feedback line::

    {"format": 1, "request_id": "3f2a...", "candidate_id": "window",
     "time": "2026-11-28T10:00:09.871Z", "label": 2, "matched": true}

with ``reward`` in place of ``label`` when the client sent a reward (:func:`label_of_reward`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

from dialogue_ranker.serving.guidelines import MaskReason
from dialogue_ranker.serving.rank_query import Candidate, RankedCandidate, RankQuery, RankResult

#: The version of the line format; a reader refuses others.
FORMAT = 1
#: The file prefixes: ``requests-<UTC time>.jsonl`` and ``feedback-<UTC time>.jsonl``.
REQUESTS = "requests"
FEEDBACK = "feedback"
KINDS = (REQUESTS, FEEDBACK)


def digest(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), in hex: what a line holds in place of a text without texts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def label_of_reward(reward: float) -> float:
    """A reward in [-1, 1] as a label: the probability ``(reward + 1) / 2`` that the reply was good.

    -1 (the user rejected it) is 0.0, 0 (no opinion) 0.5, 1 (the user took it) 1.0; the ranking
    data counts a probability of 0.5 or more as appropriate.
    """
    return (reward + 1.0) / 2.0


def timestamp(time_s: float) -> str:
    """``time_s`` (seconds since the epoch) as UTC ISO 8601 to the millisecond, ``Z`` for UTC."""
    moment = dt.datetime.fromtimestamp(time_s, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(text: str, texts: bool) -> dict[str, str]:
    return {"text": text} if texts else {"sha256": digest(text)}


def request_line(
    query: RankQuery,
    candidates: Sequence[Candidate],
    reasons: Sequence[MaskReason | None],
    result: RankResult,
    *,
    request_id: str,
    time_s: float,
    texts: bool,
) -> dict[str, Any]:
    """The line of one ranked request: every candidate (its own and its bank's), in request order."""
    answered: dict[tuple[str, str | None], tuple[int, RankedCandidate]] = {
        (entry.id, entry.bank): (place, entry) for place, entry in enumerate(result.ranking, start=1)
    }
    rows = []
    for candidate, reason in zip(candidates, reasons, strict=True):
        place, entry = answered.get((candidate.id, candidate.bank), (None, None))
        rows.append(
            {"id": candidate.id, **_text(candidate.text, texts), "generator": candidate.generator,
             "action": candidate.action, "bank": candidate.bank,
             "score": None if entry is None else entry.score, "logit": None if entry is None else entry.logit,
             "rank": place, "masked": None if reason is None else reason.value}
        )  # fmt: skip
    situations: dict[str, list[str]] = (
        {"situations": list(query.statements)}
        if texts
        else {"situations_sha256": [digest(s) for s in query.statements]}
    )
    return {
        "format": FORMAT,
        "request_id": request_id,
        "time": timestamp(time_s),
        "model": result.model,
        "conversation_id": query.conversation_id,
        "group": query.conversation_id or request_id,
        "texts": texts,
        "context": [{"speaker": t.speaker, **_text(t.text, texts)} for t in query.turns],
        **situations,
        "intent": query.intent,
        "bank": query.bank,
        "threshold": result.threshold,
        "abstain": result.abstain,
        "candidates": rows,
    }


def feedback_line(
    *,
    request_id: str,
    candidate_id: str,
    label: int | float | None,
    reward: float | None,
    matched: bool,
    time_s: float,
) -> dict[str, Any]:
    """The line of one feedback: the judgement as sent (a label or a reward), and whether it matched."""
    judgement: dict[str, int | float] = {"label": label} if label is not None else {}
    if reward is not None:
        judgement["reward"] = reward
    return {
        "format": FORMAT,
        "request_id": request_id,
        "candidate_id": candidate_id,
        "time": timestamp(time_s),
        **judgement,
        "matched": matched,
    }
