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
    assert "## Held-out evaluation: dailydialog-pp (every list)" in render_card(bundle)
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
