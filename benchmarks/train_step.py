r"""A training step's seconds with and without dropout on the attention probabilities, side by side.

``ranker train --attention-dropout`` (training/attention_dropout.py): with dropout on its
probabilities, PyTorch's attention on a CPU cannot take its fused kernel. This times what
``ranker adapt`` steps on, built by adapt's and ``ranker train``'s own code: the base bundle's
weights (dequantized), its encoding, head and last-turn view, the embeddings and first
``--freeze-layers`` layers frozen, batches of eight lists from each ``--lists FILE[:CUT]`` (CUT:
candidates kept per list, as ``--train-candidates`` cuts the team's), the label loss, backward,
clipping and AdamW. Each setting starts from the same weights and steps
on the same batches; the settings alternate step by step, so a host's drift falls on both.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_step.py \\
        --lists runs/data/persona-chat.jsonl:5 \\
        --lists runs/dialogue-minilm-l6-2.10.0/data/topical-chat.jsonl --precision bf16

Prints seconds a step per setting and file, and the ratio; quote it with ``lscpu``'s model and
flags (the ratio moves with the CPU).
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from pathlib import Path

import torch

from dialogue_ranker.adapt.args import build_parser
from dialogue_ranker.adapt.prepare import base_facts
from dialogue_ranker.adapt.train_phase import base_flags
from dialogue_ranker.data.machine import read_cpu
from dialogue_ranker.data.ranking_data import read_lists
from dialogue_ranker.training import train
from dialogue_ranker.training.attention_dropout import set_attention_dropout
from dialogue_ranker.training.backbone import autocast, make_optimizer, optimizer_step
from dialogue_ranker.training.freezing import freeze
from dialogue_ranker.training.list_loss import loss_of
from dialogue_ranker.training.train_lists import sample_candidates

BATCH_LISTS = 8
SETTINGS = {"attention dropout 0.1 (the encoder's)": 0.1, "attention dropout 0": 0.0}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=Path("models/dialogue-minilm-l6"))
    p.add_argument("--lists", action="append", required=True, metavar="FILE[:CUT]")
    p.add_argument("--steps", type=int, default=8, help="timed steps per setting and file")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--freeze-layers", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    return p.parse_args()


def batches(spec: str, count: int, rng: random.Random) -> list:
    """``count`` batches of seeded lists of one file, cut to CUT candidates where given."""
    path, _, cut = spec.partition(":")
    lists = rng.sample(read_lists(path), BATCH_LISTS * count)
    if cut:
        lists = [sample_candidates(x, int(cut), rng) for x in lists]
    return [lists[i : i + BATCH_LISTS] for i in range(0, len(lists), BATCH_LISTS)]


def train_flags(args: argparse.Namespace, data: str) -> argparse.Namespace:
    """``ranker train``'s flags as ``ranker adapt`` builds them from the base bundle (its own code)."""
    adapt = build_parser(None).parse_args(
        ["--lists", data, "--out", "unused", "--model", str(args.model), "--precision", args.precision,
         "--freeze-layers", str(args.freeze_layers), "--threads", str(args.threads)]
    )  # fmt: skip
    return train.parse_args([*base_flags(adapt, base_facts(args.model)), "--data", data, "--out", "unused"])


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    flags = train_flags(args, args.lists[0].partition(":")[0])
    encoder, base = train.load_start(args.model, flags, pair=False)
    freeze(base, args.freeze_layers)
    rng = random.Random(13)
    files = {spec: batches(spec, args.steps + 1, rng) for spec in args.lists}
    models = {}
    for label, p in SETTINGS.items():
        model = copy.deepcopy(base).train()
        set_attention_dropout(model, p)
        optimizer, schedule = make_optimizer(model, lr=flags.lr, total_steps=10_000)
        models[label] = (model, optimizer, schedule)
    seconds: dict[tuple[str, str], list[float]] = {}
    for spec, file_batches in files.items():
        for i, batch in enumerate(file_batches):  # the first batch of each file warms up, untimed
            for label, (model, optimizer, schedule) in models.items():
                started = time.perf_counter()
                with autocast(args.precision):
                    loss = loss_of(model, encoder, batch, flags, random.Random(i))
                optimizer_step(model, optimizer, schedule, loss)
                if i:
                    seconds.setdefault((spec, label), []).append(time.perf_counter() - started)
    cpu = read_cpu().model
    print(
        f"CPU: {cpu}; torch {torch.__version__}, {args.threads} threads, {args.precision}, "
        f"--freeze-layers {args.freeze_layers}, {args.steps} steps of {BATCH_LISTS} lists a setting"
    )
    print("| lists | " + " | ".join(f"{label}, s a step" for label in SETTINGS) + " | ratio |")
    print("| --- |" + " ---: |" * (len(SETTINGS) + 1))
    for spec in files:
        means = [statistics.mean(seconds[(spec, label)]) for label in SETTINGS]
        print(
            f"| {Path(spec).name} | "
            + " | ".join(f"{m:.3f}" for m in means)
            + f" | {means[0] / means[1]:.2f}x |"
        )


if __name__ == "__main__":
    main()
