r"""Train the retrieval encoder response banks use: a dual encoder, context -> response.

    ranker train-retriever --data runs/data/topical-chat-entity-fact.jsonl:1 \
        --data runs/data/sugar.jsonl:1 --out runs/retriever

Starts from the packaged all-MiniLM-L6-v2 (a sentence encoder: mean pooling, unit vectors). Each
training pair is a list's context, as the service will query the bank (its last ``--query-turns``
turns, :func:`dialogue_ranker.serving.banks.encoder.retrieval_query`), and one of its
appropriate replies. The loss is a softmax over the batch: each context against every reply of
the batch (in-batch negatives: other conversations' true replies, what a bank is full of) plus
one mined wrong reply per list (``--hard-negatives``: the list's own label-0 candidates, which
the converters mine to look right: same-entity turns, nearby turns, on-topic facts), at cosine x
``--scale``.

Lists are split as everywhere (:func:`dialogue_ranker.evaluation.domains.group_split`): training
reads the train part; the dev part of the first ``--data`` file makes the dev bank (every
appropriate reply of its lists, :mod:`dialogue_ranker.evaluation.retrieval`), whose R@1, R@10
and MRR are measured before and after training, in ``metrics.json``. The run directory's
``encoder/`` is a sentence-transformers-style directory (``ranker export-retriever`` reads it)
and ``config.json`` says how queries are made.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoModel

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation.domains import group_split
from dialogue_ranker.evaluation.retrieval import DevBank, dev_bank, recall_metrics
from dialogue_ranker.serving.banks.encoder import retrieval_query
from dialogue_ranker.training.backbone import (
    autocast,
    backbone_dir,
    make_optimizer,
    seed_everything,
    training_precision,
)
from dialogue_ranker.training.interpolate import interpolated
from dialogue_ranker.training.train_args import parse_source


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``ranker train-retriever``'s arguments (this module's docstring is its help)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=parse_source, action="append", required=True, help="FILE[:WEIGHT]")
    p.add_argument("--out", type=Path, required=True, help="run directory to create")
    p.add_argument("--backbone", type=Path, default=None, help="default: the packaged all-MiniLM-L6-v2")
    p.add_argument("--query-turns", type=int, default=2, help="the context's last turns a query is made of")
    p.add_argument("--batch-pairs", type=int, default=32)
    p.add_argument("--hard-negatives", type=int, default=1, help="mined wrong replies per pair (0: none)")
    p.add_argument("--scale", type=float, default=20.0, help="cosine scale in the softmax")
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--max-steps", type=int, default=400)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--dev-queries", type=int, default=1000, help="dev lists (queries) in the dev bank")
    p.add_argument("--max-query-tokens", type=int, default=128)
    p.add_argument("--max-response-tokens", type=int, default=64)
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--wise-alpha",
        type=float,
        default=1.0,
        help="write alpha x the trained weights + (1 - alpha) x the starting ones (WiSE-FT: a "
        "trained encoder keeps what the untrained one retrieved well outside the training data); "
        "the dev bank is measured on what is written",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop training after this many seconds and write the encoder as it is (the schedule "
        "still spans --max-steps); the run records the steps it took",
    )
    return p.parse_args(argv)


class SentenceEncoder(torch.nn.Module):
    """A transformer, mean pooling over real tokens, unit vectors: all-MiniLM-L6-v2's recipe."""

    def __init__(self, path: Path, tokenizer: Tokenizer) -> None:
        super().__init__()
        self.model = AutoModel.from_pretrained(str(path), add_pooling_layer=False)
        self.tokenizer = tokenizer

    def forward(self, texts: list[str], max_tokens: int) -> torch.Tensor:  # noqa: D102
        encodings = self.tokenizer.encode_batch(texts)
        length = min(max_tokens, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(texts), length), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = min(length, len(e.ids))
            ids[row, :n], mask[row, :n] = e.ids[:n], 1
            if len(e.ids) > length:  # keep the closing [SEP]
                ids[row, n - 1] = e.ids[-1]
        ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
        hidden = self.model(input_ids=ids_t, attention_mask=mask_t, token_type_ids=torch.zeros_like(ids_t))
        weights = mask_t.unsqueeze(-1).to(hidden.last_hidden_state.dtype)
        pooled = (hidden.last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return torch.nn.functional.normalize(pooled.float(), dim=-1)

    @torch.no_grad()
    def embed(self, texts: list[str], max_tokens: int, batch: int = 128) -> np.ndarray:
        """Unit vectors of many texts, length-sorted into batches."""
        self.eval()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            out[idx] = self([texts[i] for i in idx], max_tokens).numpy()
        return out


def training_pairs(
    lists: list[RankingList], turns: int, rng: random.Random
) -> list[tuple[str, str, list[str]]]:
    """(query, a best reply, the list's wrong replies) per list with an appropriate reply."""
    pairs = []
    for x in lists:
        best = max(c.gain for c in x.candidates)
        good = [c.text for c in x.candidates if c.appropriate and c.gain == best]
        if good:
            wrong = [c.text for c in x.candidates if not c.appropriate]
            pairs.append((retrieval_query(x.context, last_turns=turns), rng.choice(good), wrong))
    return pairs


def measure(encoder: SentenceEncoder, bank: DevBank, args: argparse.Namespace) -> dict:
    """R@1, R@10 and MRR of every dev query against the whole dev bank, by cosine."""
    queries = [retrieval_query(x.context, last_turns=args.query_turns) for x in bank.lists]
    q = encoder.embed(queries, args.max_query_tokens)
    r = encoder.embed(list(bank.texts), args.max_response_tokens)
    return recall_metrics(q @ r.T, bank.answers)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    rng = random.Random(args.seed)
    started = time.time()
    source = args.backbone or backbone_dir()
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    encoder = SentenceEncoder(source, tokenizer)
    pairs, dev_lists = [], []
    for i, data in enumerate(args.data):
        lists = read_lists(data.path)
        train = training_pairs([x for x in lists if group_split(x.group) == "train"], args.query_turns, rng)
        whole, part = divmod(data.weight, 1.0)
        pairs += train * int(whole) + rng.sample(train, round(part * len(train)))
        if i == 0:
            dev_lists = [x for x in lists if group_split(x.group) == "dev"]
    dev = dev_bank(random.Random(0).sample(dev_lists, min(args.dev_queries, len(dev_lists))))
    before = measure(encoder, dev, args)
    print("dev bank, untrained:", json.dumps(before), flush=True)
    precision = training_precision(args.precision)
    rng.shuffle(pairs)
    steps = min(args.max_steps, len(pairs) // args.batch_pairs)
    optimizer, schedule = make_optimizer(encoder, lr=args.lr, total_steps=steps)
    encoder.train()
    taken = 0
    for step in range(steps):
        if args.max_seconds is not None and time.time() - started > args.max_seconds:
            print(f"--max-seconds {args.max_seconds:g}: stopped after step {step} of {steps}", flush=True)
            break
        batch = pairs[step * args.batch_pairs : (step + 1) * args.batch_pairs]
        replies = [reply for _, reply, _ in batch]
        for _, _, wrong in batch:
            replies += rng.sample(wrong, min(args.hard_negatives, len(wrong)))
        with autocast(precision):
            q = encoder([query for query, _, _ in batch], args.max_query_tokens)
            r = encoder(replies, args.max_response_tokens)
        logits = args.scale * q @ r.T
        # A reply may occur twice in a batch ("Haha, nice!"): its copies are not negatives of it.
        same = torch.tensor([[a == b for b in replies] for a in replies[: len(batch)]])
        logits = logits.masked_fill(same & ~torch.eye(len(batch), len(replies), dtype=torch.bool), -1e4)
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        taken = step + 1
        if step % 50 == 0 or step == steps - 1:
            print(
                f"step {step + 1}/{steps} loss {loss.item():.3f} ({time.time() - started:.0f} s)", flush=True
            )
    if args.wise_alpha != 1.0:
        start = AutoModel.from_pretrained(str(source), add_pooling_layer=False)
        encoder.model = interpolated(start, encoder.model, args.wise_alpha)
    after = measure(encoder, dev, args)
    print("dev bank, trained:", json.dumps(after), flush=True)
    out = args.out
    (out / "encoder").mkdir(parents=True, exist_ok=True)
    encoder.model.save_pretrained(str(out / "encoder"))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, out / "encoder" / name)
    # What sentence-transformers and ranker export-retriever read: mean pooling, then normalise.
    (out / "encoder" / "1_Pooling").mkdir(exist_ok=True)
    (out / "encoder" / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {"word_embedding_dimension": encoder.model.config.hidden_size, "pooling_mode_mean_tokens": True}
        )
    )
    config = {
        **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "data"},
        "data": [{"file": str(d.path), "weight": d.weight} for d in args.data],
        "backbone": str(source),
        "query": {"turns": args.query_turns},
        "pooling": "mean",
        "training_precision": precision,
        "steps": taken,
        "planned_steps": steps,
        "train_pairs": len(pairs),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    result = {
        "dev_bank": {"untrained": before, "trained": after},
        "train_seconds": round(time.time() - started, 1),
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2), flush=True)
    return result


if __name__ == "__main__":
    exit_on_data_error(main)
