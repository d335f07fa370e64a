"""A joint statement selector: the request and all statements in one sequence, on dev.

    .venv/bin/python -m experiments.joint_selector            # 4 epochs, about 13 minutes here

The pairwise selector the service ships reads (request, statement) pairs one by one, so it
cannot see that SUGAR's relevant statements describe one coherent scene. This variant reads
``[CLS] user: request [SEP] s1 [SEP] s2 [SEP] ...`` (statements as segment B, order shuffled in
training), puts a one-logit token-classification head on the backbone, and scores a statement by
the mean of its tokens' logits (the same as pooling, then the linear head). Training lists are the
12 statements (60%) or the gold statements plus 3-16 expanded distractors; binary cross-entropy
per statement. It is scored on dev against the shipped selector, alone and averaged with it,
feeding the shipped ranker.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence

import numpy as np
import torch
from transformers import AutoModelForTokenClassification

from experiments.common import evaluator, report, shipped_relevance, splits
from service.selection import choose_statements
from service.tokenization import EncodedPair, PairEncoder, Turn, token_ids, turn_text
from training.backbone import backbone_dir, make_optimizer, optimizer_step, seed_everything, to_tensors
from training.selector import fit_relevance_calibration
from training.sugar import SugarExample

#: (token ids, token type ids, token spans of its statements, their indices in the request)
Window = tuple[list[int], list[int], list[tuple[int, int]], list[int]]


class ListEncoder:
    """Packs a request's statements into as few windows of ``max_length`` tokens as fit."""

    def __init__(self, max_length: int) -> None:
        # The serving encoder's tokenizer, special ids and padding; only the layout is new here.
        self.pair_encoder = PairEncoder.from_file(backbone_dir(), max_length=max_length)

    def encode(self, request: str, statements: Sequence[str]) -> list[Window]:
        enc = self.pair_encoder
        head = [enc.cls_id, *token_ids(enc.tokenizer, [turn_text(Turn("user", request))])[0][:64], enc.sep_id]
        windows: list[Window] = []
        for j, ids in enumerate(token_ids(enc.tokenizer, statements)):
            ids = ids[:40]
            if not windows or len(windows[-1][0]) + len(ids) + 1 > enc.max_length:
                windows.append((list(head), [0] * len(head), [], []))
            tokens, types, spans, index = windows[-1]
            spans.append((len(tokens), len(tokens) + len(ids)))
            index.append(j)
            tokens.extend([*ids, enc.sep_id])
            types.extend([1] * (len(ids) + 1))
        return windows

    def pad(self, windows: Sequence[Window]) -> dict[str, torch.Tensor]:
        pairs = [EncodedPair(w[0], w[1], turns_kept=1, statements_kept=len(w[2])) for w in windows]
        return to_tensors(self.pair_encoder, pairs)


def training_list(e: SugarExample, rng: random.Random) -> tuple[list[str], list[int]]:
    gold = {e.statements[i] for i in e.gold} | {e.expanded[i] for i in e.expanded_gold}
    if rng.random() < 0.6:
        chosen = list(e.statements)
    else:
        pool = list(dict.fromkeys([*e.statements, *e.expanded]))
        others = [s for s in pool if s not in gold]
        chosen = [s for s in pool if s in gold] + rng.sample(others, min(len(others), rng.randint(3, 16)))
    rng.shuffle(chosen)
    return chosen, [int(s in gold) for s in chosen]


@torch.no_grad()
def statement_logits(model, enc: ListEncoder, examples: Sequence[SugarExample]) -> list[np.ndarray]:
    model.eval()
    out = []
    for e in examples:
        windows = enc.encode(e.request, e.statements)
        token_logits = model(**enc.pad(windows)).logits.squeeze(-1).numpy()
        z = np.zeros(len(e.statements), dtype=np.float32)
        for row, (_, _, spans, index) in enumerate(windows):
            for (start, end), j in zip(spans, index, strict=True):
                z[j] = token_logits[row, start:end].mean()
        out.append(z)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--limit", type=int, default=None, help="first N train and dev examples (smoke runs)")
    args = p.parse_args()
    torch.set_num_threads(2)
    seed_everything(13)
    train, dev = splits()
    if args.limit:
        train, dev = train[: args.limit], dev[: args.limit]
    enc = ListEncoder(args.max_length)
    model = AutoModelForTokenClassification.from_pretrained(str(backbone_dir()), num_labels=1)
    batch = 16
    optimizer, schedule = make_optimizer(model, lr=5e-5, total_steps=args.epochs * -(-len(train) // batch))
    rng = random.Random(13)
    for epoch in range(args.epochs):
        model.train()
        order = list(range(len(train)))
        rng.shuffle(order)
        for start in range(0, len(order), batch):
            windows: list[Window] = []
            targets: list[int] = []
            for i in order[start : start + batch]:
                statements, labels = training_list(train[i], rng)
                for w in enc.encode(train[i].request, statements):
                    windows.append(w)
                    targets.extend(labels[j] for j in w[3])
            token_logits = model(**enc.pad(windows)).logits.squeeze(-1)
            pooled = torch.stack(
                [token_logits[r, s:t].mean() for r, w in enumerate(windows) for s, t in w[2]]
            )
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                pooled, torch.tensor(targets, dtype=torch.float32)
            )
            optimizer_step(model, optimizer, schedule, loss)
        print(f"epoch {epoch + 1} done, last loss {loss.item():.3f}", flush=True)
    joint = statement_logits(model, enc, dev)
    cal = fit_relevance_calibration(joint, dev)
    ev = evaluator()
    pairwise = shipped_relevance(ev, dev)
    for t in (0.4, 0.5):
        report(
            f"pairwise (shipped), threshold {t}",
            ev,
            dev,
            [choose_statements(r, threshold=t, min_keep=1) for r in pairwise],
        )
    for t in (0.3, 0.4, 0.5):
        report(
            f"joint, threshold {t}",
            ev,
            dev,
            [choose_statements(cal(z), threshold=t, min_keep=1) for z in joint],
        )
    for t in (0.4, 0.5):
        mean = [(cal(z) + r) / 2 for z, r in zip(joint, pairwise, strict=True)]
        report(
            f"mean of both, threshold {t}",
            ev,
            dev,
            [choose_statements(m, threshold=t, min_keep=1) for m in mean],
        )


if __name__ == "__main__":
    main()
