"""The model card is generated from the bundle's files (``ranker card``), never edited by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SHIPPED_MODEL

from dialogue_ranker.export.card import main, render_card


def test_the_shipped_card_is_what_its_files_render() -> None:
    assert (SHIPPED_MODEL / "MODEL_CARD.md").read_text() == render_card(SHIPPED_MODEL), (
        "models/dialogue-minilm-l6/MODEL_CARD.md drifted from its files: run `ranker card` on it"
    )


def test_the_card_shows_each_evaluation_file_and_drops_a_removed_one(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SHIPPED_MODEL, bundle, ignore=shutil.ignore_patterns("model.onnx"))
    found = json.loads((bundle / "eval-ddpp.json").read_text())
    card = render_card(bundle).splitlines()
    headers = [line for line in card if line.startswith("## Held-out evaluation:")]
    assert any("dailydialog-pp" in h and h.endswith("(every list)") for h in headers), headers
    found["results"]["dailydialog-pp"]["auc_adversarial"] = 0.123456
    (bundle / "eval-ddpp.json").write_text(json.dumps(found))
    assert "0.123" in render_card(bundle)
    (bundle / "eval-ddpp.json").unlink()
    assert "dailydialog-pp" not in render_card(bundle)


def test_check_fails_on_a_card_edited_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SHIPPED_MODEL, bundle, ignore=shutil.ignore_patterns("model.onnx"))
    main([str(bundle), "--check"])
    assert "is current" in capsys.readouterr().out
    with (bundle / "MODEL_CARD.md").open("a") as card:
        card.write("\nA line written by hand.\n")
    with pytest.raises(SystemExit, match="out of date"):
        main([str(bundle), "--check"])


def test_an_adapted_bundles_card_states_its_lineage(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(SHIPPED_MODEL, bundle, ignore=shutil.ignore_patterns("model.onnx", "retriever"))
    metadata = json.loads((bundle / "metadata.json").read_text())
    metadata["adapted_by"] = {
        "date": "2026-11-27",
        "base": {"id": "dialogue-minilm-l6@2.10.0", "sha256": "ab" * 32},
        "lists": [{"file": "persona-chat.jsonl", "sha256": "cd" * 32, "lists": 120, "groups": 12}],
        "split": {"rule": "stable SHA-1 hash", "counts": {"train": {"lists": 80, "groups": 8}}},
        "guard": {"kind": "both", "replay": [{"file": "sugar.jsonl", "weight": 0.1}], "teacher": "x@1"},
        "training": {"steps": 40, "planned_steps": 50, "stopped_by": "max-seconds"},
        "export": {"shipped": "fp32", "why": "int8 loses"},
        "seconds": {"prepare": 3.0, "train": 600.0},
    }
    (bundle / "metadata.json").write_text(json.dumps(metadata))
    card = render_card(bundle)
    assert "## Lineage" in card and "from `dialogue-minilm-l6@2.10.0`" in card
    assert "| `persona-chat.jsonl` | cdcdcdcdcdcd... | 120 | 12 |" in card
    assert "Guard `both`: replay `sugar.jsonl` at 0.1; the base bundle taught" in card
    assert "40 of 50 planned steps (stopped by max-seconds)" in card
    assert "## Lineage" not in render_card(SHIPPED_MODEL)
