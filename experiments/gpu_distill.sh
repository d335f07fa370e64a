#!/usr/bin/env bash
# Both branches of `make model`, their even soup, and the ranker distilled from the two branches'
# output ensemble (model 2.7.0), on a CUDA machine (README "Training", "Distilling the output
# ensemble"). The open-domain branch's first stage alone is 5-7 hours on 2 CPU cores.
#
#   SHARED=../shared/data BACKBONE=<all-MiniLM-L6-v2 dir> OUT=runs/gpu bash experiments/gpu_distill.sh
#
# On the H200 that built 2.7.0 the branches took 494 s side by side (conversions included), so a
# machine whose commands may run 600 s ran it in two calls: STEPS=branches, then STEPS=student on
# the same machine, which still held runs/ (the soup 60 s, the student 124 s). STEPS=all runs both.
# OUT gets lease.log (every step's output), runs-meta.tgz (each run's config, metrics and
# calibration) and the weights in fp16 (training/half_precision.py), split into 15 MiB parts:
# the student's (student.tgz.part-*), or, if it did not finish, the open-domain run's
# (open.tgz.part-*). DEADLINE_S: seconds from the start by which everything must be written; the
# student trains for what is left (--max-seconds; `make model` replays the steps it reached with
# --stop-at). SMOKE=1: tiny runs, to check the script on a CPU.
set -uo pipefail
START=$(date +%s)
SHARED=${SHARED:-../shared/data}
BACKBONE=${BACKBONE:?an all-MiniLM-L6-v2 directory}
OUT=${OUT:-runs/gpu}
DEADLINE_S=${DEADLINE_S:-560}
PY=${PY:-python3}
SHARE=${SHARE:-0.5}            # the first branch's share of the teachers' logit
DISTILL_WEIGHT=${DISTILL_WEIGHT:-0.7}
STEPS=${STEPS:-all}
D=runs/data
LOG=$OUT/lease.log
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT" "$D"
SMOKE_ARGS=()
if [ -n "${SMOKE:-}" ]; then SMOKE_ARGS=(--limit 24 --max-steps 2 --dev-lists 6); fi

say() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
# A run directory in fp16, tarred and split into parts that fit the machine's return limits.
pack() {  # NAME RUN
    local tmp; tmp=$(mktemp -d)
    cp -r "$2" "$tmp/$1" && $PY -m training.half_precision half "$tmp/$1/ranker" >> "$LOG" 2>&1 \
        && tar -C "$tmp" -czf - "$1" | split -b 15m - "$OUT/$1.tgz.part-"
    rm -rf "$tmp"
}

if [ "$STEPS" != student ]; then
say "converting the shared data"
$PY -m training.convert sugar "$SHARED/sugar/sugar.jsonl" $D/sugar.jsonl >> "$LOG" 2>&1 &
$PY -m training.convert sugar "$SHARED/sugar/sugar.jsonl" $D/sugar-statement.jsonl --negatives statement:2 >> "$LOG" 2>&1 &
$PY -m training.convert topical-chat "$SHARED/topical_chat" $D/topical-chat.jsonl >> "$LOG" 2>&1 &
$PY -m training.convert topical-chat "$SHARED/topical_chat" $D/topical-chat-entity-fact.jsonl \
    --negatives same-entity:4,fact:2,random:3 >> "$LOG" 2>&1 &
$PY -m training.convert topical-chat "$SHARED/topical_chat" $D/topical-chat-fact-only.jsonl --negatives fact:3 >> "$LOG" 2>&1 &
$PY -m training.convert topical-chat "$SHARED/topical_chat" $D/topical-chat-distill.jsonl \
    --negatives shared-word:2,short:2,random:2,nearby:1,same-entity:1,fact:1 >> "$LOG" 2>&1 &
wait
for f in sugar sugar-statement topical-chat topical-chat-entity-fact topical-chat-fact-only topical-chat-distill; do
    [ -s $D/$f.jsonl ] || { say "conversion of $f failed"; exit 1; }
done

MIX2=(--data $D/sugar.jsonl:2 --data $D/topical-chat-entity-fact.jsonl:0.04
      --data $D/topical-chat-fact-only.jsonl:0.04 --data $D/sugar-statement.jsonl:1
      --seed 14 --lr 2e-5 --max-steps 300 --precision auto)
say "training both branches side by side"
( $PY -m training.train --backbone "$BACKBONE" --data $D/sugar.jsonl:2 --data $D/topical-chat.jsonl:0.08 \
      "${SMOKE_ARGS[@]}" --out runs/ranker-tuned \
  && $PY -m training.train --init runs/ranker-tuned "${MIX2[@]}" "${SMOKE_ARGS[@]}" --out runs/ranker
) 2>&1 | sed -u 's/^/[branch] /' >> "$LOG" &
( $PY -m training.train --backbone "$BACKBONE" --data $D/sugar.jsonl:2 --data $D/topical-chat.jsonl:2 \
      --precision auto "${SMOKE_ARGS[@]}" --out runs/ranker-open-tuned \
  && $PY -m training.train --init runs/ranker-open-tuned "${MIX2[@]}" "${SMOKE_ARGS[@]}" --out runs/ranker-open
) 2>&1 | sed -u 's/^/[open] /' >> "$LOG" &
wait
for r in runs/ranker runs/ranker-open; do [ -f $r/ranker/head.pt ] || { say "$r did not finish"; exit 1; }; done
say "branches done; keeping the open-domain run in case the student does not finish"
pack open runs/ranker-open

fi
[ "$STEPS" = branches ] && { tar -czf "$OUT/runs-meta.tgz" runs/*/config.json runs/*/metrics.json; exit 0; }
if [ "$(left)" -lt 150 ]; then say "too little time left for the soup and the student"; exit 0; fi
say "the even soup"
$PY -m training.interpolate --run runs/ranker-open --with runs/ranker:0.5 --alpha 1 --out runs/ranker-soup >> "$LOG" 2>&1 \
    || { say "soup failed"; exit 1; }

BUDGET=$(( $(left) - 60 ))
say "distilling for at most ${BUDGET}s"
$PY -m training.train --init runs/ranker-soup --teacher runs/ranker-open:$(awk "BEGIN { print 1 - $SHARE }") \
    --teacher runs/ranker:$SHARE --distill-weight "$DISTILL_WEIGHT" \
    --data $D/sugar.jsonl:1 --data $D/sugar-statement.jsonl:0.5 --data $D/topical-chat.jsonl:0.05 \
    --data $D/topical-chat-entity-fact.jsonl:0.05 --data $D/topical-chat-fact-only.jsonl:0.025 \
    --data $D/topical-chat-distill.jsonl:0.1 --batch-lists 16 --lr 4e-5 --seed 14 --precision auto \
    --dev-lists 100 --max-seconds "$BUDGET" "${SMOKE_ARGS[@]}" --out runs/ranker-distilled 2>&1 \
    | sed -u 's/^/[student] /' >> "$LOG"
if [ -f runs/ranker-distilled/ranker/head.pt ]; then
    pack student runs/ranker-distilled && rm -f "$OUT"/open.tgz.part-*
    say "student packed"
else
    say "the student did not finish; the open-domain run is packed instead"
fi
tar -czf "$OUT/runs-meta.tgz" runs/*/config.json runs/*/metrics.json runs/*/calibration.json 2>/dev/null
say "done"
