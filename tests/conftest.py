from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import ABCD_KB, SHARED_DATA, real_model_dir, write_fake_bundle

# The suite's largest tests train, export and checkpoint real models: about 1 GB of temporary files at
# its peak (tmp_path_retention_policy in pyproject.toml removes each one as its test passes). A disk
# that fills halfway through shows up as pytest INTERNALERRORs far from the cause, so say it first.
MIN_FREE_GIB = 3.0


def _free_gib() -> float:
    return shutil.disk_usage(tempfile.gettempdir()).free / 2**30


def pytest_configure(config: pytest.Config) -> None:
    # Here rather than in the report header, which --no-header skips; xdist workers are checked once,
    # by the controller that starts them.
    if hasattr(config, "workerinput"):
        return
    if (free_gib := _free_gib()) < MIN_FREE_GIB:
        raise pytest.UsageError(
            f"only {free_gib:.1f} GiB free under {tempfile.gettempdir()}; the suite needs "
            f"{MIN_FREE_GIB:.0f} GiB (old pytest-of-* folders there are safe to remove)"
        )


def pytest_report_header(config: pytest.Config) -> str:
    return f"disk: {_free_gib():.0f} GiB free under {tempfile.gettempdir()}"


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
