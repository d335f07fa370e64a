"""Train the shared-prefix ranker on a weighted mix of ranking-data files, then calibrate it.

    ranker train --data runs/data/sugar.jsonl:3 --data runs/data/topical-chat.jsonl:0.1 \
        --out runs/ranker

Every file is in the ranking-data format (:mod:`dialogue_ranker.data.ranking_data`); a user's own logs train
a bundle with the same command. ``FILE:WEIGHT`` sets how many passes over the file's training
lists one epoch makes (0.1: a fresh 10% sample each epoch; 3: three passes; default 1). Lists
are split by group with :func:`dialogue_ranker.evaluation.domains.group_split`, the same split the evaluation
CLI uses: training reads the train part, early stopping and calibration read the dev part, the
test part is never read.

Loss per list: ListNet over the candidates' gains plus a pointwise BCE on "appropriate" (see
the 1.1.0 per-pair ranker's listwise loss). Situations are shuffled in training so the model does
not learn their order; in half the lists that mark relevant situations (``--thinned``) half the
others are dropped. After each epoch the dev lists are scored; the epoch with the best mean
dev nDCG@3 over the files is kept. Calibration (Platt) and the abstention threshold are fitted
on the pooled dev lists of every file.

The run directory gets ``ranker/`` (encoder, head, tokenizer), ``calibration.json``,
``config.json`` and ``metrics.json``; ``ranker export --run`` makes the model directory.

``--init RUN`` starts from a finished run's ranker instead of the backbone: a second stage on
another mix (what ``make model`` does: the shipped model's first stage learns same-conversation
negatives, its second on-topic statements and other conversations' turns; README "Training").
The run records the first stage (``config.json``: ``init``) and keeps its backbone as the
backbone, so ``dialogue_ranker.training.interpolate`` still averages toward the untrained model.

``--teacher RUN:WEIGHT`` (repeatable) distils the output ensemble of finished runs into this one:
their weighted logits are soft targets beside the labels, on the same sequences, per view
(:mod:`training.distill`; ``--distill-weight`` sets the mix). ``--max-seconds`` ends training early
on a lent machine whose lease runs out; the run records the steps it took, and ``--stop-at N``
with the same ``--max-steps`` replays it.

``--layout pair`` trains the same encoder and head as a per-pair cross-encoder instead (each
candidate in a sequence of its own with the context, full attention) on the same lists, splits,
loss and dev metrics: the comparison the shared-prefix design is judged by. Such a run is not
exported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from dialogue_ranker.data.ranking_data import DataError, RankingList, exit_on_data_error, read_lists
from dialogue_ranker.evaluation import calibration as calibrate
from dialogue_ranker.evaluation import metrics
from dialogue_ranker.evaluation.domains import evaluate, group_split
from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.calibration import Calibrator, sigmoid
from dialogue_ranker.serving.list_encoding import EncodedList, ListEncoder
from dialogue_ranker.training.backbone import (
    PRECISIONS,
    autocast,
    backbone_dir,
    backbone_label,
    device,
    device_label,
    make_optimizer,
    optimizer_step,
    seed_everything,
    training_precision,
)
from dialogue_ranker.training.distill import Ensemble, distillation_loss, parse_teacher
from dialogue_ranker.training.shared_prefix import (
    HEADS,
    SharedPrefixRanker,
    candidate_means,
    finished_run_config,
    score_requests,
    to_tensors,
)

#: How a list is laid out for the encoder (see --layout).
LAYOUTS = ("shared-prefix", "pair")


@dataclass(frozen=True)
class Source:
    """One training file and its weight."""

    name: str
    path: Path
    weight: float


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=parse_source, action="append", required=True, help="FILE[:WEIGHT]")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--backbone", default=None, help="backbone directory (default: packaged all-MiniLM-L6-v2)")
    p.add_argument(
        "--init",
        default=None,
        help="a finished run directory to continue from (a second stage; default: the fresh backbone)",
    )
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-lists", type=int, default=8, help="ranking lists per optimiser step")
    p.add_argument("--tau", type=float, default=3.0, help="ListNet target temperature over the gains")
    p.add_argument("--pointwise-weight", type=float, default=0.5)
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
    p.add_argument("--max-steps", type=int, default=None, help="stop after N steps (smoke runs)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="training forward pass: fp32, bf16 (autocast; weights stay fp32), or auto (bf16 where the "
        "GPU or CPU has native bf16 matrix units, e.g. AVX-512 BF16, else fp32); dev scoring is fp32",
    )
    p.add_argument(
        "--head",
        choices=HEADS,
        default="cosine",
        help="token-logit head: cosine (linear plus scale x cosine with the mean prefix state, so the "
        "fresh model already ranks by the backbone's reply-to-context similarity) or linear",
    )
    p.add_argument(
        "--train-candidates",
        type=list_size,
        default=None,
        help="at most N candidates per training list: its appropriate ones, then negatives sampled "
        "afresh each step (dev lists stay whole; default: every candidate)",
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
        help="RUN:WEIGHT (repeatable): finished runs whose weighted logits (an output ensemble) the "
        "ranker learns beside the labels, per view (training/distill.py)",
    )
    p.add_argument(
        "--distill-weight",
        type=float,
        default=0.5,
        help="with --teacher: the loss is (1 - w) x the label loss + w x the distillation loss",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop training after this many seconds (a lent machine's lease; the schedule still spans "
        "--max-steps); the run records the steps it took",
    )
    p.add_argument(
        "--stop-at",
        type=int,
        default=None,
        help="end after this many steps of the --max-steps schedule (replays a run that --max-seconds "
        "ended early)",
    )
    p.add_argument(
        "--last-turn-weight",
        type=float,
        default=0.0,
        help="train on the logits the service computes with the last-turn view (service/context_views.py): "
        "a multi-turn list's full-context and last-turn logits averaged at this weight (0: one view)",
    )
    return p.parse_args(argv)


def encoding_of(args: argparse.Namespace, pair: bool) -> dict[str, Any]:
    """The encoding a run records (``config.json``), which its teachers and soup members must share."""
    return {
        "kind": "shared-prefix" if not pair else "pair-design-run",
        "max_prefix_tokens": args.max_prefix_tokens,
        "max_candidate_tokens": args.max_candidate_tokens,
    }


def first_stage(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--init``'s run configuration, checked against this run's arguments (None without ``--init``)."""
    if args.init is None:
        return None
    if args.backbone is not None:
        raise DataError("--init and --backbone exclude each other: a second stage keeps its first's backbone")
    run = Path(args.init)
    config = finished_run_config(run, "--init")
    if config.get("head") != args.head or config.get("layout", "shared-prefix") != args.layout:
        raise DataError(
            f"--init {run}: trained with --head {config.get('head')} --layout {config.get('layout')}; "
            f"this run asks for --head {args.head} --layout {args.layout}"
        )
    return config


def load_splits(
    args: argparse.Namespace,
) -> tuple[dict[str, list[RankingList]], dict[str, list[RankingList]]]:
    """Train and dev lists per file."""
    train, dev = {}, {}
    rng = random.Random(args.seed if args.dev_seed is None else args.dev_seed)
    for source in args.data:
        if source.name in train:
            raise DataError(f"{source.path}: another --data file is also named {source.name!r}")
        lists = read_lists(source.path)
        train[source.name] = [x for x in lists if group_split(x.group) == "train"][: args.limit]
        held = [x for x in lists if group_split(x.group) == "dev"]
        if len(held) > args.dev_lists:
            held = rng.sample(held, args.dev_lists)
        dev[source.name] = held
        if not train[source.name] or not dev[source.name]:
            raise DataError(f"{source.path}: needs lists in both the train and dev parts of the group split")
    return train, dev


def run_dev_lists(config: dict[str, Any]) -> dict[str, list[RankingList]]:
    """The dev lists a run was scored and calibrated on, from its ``config.json``."""
    split_args = argparse.Namespace(
        data=[Source(d["name"], Path(d["file"]), d["weight"]) for d in config["data"]],
        seed=config["seed"],
        dev_seed=config.get("dev_seed"),  # absent in runs from before --dev-seed
        dev_lists=config["dev_lists"],
        limit=config.get("limit"),
    )
    return load_splits(split_args)[1]


def epoch_batches(
    args: argparse.Namespace, train: dict[str, list[RankingList]], rng: random.Random
) -> list[list[RankingList]]:
    """One epoch: each file's share by its weight, batched within a file (similar lengths), shuffled."""
    batches = []
    for source in args.data:
        lists = train[source.name]
        whole, part = divmod(source.weight, 1.0)
        chosen = [x for _ in range(int(whole)) for x in rng.sample(lists, len(lists))]
        chosen += rng.sample(lists, round(part * len(lists)))
        batches += [chosen[i : i + args.batch_lists] for i in range(0, len(chosen), args.batch_lists)]
    rng.shuffle(batches)
    return batches


def encode(encoder: ListEncoder, x: RankingList, rng: random.Random | None = None, *, thinned: float = 0.0):
    """The list's sequences; with ``rng`` (training), situations shuffled and some lists thinned.

    In a ``thinned`` share of the lists that mark their relevant situations, half the others are
    dropped. Thinned lists show the ranker more clearly which situations decide the ranking; the rest keep
    every situation, as the service gives them (there is no selector in front of this ranker).
    """
    situations = list(x.situations)
    if rng is not None:
        if x.relevant_situations and rng.random() < thinned:
            relevant = set(x.relevant_situations)
            situations = [s for i, s in enumerate(situations) if i in relevant or rng.random() < 0.5]
        rng.shuffle(situations)
    return encoder.encode_request(x.context, situations, [c.text for c in x.candidates])


def list_logits(model, encoder: ListEncoder, sequences: list[list[EncodedList]]) -> torch.Tensor:
    """(lists, widest list) candidate logits, each list's sequences in order; absent candidates 0."""
    return ListBatch(encoder, sequences).logits(model)


class ListBatch:
    """Lists' sequences padded once, to be scored by one model or several (a student and its teachers)."""

    def __init__(self, encoder: ListEncoder, sequences: list[list[EncodedList]]) -> None:
        self.sequences = sequences
        self.flat = [s for seqs in sequences for s in seqs]
        self.feeds = to_tensors(encoder, self.flat, device())

    def logits(self, model) -> torch.Tensor:
        """(lists, widest list) candidate logits of ``model``; absent candidates 0."""
        # fp32 from here on, whatever precision the encoder ran in: the losses' masks and softmaxes.
        token_logits = model(**self.feeds).float()
        per_sequence = candidate_means(
            token_logits, self.feeds["segment_ids"], max(s.candidates for s in self.flat)
        )
        rows, start = [], 0
        for seqs in self.sequences:
            rows.append(torch.cat([per_sequence[start + i, : s.candidates] for i, s in enumerate(seqs)]))
            start += len(seqs)
        width = max(len(r) for r in rows)
        return torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])

    def present(self) -> torch.Tensor:
        """(lists, widest list): which entries of :meth:`logits`' rows are candidates."""
        counts = torch.tensor([sum(s.candidates for s in seqs) for seqs in self.sequences])
        return torch.arange(int(counts.max()))[None, :] < counts[:, None]


def sample_candidates(x: RankingList, n: int, rng: random.Random) -> RankingList:
    """``x`` with at most ``n`` candidates: its appropriate ones first, then sampled negatives.

    Design runs use it to train a per-pair cross-encoder, which pays a whole sequence per
    candidate, on a budget this CPU can give; both layouts then see the same candidates.
    """
    if len(x.candidates) <= n:
        return x
    good = [c for c in x.candidates if c.appropriate][: max(1, n - 1)]
    rest = [c for c in x.candidates if not c.appropriate]
    kept = good + rng.sample(rest, min(len(rest), n - len(good)))
    rng.shuffle(kept)
    return dataclasses.replace(x, candidates=tuple(kept))


def served_logits(model, encoder: ListEncoder, batch: list[RankingList], args, rng) -> torch.Tensor:
    """The batch's candidate logits as the service combines them (one forward pass for every view)."""
    views = ViewLogits(encoder, batch, args, rng, last_turn=args.last_turn_weight > 0)
    return views.served(views.batch.logits(model), args.last_turn_weight)


class ViewLogits:
    """A batch's lists with every turn, then its multi-turn lists with their last turn alone.

    The sequences are encoded (situations shuffled and thinned) once, so a student and its teachers
    read the same ones.
    """

    def __init__(self, encoder: ListEncoder, batch: list[RankingList], args, rng, *, last_turn: bool) -> None:
        sequences = [encode(encoder, x, rng, thinned=args.thinned) for x in batch]
        views = [context_views.views(x.context, 1.0 if last_turn else 0.0) for x in batch]
        self.size = len(batch)
        self.multi = [row for row, v in enumerate(views) if len(v) > 1]
        last = [encode(encoder, dataclasses.replace(batch[r], context=views[r][-1]), rng) for r in self.multi]
        self.batch = ListBatch(encoder, sequences + last)

    def served(self, logits: torch.Tensor, last_turn_weight: float) -> torch.Tensor:
        """Each list's logits as the service combines its views (``logits``: one row per view)."""
        full = logits[: self.size]
        if not self.multi or last_turn_weight <= 0:
            return full
        combined = full.clone()
        combined[self.multi] = context_views.mean(full[self.multi], logits[self.size :], last_turn_weight)
        return combined


def label_loss(logits: torch.Tensor, batch: list[RankingList], args) -> torch.Tensor:
    """ListNet over the labels' gains plus pointwise BCE on "appropriate" (candidates padded and masked)."""
    width = logits.shape[1]
    present = torch.zeros(len(batch), width, dtype=torch.bool)
    gains = torch.zeros(len(batch), width)
    targets = torch.zeros(len(batch), width)
    for row, x in enumerate(batch):
        n = len(x.candidates)
        present[row, :n] = True
        gains[row, :n] = torch.tensor([c.gain for c in x.candidates])
        targets[row, :n] = torch.tensor(
            [float(c.label) if isinstance(c.label, float) else float(c.appropriate) for c in x.candidates]
        )
    present, gains, targets = present.to(logits.device), gains.to(logits.device), targets.to(logits.device)
    blocked = torch.finfo(logits.dtype).min
    target = torch.softmax((gains * args.tau).masked_fill(~present, blocked), dim=-1)
    log_p = torch.log_softmax(logits.masked_fill(~present, blocked), dim=-1)
    listnet = -(target * log_p).masked_fill(~present, 0.0).sum(-1).mean()
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits[present], targets[present])
    return listnet + args.pointwise_weight * bce


def loss_of(
    model, encoder: ListEncoder, batch: list[RankingList], args, rng, teachers: Ensemble | None = None
) -> torch.Tensor:
    """The label loss on the served logits; with ``teachers``, mixed with distillation on every view."""
    if args.train_candidates:
        batch = [sample_candidates(x, args.train_candidates, rng) for x in batch]
    # Teachers are matched on the last-turn view too, whether or not the labels are.
    views = ViewLogits(encoder, batch, args, rng, last_turn=args.last_turn_weight > 0 or teachers is not None)
    logits = views.batch.logits(model)
    labels = label_loss(views.served(logits, args.last_turn_weight), batch, args)
    if teachers is None:
        return labels
    target = teachers.logits(views.batch.logits)
    present = views.batch.present().to(logits.device)
    distilled = distillation_loss(logits, target, present)
    return (1 - args.distill_weight) * labels + args.distill_weight * distilled


def centre_bias(model: SharedPrefixRanker, encoder: ListEncoder, lists: list[RankingList]) -> float:
    """Set the head's bias so that the fresh model's mean logit on ``lists`` is the base rate's.

    The cosine head's logits start around scale x 0.5, not 0; the bias learns at the encoder's
    learning rate, far too slowly to move that, and until it did the pointwise loss would push
    every cosine down, wearing away the geometry the head is there to keep. On a second stage
    (``--init``) it re-centres the first stage's head on the new mix's base rate. Returns the shift.
    """
    with torch.no_grad():
        logits = score_requests(model, encoder, [encode(encoder, x) for x in lists], device())
        flat = np.concatenate([np.asarray(z) for z in logits])
        base = np.clip(np.mean([c.appropriate for x in lists for c in x.candidates]), 0.02, 0.98)
        shift = float(np.log(base / (1 - base)) - flat.mean())
        model.head.bias += shift
    return shift


def dev_logits(model, encoder: ListEncoder, dev: dict[str, list[RankingList]]) -> dict[str, list[np.ndarray]]:
    """Candidate logits of every dev list, per file."""
    return {
        name: [
            np.asarray(z)
            for z in score_requests(model, encoder, [encode(encoder, x) for x in lists], device())
        ]
        for name, lists in dev.items()
    }


def dev_report(dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]]) -> dict[str, dict]:
    """Ranking metrics per file on uncalibrated scores (calibration does not change the order)."""
    return {name: evaluate(lists, [sigmoid(z) for z in logits[name]], 0.5) for name, lists in dev.items()}


def fit_calibration(
    dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]], *, keep_identity: bool = False
) -> dict[str, Any]:
    """Platt (isotonic as the alternative) and the abstention threshold on the pooled dev lists.

    Returns the maps, the threshold, its abstention accuracy, and the pooled logits and outcomes.
    When the logits do not order the classes Platt fails: ``keep_identity`` keeps the identity map
    instead (training, where only an undertrained smoke run gets there; the export re-fits on the
    shipped graph without it and refuses such a model).
    """
    pooled = [(x, z) for name in dev for x, z in zip(dev[name], logits[name], strict=True)]
    flat = np.concatenate([z for _, z in pooled])
    outcomes = np.asarray([int(c.appropriate) for x, _ in pooled for c in x.candidates])
    maps = {"isotonic": calibrate.fit("isotonic", flat, outcomes)}
    try:
        maps["platt"] = calibrate.fit("platt", flat, outcomes)
    except ValueError as e:
        if not keep_identity:
            raise
        print(f"WARNING: {e}; the run keeps the identity map")
        maps["platt"] = Calibrator.identity()
    threshold, accuracy = metrics.best_abstention_threshold(
        [maps["platt"](z) for _, z in pooled], [[int(c.appropriate) for c in x.candidates] for x, _ in pooled]
    )
    return {
        "maps": maps,
        "threshold": threshold,
        "abstention_accuracy": accuracy,
        "logits": flat,
        "outcomes": outcomes,
    }


def calibrated_report(
    dev: dict[str, list[RankingList]], logits: dict[str, list[np.ndarray]], fitted: dict[str, Any]
) -> dict[str, dict]:
    """Metrics per file on probabilities from ``fitted`` (:func:`fit_calibration`), at its threshold."""
    platt = fitted["maps"]["platt"]
    return {name: evaluate(dev[name], [platt(z) for z in logits[name]], fitted["threshold"]) for name in dev}


def write_calibration(path: Path, fitted: dict[str, Any]) -> None:
    """A run's ``calibration.json``: every fitted map (Platt in use) and the abstention threshold."""
    calibration = {
        "method": "platt",
        "maps": {m: c.to_dict() for m, c in fitted["maps"].items()},
        "threshold": fitted["threshold"],
    }
    path.write_text(json.dumps(calibration, indent=2))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    init = first_stage(args)
    # A second stage starts from the first stage's weights and tokenizer (no packaged backbone needed).
    start = Path(args.init) / "ranker" if init else Path(args.backbone or backbone_dir())
    train, dev = load_splits(args)
    precision = training_precision(args.precision)
    print(f"training precision: {precision}", flush=True)
    print("lists:", {n: {"train": len(train[n]), "dev": len(dev[n])} for n in train}, flush=True)
    # Training lists are one sequence each, however long: the chunk budgets are lifted. The pair
    # layout puts each candidate in a sequence of its own.
    pair = args.layout == "pair"
    encoder = ListEncoder.from_file(
        start,
        max_prefix_tokens=args.max_prefix_tokens,
        max_candidate_tokens=args.max_candidate_tokens,
        max_chunk_tokens=1 << 16,
        max_chunk_candidates=1 if pair else 1 << 10,
    )
    model = SharedPrefixRanker.load(start, full_attention=pair, head=args.head).to(device())
    teachers = None
    if args.teacher:
        if pair:
            raise DataError("--teacher distils into the shared-prefix layout only")
        teachers = Ensemble(args.teacher, encoding_of(args, pair), device())
    rng = random.Random(args.seed)
    epochs = [epoch_batches(args, train, rng) for _ in range(args.epochs)]
    if args.head == "cosine":
        first = [x for batch in epochs[0][:8] for x in batch]
        print(f"cosine head: bias shifted by {centre_bias(model, encoder, first):.3f}", flush=True)
    total = sum(len(e) for e in epochs)
    if args.max_steps:
        total = min(total, args.max_steps)
    optimizer, schedule = make_optimizer(model, lr=args.lr, total_steps=total)
    # --stop-at ends the run early; the schedule still spans every planned step.
    end = total if args.stop_at is None else min(total, args.stop_at)
    history, best_state, best_score, step = [], None, -1.0, 0
    bar = tqdm(total=total, desc="ranker", unit="step", mininterval=30)
    out_of_time = False
    for epoch, batches in enumerate(epochs, start=1):
        model.train()
        for batch in batches:
            if step >= end:
                break
            if args.max_seconds is not None and time.time() - started > args.max_seconds:
                tqdm.write(f"--max-seconds {args.max_seconds:g}: stopping after {step} of {total} steps")
                out_of_time = True
                break
            with autocast(precision):
                loss = loss_of(model, encoder, batch, args, rng, teachers)
            optimizer_step(model, optimizer, schedule, loss)
            step += 1
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}", refresh=False)
        report = dev_report(dev, dev_logits(model, encoder, dev))
        score = float(np.mean([r["ndcg_at_3"] for r in report.values()]))
        history.append({"epoch": epoch, "step": step, "dev": report, "mean_ndcg_at_3": score})
        tqdm.write(f"dev after epoch {epoch}: {json.dumps(history[-1])}")
        if score > best_score:
            best_score = score
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if step >= end or out_of_time:
            break
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)

    # Calibration and the abstention threshold on the pooled dev lists of every file.
    logits = dev_logits(model, encoder, dev)
    fitted = fit_calibration(dev, logits, keep_identity=True)
    maps, abstain_acc = fitted["maps"], fitted["abstention_accuracy"]
    flat, outcomes = fitted["logits"], fitted["outcomes"]
    calibrate.reliability_diagram(
        {
            "uncalibrated": (sigmoid(flat), outcomes),
            "platt (dev fit)": (maps["platt"](flat), outcomes),
        },
        out / "reliability_dev.png",
        title="Ranker calibration, pooled dev lists",
    )
    calibrated = calibrated_report(dev, logits, fitted)
    model.save(out / "ranker", start / "tokenizer.json")
    write_calibration(out / "calibration.json", fitted)
    config = {
        **vars(args),
        "training_precision": precision,
        "device": device_label(),
        "data": [{"file": str(s.path), "name": s.name, "weight": s.weight} for s in args.data],
        "backbone": init["backbone"] if init else backbone_label(args.backbone),
        "init": {"run": args.init, "config": init} if init else None,
        "teacher": teachers.configs if teachers else None,
        # What the schedule planned and what ran (they differ when --max-seconds or --stop-at ended it).
        "planned_steps": total,
        "steps_taken": step,
        "encoding": encoding_of(args, pair),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    result = {
        "dev": calibrated,
        "dev_abstention_accuracy_pooled": abstain_acc,
        "history": history,
        "steps": step,
        "planned_steps": total,
        "train_seconds": round(time.time() - started, 1),
        "lists": {n: {"train": len(train[n]), "dev": len(dev[n])} for n in train},
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({"dev": calibrated, "train_seconds": result["train_seconds"]}, indent=2), flush=True)
    return result


if __name__ == "__main__":
    exit_on_data_error(main)
