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

from dialogue_ranker.export.card_lines import (
    adapted_by_section,
    data_table,
    dev_table,
    evaluation_sections,
    head_lines,
    machine_line,
    schedule_lines,
)
from dialogue_ranker.export.run_stages import has_stages

STAGE_LINE = """
Each stage after the first continues from the one before (`ranker train --init`).
"""


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
there are several). The service abstains when no candidate reaches {threshold:.3f}
({threshold_on}).{calibrated_by}

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


def calibrated_by_line(calibrated: dict | None) -> str:
    """The paragraph saying which lists ``ranker calibrate`` fitted the maps on ('' when it did not)."""
    if not calibrated:
        return ""
    onnx = (calibrated.get("held_out") or {}).get("onnx")
    held = ""
    if onnx:
        before, after = onnx["before"]["ece"], onnx["after"]["ece"]
        held = f" On {onnx['lists']} held-out lists (by group), ECE was {before:.3f}, now {after:.3f}."
    runtimes = ", ".join(calibrated["runtimes"])
    command = calibrated.get("command", "ranker calibrate")
    return (
        f"\n\nRecalibrated by `{command}` on {calibrated['date']}: a {calibrated['method']} map and "
        f"the threshold fitted on {calibrated['fitted_on_lists']} of the {calibrated['list_count']} lists "
        f"of `{calibrated['lists']}` (SHA-256 {calibrated['sha256'][:12]}...) for {runtimes}; the base "
        f"bundle {calibrated['base']} is otherwise unchanged.{held}"
    )


def threshold_source(metadata: dict) -> str:
    """Where the threshold came from: the dev lists that chose it, or the bundle it was kept from."""
    if metadata.get("threshold_from"):
        return f"kept from `{metadata['threshold_from']}`, the operating point it was released with"
    return f"chosen on the dev lists of {', '.join(metadata['threshold_fitted_on'])}"


def render_card(bundle: Path) -> str:
    """The model card of the bundle in ``bundle``, from its metadata and evaluation files."""
    metadata = json.loads((bundle / "metadata.json").read_text())
    config = metadata["training_config"]
    card = CARD.format(
        name=metadata["name"],
        version=metadata["version"],
        precision=metadata["ranker"]["precision"],
        threshold=metadata["threshold"],
        threshold_on=threshold_source(metadata),
        calibrated_on=", ".join(metadata["calibration_fitted_on"]),
        data_rows=data_table(metadata["training_data"]["datasets"]),
        stage_line=STAGE_LINE if has_stages(config) else "",
        schedule_lines=schedule_lines(config),
        dev_table=dev_table(metadata["metrics"]["dev (shipped graph, calibrated)"]),
        machine_line=machine_line(metadata["export"].get("machine")),
        head_line=head_lines(metadata),
        calibrated_by=calibrated_by_line(metadata.get("calibrated_by")),
    )
    lineage = adapted_by_section(metadata.get("adapted_by"))
    sections = ([lineage] if lineage else []) + evaluation_sections(bundle)
    history = (
        "## History\n\nEvery released version and its held-out figures: `CHANGELOG.md`, beside this card.\n"
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
