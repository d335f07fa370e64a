#!/usr/bin/env bash
# The runs of docs/research/2026-12-07-multi-right.md: the three new sets converted with
# `--paraphrases right` (the miner's paraphrases of the true turn as second right replies); then
# 2.11.9's train stage (100 fp32 steps from 2.10.0) with the files as they are (control) and with
# those files in place of the new sets' (paraphrases), at seeds 21 and 22; scored by
# 2026-12-07-multi-right-frontier.py. Seed 21's control and the start are those of
# 2026-12-07-pointwise-per-file.sh (runs/probe-pointwise/{control,start}).
# D: the recipe's data folder (2.11.20's); runs/model-2.10.0: git archive 2f41c0f models/dialogue-minilm-l6.
set -euo pipefail
export HF_HUB_OFFLINE=1
D=${D:-runs/dialogue-minilm-l6-2.11.20/data}
P=runs/probe-multi-right; M=$P/data; R=runs/model-2.10.0/retriever
mkdir -p $M
.venv/bin/ranker convert sgd ../shared/data/sgd/sgd_train.jsonl.gz $M/sgd-train.jsonl \
    --retriever $R --max-dialogues 2200 --paraphrases right
.venv/bin/ranker convert persona-chat ../shared/data/synthetic_persona_chat/spc_test.jsonl.gz \
    $M/persona-chat.jsonl --retriever $R --statement-variants dropped,shuffled,irrelevant --paraphrases right
.venv/bin/ranker convert taskmaster ../shared/data/taskmaster/tm4_dialogues.jsonl.gz $M/taskmaster.jsonl \
    --negatives earlier:2,later:3,contradicted:1,random:3 --statement-variants dropped,shuffled,irrelevant \
    --paraphrases right
OLD_MIX="--data $D/sugar.jsonl:0.5 --data $D/sugar-statement.jsonl:0.5 --data $D/topical-chat.jsonl:0.05 --data $D/topical-chat-entity-fact.jsonl:0.05 --data $D/topical-chat-distill.jsonl:0.1 --data $D/tc-short-positive.jsonl:1 --data $D/sugar-flip.jsonl:4 --data $D/written.jsonl:30"
train() {  # train ARM SEED NEW_SETS_FOLDER
  local new="--data $3/persona-chat.jsonl:0.5 --data $3/sgd-train.jsonl:1.5 --data $3/taskmaster.jsonl:0.5"
  .venv/bin/ranker train $OLD_MIX $new --init-bundle runs/model-2.10.0 --lr 3e-05 --seed "$2" --max-steps 100 \
      --precision fp32 --dev-lists 20 --checkpoint-every 0 --threads 2 --out "$P/$1" > "$P/$1.log" 2>&1
}
train multi-right 21 $M
train control-s22 22 $D
train multi-right-s22 22 $M
for seed in 23 24 25; do train control-s$seed $seed $D; done
.venv/bin/python docs/research/probes/2026-12-07-multi-right-frontier.py runs/probe-pointwise/start \
    runs/probe-pointwise/control $P/control-s22 $P/multi-right $P/multi-right-s22
.venv/bin/python docs/research/probes/2026-12-07-multi-right-frontier.py runs/probe-pointwise/start \
    runs/probe-pointwise/control $P/control-s22 $P/control-s23 $P/control-s24 $P/control-s25
