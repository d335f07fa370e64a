"""Model 2.0 with a learned statement selector in front of it, on SUGAR dev.

    HF_HUB_OFFLINE=1 .venv/bin/python -m experiments.selector_for_2_0   # about 14 minutes here

Model 2.0 ships without a selector: its shared-prefix ranker reads all 12 statements. This trains
a pairwise (request, statement) relevance classifier, as model 1.1.0's selector was, on the train
groups of the group split (the statement pool: the 12 plus SUGAR's expanded statements; 2
epochs), then ranks the dev examples that have a bad candidate (the paper's protocol) with the
shipped 2.0 graph, one sequence per call as served (``training.evaluate.Evaluator``), given: all
12 statements, the gold ones, the selector's top k, or those over a logit threshold. Thresholds
and k are compared on dev itself, so the best row is an optimistic estimate of what a tuned
selector would give. Writes ``runs/selector/dev.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from service.model_bundle import load_bundle
from service.tokenization import PairEncoder
from training.backbone import backbone_dir
from training.domain_eval import group_split
from training.evaluate import Evaluator
from training.ranker import ranking_metrics
from training.selector import encode_selector_data, precision_recall, selector_logits, train_selector
from training.sugar import SugarExample, load_sugar

SUGAR = Path("../shared/data/sugar/sugar.jsonl")
MODEL = Path("models/dialogue-minilm-l6")
OUT = Path("runs/selector/dev.json")


def main() -> dict:
    torch.set_num_threads(2)
    examples = load_sugar(SUGAR)
    train = [e for e in examples if group_split(f"sugar-{e.index}") == "train"]
    dev = [e for e in examples if group_split(f"sugar-{e.index}") == "dev"]
    print(len(train), len(dev), flush=True)
    backbone = str(backbone_dir())
    encoder = PairEncoder.from_file(backbone + "/tokenizer.json", max_length=96)
    started = time.time()
    data = encode_selector_data(encoder, train)
    print("selector pairs", len(data.pairs), flush=True)
    model = train_selector(backbone, encoder, data, epochs=2, lr=4e-5, batch_size=64, seed=13)
    print("selector trained", round(time.time() - started), "s", flush=True)
    logits = selector_logits(model, encoder, dev, "u+S")

    ranker = Evaluator(load_bundle(MODEL))  # the shipped graph, one sequence per call as served

    def score(choose) -> tuple[float, float]:
        given = [choose(e, z) for e, z in zip(dev, logits, strict=True)]
        m = ranking_metrics(ranker.logits(dev, given), dev)
        return round(m["precision_at_1"], 3), round(m["ndcg_at_3"], 3)

    def top(k: int):
        return lambda e, z: [e.statements[i] for i in sorted(np.argsort(-np.asarray(z))[:k])]

    def over(threshold: float):
        def choose(e: SugarExample, z) -> list[str]:
            kept = [e.statements[i] for i in range(len(z)) if z[i] >= threshold]
            return kept or [e.statements[int(np.argmax(z))]]

        return choose

    result: dict = {"examples": sum(e.has_bad for e in dev)}
    result["all 12"] = score(lambda e, z: list(e.statements))
    result["gold"] = score(lambda e, z: e.statements_for("u+S1"))
    for k in (1, 2, 3, 4, 6):
        result[f"selector top {k}"] = score(top(k))
    for threshold in (0.0, -1.0, -2.0):
        result[f"selector logit >= {threshold}"] = score(over(threshold))
    chosen = [list(np.argsort(-np.asarray(z))[:2]) for z in logits]
    result["top2 selection P/R"] = precision_recall(chosen, [list(e.gold) for e in dev])
    print(json.dumps(result, indent=1))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
