#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: one training round with the motion
# loss from the shipped weights (scripts/gpu_train.sh, whose archives come back in $OUT), then the
# temporal stage's flicker / ghosting per history weight on the new weights, song clip, then the
# speech clip for the presets named in $CONFIRM. Anything after the first argument goes to
# `kagura train`.
#   bash scripts/gpu_motion_round.sh MINUTES [kagura train options]
set -uo pipefail
minutes=$1; shift
start=$(date +%s)
bash scripts/gpu_train.sh --init pipeline/diffusion/kagura --steps 1000 --ae-steps 0 --gan-start 0 \
    --minutes "$minutes" --export-partial "$@"
source scripts/gpu_env.sh >/dev/null 2>&1
blends='{"blend 0.4":{"blend":0.4},"blend 0.5":{"blend":0.5},"blend 0.6":{"blend":0.6},"blend 0.7":{"blend":0.7},"blend 0.8":{"blend":0.8}}'
left=$(( ${BUDGET_S:-560} - ($(date +%s) - start) ))
echo "variants with ${left} s left"
timeout "$left" python3 scripts/temporal_variants.py --weights /tmp/kagura --frames 240 \
    --presets "${PRESETS_ORDER:-cyberpunk,studio,ink-wash}" --device cuda --variants "$blends" 2>&1 | filter
left=$(( ${BUDGET_S:-560} - ($(date +%s) - start) ))
[ -n "${CONFIRM:-}" ] && [ "$left" -gt 20 ] && timeout "$left" python3 scripts/temporal_variants.py \
    --weights /tmp/kagura --frames 240 --clip speech --presets "$CONFIRM" --device cuda \
    --variants "$blends" 2>&1 | filter
echo "round done in $(( $(date +%s) - start )) s"
