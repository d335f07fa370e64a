"""``ranker evaluate``: the per-domain evaluation, for bundles and for training runs.

:mod:`dialogue_ranker.evaluation.domains` scores bundles; this module adds ``--run``: a training
run directory scored in PyTorch before any export.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dialogue_ranker.data.ranking_data import RankingList, exit_on_data_error
from dialogue_ranker.evaluation import domains
from dialogue_ranker.serving import context_views
from dialogue_ranker.serving.calibration import Calibrator


class RunScorer:
    """Calibrated scores of ranking lists with a training run's PyTorch model, before any export.

    The run's own calibration map and threshold (``calibration.json``), and its encoding with the
    chunk budgets lifted, as in training: what a run scores before int8 quantisation, e.g. to
    choose between runs trained elsewhere without exporting each. Torch is imported here only.
    """

    def __init__(self, run: Path, last_turn_weight: float = 0.0) -> None:
        from dialogue_ranker.training.shared_prefix import load_run_for_scoring

        self.model, self.encoder = load_run_for_scoring(run)
        self.last_turn_weight = last_turn_weight
        calibration = json.loads((run / "calibration.json").read_text())
        self.calibration = Calibrator.from_dict(calibration["maps"]["platt"])
        self.threshold = float(calibration["threshold"])

    def probabilities(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        """Calibrated P(appropriate) per candidate, per list."""
        return [np.asarray(self.calibration(z)) for z in self.logits(lists)]

    def logits(self, lists: Sequence[RankingList]) -> list[np.ndarray]:
        """Each candidate's logit (its views' weighted mean), per list."""
        import torch

        from dialogue_ranker.training.dev_scoring import dev_logits

        with torch.no_grad():
            logits = dev_logits(self.model, self.encoder, {"lists": list(lists)})["lists"]
            # Only multi-turn lists have a second view (a one-turn list's would be itself).
            views = [context_views.views(x.context, self.last_turn_weight) for x in lists]
            multi = [i for i, v in enumerate(views) if len(v) > 1]
            last = [dataclasses.replace(lists[i], context=views[i][-1]) for i in multi]
            alone = dev_logits(self.model, self.encoder, {"lists": last})["lists"] if last else []
            for i, z in zip(multi, alone, strict=True):
                logits[i] = context_views.mean(logits[i], z, self.last_turn_weight)
        return logits


def main(argv: list[str] | None = None) -> dict[str, dict]:
    """``ranker evaluate``: bundles (``--model``) and training runs (``--run``)."""
    return domains.main(argv, run_scorer=RunScorer)


if __name__ == "__main__":
    exit_on_data_error(main)
