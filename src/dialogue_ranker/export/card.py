"""``ranker card DIR``: a bundle's model card, generated from its files, never edited by hand.

The card is rendered from ``metadata.json`` (what the export recorded: the graph's precision,
calibration, threshold, training data and schedule, dev metrics, the machine it measured on) and
the evaluation files beside it (``eval-test.json``, ``eval-ddpp.json`` from ``ranker evaluate
--out``; ``eval-sugar-settings.md`` from ``ranker evaluate-sugar``). The export writes it; a
recipe's last stage writes it again once the evaluations exist. ``--check`` fails when the
committed card differs from what its files render (the suite runs it on the shipped model).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dialogue_ranker.evaluation.domains import markdown
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights

DATASETS = {
    "sugar": (
        "SUGAR (situated response selection)",
        "CC BY-SA 4.0",
        "Otani et al., 'A Textual Dataset for Situated Proactive Response Selection', ACL 2023, "
        "data release v4.1.1 (derived in part from ConceptNet 5, CC BY-SA 4.0, and ATOMIC, CC BY 4.0)",
    ),
    "topical-chat": (
        "Topical-Chat (knowledge-grounded socialbot conversations) with mined hard negatives",
        "CDLA-Sharing 1.0",
        "Gopalakrishnan et al., 'Topical-Chat: Towards Knowledge-Grounded Open-Domain Conversations', "
        "Interspeech 2019 (Amazon Alexa Prize)",
    ),
}


#: The graphs the export can build, in the order it builds them.
PRECISION = {
    "fp32": "fp32",
    "int8_dynamic": "int8 (dynamic, per-channel weights; one request's sequence per call)",
    "int8_blockwise": "int8 (weights in blocks of 128, activations quantized per token and block; "
    "MatMulNBits, accuracy level 4)",
    "int8_static": "int8 (static QDQ, MatMul only)",
}

#: How the model card describes the token head (``dialogue_ranker.training.train --head``).
HEAD_LINES = {
    "linear": "A token's logit is a linear head on its final state.",
    "cosine": "A token's logit is a linear head on its final state plus a learned scale times the "
    "cosine of that state with the mean prefix state (the reply-to-context similarity the "
    "backbone was trained for).",
}


def dataset_of(name: str) -> tuple[str, str, str]:
    """Dataset, licence and attribution of a training file, by its name; ``?`` when unknown.

    ``topical-chat-fact`` is a Topical-Chat conversion with another negative mix.
    """
    known = [key for key in DATASETS if name == key or name.startswith(key + "-")]
    return DATASETS[max(known, key=len)] if known else (name, "?", "?")


def training_stages(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's configuration after its earlier stages' (``training.train --init``), first first."""
    init = config.get("init") or {}
    earlier = training_stages(init["config"]) if init.get("config") else []
    return [*earlier, config]


def soup_members(config: dict[str, Any]) -> list[tuple[str, float, dict[str, Any]]]:
    """(label, share, configuration) of each run averaged into the weights or the outputs.

    One unlabelled run when neither ``dialogue_ranker.training.interpolate --with`` blended others in nor
    ``--ensemble-with`` added one; else A (the ``--run``), B, C...
    """
    blend = (
        (config.get("interpolation") or {}).get("with") or (config.get("ensemble") or {}).get("with") or []
    )
    if not blend:
        return [("", 1.0, config)]
    rest = 1.0 - sum(m["weight"] for m in blend)
    # A member recorded before interpolate kept its configuration lists no stages of its own.
    members = [(rest, config)] + [(m["weight"], m.get("config") or {"data": []}) for m in blend]
    return [(chr(ord("A") + i), share, c) for i, (share, c) in enumerate(members)]


def continued_from_soup(config: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The soup (or output ensemble) a run's stages continued from, and those later stages in order.

    ``(config, [])`` for a run that is itself a soup, or that no soup is under. The distilled
    ranker (``dialogue_ranker.training.train --init <soup> --teacher ...``) is one stage after its soup.
    """
    after: list[dict[str, Any]] = []
    current = config
    while not (current.get("interpolation") or current.get("ensemble")):
        earlier = (current.get("init") or {}).get("config")
        if not earlier:
            return config, []
        after.insert(0, current)
        current = earlier
    return current, after


def stage_rows(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(stage label, stage configuration) of every run in the weights, first stage first.

    ``1``, ``2`` for one run; ``A1``, ``A2``, ``B1``... for a soup, then ``S1``... for the stages
    trained on from it.
    """
    soup, after = continued_from_soup(config)
    return [
        (f"{label}{n}", stage)
        for label, _, member in soup_members(soup)
        for n, stage in enumerate(training_stages(member), start=1)
        if "data" in stage and stage["data"]
    ] + [(f"S{n}", stage) for n, stage in enumerate(after, start=1) if stage.get("data")]


def distillation_line(config: dict[str, Any]) -> str:
    """The card's sentences on stages trained on from a soup, with the teachers they learned from."""
    soup, after = continued_from_soup(config)
    if not after:
        return ""
    interpolation = soup.get("interpolation") or {}
    labels = {interpolation.get("from_run"): "A"} | {
        m["run"]: chr(ord("B") + i) for i, m in enumerate(interpolation.get("with") or [])
    }
    lines = ""
    for n, stage in enumerate(after, start=1):
        lines += f"\nStage S{n} continued from the {'soup' if n == 1 else f'stage S{n - 1}'}"
        teachers = stage.get("teacher") or []
        if teachers:
            parts = " + ".join(
                f"{t['weight']:g} x " + (f"run {labels[t['run']]}" if t["run"] in labels else t["run"]) + "'s"
                for t in teachers
            )
            lines += (
                f" and learned the output ensemble {parts} logits, per view, as soft targets at weight"
                f" {stage['distill_weight']:g} beside the labels (`ranker train --teacher`)"
            )
        lines += "."
    return lines + " Calibration and the threshold are fitted on the final weights."


def interpolation_line(config: dict[str, Any]) -> str:
    """The card's sentences on ``training.interpolate``, when the run was interpolated or a soup.

    A run trained on from a soup (:func:`continued_from_soup`) describes that soup.
    """
    config, after = continued_from_soup(config)
    interpolation = config.get("interpolation") or {}
    alpha = interpolation.get("alpha")
    members = soup_members(config)
    lines = ""
    if interpolation.get("with"):  # an ensemble's members say so in ensemble_line
        parts = " + ".join(f"{share:g} x run {label}" for label, share, _ in members)
        how = "a model soup (`ranker interpolate --with`)"
        if interpolation.get("merge") == "ties":
            how = (
                "the runs' changes from the untrained model TIES-merged (`ranker interpolate "
                f"--with ... --merge ties --density {interpolation.get('density'):g}`)"
            )
        lines += (
            f"\nThe weights are {how}: {parts}, runs of "
            "the same backbone and encoding trained on the mixes below (stages A1, A2... are run A's)"
            + ("." if after else "; calibration and the threshold are fitted on the soup.")
        )
    if alpha is None or alpha == 1:  # 1: the fine-tuned weights as they are, calibration re-fitted
        return lines
    return lines + (
        f"\nThe weights are {alpha:g} x the fine-tuned model's plus {1 - alpha:g} x the untrained model's "
        "(`ranker interpolate`), which keeps more of what the backbone knew about replies."
    )


def ensemble_line(config: dict[str, Any]) -> str:
    """The card's sentences on an output ensemble (``--ensemble-with``) and recovered members."""
    config = continued_from_soup(config)[0]
    lines = ""
    members = soup_members(config)
    if config.get("ensemble"):
        parts = " + ".join(f"{share:g} x run {label}'s" for label, share, _ in members)
        lines += (
            "\nThe graph is an output ensemble (`training/ensemble.py`, `ranker export --ensemble-with`):"
            f" each token logit is {parts}, two encoders reading the same inputs, trained on the mixes"
            " below (stages A1, A2... are run A's); calibration and the threshold are fitted on it."
        )
    for label, _, member in members:
        recovered = member.get("recovered")
        if recovered:
            others = len(recovered.get("same_weights") or [])
            lines += (
                f"\nRun {label}'s weights were recovered (`python -m training.recover`) from model"
                f" {recovered['bundle_version']}'s graph"
                + (
                    f" and {others} other quantization{'s' * (others > 1)} of the same weights"
                    if others
                    else ""
                )
                + f": the soup of run {label} and, at {recovered['other_share']:g}, a run trained again as"
                " that soup's other member was; where the quantized weights could not tell the two"
                " apart, they are taken to agree."
            )
    return lines


STAGE_LINE = """
Each stage after the first continues from the one before (`ranker train --init`).
"""


def stage_schedule(config: dict[str, Any]) -> str:
    """One line on how a stage trained: its length, learning rate, batch, seed and precision."""
    epochs, steps = config["epochs"], config["max_steps"]
    length = f"{steps} step{'s' * (steps != 1)}" if steps else f"{epochs} epoch{'s' * (epochs != 1)}"
    taken, planned = config.get("steps_taken"), config.get("planned_steps")
    if taken is not None and planned is not None and taken < planned:  # --max-seconds or --stop-at
        length = f"the first {taken} of the {planned} steps of {length}"
    # Runs from before --precision trained in fp32.
    precision = config.get("training_precision", "fp32")
    device = config.get("device", "cpu")
    return (
        f"{length}, {config['batch_lists']} lists a step, learning rate {config['lr']:g}, "
        f"seed {config['seed']}, forward pass in {'bf16 autocast' if precision == 'bf16' else 'fp32'}"
        + ("" if device == "cpu" else f", on {device}")
    )


def schedule_lines(config: dict[str, Any]) -> str:
    """The card's list of stage schedules (every soup member's)."""
    return "\n".join(f"- stage {label}: {stage_schedule(c)}" for label, c in stage_rows(config))


CARD = """# {name} {version}

A dialogue response ranker: a shared-prefix cross-encoder over (conversation + situational
statements, candidate) that reads the context once per request and scores every candidate from
its own tokens. Fine-tuned from all-MiniLM-L6-v2 (6 layers, 384 hidden) on the mix below.
{head_line}
No statement selector: every statement goes to the ranker, which was trained with distractors.

## Files
| file | what |
| --- | --- |
| `model.onnx` | ranker, {precision} ONNX; int64 `input_ids`, `token_type_ids`, `position_ids`, \
`segment_ids` in (see `serving/list_encoding.py`), `token_logits` out; a candidate's logit is \
the mean over its tokens |
| `tokenizer.json` | WordPiece tokenizer (uncased) |
| `metadata.json` | encoding budgets, calibration, threshold, metrics, training configuration |

## Scores
`score` = calibrated P(appropriate) (rated acceptable or best; Topical-Chat: the true next
turn), Platt-fitted with the shipped graph on the dev lists of {calibrated_on} (pooled, when
there are several). The service abstains when no candidate reaches {threshold:.3f} (chosen on the dev
lists of {threshold_on}).

## Training data
{data_rows}
{stage_line}
{schedule_lines}

Lists are split by group (dialogue) with a stable hash: 70% train, 15% dev, 15% test. Dev lists
choose the epoch and fit the calibration; test lists are read only by the evaluation CLI.
DailyDialog++ (CC BY-NC-SA) is used for evaluation and model selection only.

## Dev metrics (shipped graph, calibrated)
{dev_table}

{machine_line}

## Limits
English only. Topical-Chat positives are the true next turn; other good replies among its mined
negatives count as wrong. Scores on a new domain are best re-fitted on labelled lists from it
(`ranker train --data yours.jsonl ...`). Where a dev file's abstention accuracy above
(or a held-out one below) is near 0.5, abstention says nothing on that kind of request; read the
ranking and pass `min_score` (0 turns abstention off for a request). A candidate that repeats a
turn of the conversation can rank high: the service's repeat mask (`ranking.mask_repeats`, on by
default) removes such candidates before ranking.
"""


def similarity_line(similarity: dict[str, Any] | None) -> str:
    """The card's sentence on the similarity term, when the graph has one."""
    if not similarity:
        return ""
    return (
        f"\nEach candidate's logit also gets {similarity['weight']:.2f} x the cosine of its mean-pooled"
        " embedding with the latest turn's, from a frozen copy of the untrained all-MiniLM-L6-v2 that"
        " reads the turn and each candidate alone (the `similarity_*` inputs; `training/similarity.py`);"
        " the weight is fitted by logistic regression on the dev lists of"
        f" {', '.join(similarity['fitted_on'])}."
    )


def views_line(views: ViewWeights) -> str:
    """The card's sentence on the last-turn view and the reply's prior, when the bundle has them."""
    if not views.adds_views:
        return ""
    w = views.last_turn
    if views.prior <= 0:
        line = (
            "\nThe service scores a request of several turns twice, with every turn and with the last"
            f" turn alone, and averages each candidate's logits at {1 / (1 + w):.2f} / {w / (1 + w):.2f}"
        )
    else:
        line = (
            "\nThe service scores a request of several turns three times, with every turn, with the last"
            " turn alone and with no context (the reply's prior): each candidate's logit is"
            f" {1 / (1 + w):.2f} / {w / (1 + w):.2f} of the first two plus {views.prior / (1 + w):.2f} of"
            f" the third's difference from {views.prior_centre:.3f}, its mean on the dev lists' multi-turn"
            " candidates"
        )
    return line + " (`serving/context_views.py`); calibration and threshold were fitted on scores so made."


def machine_line(machine: dict[str, Any] | None) -> str:
    """Where the export measured: int8 scores differ between CPUs (AVX2 against AVX-512 VNNI)."""
    if not machine:
        return ""
    flags = ", ".join(machine["kernel_flags"]) or "none of AVX2, AVX-512, VNNI"
    return (
        f"Measured with ONNX Runtime {machine['onnxruntime']} on {machine['cpu']} ({flags}). ONNX"
        " Runtime picks its int8 kernels by instruction set, so the int8 graph's scores on a CPU"
        " without the same ones can differ by about 0.01-0.02 of P@1."
    )




def data_table(datasets: list[dict[str, Any]]) -> str:
    """The training-data table: a row per file of each stage."""
    columns = ("stage", "file", "dataset", "weight", "license", "attribution")
    rows = ["| stage | file | dataset | weight | licence | attribution |", "|" + " --- |" * len(columns)]
    rows += ["| " + " | ".join(str(d[k]) for k in columns) + " |" for d in datasets]
    return "\n".join(rows)


def dev_table(dev: dict[str, dict]) -> str:
    """The export's dev metrics: a row per dev file."""
    cols = ("precision_at_1", "ndcg_at_3", "mrr", "r1_of_10", "ece", "abstention_accuracy")
    table = [
        "| dev file | lists | P@1 | nDCG@3 | MRR | R@1 of 10 | ECE | abstention acc. |",
        "|" + " --- |" * 8,
    ]
    for name, r in dev.items():
        cells = " | ".join("-" if r[c] is None else f"{r[c]:.3f}" for c in cols)
        table.append(f"| {name} | {r['lists']} | {cells} |")
    return "\n".join(table)


def head_lines(metadata: dict[str, Any]) -> str:
    """The description's sentences on the head, soup, ensemble, distillation, similarity and views."""
    config = metadata["training_config"]
    views = ViewWeights.from_dict(metadata["views"]) if "views" in metadata else ONE_VIEW
    return (
        HEAD_LINES[config.get("head", "linear")]
        + interpolation_line(config)
        + ensemble_line(config)
        + distillation_line(config)
        + similarity_line(metadata.get("similarity"))
        + views_line(views)
    )


def has_stages(config: dict[str, Any]) -> bool:
    """Whether a run had several stages (or continued from a soup): the card explains the labels."""
    members = soup_members(config)
    return any(len(training_stages(m)) > 1 for _, _, m in members) or bool(continued_from_soup(config)[1])


#: Held-out evaluation files a bundle may hold (``ranker evaluate --out``), in card order.
EVALUATION_FILES = ("eval-test.json", "eval-ddpp.json")
#: What each split means, for the held-out sections.
SPLIT_MEANING = {
    "all": "every list (data no model trains on)",
    "test": "the test part of the group split (read by no training step)",
}


def evaluation_sections(bundle: Path) -> list[str]:
    """A section per evaluation file present: its table, as ``ranker evaluate`` printed it."""
    sections = []
    for name in EVALUATION_FILES:
        path = bundle / name
        if not path.is_file():
            continue
        found = json.loads(path.read_text())
        split, results = found["split"], found["results"]
        part = "every list" if split == "all" else f"{split} split"
        where = SPLIT_MEANING.get(split, f"the {split} part of the group split")
        sections.append(
            f"## Held-out evaluation: {', '.join(results)} ({part})\n\n"
            f"`ranker evaluate --split {split}` (`{name}`): {where}, scored as the service scores"
            " them (one sequence per request, the shipped graph, calibrated; abstention at the"
            " bundle's threshold).\n\n" + markdown(found["model"], results)
        )
    extra = [f for f in ("eval-sugar-settings.md", "eval-dev.md") if (bundle / f).is_file()]
    if extra:
        links = ", ".join(f"`{f}`" for f in extra)
        sections.append(
            "## SUGAR by the paper's protocol\n\n"
            f"`ranker evaluate-sugar`: each statement setting on the SUGAR groups, beside TF-IDF: {links}.\n"
        )
    return sections


def render_card(bundle: Path) -> str:
    """The model card of the bundle in ``bundle``, from its metadata and evaluation files."""
    metadata = json.loads((bundle / "metadata.json").read_text())
    config = metadata["training_config"]
    card = CARD.format(
        name=metadata["name"],
        version=metadata["version"],
        precision=metadata["ranker"]["precision"],
        threshold=metadata["threshold"],
        threshold_on=", ".join(metadata["threshold_fitted_on"]),
        calibrated_on=", ".join(metadata["calibration_fitted_on"]),
        data_rows=data_table(metadata["training_data"]["datasets"]),
        stage_line=STAGE_LINE if has_stages(config) else "",
        schedule_lines=schedule_lines(config),
        dev_table=dev_table(metadata["metrics"]["dev (shipped graph, calibrated)"]),
        machine_line=machine_line(metadata["export"].get("machine")),
        head_line=head_lines(metadata),
    )
    sections = evaluation_sections(bundle)
    history = (
        "## History\n\nEvery released version and its held-out figures: `CHANGELOG.md`,"
        " beside this card.\n"
    )
    return "\n".join([card.rstrip("\n"), "", *sections, history]).rstrip("\n") + "\n"


def write_card(bundle: Path) -> Path:
    """(Re)write ``MODEL_CARD.md`` in the bundle from its files."""
    path = bundle / "MODEL_CARD.md"
    path.write_text(render_card(bundle))
    return path


def main(argv: list[str] | None = None) -> None:
    """``ranker card DIR [--check]``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("bundle", type=Path, help="a model directory (holds metadata.json)")
    parser.add_argument("--check", action="store_true", help="fail if MODEL_CARD.md differs from its files")
    args = parser.parse_args(argv)
    if not (args.bundle / "metadata.json").is_file():
        parser.error(f"{args.bundle}: no metadata.json (not a model directory)")
    if args.check:
        card = args.bundle / "MODEL_CARD.md"
        current = card.read_text() if card.exists() else ""
        if current != render_card(args.bundle):
            sys.exit(f"{args.bundle}/MODEL_CARD.md is out of date: run `ranker card {args.bundle}`")
        print(f"{args.bundle}/MODEL_CARD.md is current")
        return
    print(f"wrote {write_card(args.bundle)}")


if __name__ == "__main__":
    main()
