#!/usr/bin/env bash
# The runs of 2026-12-07-topical-chat-weight.md: seed 24's 100 fp32 steps from 2.10.0 with
# Topical-Chat at 4x (and SUGAR at 2x), steps back toward 2.10.0, and one new set at a time.
# Each is scored by 2026-12-07-interpolate-s24.py (600 Topical-Chat dev lists). Run from the repo root
# with runs/model-2.10.0 and runs/dialogue-minilm-l6-2.11.20/data in place (see the training guide).
set -euo pipefail
export HF_HUB_OFFLINE=1
D=runs/dialogue-minilm-l6-2.11.20/data; P=runs/probe-interp; START=runs/probe-pointwise/start
mkdir -p $P
sugar() { echo "--data $D/sugar.jsonl:$1 --data $D/sugar-statement.jsonl:$1"; }
tc() { echo "--data $D/topical-chat.jsonl:$1 --data $D/topical-chat-entity-fact.jsonl:$1 --data $D/topical-chat-distill.jsonl:$2"; }
REST="--data $D/tc-short-positive.jsonl:1 --data $D/sugar-flip.jsonl:4 --data $D/written.jsonl:30"
SGD="--data $D/sgd-train.jsonl:1.5"; PERSONA="--data $D/persona-chat.jsonl:0.5"; TM="--data $D/taskmaster.jsonl:0.5"
train() {  # [SEED=N] train OUT DATA...   (seed 24 unless SEED is set)
  local out=$1; shift
  .venv/bin/ranker train "$@" --init-bundle runs/model-2.10.0 --lr 3e-05 --seed ${SEED:-24} --max-steps 100 --precision fp32 \
      --dev-lists 20 --checkpoint-every 0 --threads 2 --out $P/$out > $P/$out.log 2>&1
}
score() { .venv/bin/python docs/research/probes/2026-12-07-interpolate-s24.py $START "$@"; }

# More Topical-Chat weight.
train tc4-s24 $(sugar 0.5) $(tc 0.2 0.4) $REST $PERSONA $SGD $TM
train tc4-sugar2-s24 $(sugar 1.0) $(tc 0.2 0.4) $REST $PERSONA $SGD $TM
for a in 0.65 0.8; do
  .venv/bin/ranker interpolate --run $P/tc4-s24 --toward-bundle runs/model-2.10.0 --alphas $a --alpha $a --out $P/tc4-s24-a$a
done
.venv/bin/ranker interpolate --run $P/tc4-s24 --with $P/tc4-sugar2-s24:0.5 --toward-bundle runs/model-2.10.0 \
    --alphas 0.65 --alpha 0.65 --out $P/tc4pair-a0.65
score $P/tc4-s24 $P/tc4-s24-a0.8 $P/tc4-s24-a0.65 $P/tc4-sugar2-s24 $P/tc4pair-a0.65 > $P/tc4-frontier.out 2>&1

# One new set at a time, then without SGD.
train only-sgd-train $(sugar 0.5) $(tc 0.05 0.1) $REST $SGD
train only-persona-chat $(sugar 0.5) $(tc 0.05 0.1) $REST $PERSONA
train only-taskmaster $(sugar 0.5) $(tc 0.05 0.1) $REST $TM
train persona-taskmaster $(sugar 0.5) $(tc 0.05 0.1) $REST $PERSONA $TM
train sgd-third $(sugar 0.5) $(tc 0.05 0.1) $REST $PERSONA $TM --data $D/sgd-train.jsonl:0.5
score $P/only-sgd-train $P/only-persona-chat $P/only-taskmaster $P/persona-taskmaster $P/sgd-third \
    > $P/one-new-set-frontier.out 2>&1

# Seeds of persona chat + Taskmaster (seed 24 is persona-taskmaster above).
for seed in 22 23; do
  SEED=$seed train persona-taskmaster-s$seed $(sugar 0.5) $(tc 0.05 0.1) $REST $PERSONA $TM
done
score $P/persona-taskmaster-s22 $P/persona-taskmaster-s23 > $P/pt-seeds-frontier.out 2>&1
