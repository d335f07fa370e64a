"""Other rules for turning the shipped selector's relevance into kept statements, on dev.

    .venv/bin/python -m experiments.selection_rules

Thresholds, a larger ``min_keep``, the top k with k the rounded sum of the relevances (the
expected number of relevant statements), and the mean of the ranker's logits over two views.
"""

from __future__ import annotations

import numpy as np

from experiments.common import evaluator, report, shipped_relevance, splits
from service.selection import choose_statements


def main() -> None:
    _, dev = splits()
    ev = evaluator()
    relevance = shipped_relevance(ev, dev)

    def by_threshold(t: float, min_keep: int = 1) -> list[list[int]]:
        return [choose_statements(r, threshold=t, min_keep=min_keep) for r in relevance]

    views = {t: report(f"threshold {t}", ev, dev, by_threshold(t)) for t in (0.2, 0.3, 0.4, 0.5, 0.6)}
    for min_keep in (3, 4):
        report(f"threshold 0.4, min_keep {min_keep}", ev, dev, by_threshold(0.4, min_keep))
    for extra in (0, 1):
        top = [[int(i) for i in np.argsort(-r)[: max(1, round(float(r.sum())) + extra)]] for r in relevance]
        report(f"top round(sum of relevance) + {extra}", ev, dev, top)
    for a, b in ((0.4, 0.2), (0.4, 0.6), (0.3, 0.5)):
        mean = [(x + y) / 2 for x, y in zip(views[a], views[b], strict=True)]
        report(f"mean logits of views {a} and {b}", ev, dev, by_threshold(a), mean)


if __name__ == "__main__":
    main()
