#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root, carrying .whl/ and .gl/: the model's
# speed (`kagura bench model`: 1 step, 2 steps one after another, 2 steps stream-batched), then
# `kagura bench live --headless` at 60 fps x3 for the 2-step presets with and without
# --stream-batch in the same call, and studio. Logs and sections land in $OUT
# (docs/BENCHMARKS.md, "live-two-steps-2026-12-04").
set -uo pipefail
source scripts/gpu_env.sh || exit 1
python3 -m app.cli bench model --device cuda --out $OUT/model.md 2>&1 | filter | tail -25
for run in "ink-wash" "ink-wash --stream-batch" "cyberpunk" "cyberpunk --stream-batch" "studio"; do
  set -- $run
  echo "=== $run"
  python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 --seconds 6 --diffusion kagura --upscale 3 --preset "$@" --out "$OUT/live_${1}${2:+_sb}.md" 2>&1 | tee "$OUT/live_${1}${2:+_sb}.log" | grep -v '^{' | grep -i "audio.*photon\|p99\|rung\|lag\|error\|Traceback" | head -12
done
