#!/usr/bin/env bash
# The runs of 2026-12-07-persona-taskmaster-soups.md: soups of the persona chat + Taskmaster seeds
# (2026-12-07-topical-chat-weight.sh trains them), steps of the best soup back toward 2.10.0, the
# calibration map fitted on SUGAR + Topical-Chat and on every shippable set at equal shares, SGD with
# random negatives, the export and release check of the chosen soup, and seed 22's share in it.
# Run from the repo root with runs/model-2.10.0 and runs/dialogue-minilm-l6-2.11.20/data in place
# (see the training guide).
set -euo pipefail
export HF_HUB_OFFLINE=1
D=runs/dialogue-minilm-l6-2.11.20/data; P=runs/probe-interp; START=runs/probe-pointwise/start
S22=$P/persona-taskmaster-s22; S23=$P/persona-taskmaster-s23; S24=$P/persona-taskmaster
soup() {  # soup OUT ALPHA RUN-ARGS...
  local out=$1 a=$2; shift 2
  .venv/bin/ranker interpolate "$@" --toward-bundle runs/model-2.10.0 --alphas $a --alpha $a --threads 2 \
      --out $P/$out > $P/$out.log 2>&1
}
score() { .venv/bin/python docs/research/probes/2026-12-07-interpolate-s24.py $START "$@"; }

# Soups of the seeds, whole (alpha 1), then the best one stepped back toward 2.10.0.
soup pt-soup-23-24 1 --run $S23 --with $S24:0.5
soup pt-soup-22-23 1 --run $S22 --with $S23:0.5
soup pt-soup-3 1 --run $S24 --with $S22:0.3333 --with $S23:0.3333
score $P/pt-soup-23-24 $P/pt-soup-22-23 $P/pt-soup-3 > $P/pt-soups-frontier.out 2>&1
for a in 0.8 0.65; do soup pt-soup-23-24-a$a $a --run $S23 --with $S24:0.5; done
score $P/pt-soup-23-24-a0.8 $P/pt-soup-23-24-a0.65 > $P/pt-soup-steps-frontier.out 2>&1

# The map fitted on SUGAR and Topical-Chat dev pooled (ranker export --calibrate-on sugar,topical-chat)
# and on the five shippable sets at equal shares, beside the SUGAR map.
.venv/bin/python docs/research/probes/2026-12-07-calibrate-on-pair.py $START $P/pt-soup-23-24 \
    $P/pt-soup-23-24-a0.8 $P/pt-soup-23-24-a0.65 $P/pt-soup-22-23 > $P/pt-soup-maps.out 2>&1

# SGD's lists with random negatives in place of the retrieved and same-service ones, at SGD's weight
# in the three-set mix (seed 24).
R=runs/probe-sgd-random; mkdir -p $R
.venv/bin/ranker convert sgd ../shared/data/sgd/sgd_train.jsonl.gz $R/sgd-train-random.jsonl --max-dialogues 2200 \
    --negatives random:6,earlier:1,later:1,contradicted:1
.venv/bin/ranker train --data $D/sugar.jsonl:0.5 --data $D/sugar-statement.jsonl:0.5 --data $D/topical-chat.jsonl:0.05 \
    --data $D/topical-chat-entity-fact.jsonl:0.05 --data $D/topical-chat-distill.jsonl:0.1 --data $D/tc-short-positive.jsonl:1 \
    --data $D/sugar-flip.jsonl:4 --data $D/written.jsonl:30 --data $D/persona-chat.jsonl:0.5 --data $D/taskmaster.jsonl:0.5 \
    --data $R/sgd-train-random.jsonl:1.5 --init-bundle runs/model-2.10.0 --lr 3e-05 --seed 24 --max-steps 100 \
    --precision fp32 --dev-lists 20 --checkpoint-every 0 --threads 2 --out $R/sgd-random-s24 > $R/sgd-random-s24.log 2>&1
score $R/sgd-random-s24 > $R/frontier.out 2>&1

# The chosen soup (23 + 24, alpha 0.8) exported and checked against 2.10.0.
C=runs/candidate-soup-a080
.venv/bin/ranker export --run $P/pt-soup-23-24-a0.8 --out $C/bundle --build $C/.build --version 2.11.22 \
    --calibrate-on sugar --threshold-from runs/model-2.10.0 --variants fp16_weights --dev-lists 400 \
    --last-turn-weight 0.5 --prior-weight 0.2 --accept-loss
cp -r runs/model-2.10.0/retriever $C/bundle/
.venv/bin/ranker release-check --candidate $C/bundle --shipped runs/model-2.10.0 --backend openvino --precision f32 \
    --out-md $C/release-check-openvino.md

# A share of seed 22 in soup 23+24, at 0.8 of the step.
for v in 0.15 0.2 0.25 0.3; do
  w=$(python3 -c "print(round((1 - $v) / 2, 4))")
  soup pt-soup-s22-$v-a0.8 0.8 --run $S23 --with $S24:$w --with $S22:$v
done
score $P/pt-soup-s22-0.15-a0.8 $P/pt-soup-s22-0.2-a0.8 $P/pt-soup-s22-0.25-a0.8 $P/pt-soup-s22-0.3-a0.8 > $P/pt-soup-s22share-frontier.out 2>&1
