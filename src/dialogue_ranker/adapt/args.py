"""``ranker adapt``'s flags, and the checks on them that need nothing but the flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from dialogue_ranker.adapt.guard import GUARDS, parse_replay
from dialogue_ranker.adapt.regression import DEFAULT_SUITE, REPO
from dialogue_ranker.serving.settings import DEFAULT_MODEL_DIR
from dialogue_ranker.training.backbone import PRECISIONS
from dialogue_ranker.training.train_args import (
    attention_dropout,
    ema_decay,
    keep_top_margin,
    list_size,
    lora_rank,
)

#: The phases, in order (``--stop-after`` names one).
PHASES = ("prepare", "train", "export", "calibrate", "evaluate", "report")
#: The export's candidate graph: the shipped model's int8 grid. fp32, the reference, is always built
#: and ships where int8 loses (fp16 weights, another candidate, add a third of the export's time).
VARIANTS = "int8_blockwise_asymmetric"
#: Exit status of a run ended by ``--stop-after`` (EX_TEMPFAIL: try again, with ``--resume``).
STOPPED_STATUS = 75
#: Candidates per training list: the right ones, then negatives drawn afresh each step (dev and test
#: lists stay whole). On 10-candidate persona lists, bf16, 2 cores, five take 2.0 s a step against
#: 3.7 s for all ten, so a budget holds 1.7 times the steps (345 against 199 in 30 minutes:
#: docs/research/2026-11-28-adapt-five-candidates.md).
TRAIN_CANDIDATES = 5
#: 5e-5 with the best epoch chosen on the team's dev lists lifted persona chat's test P@1 0.224 to
#: 0.539 in 299 steps (40.6% of the distance to 1.0); 3e-5 gave 0.226 to 0.511 in 345, and the
#: largest regression drop was -0.030 against -0.060 (docs/research/2026-11-28-adapt-lr-and-selection.md).
LEARNING_RATE = 5e-5
#: ``ranker train --ema``: 0 (the last step's weights) until a measured run chooses otherwise.
EMA = 0.0
#: ``ranker train --anchor-weight``: 0 until a measured run chooses otherwise.
ANCHOR_WEIGHT = 0.0
#: ``ranker train --freeze-layers``: the embeddings and first 3 of the 6 layers kept, as in every
#: persona run since run 17 (run 10 held the guard where the unfrozen runs 9 and 11 did not:
#: docs/research/2026-12-01-adapt-replan-and-interpolation.md), and a cheaper backward pass.
FREEZE_LAYERS = 3
#: ``ranker train --attention-dropout``: none on the attention's probabilities, so that a CPU's
#: attention takes its fused kernel. A training step of the team's lists took half the time
#: (docs/research/2026-12-06-attention-dropout.md); the hidden states keep the base's 0.1.
ATTENTION_DROPOUT = 0.0
#: ``ranker train --lora-rank``: 0 (the weights themselves) until a measured run chooses otherwise.
LORA_RANK = 0
#: ``ranker train --keep-top``: 0 (off) until a measured run chooses otherwise.
KEEP_TOP = 0.0
#: The base's share of the team's own lists' targets (adapt/guard.py): 0 until a measured run
#: chooses otherwise.
TEAM_TEACHER = 0.0


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """``ranker adapt``'s parser; ``description`` is its ``--help`` text (the entry module's docstring)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--lists",
        type=Path,
        action="append",
        required=True,
        help="your labelled lists: a ranking-data JSONL file, or a directory of the service's request logs "
        "and feedback (repeatable)",
    )
    p.add_argument(
        "--model", type=Path, default=DEFAULT_MODEL_DIR, help="the base bundle (default: the shipped one)"
    )
    p.add_argument("--out", type=Path, required=True, help="the run's directory (the bundle is OUT/bundle)")
    p.add_argument(
        "--minutes", type=float, default=30.0, help="the whole command's time budget, every phase included"
    )
    p.add_argument("--resume", action="store_true", help="continue the run in --out where it stopped")
    p.add_argument(
        "--guard",
        choices=GUARDS,
        default=GUARDS[0],
        help="what keeps the base's ranking: replay its training lists, distil the base on them, both, or "
        "none (adapt/guard.py)",
    )
    p.add_argument(
        "--replay",
        type=parse_replay,
        action="append",
        default=None,
        metavar="FILE[:WEIGHT]",
        help="lists the base trained on, mixed in (their train split; WEIGHT: lists per list of yours, "
        "default 0.1); default: the regression suite's files that are present",
    )
    p.add_argument(
        "--regression-suite",
        type=Path,
        default=DEFAULT_SUITE,
        metavar="TOML",
        help="what the base knew, scored on both bundles (release-check's format)",
    )
    p.add_argument(
        "--suite-root", type=Path, default=REPO, help="where the suite's relative paths start (the checkout)"
    )
    p.add_argument("--limit", type=int, default=None, help="smoke runs: at most N lists per file and part")
    p.add_argument(
        "--max-steps", type=int, default=None, help="training steps (default: planned from --minutes)"
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="training's forward pass (ranker train --precision): auto is bf16 on a GPU that supports "
        "it and, on a CPU that flags AVX-512 BF16 or AMX, whichever of bf16 and fp32 the step probe "
        "times faster; weights stay fp32",
    )
    p.add_argument(
        "--train-candidates",
        type=list_size,
        default=TRAIN_CANDIDATES,
        help="at most N candidates per training list (ranker train --train-candidates): fewer make a "
        "step cheaper, so the budget holds more of them",
    )
    p.add_argument(
        "--anchor-weight",
        type=float,
        default=ANCHOR_WEIGHT,
        help="the pull back to the base's weights after each step (ranker train --anchor-weight; 0: "
        "off): part of the forgetting guard that costs no step time",
    )
    p.add_argument(
        "--ema",
        type=ema_decay,
        default=EMA,
        metavar="DECAY",
        help="keep a moving average of the weights, not the last step's (ranker train --ema; 0: off): "
        "it averages out the noise of the last batches, which moves a regression set from seed to seed",
    )
    p.add_argument(
        "--freeze-layers",
        type=int,
        default=FREEZE_LAYERS,
        metavar="N",
        help="keep the base's embeddings and first N encoder layers as they are (ranker train "
        "--freeze-layers): cheaper steps, and what those layers knew is kept",
    )
    p.add_argument(
        "--attention-dropout",
        type=attention_dropout,
        default=ATTENTION_DROPOUT,
        metavar="P",
        help="the dropout on the encoder's attention probabilities (ranker train --attention-dropout): at 0 "
        "a step takes about half the time on a CPU, so the budget holds more steps",
    )
    p.add_argument(
        "--lora-rank",
        type=lora_rank,
        default=LORA_RANK,
        metavar="R",
        help="learn a rank-R change to the layers above --freeze-layers, not their weights (ranker train "
        "--lora-rank; 0: off): a bounded update, merged before the export, so the graph is the base's shape",
    )
    p.add_argument(
        "--keep-top",
        type=keep_top_margin,
        default=KEEP_TOP,
        metavar="MARGIN",
        help="where the base ranks a right reply (of the list's highest grade) first on a list it "
        "teaches, hold the adapted model's logit for it MARGIN above the best wrong reply's (ranker train "
        "--keep-top; 0: off); needs the base as a teacher: --guard both or distill, or --team-teacher",
    )
    p.add_argument(
        "--team-teacher",
        type=float,
        default=TEAM_TEACHER,
        metavar="SHARE",
        help="the base's outputs' share of your lists' targets (learning without forgetting; 0: their "
        "labels alone; below 1). The step probe does not time the teacher on your lists: the schedule is "
        "re-planned after the first epoch",
    )
    p.add_argument(
        "--select-on",
        choices=("team", "all"),
        default="team",
        help="which dev lists choose the best epoch: yours alone, or yours and the replay's (mean nDCG@3)",
    )
    p.add_argument(
        "--views",
        choices=("fit", "base"),
        default="fit",
        help="the bundle's context views (last-turn and prior weights): chosen on your dev lists from a "
        "small grid, the base's kept on a tie (export/view_fit.py), or the base's as they are",
    )
    p.add_argument(
        "--lr", type=float, default=LEARNING_RATE, help="the learning rate (ranker train --lr; linear decay)"
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--name", default=None, help="the bundle's name (default: the base's, with -adapted)")
    p.add_argument(
        "--version", default=None, help="the bundle's version (default: the base's, with +adapted)"
    )
    p.add_argument(
        "--variants", default=VARIANTS, help="graphs the export builds and chooses among (ranker export)"
    )
    p.add_argument(
        "--runtimes",
        default=None,
        help="runtimes whose map is fitted (ranker calibrate; default: every one this host runs)",
    )
    p.add_argument("--threads", type=int, default=2, help="ONNX Runtime threads when scoring")
    p.add_argument(
        "--stop-after",
        choices=PHASES,
        default=None,
        help="debugging: end after this phase as a kill would (status 75), to check --resume",
    )
    return p


def parse_args(argv: list[str] | None, description: str | None) -> argparse.Namespace:
    """The flags, checked."""
    p = build_parser(description)
    args = p.parse_args(argv)
    if args.minutes <= 0:
        p.error(f"--minutes {args.minutes:g} is not positive")
    if not 0 < args.lr < 1:
        p.error(f"--lr {args.lr:g} is not a learning rate (between 0 and 1)")
    if not 0 <= args.team_teacher < 1:
        p.error(f"--team-teacher {args.team_teacher:g} is not a share below 1 (at 1 no label teaches)")
    if args.keep_top and args.guard not in ("both", "distill") and not args.team_teacher:
        p.error(f"--keep-top with --guard {args.guard}: the base teaches no list (--guard both or distill)")
    if args.freeze_layers < 0:  # more than the base has: ranker train names its layer count
        p.error(f"--freeze-layers {args.freeze_layers} is negative")
    for flag, value in (("--limit", args.limit), ("--max-steps", args.max_steps)):
        if value is not None and value < 1:
            p.error(f"{flag} {value} is not positive")
    if not (args.model / "metadata.json").is_file():
        p.error(f"--model {args.model}: not a bundle (no metadata.json)")
    if args.out.resolve() == args.model.resolve():
        p.error("--out is the base bundle: adapt writes a new directory")
    if args.guard == "none" and args.replay:
        p.error("--replay with --guard none: choose a guard that uses them, or leave --replay out")
    return args
