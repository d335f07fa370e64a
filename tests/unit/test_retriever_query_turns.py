"""``ranker export-retriever`` writes the query turns the encoder was trained with."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dialogue_ranker.export.retriever import query_turns


def run_encoder(tmp_path: Path, config: dict | None) -> Path:
    encoder = tmp_path / "run" / "encoder"
    encoder.mkdir(parents=True)
    if config is not None:
        (encoder.parent / "config.json").write_text(json.dumps(config))
    return encoder


def test_the_training_run_config_gives_the_query_turns(tmp_path: Path) -> None:
    source = run_encoder(tmp_path, {"query": {"turns": 2}})
    assert query_turns(argparse.Namespace(source=source, query_turns=None)) == 2


def test_the_flag_wins_over_the_run_config(tmp_path: Path) -> None:
    source = run_encoder(tmp_path, {"query": {"turns": 2}})
    assert query_turns(argparse.Namespace(source=source, query_turns=3)) == 3


def test_without_a_run_config_a_query_is_the_last_turn(tmp_path: Path) -> None:
    assert query_turns(argparse.Namespace(source=run_encoder(tmp_path, None), query_turns=None)) == 1
    assert query_turns(argparse.Namespace(source=None, query_turns=None)) == 1
