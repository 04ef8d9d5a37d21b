#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: evaluate the shipped weights as they
# are (model card, metrics, grid, BENCHMARKS section), time them, and run the live bench at
# 60 fps for a 1-step and a 2-step preset (or the presets PRESETS="..." names). Returns
# $OUT/weights.tar and $OUT/docs.tar as scripts/gpu_train.sh does.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
rm -rf /tmp/kagura /tmp/docs && cp -r pipeline/diffusion/kagura /tmp/kagura && mkdir -p /tmp/docs
cp docs/BENCHMARKS.md /tmp/docs/BENCHMARKS.md; B=/tmp/docs/BENCHMARKS.md
python3 -m app.cmd_train --device cuda --eval-only --export /tmp/kagura --bench-out "$B" \
    --docs-img /tmp/docs/img --out /tmp/run 2>&1 | filter
python3 -m app.bench_model --device cuda --weights /tmp/kagura --out "$B" 2>&1 | filter | grep "model, "
for preset in ${PRESETS:-studio ink-wash}; do
    python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 --seconds 10 \
        --preset $preset --diffusion kagura --upscale 3 --section live-headless-cuda-$preset --out "$B" 2>&1 \
        | filter | grep -A2 "audio→photon median" | tail -1
done
tar -cf "$OUT/weights.tar" -C /tmp kagura && tar -cf "$OUT/docs.tar" -C /tmp docs
