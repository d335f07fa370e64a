"""The model card's text pieces: a sentence or table per thing the bundle's files record.

Each takes what ``metadata.json`` (or an evaluation file) holds and returns markdown; an empty
string where the bundle has no such thing. :mod:`dialogue_ranker.export.card` puts them together.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dialogue_ranker.evaluation.domains import markdown
from dialogue_ranker.export.run_stages import continued_from_soup, soup_members, stage_rows
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights

#: The graphs the export can build, in the order it builds them, as the metadata and card name them.
PRECISION = {
    "fp32": "fp32",
    "int8_dynamic": "int8 (dynamic, per-channel weights; one request's sequence per call)",
    "int8_blockwise": "int8 (weights in blocks of 128, activations quantized per token and block; "
    "MatMulNBits, accuracy level 4)",
    "int8_blockwise_asymmetric": "int8 (weights in blocks of 128 with a scale and zero point each, "
    "activations quantized per token and block; MatMulNBits, accuracy level 4)",
    "int8_static": "int8 (static QDQ, MatMul only)",
    "fp16_weights": "fp16 matrix weights (cast to fp32 at load; computed in fp32), int8 embedding tables",
}

#: How the model card describes the token head (``dialogue_ranker.training.train --head``).
HEAD_LINES = {
    "linear": "A token's logit is a linear head on its final state.",
    "cosine": "A token's logit is a linear head on its final state plus a learned scale times the "
    "cosine of that state with the mean prefix state (the reply-to-context similarity the "
    "backbone was trained for).",
}


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
    frozen, ema = config.get("freeze_layers") or 0, config.get("ema") or 0.0
    rank, keep = config.get("lora_rank") or 0, config.get("keep_top") or 0.0
    attention = config.get("attention_dropout")
    pointwise = "; ".join(f"{name} {weight:g}" for name, weight in config.get("pointwise_on") or ())
    others = config.get("pointwise_weight", 0.5)
    return (
        f"{length}, {config['batch_lists']} lists a step, learning rate {config['lr']:g}, "
        f"seed {config['seed']}, forward pass in {'bf16 autocast' if precision == 'bf16' else 'fp32'}"
        + (f", the embeddings and first {frozen} layers frozen" if frozen else "")
        + (f", the weights' moving average kept (decay {ema:g})" if ema else "")
        + (f", a rank-{rank} change to the layers above (LoRA), merged" if rank else "")
        + (f", the teachers' right top candidates held {keep:g} logits ahead" if keep else "")
        + (f", attention dropout {attention:g}" if attention is not None else "")
        + (f", the pointwise loss weighted per file ({pointwise}; others {others:g})" if pointwise else "")
        + (", the start's head bias kept (not re-centred)" if config.get("keep_head_bias") else "")
        + ("" if device == "cpu" else f", on {device}")
    )


def schedule_lines(config: dict[str, Any]) -> str:
    """The card's list of stage schedules (every soup member's)."""
    return "\n".join(f"- stage {label}: {stage_schedule(c)}" for label, c in stage_rows(config))


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


def adapted_by_section(adapted: dict[str, Any] | None) -> str:
    """The card's lineage section of a bundle ``ranker adapt`` made ('' for any other bundle)."""
    if not adapted:
        return ""
    base, split, training, guard = adapted["base"], adapted["split"], adapted["training"], adapted["guard"]
    lists = "\n".join(
        f"| `{s['file']}` | {s['sha256'][:12]}... | {s['lists']} | {s['groups']} |" for s in adapted["lists"]
    )
    parts = ", ".join(f"{p} {c['lists']} lists ({c['groups']} groups)" for p, c in split["counts"].items())
    replay = ", ".join(f"`{r['file']}` at {r['weight']:g}" for r in guard["replay"]) or "none"
    teacher = "; the base bundle taught the replay lists (`ranker train --teacher`)" * bool(guard["teacher"])
    seconds = ", ".join(f"{phase} {s:.0f} s" for phase, s in adapted["seconds"].items())
    views = views_fitted_line(adapted.get("views_fitted"))
    return f"""## Lineage

Adapted by `ranker adapt` on {adapted["date"]} from `{base["id"]}` (SHA-256 of its files
{base["sha256"][:12]}...) on the team's lists:

| lists | SHA-256 | lists | groups |
| --- | --- | --- | --- |
{lists}

Split by group ({split["rule"]}): {parts}. Guard `{guard["kind"]}`: replay {replay}{teacher}.
{training["steps"]} of {training["planned_steps"]} planned steps (stopped by {training["stopped_by"]});
graph {adapted["export"]["shipped"]}: {adapted["export"]["why"]}.{views}
Time: {seconds}.
"""


def views_fitted_line(fit: dict[str, Any] | None) -> str:
    """The lineage's sentence on context views chosen on the team's dev lists ('' where they were not)."""
    if not fit:
        return ""
    given, chosen = fit["given"], fit["chosen"]
    return (
        f" Context views chosen on {fit['lists']} of the team's dev lists: last-turn weight "
        f"{chosen['last_turn_weight']:g}, prior weight {chosen['prior_weight']:g} (the base's "
        f"{given['last_turn_weight']:g}, {given['prior_weight']:g})."
    )
