"""Context views: a multi-turn request scored with its last turn alone, and with no turn, too.

A multi-turn request is scored with every turn, with its last turn alone and, when the bundle
asks for it, with a bare "." turn (the reply's own prior). Each candidate's logit is

    (full + last_turn_weight * last + prior_weight * (prior - prior_centre)) / (1 + last_turn_weight)

Why the last turn: a reply that reuses an earlier turn's words without answering the last one
(DailyDialog++'s adversarial replies) draws support from the whole context; read against the last
turn alone it loses it. On model 2.5.1's weights, at weight 0.5, DailyDialog++ dev AUC against
adversarial replies rose from 0.750 to 0.776 (against random ones 0.860 to 0.863), Topical-Chat
R@1 stayed level (dev 0.507 to 0.492, test 0.505 to 0.520, 600 lists each) and SUGAR, whose
requests have one turn, did not move (README "Training", the last-turn view).

Why the prior: many adversarial replies are odd sentences whatever the context; the reply's
score with no context says so. On model 2.7.0's graph, prior weight 0.2 beside the last turn's
0.5 took DailyDialog++ dev AUC against adversarial replies from 0.786 to 0.801 (P@1 0.810 to 0.825)
for 0.013 of Topical-Chat test R@1 (README "Training", the reply's prior). The prior's logits
run low (about -2.8 against -1 for the full context), so they enter as their difference from
``prior_centre``, their mean on the export's dev lists' multi-turn candidates: the ranking is that
of the plain weighted mean, and the scores keep the scale the calibration map was fitted for.

A request of one turn has one view (the others would read the same turn or, for the prior,
change SUGAR-style situated requests, which it was not chosen for), so it costs nothing; a
multi-turn request costs a second, shorter pass, and a third of its candidates after a bare turn
(with a prior, the last-turn view is scored even at weight 0: views are read by position). Equal
logits in every view give the same logit back (with a zero centre), so a one-turn request's
calibration still fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

#: The text of the prior view's one turn: a context that says nothing.
PRIOR_TEXT = "."


@dataclasses.dataclass(frozen=True)
class ViewWeights:
    """How much each extra view counts (0: that view is not scored)."""

    last_turn: float = 0.0
    prior: float = 0.0
    prior_centre: float = 0.0

    def __post_init__(self) -> None:
        for key, value in (("last_turn_weight", self.last_turn), ("prior_weight", self.prior)):
            if not 0.0 <= value < math.inf:
                raise ValueError(f"{key} {value} is not >= 0")
        if not math.isfinite(self.prior_centre):
            raise ValueError(f"prior_centre {self.prior_centre} is not finite")

    @property
    def adds_views(self) -> bool:
        """Whether a multi-turn request is scored more than once (with every turn)."""
        return self.last_turn > 0 or self.prior > 0

    def to_dict(self) -> dict[str, float]:
        """The bundle's ``views`` metadata (the prior's fields only when it is used)."""
        out = {"last_turn_weight": self.last_turn}
        if self.prior > 0:
            out |= {"prior_weight": self.prior, "prior_centre": self.prior_centre}
        return out

    @classmethod
    def from_dict(cls, views: dict[str, Any] | None) -> ViewWeights:
        """From a bundle's ``views`` metadata (absent: one view)."""
        views = views or {}
        values = {}
        for key in ("last_turn_weight", "prior_weight", "prior_centre"):
            try:
                values[key] = float(views.get(key, 0.0))
            except (TypeError, ValueError):
                raise ValueError(f"{key} {views[key]!r} is not a number") from None
        return cls(values["last_turn_weight"], values["prior_weight"], values["prior_centre"])


#: One view: every turn, nothing else.
ONE_VIEW = ViewWeights()


def as_weights(weights: ViewWeights | float) -> ViewWeights:
    """A bare number is the last-turn weight alone."""
    return weights if isinstance(weights, ViewWeights) else ViewWeights(last_turn=float(weights))


def views(turns: Sequence[T], weights: ViewWeights | float) -> list[Sequence[T]]:
    """The contexts a request is scored with: every turn, then the last one, then the bare turn.

    The prior view's turn is the last turn with its text replaced (a dataclass, as both the
    service's and the training data's turns are), so the speaker is kept.
    """
    w = as_weights(weights)
    if len(turns) < 2 or not w.adds_views:
        return [turns]
    out = [turns, turns[-1:]]
    if w.prior > 0:
        out.append([dataclasses.replace(turns[-1], text=PRIOR_TEXT)])  # type: ignore[type-var]
    return out


def mean(full: Any, last: Any, last_turn_weight: float) -> Any:
    """The candidates' logits from their full-context and last-turn logits (numpy, or torch in training)."""
    return (full + last_turn_weight * last) / (1.0 + last_turn_weight)


def combine(logits: np.ndarray, views: int, weights: ViewWeights | float) -> np.ndarray:
    """Each candidate's logit from its views' logits, given one view after another.

    Raises:
        ValueError: ``logits`` does not hold the same number of candidates for each view, or
            the number of views is not what the weights make.
    """
    if views == 1:
        return logits
    w = as_weights(weights)
    if views not in (2, 3) or len(logits) % views or (views == 3) != (w.prior > 0):
        raise ValueError(f"{len(logits)} logits do not split into {views} views")
    parts = np.split(np.asarray(logits, dtype=np.float32), views)
    out = mean(parts[0], parts[1], w.last_turn)
    if views == 3:
        out = out + w.prior * (parts[2] - w.prior_centre) / (1.0 + w.last_turn)
    return out
