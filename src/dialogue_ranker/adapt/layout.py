"""What ``ranker adapt`` writes under ``--out``, one path per thing.

``bundle/`` is the adapted bundle to serve (one directory, nothing outside it needed); the rest is
the run's own: the team's lists as split, the training run and its checkpoints, the export's
graphs, the bundle before the team's calibration, the comparison and the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """The paths under ``out``."""

    out: Path

    @property
    def data(self) -> Path:
        """The team's lists as ``ranker train`` and the scoring phases read them."""
        return self.out / "data"

    @property
    def team(self) -> Path:
        """Every team list, one file (``ranker train`` splits it by the same group hash)."""
        return self.data / "team.jsonl"

    @property
    def team_dev(self) -> Path:
        """The dev lists the calibration is fitted on (a seeded sample sized to the budget)."""
        return self.data / "team-dev.jsonl"

    @property
    def team_test(self) -> Path:
        """The test lists both bundles are compared on (a seeded sample sized to the budget)."""
        return self.data / "team-test.jsonl"

    @property
    def probe(self) -> Path:
        """The step probe's few-step training run (deleted once measured)."""
        return self.out / "probe"

    @property
    def run(self) -> Path:
        """The training run (``ranker train --out``)."""
        return self.out / "run"

    @property
    def build(self) -> Path:
        """The export's graphs and its report."""
        return self.out / "build"

    @property
    def exported(self) -> Path:
        """The exported bundle, before the team's calibration per runtime."""
        return self.out / "exported"

    @property
    def bundle(self) -> Path:
        """The adapted bundle."""
        return self.out / "bundle"

    @property
    def comparison(self) -> Path:
        """Both bundles' rows with their intervals (what the report is written from)."""
        return self.out / "comparison.json"

    @property
    def report_md(self) -> Path:
        """The report."""
        return self.out / "report.md"

    @property
    def report_png(self) -> Path:
        """The report's figure."""
        return self.out / "report.png"
