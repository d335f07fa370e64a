#!/usr/bin/env bash
# Soups of seeds 22-25 nearer 2.10.0 (0.6 and 0.7 of the step) and one weighted toward seed 25,
# through the one-pass dev screen (2026-12-08-dev-screen.py). Needs the seeds of
# 2026-12-07-more-seeds.sh in runs/probe-interp. Run alone: about 1 min a soup, 4 min a scored run.
set -euo pipefail
export HF_HUB_OFFLINE=1
P=runs/probe-interp; S="$P/persona-taskmaster-s"
soup() {  # soup OUT ALPHA RUN-ARGS...
  local out=$1 a=$2; shift 2
  [ -f $P/$out/metrics.json ] && return 0
  .venv/bin/ranker interpolate "$@" --toward-bundle runs/model-2.10.0 --alphas $a --alpha $a --threads 2 \
      --out $P/$out > $P/$out.log 2>&1
}
for a in 0.6 0.7; do soup pt-soup-4-a$a $a --run ${S}23 --with ${S}24:0.25 --with ${S}22:0.25 --with ${S}25:0.25; done
soup pt-soup-4s25-a0.8 0.8 --run ${S}25 --with ${S}22:0.2 --with ${S}23:0.2 --with ${S}24:0.2
.venv/bin/python docs/research/probes/2026-12-08-dev-screen.py runs/probe-pointwise/start $P/pt-soup-4-a0.6 \
    $P/pt-soup-4-a0.7 $P/pt-soup-4s25-a0.8
