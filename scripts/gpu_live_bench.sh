#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: `kagura bench live --headless` on
# cuda — the live session with the GPU stages and the quality ladder: audio-to-photon latency,
# per-stage CUDA-event times, drops and QoS events. Carry .whl/ and .gl/ (scripts/gpu_env.sh:
# skia-python, av, soxr, pydantic, platformdirs, diffusers, the GL loaders). The updated
# docs/BENCHMARKS.md and the log land in $OUT. Extra arguments go to the bench, e.g.
#   bash scripts/gpu_live_bench.sh --diffusion-random sd-turbo --upscale 4 --fps 60 --seconds 10
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md" 2>/dev/null || true
python3 -m app.cli bench live --headless --device cuda --out "$OUT/BENCHMARKS.md" "$@" 2>&1 \
  | tee "$OUT/bench_live_headless.log" | grep -v '^{'
