from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ABCD_KB, SHARED_DATA, real_model_dir, write_fake_bundle


@pytest.fixture
def fake_bundle(tmp_path: Path) -> Path:
    return write_fake_bundle(tmp_path / "bundle")


@pytest.fixture
def abcd_kb() -> Path:
    if not ABCD_KB.is_file():
        pytest.skip(f"ABCD reference guidelines not found at {ABCD_KB} (../shared/data is absent)")
    return ABCD_KB


@pytest.fixture(scope="session")
def model_dir() -> Path:
    path = real_model_dir()
    if path is None:
        pytest.skip("no real model: RANKER_TEST_MODEL is not set and models/dialogue-minilm-l6 is absent")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sugar_lists(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """SUGAR converted to ranking lists (``ranker convert sugar``), once a session."""
    from dialogue_ranker.training import convert

    path = tmp_path_factory.mktemp("data") / "sugar.jsonl"
    convert.main(["sugar", str(shared_data / "sugar" / "sugar.jsonl"), str(path)])
    return path
