"""What a ``POST /rank`` answer must be, derived from its request, and the check of a response.

A 200 counts as a success only when the body keeps the API's promises: the response schema,
one ranked entry per unmasked candidate (at most ``top_k``), ids from the request and none
twice, calibrated scores in [0, 1] sorted best first, generator and action echoed, guideline
and repeat masks as the intent and ``mask_mode`` require, ``abstain`` consistent with
``threshold``, and ``statements_used`` listing every situation of the request, in order.

A request that names a bank gets the bank's responses too: entries whose ``bank`` is the
request's bank, with the bank's ids (not the request's), a ``retrieval_score`` (a cosine), and
``retrieve_k`` of them (or the service's default) after the request's own candidates. When the
suite has the bank's file, their ids, echoes and masks are checked against it as well.

What the answer must hold is derived from the request in :mod:`loadtests.expected`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.expected import MASK_REASONS, Expected

#: Failure name of a 429: the service shed load (queue full). Fixed text, so Locust counts every
#: shed request under one failure type.
SHED_LOAD = "shed load: 429 overloaded"

#: A cosine is within [-1, 1]; int8 vectors and float rounding may pass it by a little.
COSINE_SLACK = 0.02

# field -> (accepted types, may be null). bool is excluded from numbers on purpose (see _typed).
_NUMBER = (int, float)
_RESPONSE_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "model": ((str,), False),
    "ranking": ((list,), False),
    "masked": ((list,), False),
    "abstain": ((bool,), False),
    "threshold": (_NUMBER, False),
    "statements_used": ((list,), False),
}
_RANKED_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": ((str,), False),
    "score": (_NUMBER, False),
    "logit": (_NUMBER, False),
    "generator": ((str,), True),
    "action": ((str,), True),
    "masked": ((bool,), False),
    "mask_reason": ((str,), True),
    "bank": ((str,), True),
    "retrieval_score": (_NUMBER, True),
}
_MASKED_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": ((str,), False),
    "action": ((str,), True),
    "reason": ((str,), False),
    "bank": ((str,), True),
}


@dataclass(frozen=True)
class Problem:
    """Why a response is wrong: ``reason`` is short and fixed (Locust groups failures by it)."""

    reason: str
    detail: str = ""


class _Bad(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.problem = Problem(reason, detail)


def check_status(status: int, content: bytes | None, *, error: BaseException | None = None) -> Problem | None:
    """The problem with a non-200 status (0: no response, ``error`` says why); None for 200."""
    if status == 200:
        return None
    if status == 429:
        return Problem(SHED_LOAD)
    if status == 0:
        return Problem(f"connection failed: {type(error).__name__}", str(error))
    try:
        error_type = json.loads(content or b"")["error"]["type"]
    except (ValueError, KeyError, TypeError):
        error_type = "no error body"
    return Problem(f"HTTP {status} {error_type}")


def check_rank_body(content: bytes, expected: Expected) -> Problem | None:
    """The first broken promise of a 200 body, or None when it is right."""
    try:
        data = json.loads(content)
    except ValueError as e:
        return Problem("malformed body: not JSON", str(e))
    try:
        _typed(data, _RESPONSE_FIELDS, "response")
        ranking, masked = data["ranking"], data["masked"]
        for entry in ranking:
            _typed(entry, _RANKED_FIELDS, "ranking entry")
        for entry in masked:
            _typed(entry, _MASKED_FIELDS, "masked entry")
        # The request's own candidates (bank null) and the bank's responses are checked apart:
        # their ids may coincide, and only the request's own are known before the answer.
        own = [e for e in ranking if e["bank"] is None]
        own_masked = [m for m in masked if m["bank"] is None]
        drawn = [e for e in ranking if e["bank"] is not None]
        drawn_masked = [m for m in masked if m["bank"] is not None]
        _check_bank_entries(drawn, drawn_masked, expected)
        if masked[: len(own_masked)] != own_masked:
            raise _Bad("masked bank response listed before the request's own", str([m["id"] for m in masked]))
        _check_masks(own, own_masked, expected)
        _check_ids(own, expected, bank_ranked=len(drawn), bank_masked=len(drawn_masked))
        _check_scores(ranking, data["threshold"])
        _check_echoes(own, expected)
        _check_abstention(ranking, data, expected)
        _check_statements(data["statements_used"], expected)
    except _Bad as bad:
        return bad.problem
    return None


def _typed(value: Any, fields: Mapping[str, tuple[tuple[type, ...], bool]], what: str) -> None:
    if not isinstance(value, dict):
        raise _Bad(f"malformed body: {what} is not an object")
    for name, (kinds, nullable) in fields.items():
        if name not in value:
            raise _Bad(f"malformed body: {what} lacks {name}")
        item = value[name]
        # JSON true/false decode to bool, a subclass of int: it must not pass for a number.
        is_bool_as_number = isinstance(item, bool) and bool not in kinds
        ok = nullable if item is None else isinstance(item, kinds) and not is_bool_as_number
        if not ok:
            raise _Bad(f"malformed body: {what} field {name} has the wrong type", repr(item)[:80])


def _check_masks(ranking: list[dict], masked: list[dict], exp: Expected) -> None:
    reasons = exp.mask_reasons
    if exp.mask_mode == "hard":
        if leaked := [e["id"] for e in ranking if e["id"] in reasons]:
            raise _Bad("invalid action not masked", f"ranked despite the guidelines: {leaked}")
        if any(e["masked"] or e["mask_reason"] is not None for e in ranking):
            raise _Bad("ranked entry flagged as masked in hard mode")
        got = [(m["id"], m["reason"]) for m in masked]
        want = [(cid, reasons[cid]) for cid in exp.ids if cid in reasons]  # request order
        if got != want:
            got_ids, want_ids = {cid for cid, _ in got}, {cid for cid, _ in want}
            if want_ids - got_ids:
                reason = "invalid action not masked"
            elif got_ids - want_ids:
                reason = "valid candidate masked"
            else:
                reason = "wrong mask reason or order"
            raise _Bad(reason, f"masked {got}, want {want}")
        if any(m["action"] != exp.echoes[m["id"]][1] for m in masked):
            raise _Bad("masked entry action not echoed")
        return
    if masked:
        raise _Bad(f"masked list not empty in {exp.mask_mode} mode", str([m["id"] for m in masked]))
    for entry in ranking:  # soft: flagged in place; off: nothing flagged
        want_reason = reasons.get(entry["id"]) if exp.mask_mode == "soft" else None
        if entry["masked"] != (want_reason is not None):
            reason = "invalid action not masked" if want_reason else "valid candidate masked"
            raise _Bad(reason, f"{entry['id']}: masked={entry['masked']}")
        if entry["mask_reason"] != want_reason:
            raise _Bad("wrong mask reason", f"{entry['id']}: {entry['mask_reason']} != {want_reason}")


def _check_ids(ranking: list[dict], exp: Expected, *, bank_ranked: int = 0, bank_masked: int = 0) -> None:
    """The request's own ranked entries (``ranking``), and how many there are beside the bank's."""
    ids = [e["id"] for e in ranking]
    if len(set(ids)) != len(ids):
        raise _Bad("duplicate ids in ranking", str(ids))
    hard = exp.mask_mode == "hard"
    rankable = [cid for cid in exp.ids if not (hard and cid in exp.mask_reasons)]
    # Unique and all among the rankable ones: a permutation (of a top_k subset).
    if unknown := set(ids) - set(rankable):
        raise _Bad("ranked ids are not a permutation of the request's", f"unexpected {sorted(unknown)}")
    if exp.bank is None:
        want = len(rankable) if exp.top_k is None else min(exp.top_k, len(rankable))
        if len(ids) != want:
            raise _Bad("wrong number of ranked candidates", f"{len(ids)} ranked, want {want}")
        return
    drawn = None if exp.retrieve_k is None else min(exp.retrieve_k, exp.bank.size)
    if exp.top_k is None:
        if len(ids) != len(rankable):
            detail = f"{len(ids)} of the request's own, want {len(rankable)}"
            raise _Bad("wrong number of ranked candidates", detail)
        got = bank_ranked + bank_masked
        if (drawn is not None and got != drawn) or got == 0:
            want_text = "at least 1" if drawn is None else str(drawn)
            raise _Bad("wrong number of bank responses", f"{got} drawn (ranked or masked), want {want_text}")
        return
    total = len(ids) + bank_ranked
    if drawn is not None:
        want = min(exp.top_k, len(rankable) + drawn - bank_masked)
        if total != want:
            raise _Bad("wrong number of ranked candidates", f"{total} ranked, want {want}")
    elif total > exp.top_k or total == 0:
        raise _Bad("wrong number of ranked candidates", f"{total} ranked with top_k {exp.top_k}")


def _check_bank_entries(ranked: list[dict], masked: list[dict], exp: Expected) -> None:
    """The bank's responses in an answer: its name, unique ids of the bank, cosines, echoes, masks."""
    if exp.bank is None:
        if ranked or masked:
            raise _Bad("bank entry in the answer to a request without a bank", str((ranked + masked)[0]))
        return
    name, responses = exp.bank.name, exp.bank.responses
    ids = [e["id"] for e in ranked + masked]
    if len(set(ids)) != len(ids):
        raise _Bad("duplicate bank ids in ranking", str(ids))
    for entry in ranked + masked:
        if entry["bank"] != name:
            raise _Bad("entry from another bank", f"{entry['id']}: bank {entry['bank']!r}, want {name!r}")
        if responses is not None and entry["id"] not in responses:
            raise _Bad("bank id not in the bank", entry["id"])
    for entry in ranked:
        cosine = entry["retrieval_score"]
        if cosine is None or not math.isfinite(cosine) or abs(cosine) > 1 + COSINE_SLACK:
            raise _Bad("bank response without a retrieval score in [-1, 1]", f"{entry['id']}: {cosine}")
    if responses is None:
        # Without the bank's file only the form of the masks can be checked.
        if any(m["reason"] not in MASK_REASONS for m in masked):
            raise _Bad("wrong mask reason", str([m["reason"] for m in masked]))
        if exp.mask_mode == "hard" and any(e["masked"] or e["mask_reason"] is not None for e in ranked):
            raise _Bad("ranked entry flagged as masked in hard mode")
        if exp.mask_mode != "hard" and masked:
            raise _Bad(f"masked list not empty in {exp.mask_mode} mode", str(ids))
        return
    for entry in ranked:
        response = responses[entry["id"]]
        if (entry["generator"], entry["action"]) != (response.generator, response.action):
            raise _Bad("bank generator or action not echoed", entry["id"])
    if any(m["action"] != responses[m["id"]].action for m in masked):
        raise _Bad("masked entry action not echoed", str([m["id"] for m in masked]))
    for entry in masked:
        want = exp.bank_mask_reason(responses[entry["id"]])
        if exp.mask_mode != "hard":
            raise _Bad(f"masked list not empty in {exp.mask_mode} mode", str(ids))
        if want is None:
            raise _Bad("valid candidate masked", f"bank response {entry['id']} ({entry['reason']})")
        if entry["reason"] != want:
            raise _Bad("wrong mask reason", f"bank response {entry['id']}: {entry['reason']} != {want}")
    for entry in ranked:
        want = exp.bank_mask_reason(responses[entry["id"]])
        if exp.mask_mode == "hard":
            if want is not None:
                raise _Bad("bank response not masked", f"{entry['id']} ranked, want masked ({want})")
            want = None
        if entry["masked"] != (want is not None) or entry["mask_reason"] != want:
            raise _Bad("wrong mask reason", f"bank response {entry['id']}: {entry['mask_reason']} != {want}")


def _check_scores(ranking: list[dict], threshold: float) -> None:
    for entry in ranking:
        if not (0.0 <= entry["score"] <= 1.0):
            raise _Bad("score outside [0, 1]", f"{entry['id']}: {entry['score']}")
        if not math.isfinite(entry["logit"]):
            raise _Bad("logit not finite", f"{entry['id']}: {entry['logit']}")
    scores = [e["score"] for e in ranking]
    if any(a < b for a, b in zip(scores, scores[1:], strict=False)):
        raise _Bad("ranking not sorted by score, best first", str(scores))
    if not (0.0 <= threshold <= 1.0):
        raise _Bad("threshold outside [0, 1]", str(threshold))


def _check_echoes(ranking: list[dict], exp: Expected) -> None:
    for entry in ranking:
        if (entry["generator"], entry["action"]) != exp.echoes[entry["id"]]:
            raise _Bad("generator or action not echoed", entry["id"])


def _check_abstention(ranking: list[dict], data: dict, exp: Expected) -> None:
    threshold = data["threshold"]
    if exp.min_score is not None and threshold != exp.min_score:
        raise _Bad("threshold is not the request's min_score", f"{threshold} != {exp.min_score}")
    # top_k only cuts the tail, so the first entry is still the best score the service saw.
    abstain = not ranking or ranking[0]["score"] < threshold
    if data["abstain"] != abstain:
        raise _Bad("abstain inconsistent with threshold", f"abstain={data['abstain']}, threshold={threshold}")


def _check_statements(used: list[Any], exp: Expected) -> None:
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in used):
        raise _Bad("malformed body: statements_used holds a non-integer")
    if used != list(range(exp.situations)):
        # Every statement reaches the model, in the request's order.
        raise _Bad("statements_used is not every statement in order", f"{used} for {exp.situations}")
