"""Which Topical-Chat negative kinds teach what transfers to DailyDialog++.

    HF_HUB_OFFLINE=1 .venv/bin/python -m experiments.negative_kinds   # about 7 minutes a kind here

One conversion of Topical-Chat with every negative kind (``echo:1``, three of each other kind),
then one file per kind: each list keeps its true turn and that kind's negatives only. A short
ranker is trained on each file alone, as the design comparison's runs were (weight 0.025, four
candidates a training list, cosine head, seed 13), and the first 300 DailyDialog++ dev lists are
scored with it: within-context AUC of the good replies against the adversarial and the random
negatives. The untrained backbone is scored as the starting point. A run already in
``--out`` is scored again, not retrained (``--kinds`` picks the kinds). Writes
``<out>/report.json``.

DailyDialog++ is read for evaluation only (its licence); nothing here trains on it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from service.list_encoding import ListEncoder
from training import train
from training.backbone import backbone_dir
from training.convert import NEGATIVE_KINDS, convert_dailydialog_pp, convert_topical_chat
from training.interpolate import score_lists
from training.ranking_data import RankingList, read_lists, write_lists
from training.shared_prefix import SharedPrefixRanker

TOPICAL_CHAT = Path("../shared/data/topical_chat")
DAILYDIALOG_PP = Path("../shared/data/dailydialog_pp/dev.jsonl")
ALL_KINDS = {kind: 1 if kind == "echo" else 3 for kind in NEGATIVE_KINDS}


def one_kind(lists: list[RankingList], kind: str) -> list[RankingList]:
    """Each list with its appropriate candidates and the negatives of ``kind`` only."""
    kept = []
    for item in lists:
        candidates = [c for c in item.candidates if c.label > 0 or c.generator == kind]
        if len(candidates) >= 2 and any(c.label == 0 for c in candidates):
            kept.append(dataclasses.replace(item, candidates=tuple(candidates)))
    return kept


def ddpp_aucs(model_dir: Path, lists: list[RankingList], *, fresh: bool = False) -> dict:
    model = SharedPrefixRanker.load(model_dir, head="cosine") if fresh else SharedPrefixRanker.load(model_dir)
    encoder = ListEncoder.from_file(
        model_dir,
        max_prefix_tokens=256,
        max_candidate_tokens=64,
        max_chunk_tokens=1 << 16,
        max_chunk_candidates=1 << 10,
    )
    report = score_lists(model.eval(), encoder, {"ddpp": lists})["ddpp"]
    return {"auc_adversarial": report["auc_adversarial"], "auc_random": report["auc_random"]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/negative-kinds"))
    p.add_argument("--kinds", default=",".join(NEGATIVE_KINDS))
    p.add_argument("--ddpp-lists", type=int, default=300)
    args = p.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    args.out.mkdir(parents=True, exist_ok=True)

    source = args.out / "topical-chat-all-kinds.jsonl"
    if not source.exists():
        write_lists(source, convert_topical_chat(TOPICAL_CHAT, negatives=ALL_KINDS))
    ddpp = list(convert_dailydialog_pp(DAILYDIALOG_PP))[: args.ddpp_lists]

    report = {"backbone (untrained)": ddpp_aucs(backbone_dir(), ddpp, fresh=True)}
    print("backbone", report["backbone (untrained)"], flush=True)
    everything = read_lists(source)
    for kind in kinds:
        run = args.out / f"run-{kind}"
        if not (run / "metrics.json").exists():
            data = args.out / f"{kind}.jsonl"
            write_lists(data, one_kind(everything, kind))
            train.main(
                ["--data", f"{data}:0.025", "--train-candidates", "4", "--seed", "13", "--out", str(run)]
            )
        seconds = json.loads((run / "metrics.json").read_text()).get("train_seconds")
        report[kind] = {**ddpp_aucs(run / "ranker", ddpp), "train_seconds": seconds}
        print(kind, report[kind], flush=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print("| trained on | DailyDialog++ AUC adv. | AUC random |\n| --- | --- | --- |")
    for name, row in report.items():
        print(f"| {name} | {row['auc_adversarial']:.3f} | {row['auc_random']:.3f} |")
    return report


if __name__ == "__main__":
    main()
