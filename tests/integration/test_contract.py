"""The API keeps its published contract: schemathesis against ``ranker serve``, every route of its
``/openapi.json``, every check and phase, from a fixed seed and a bounded number of cases.

``benchmarks/contract_fuzz.py`` is the runner (the declared refusals are in
``benchmarks/contract_checks.py``); ``python -m benchmarks.contract_fuzz`` is the long run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bank_helpers import SUPPORT_BANK, require_retriever, write_bank

from benchmarks import contract_fuzz
from dialogue_ranker import docs_gen

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Cases an operation a phase: the run stays within about half a minute on 2 cores.
MAX_EXAMPLES = 15
SEED = 61


def test_every_route_keeps_its_published_contract(tmp_path: Path, model_dir: Path, abcd_kb: Path) -> None:
    require_retriever()
    bank = write_bank(tmp_path / "support.jsonl", SUPPORT_BANK)
    code, report = contract_fuzz.run_contract(
        model=model_dir,
        banks=[f"support={bank}"],
        guidelines=abcd_kb,
        max_examples=MAX_EXAMPLES,
        seed=SEED,
        workdir=tmp_path,
    )
    assert code == 0, report
    # Every route the document publishes was called, and every phase ran (the stateful one
    # follows the document's links; without them it would be skipped as not applicable).
    operations = sum(len(methods) for methods in docs_gen.openapi_document()["paths"].values())
    assert f"Selected: {operations}/{operations}" in report and f"Tested: {operations}" in report, report
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}\n" in report, report
