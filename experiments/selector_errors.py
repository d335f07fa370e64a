"""Where the shipped selector errs on dev, and what each kind of error costs the ranker.

    .venv/bin/python -m experiments.selector_errors

Each dev statement is put in a class by what the training split says of its (request,
statement) pair: seen only as gold, seen only as non-gold, both, or unseen. Then the shipped
ranker scores dev with the gold statements, the selected ones, the selected ones less the
false positives, and the gold ones plus the false positives.
"""

from __future__ import annotations

import collections

from experiments.common import evaluator, report, splits


def main() -> None:
    train, dev = splits()
    ev = evaluator()
    seen: dict[tuple[str, str], set[bool]] = collections.defaultdict(set)
    for e in train:
        for i, s in enumerate(e.statements):
            seen[(e.request, s)].add(i in e.gold)
    kept = ev.selected(dev, "u+S")
    classes: collections.Counter = collections.Counter()
    names = {frozenset(): "unseen", frozenset({True}): "seen gold", frozenset({False}): "seen non-gold"}
    for e, k in zip(dev, kept, strict=True):
        for i, s in enumerate(e.statements):
            cls = names.get(frozenset(seen.get((e.request, s), set())), "seen both")
            classes[(cls, "gold" if i in e.gold else "non-gold", "kept" if i in k else "dropped")] += 1
    for key in sorted(classes):
        print(" / ".join(key), classes[key])
    gold = [sorted(e.gold) for e in dev]
    report("gold statements", ev, dev, gold)
    report("selected (shipped)", ev, dev, kept)
    report(
        "selected less false positives",
        ev,
        dev,
        [[i for i in k if i in g] for k, g in zip(kept, gold, strict=True)],
    )
    report(
        "gold plus false positives",
        ev,
        dev,
        [k + [i for i in g if i not in k] for k, g in zip(kept, gold, strict=True)],
    )


if __name__ == "__main__":
    main()
