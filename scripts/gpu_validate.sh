#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: after changes to the runtime, check
# that everything GPU-side still works and what the user runs still performs — every GPU test,
# the live path at 60 fps, the GPU chain per stage, the offline 1080p render, and the real
# `kagura render` from the shell cold and warm; then the shipped weights are evaluated again as
# they are (model card, metrics: the temporal figures follow each preset's [temporal] settings). Figures go into
# $OUT/BENCHMARKS.md (a copy of docs/BENCHMARKS.md), the model card and metrics into
# $OUT/card.tar, logs into $OUT/validate.log.
#   bash scripts/gpu_validate.sh [1|2]
# A part number runs half of it (the device tool's calls are at most 10 minutes): 1 = the GPU
# tests, the live path and the GPU chain; 2 = the offline render, the real command, the model.
set -uo pipefail
PART=${1:-all}
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"; B=$OUT/BENCHMARKS.md
{
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
if [ "$PART" != 2 ]; then
# that machine has no PySide6, ray nor keyring: their test files are left out
timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ --continue-on-collection-errors \
    --ignore=tests/test_farm.py --ignore=tests/test_calibration_dialog.py \
    --ignore=tests/test_stats_overlay.py --ignore=tests/test_hostile_app.py \
    --ignore=tests/test_kagura_torch_gpu.py 2>&1 | tail -8
# the plain-torch loader against diffusers on cuda; -s: its start-up figures for BENCHMARKS
timeout 200 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_kagura_torch_gpu.py 2>&1 | tail -25
python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 --seconds 10 \
    --preset studio --diffusion kagura --upscale 3 --out "$B" 2>&1 | filter | grep -A2 "audio→photon median" | tail -1
# the live GPU chain and the offline stages alone, Kagura's model, CUDA events per stage
timeout 150 python3 -m app.cli bench pipeline --device cuda --model pipeline/diffusion/kagura \
    --size 640x360 --out-size 1920x1080 --frames 300 --offline --out "$B" 2>&1 | filter | tail -4
fi
if [ "$PART" != 1 ]; then
python3 -m app.cli bench offline --device cuda --size 1920x1080 --seconds 12 --preset studio \
    --diffusion kagura --upscale 3 --encoders 4 --x264-preset ultrafast --out "$B" 2>&1 | filter | tail -2
timeout 150 python3 -m app.cli bench e2e --device cuda --commands render --size 1920x1080 --upscale 3 \
    --repeats 1 --cold-repeats 1 --no-imports --out "$B" 2>&1 | filter | tail -12
rm -rf /tmp/kagura && cp -r pipeline/diffusion/kagura /tmp/kagura
python3 -m app.cmd_train --device cuda --eval-only --export /tmp/kagura --bench-out "$B" \
    --docs-img /tmp/img --out /tmp/run 2>&1 | filter | tail -3
tar -cf "$OUT/card.tar" -C /tmp/kagura MODEL_CARD.md metrics.json
fi
} 2>&1 | tee "$OUT/validate.log"
