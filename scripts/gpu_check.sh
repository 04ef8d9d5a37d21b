#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: the portable CPU tests under that
# machine's python3, the GPU tests, and the GPU benchmarks. Wheels that machine lacks travel in
# .whl/ (see docs/BENCHMARKS.md for the command); results land in $OUT.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
python3 -m pytest -q -p no:cacheprovider tests/test_graph.py tests/test_render.py tests/test_presets.py tests/test_stylize.py 2>&1 | tail -3
python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_stylize_gpu.py tests/test_upscale_gpu.py \
    tests/test_reference.py tests/test_kagura_model_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md" 2>/dev/null || true
python3 -m app.cli bench stylize --device cuda --out "$OUT/BENCHMARKS.md" "$@"
