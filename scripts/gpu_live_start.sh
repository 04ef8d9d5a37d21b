#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: kagura live's start-up with the
# quality ladder's lower rungs set up beside the first frames (issue 16), checked and timed in
# one short call — the GPU test of that set-up, `kagura render` and `kagura live` from the
# shell with their set-up steps (bench e2e), and the live path at 60 fps x3 with the ladder.
# Figures go into $OUT/BENCHMARKS.md (a copy of docs/BENCHMARKS.md), logs into $OUT/start.log.
#   bash scripts/gpu_live_start.sh
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"; B=$OUT/BENCHMARKS.md
{
timeout 90 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_live_rungs_gpu.py 2>&1 | tail -6
timeout 120 python3 -m app.cli bench e2e --device cuda --commands render live --size 1920x1080 \
    --upscale 3 --repeats 2 --cold-repeats 0 --no-imports --out "$B" 2>&1 | filter | tail -8
timeout 60 python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
    --seconds 10 --preset studio --diffusion kagura --upscale 3 --out "$B" 2>&1 | filter \
    | grep -B3 -A14 "audio→photon median" | head -40
} 2>&1 | tee "$OUT/start.log"
