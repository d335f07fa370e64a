#!/usr/bin/env bash
# The soup of four (seeds 22-25 at 0.25 each, 0.8 of the step from 2.10.0;
# docs/research/2026-12-07-more-seeds.md) exported as 2.11.23 and checked against 2.10.0 on OpenVINO f32.
# Run alone on 2 cores: export about 30 min, the check about 27 min per runtime.
set -euo pipefail
export HF_HUB_OFFLINE=1
C=runs/candidate-soup4
.venv/bin/ranker export --run runs/probe-interp/pt-soup-4-a0.8 --out $C/bundle --build $C/.build --version 2.11.23 \
    --calibrate-on sugar --threshold-from runs/model-2.10.0 --variants fp16_weights --dev-lists 400 \
    --last-turn-weight 0.5 --prior-weight 0.2 --accept-loss
cp -r runs/model-2.10.0/retriever $C/bundle/

# The suite reads recipe 2.11.0's data folder. Recipe 2.11.20's data section writes the same files
# but one (its Taskmaster negatives are not retriever-mined), so link those and convert Taskmaster
# as recipe 2.11.0 does (2 min).
D=runs/dialogue-minilm-l6-2.11.0/data
mkdir -p $D
for f in sugar sugar-flip-all topical-chat written dailydialog-pp persona-chat sgd-test taskmaster-reward; do
  ln -sf ../../dialogue-minilm-l6-2.11.20/data/$f.jsonl $D/$f.jsonl
done
.venv/bin/ranker convert taskmaster ../shared/data/taskmaster/tm4_dialogues.jsonl.gz $D/taskmaster.jsonl \
    --retriever models/dialogue-minilm-l6/retriever --statement-variants dropped,shuffled,irrelevant

# Exit status 1: refused. The ONNX Runtime check was not run: one runtime's refusal refuses the release.
.venv/bin/ranker release-check --candidate $C/bundle --shipped runs/model-2.10.0 --backend openvino --precision f32 \
    --out-md $C/release-check-openvino.md
