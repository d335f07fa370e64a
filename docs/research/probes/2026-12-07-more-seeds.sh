#!/usr/bin/env bash
# The runs of 2026-12-07-more-seeds.md: the persona chat + Taskmaster mix of
# 2026-12-07-topical-chat-weight.sh trained again at seeds 22-24 (a fresh machine had lost them; the
# same command gives the same dev figures, to the digit for seed 24) and at seed 25, soups of the
# four at 0.8 of the step, and their abstention at 2.10.0's threshold and at one chosen again. Run
# from the repo root with runs/model-2.10.0 and runs/dialogue-minilm-l6-2.11.20/data in place (the
# data section of recipe 2.11.20; its conversions took 17 minutes here).
# `2026-12-07-more-seeds.sh 25 22 23 24` trains those seeds (about 9 minutes each on 2 cores); with
# no argument it scores and soups.
set -euo pipefail
export HF_HUB_OFFLINE=1
D=runs/dialogue-minilm-l6-2.11.20/data; P=runs/probe-interp; START=runs/probe-pointwise/start
mkdir -p $P $(dirname $START)
sugar() { echo "--data $D/sugar.jsonl:$1 --data $D/sugar-statement.jsonl:$1"; }
tc() { echo "--data $D/topical-chat.jsonl:$1 --data $D/topical-chat-entity-fact.jsonl:$1 --data $D/topical-chat-distill.jsonl:$2"; }
REST="--data $D/tc-short-positive.jsonl:1 --data $D/sugar-flip.jsonl:4 --data $D/written.jsonl:30"
PERSONA="--data $D/persona-chat.jsonl:0.5"; TM="--data $D/taskmaster.jsonl:0.5"

# 2.10.0 read back as a run, no step: the scoring probe's baseline column.
[ -f $START/metrics.json ] || .venv/bin/ranker train --data $D/sugar.jsonl --init-bundle runs/model-2.10.0 --max-steps 0 \
    --threads 2 --out $START > $START.log 2>&1
for seed in "$@"; do
  out=$P/persona-taskmaster-s$seed
  [ -f $out/metrics.json ] && continue  # done before
  .venv/bin/ranker train $(sugar 0.5) $(tc 0.05 0.1) $REST $PERSONA $TM --init-bundle runs/model-2.10.0 \
      --lr 3e-05 --seed $seed --max-steps 100 --precision fp32 --dev-lists 20 --checkpoint-every 0 --threads 2 \
      --out $out > $out.log 2>&1
done

# Scored alone (seeds 22 and 23 as in 2026-12-07-persona-taskmaster-soups.md; seed 24 to check
# that the same command gives the same figures), then soups of four seeds at 0.8 of the step.
[ $# -gt 0 ] && exit 0  # training only
score() { .venv/bin/python docs/research/probes/2026-12-07-interpolate-s24.py $START "$@"; }
S="$P/persona-taskmaster-s"
score ${S}24 ${S}25 > $P/seeds-a-frontier.out 2>&1
soup() {  # soup OUT ALPHA RUN-ARGS...
  local out=$1 a=$2; shift 2
  .venv/bin/ranker interpolate "$@" --toward-bundle runs/model-2.10.0 --alphas $a --alpha $a --threads 2 \
      --out $P/$out > $P/$out.log 2>&1
}
soup pt-soup-4-a0.8 0.8 --run ${S}23 --with ${S}24:0.25 --with ${S}22:0.25 --with ${S}25:0.25
soup pt-soup-4w-a0.8 0.8 --run ${S}23 --with ${S}24:0.3 --with ${S}22:0.2 --with ${S}25:0.2
score $P/pt-soup-4-a0.8 $P/pt-soup-4w-a0.8 > $P/pt-soup-4-frontier.out 2>&1

.venv/bin/python docs/research/probes/2026-12-07-threshold-refit.py $START $P/pt-soup-4-a0.8 $P/pt-soup-4w-a0.8 \
    > $P/threshold-refit.out 2>&1
