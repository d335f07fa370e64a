#!/usr/bin/env bash
# The runs of docs/research/2026-12-07-pointwise-per-file.md: 2.11.9's train stage (labels alone,
# 2.10.0's mix plus the new sets), 100 fp32 steps from 2.10.0, one run per arm named:
#   docs/research/probes/2026-12-07-pointwise-per-file.sh control weighted kept old-mix
# D: the recipe's data folder (2.11.9's files); runs/model-2.10.0: the 2.10.0 bundle
# (git archive 2f41c0f models/dialogue-minilm-l6). The start is 2.10.0 read back as a run:
#   ranker train --data $D/sugar.jsonl --init-bundle runs/model-2.10.0 --max-steps 0 --out runs/probe-pointwise/start
set -euo pipefail
export HF_HUB_OFFLINE=1
D=${D:-runs/dialogue-minilm-l6-2.11.20/data}
mkdir -p runs/probe-pointwise
OLD_MIX="--data $D/sugar.jsonl:0.5 --data $D/sugar-statement.jsonl:0.5 --data $D/topical-chat.jsonl:0.05 --data $D/topical-chat-entity-fact.jsonl:0.05 --data $D/topical-chat-distill.jsonl:0.1 --data $D/tc-short-positive.jsonl:1 --data $D/sugar-flip.jsonl:4 --data $D/written.jsonl:30"
NEW_SETS="--data $D/persona-chat.jsonl:0.5 --data $D/sgd-train.jsonl:1.5 --data $D/taskmaster.jsonl:0.5"
STAGE="--init-bundle runs/model-2.10.0 --lr 3e-05 --seed 21 --max-steps 100 --precision fp32 --dev-lists 20 --checkpoint-every 0 --threads 2"
COMMON="$OLD_MIX $NEW_SETS $STAGE"
for arm in "$@"; do
  case $arm in
    control) extra="" ;;
    weighted) extra="--pointwise-on persona-chat:0.1 --pointwise-on sgd-train:0.1 --pointwise-on taskmaster:0.1" ;;
    kept) extra="--keep-head-bias" ;;
    old-mix) extra="" ;;
  esac
  start=$(date +%s)
  flags=$COMMON
  [ "$arm" = old-mix ] && flags="$OLD_MIX $STAGE"  # 2.10.0's own files alone: the same steps without the new sets
  .venv/bin/ranker train $flags $extra --out runs/probe-pointwise/$arm > runs/probe-pointwise/$arm.log 2>&1
  echo "$arm $(( $(date +%s) - start )) s" >> runs/probe-pointwise/times.txt
done
