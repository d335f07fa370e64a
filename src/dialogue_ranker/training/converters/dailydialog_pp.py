"""DailyDialog++ as ranking lists: one list per context.

5 positives (label 1, ``human``), 5 adversarial (label 0, ``adversarial``: they reuse the
context's words) and 5 random negatives (label 0, ``random``). CC BY-NC-SA 4.0: for evaluation
and model selection only, never for a model that ships.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from dialogue_ranker.data.ranking_data import Candidate, RankingList
from dialogue_ranker.serving.tokenization import Turn


def convert_dailydialog_pp(path: Path) -> Iterator[RankingList]:
    """DailyDialog++ contexts as ranking lists (evaluation only: non-commercial licence)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        turns = [str(t) for t in row["context"]]
        # The responder speaks next: the last context turn is its partner's.
        speakers = ["user" if (len(turns) - i) % 2 == 1 else "bot" for i in range(len(turns))]
        candidates = [
            *(Candidate(t, 1, "human") for t in row["positive_responses"]),
            *(Candidate(t, 0, "adversarial") for t in row["adversarial_negative_responses"]),
            *(Candidate(t, 0, "random") for t in row["random_negative_responses"]),
        ]
        yield RankingList(
            context=tuple(Turn(s, t) for s, t in zip(speakers, turns, strict=True)),
            candidates=tuple(c for c in candidates if c.text.strip()),
            group=f"ddpp-{row.get('id', number)}",
        )
