#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root, carrying .whl/ and .gl/: the GPU
# libraries' first use on a thread of its own (pipeline/accel/first_use.py, issue 16), checked
# and timed in one call — its GPU tests, the diffusion set-up in fresh processes without and
# with the libraries touched first (scripts/cuda_first_use.py), and `kagura render` / `kagura
# live` from the shell without (KAGURA_NO_GPU_FIRST_USE=1), then with the thread.
# Logs into $OUT/first_use.log; the "with" e2e table into $OUT/BENCHMARKS.md (a copy).
#   bash scripts/gpu_first_use.sh
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"; B=$OUT/BENCHMARKS.md
e2e() {
  timeout 150 python3 -m app.cli bench e2e --device cuda --commands render live --size 1920x1080 \
    --upscale 3 --repeats 2 --cold-repeats 0 --no-imports "$@" 2>&1 | filter \
    | grep -A3 "^| command\|^- .render. warm\|^- .live. warm"
}
{
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_first_use.py \
    tests/test_accel_gpu.py tests/test_diffusion_gpu.py tests/test_upscale_gpu.py \
    tests/test_live_rungs_gpu.py tests/test_temporal.py 2>&1 | tail -4
for mode in cold libs cold libs cold libs; do python3 scripts/cuda_first_use.py $mode 2>&1 | tail -1; done
echo "== without the thread"; KAGURA_NO_GPU_FIRST_USE=1 e2e --no-write
echo "== with the thread"; e2e --out "$B"
} 2>&1 | tee "$OUT/first_use.log"
