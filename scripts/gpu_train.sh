#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: train Kagura's own model, export it
# to $OUT/kagura, evaluate it and time it. Copy $OUT/kagura to pipeline/diffusion/kagura and the
# sections of $OUT/BENCHMARKS.md into docs/ afterwards.
#   bash scripts/gpu_train.sh [extra kagura train options]
set -uo pipefail
source scripts/gpu_env.sh || exit 1
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"
python3 -m app.cmd_train --device cuda --no-resume --out /tmp/kagura-run --export "$OUT/kagura" \
    --bench-out "$OUT/BENCHMARKS.md" --docs-img "$OUT/img" "$@" 2>&1 \
    | grep -v "accelerate\|^\`\`\`\|pip install\|^\.$\|should be kept in float32\|^$\|Loading weights\|Writing model"
cp /tmp/kagura-run/log.jsonl "$OUT/" 2>/dev/null
python3 -m app.bench_model --device cuda --weights "$OUT/kagura" --out "$OUT/BENCHMARKS.md" 2>&1 | grep -v "accelerate\|^\`\`\`\|pip install\|^\.$\|float32\|^$\|Loading weights" | tail -20
