"""``ranker train``'s flags, and what they settle before training.

The parser (its description is the entry module's docstring, the usage), ``--init``'s first stage
checked against this run, and the encoding the run records for its teachers and soup members.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dialogue_ranker.data.ranking_data import DataError
from dialogue_ranker.training.backbone import PRECISIONS
from dialogue_ranker.training.checkpoint import KEEP
from dialogue_ranker.training.distill import parse_teacher
from dialogue_ranker.training.shared_prefix import HEADS, bundle_run_config, finished_run_config
from dialogue_ranker.training.train_lists import Source

#: How a list is laid out for the encoder (see --layout).
LAYOUTS = ("shared-prefix", "pair")
#: Steps between checkpoints: about five minutes of a 2-core CPU run (3 s a step at 8 lists), a
#: few seconds of a GPU's, for a save of about a second (weights and AdamW's two moments, 270 MB).
CHECKPOINT_EVERY = 100


def parse_source(text: str) -> Source:
    """``FILE`` or ``FILE:WEIGHT``; the name is the file's stem."""
    path, _, weight = text.rpartition(":") if ":" in text else (text, "", "")
    try:
        value = float(weight) if weight else 1.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"--data takes FILE[:WEIGHT], got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"--data weight must be positive, got {text!r}")
    return Source(Path(path).stem, Path(path or text), value)


def list_size(text: str) -> int:
    """``--train-candidates``: a whole number of at least 2 (a list of one ranks nothing)."""
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"--train-candidates takes a number of at least 2, got {text!r}")
    return int(text)


def number_flag(flag: str, text: str, expected: str, allowed: Callable[[float], bool], bounds: str) -> float:
    """``text`` as ``flag``'s number; refused naming the flag where it is no number or not ``allowed``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} takes {expected}, got {text!r}") from None
    if not allowed(value):
        raise argparse.ArgumentTypeError(f"{flag} {text}: {bounds}")
    return value


def step_count(text: str) -> int:
    """``--max-steps N``: a whole number of steps, 0 included (no step: the start read back as a run)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"--max-steps takes a whole number of steps (0 or more): {text!r}")
    return int(text)


def ema_decay(text: str) -> float:
    """``--ema DECAY``: 0 (off) or a decay in (0, 1)."""
    return number_flag(
        "--ema",
        text,
        "a decay such as 0.98",
        lambda v: 0.0 <= v < 1.0,
        "the decay must be at least 0 and below 1",
    )


def lora_rank(text: str) -> int:
    """``--lora-rank R``: 0 (off) or a whole number of ranks (training/low_rank.py)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"--lora-rank takes a whole number (0: off), got {text!r}")
    return int(text)


def attention_dropout(text: str) -> float:
    """``--attention-dropout P``: a probability in [0, 1) (training/attention_dropout.py)."""
    return number_flag(
        "--attention-dropout", text, "a probability", lambda v: 0.0 <= v < 1.0, "a probability in [0, 1)"
    )


def keep_top_margin(text: str) -> float:
    """``--keep-top MARGIN``: 0 (off) or a positive margin in logits (training/distill.py)."""
    return number_flag(
        "--keep-top",
        text,
        "a margin in logits",
        lambda v: 0.0 <= v <= 20.0,
        "the margin must be between 0 and 20 logits",
    )


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """``ranker train``'s parser; ``description`` is its ``--help`` text (the entry module's docstring)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=parse_source, action="append", required=True, help="FILE[:WEIGHT]")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--backbone", default=None, help="backbone directory (default: packaged all-MiniLM-L6-v2)")
    p.add_argument(
        "--init",
        default=None,
        help="a finished run directory to continue from (a second stage; default: the fresh backbone)",
    )
    p.add_argument(
        "--init-bundle",
        default=None,
        help="a model directory (bundle) to continue from: its ranker graph's weights, dequantized "
        "(training/recover.py), for a stage on top of a shipped model whose run directory is gone",
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument(
        "--anchor-weight",
        type=float,
        default=0.0,
        help="after each step, pull every encoder weight lr x this of the way back to its start (L2-SP; "
        "0: off): a fine-tune keeps more of what the model it began from knew (training/anchor.py)",
    )
    p.add_argument(
        "--ema",
        type=ema_decay,
        default=0.0,
        metavar="DECAY",
        help="the dev checks score, and the run keeps, a moving average of the weights at this decay "
        "(about 1 / (1 - DECAY) steps; 0: the last step's weights; training/weight_average.py)",
    )
    p.add_argument("--batch-lists", type=int, default=8, help="ranking lists per optimiser step")
    p.add_argument("--tau", type=float, default=3.0, help="ListNet target temperature over the gains")
    p.add_argument(
        "--pointwise-weight",
        type=float,
        default=0.5,
        help="the pointwise BCE's weight beside ListNet (every file not named by --pointwise-on)",
    )
    p.add_argument(
        "--pointwise-on",
        type=pointwise_entry,
        action="append",
        default=[],
        metavar="NAME:WEIGHT",
        help="the pointwise BCE's weight on the lists of this --data file (its name, as the run records "
        "it; repeatable). The BCE learns each file's share of right replies as a prior: a lower weight "
        "on one-in-ten files keeps their base rate from pulling every logit down",
    )
    p.add_argument(
        "--thinned", type=float, default=0.5, help="share of lists with marked relevant situations thinned"
    )
    p.add_argument("--max-prefix-tokens", type=int, default=256)
    p.add_argument("--max-candidate-tokens", type=int, default=64)
    p.add_argument("--dev-lists", type=int, default=400, help="dev lists per file (a seeded sample)")
    p.add_argument(
        "--dev-seed",
        type=int,
        default=None,
        help="seed of that sample (default: --seed); give runs of different --seed the same one to "
        "compare them on the same dev lists",
    )
    p.add_argument("--limit", type=int, default=None, help="first N train lists per file (smoke runs)")
    p.add_argument(
        "--max-steps",
        type=step_count,
        default=None,
        help="stop after N steps (smoke runs); 0 takes none: --init-bundle's weights read back as a run",
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="training forward pass: fp32, bf16 (autocast; weights stay fp32), or auto (bf16 on a GPU "
        "that supports it; on a CPU that flags AVX-512 BF16 or AMX, a few passes of the first batch "
        "timed in each and the faster kept, else fp32); dev scoring is fp32",
    )
    p.add_argument(
        "--head",
        choices=HEADS,
        default="cosine",
        help="token-logit head: cosine (linear plus scale x cosine with the mean prefix state, so the "
        "fresh model already ranks by the backbone's reply-to-context similarity) or linear",
    )
    p.add_argument(
        "--keep-head-bias",
        action="store_true",
        help="start from the cosine head's bias as it is: no re-centring of the mean logit on the mix's "
        "share of right replies (a fine-tune of a trained ranker, whose bias the shipped calibration "
        "was fitted on; the re-centring moves every logit by the shift it prints)",
    )
    p.add_argument(
        "--train-candidates",
        type=list_size,
        default=None,
        help="at most N candidates per training list: its appropriate ones, then negatives sampled "
        "afresh each step (dev lists stay whole; default: every candidate)",
    )
    p.add_argument(
        "--train-candidates-on",
        action="append",
        default=[],
        metavar="NAME",
        help="with --train-candidates: cut the lists of these --data files only (their names; repeatable; "
        "default: every file). A fine-tune cuts its new lists for speed and keeps its replay whole, as "
        "the regression suite scores it",
    )
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="shared-prefix",
        help="shared-prefix: the context once, every candidate its own segment (what ships); pair: each "
        "candidate in its own sequence with the context, full attention (a per-pair cross-encoder, for "
        "design comparisons: ranker export ships shared-prefix runs only)",
    )
    p.add_argument(
        "--teacher",
        type=parse_teacher,
        action="append",
        default=[],
        help="RUN:WEIGHT (repeatable): finished runs, or shipped model directories (read back from "
        "their graph), whose weighted logits (an output ensemble) the ranker learns beside the "
        "labels, per view (training/distill.py)",
    )
    p.add_argument(
        "--distill-weight",
        type=float,
        default=0.5,
        help="with --teacher: the loss is (1 - w) x the label loss + w x the distillation loss",
    )
    p.add_argument(
        "--distill-on",
        action="append",
        default=[],
        metavar="NAME[:SHARE]",
        help="with --teacher: distil on the lists of these --data files only (their names, as the run "
        "records them; repeatable; default: every file). A stage that teaches what the teacher gets "
        "wrong leaves its own lists to the labels and keeps the teacher on the rest. SHARE: that "
        "file's lists learn (1 - SHARE) x their labels + SHARE x the teachers (named files without "
        "one take --distill-weight); with any SHARE given, each list counts once and the files not "
        "named learn their labels alone",
    )
    p.add_argument(
        "--keep-top",
        type=keep_top_margin,
        default=0.0,
        metavar="MARGIN",
        help="with --teacher: on each distilled list whose teachers rank a right candidate first (one of "
        "the list's highest grade, as P@1 counts it), a hinge holding the ranker's logit for it MARGIN "
        "above its best wrong candidate's (training/distill.py; 0: off): the teachers' right top-1 "
        "decisions kept, near ties included",
    )
    p.add_argument(
        "--distill-replaces-labels",
        action="store_true",
        help="with --distill-on: a taught list learns the teachers' targets alone and every other list its "
        "labels alone, each list counting once (--distill-weight is then unused): the old lists of a "
        "fine-tune kept where the teacher put them, the new ones learnt from their labels",
    )
    p.add_argument(
        "--select-on",
        action="append",
        default=[],
        metavar="NAME",
        help="choose the best epoch (and judge --patience) by these --data files' mean dev nDCG@3 (their "
        "names; repeatable; default: every file's). A fine-tune chooses by its own lists and reports "
        "what it kept of the rest",
    )
    p.add_argument(
        "--patience",
        type=int,
        default=None,
        metavar="N",
        help="stop after N epochs in a row without a better mean dev nDCG@3 (the best epoch is kept either "
        "way; default: every epoch runs)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop training after this many seconds (a lent machine's lease; the schedule still spans "
        "--max-steps); the run records the steps it took",
    )
    p.add_argument(
        "--freeze-layers",
        type=int,
        default=0,
        metavar="N",
        help="keep the embeddings and the encoder's first N layers as they start (training/freezing.py): "
        "a fine-tune moves only the upper layers and the head, and a step's backward pass stops at "
        "layer N",
    )
    p.add_argument(
        "--attention-dropout",
        type=attention_dropout,
        default=None,
        metavar="P",
        help="the dropout on the encoder's attention probabilities (training/attention_dropout.py; default: "
        "the encoder's own, 0.1 for all-MiniLM-L6-v2): 0 lets the attention take its fused kernel, about "
        "half a CPU step's time",
    )
    p.add_argument(
        "--lora-rank",
        type=lora_rank,
        default=0,
        metavar="R",
        help="train a rank-R change to each encoder layer's linear maps above --freeze-layers instead of "
        "their weights (LoRA through peft; training/low_rank.py), merged into them when the run is saved; "
        "0: off",
    )
    p.add_argument(
        "--replan",
        action="store_true",
        help="with --max-seconds: after each epoch, shorten the schedule (the learning rate's decay and "
        "the steps) to what this run's own seconds a step fit in the time left (training/replan.py)",
    )
    p.add_argument(
        "--stop-at",
        type=int,
        default=None,
        help="end after this many steps of the --max-steps schedule (replays a run that --max-seconds "
        "ended early)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=CHECKPOINT_EVERY,
        metavar="N",
        help="write a checkpoint (weights, optimiser, schedule, batch position, random states) to "
        f"RUN/checkpoints/ every N steps, the last {KEEP} kept (default {CHECKPOINT_EVERY}; 0: none)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished run in --out from its newest checkpoint (the same flags; a run "
        "with no checkpoint yet starts from the beginning)",
    )
    p.add_argument(
        "--stop-after-steps",
        type=int,
        default=None,
        metavar="K",
        help="debugging: end the process after K steps as a kill would (status 75, nothing written "
        "after the last checkpoint), to check that --resume ends where an uninterrupted run does",
    )
    p.add_argument(
        "--last-turn-weight",
        type=float,
        default=0.0,
        help="train on the logits the service computes with the last-turn view (service/context_views.py): "
        "a multi-turn list's full-context and last-turn logits averaged at this weight (0: one view)",
    )
    return p


def pointwise_entry(entry: str) -> tuple[str, float]:
    """``--pointwise-on NAME:WEIGHT``: the file's name and its BCE weight (a number >= 0)."""
    name, sep, tail = entry.rpartition(":")
    if not (sep and name):
        raise argparse.ArgumentTypeError(f"--pointwise-on takes NAME:WEIGHT (a --data name), got {entry!r}")
    # v >= 0 refuses NaN too.
    weight = number_flag(
        "--pointwise-on", tail, "a weight such as 0.1", lambda v: v >= 0, "the weight must be 0 or more"
    )
    return name, weight


def split_shares(entries: list[str], default: float) -> tuple[list[str], dict[str, float]]:
    """``--distill-on NAME[:SHARE]`` entries: the names, and each one's share (none where no entry has one).

    Raises:
        ValueError: a share outside [0, 1].
    """
    names, shares, given = [], {}, False
    for entry in entries:
        name, sep, tail = entry.rpartition(":")
        try:
            share = float(tail) if sep else None
        except ValueError:
            share = None
        if share is None:
            name, share = entry, default
        elif not 0 <= share <= 1:
            raise ValueError(f"--distill-on {entry}: the teachers' share must be between 0 and 1")
        else:
            given = True
        names.append(name)
        shares[name] = share
    return names, shares if given else {}


def encoding_of(args: argparse.Namespace, pair: bool) -> dict[str, Any]:
    """The encoding a run records (``config.json``), which its teachers and soup members must share."""
    return {
        "kind": "shared-prefix" if not pair else "pair-design-run",
        "max_prefix_tokens": args.max_prefix_tokens,
        "max_candidate_tokens": args.max_candidate_tokens,
    }


def first_stage(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--init``'s run configuration, checked against this run's arguments (None without ``--init``)."""
    if args.init is None and args.init_bundle is None:
        return None
    option = "--init" if args.init_bundle is None else "--init-bundle"
    if args.init is not None and args.init_bundle is not None:
        raise DataError("--init and --init-bundle exclude each other: a stage starts from one model")
    if args.backbone is not None:
        raise DataError(
            f"{option} and --backbone exclude each other: a second stage keeps its first's backbone"
        )
    run = Path(args.init or args.init_bundle)
    config = finished_run_config(run, "--init") if args.init else bundle_run_config(run, "--init-bundle")
    if config.get("head") != args.head or config.get("layout", "shared-prefix") != args.layout:
        raise DataError(
            f"{option} {run}: trained with --head {config.get('head')} --layout {config.get('layout')}; "
            f"this run asks for --head {args.head} --layout {args.layout}"
        )
    return config
