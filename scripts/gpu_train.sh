#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: train Kagura's own model, export,
# evaluate and time it. Everything comes back as two archives (the device tool returns at most
# 8 files): $OUT/weights.tar (the exported folder, kagura/) and $OUT/docs.tar (BENCHMARKS.md
# with the new sections, img/, log.jsonl). Unpack weights.tar over pipeline/diffusion/ and
# take the sections of BENCHMARKS.md into docs/ afterwards.
#   bash scripts/gpu_train.sh [--before] [extra kagura train options, e.g. --init DIR --minutes 6]
# --before first evaluates the weights in pipeline/diffusion/kagura as they are (the "before"
# figures, into $OUT/before/).
set -uo pipefail
source scripts/gpu_env.sh || exit 1
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
mkdir -p "$OUT/docs"
cp docs/BENCHMARKS.md "$OUT/docs/BENCHMARKS.md"
filter() { grep -v "accelerate\|^\`\`\`\|pip install\|^\.$\|should be kept in float32\|^$\|Loading weights\|Writing model"; }
if [ "${1:-}" = "--before" ]; then
    shift
    rm -rf /tmp/kagura-before && cp -r pipeline/diffusion/kagura /tmp/kagura-before
    python3 -m app.cmd_train --device cuda --eval-only --export /tmp/kagura-before \
        --bench-out /tmp/before-BENCH.md --docs-img /tmp/before-img --out /tmp/before-run 2>&1 | filter
    mkdir -p "$OUT/docs/before" && cp /tmp/kagura-before/metrics.json "$OUT/docs/before/"
fi
python3 -m app.cmd_train --device cuda --no-resume --out /tmp/kagura-run --export /tmp/kagura \
    --bench-out "$OUT/docs/BENCHMARKS.md" --docs-img "$OUT/docs/img" "$@" 2>&1 | filter
cp /tmp/kagura-run/log.jsonl "$OUT/docs/" 2>/dev/null
python3 -m app.bench_model --device cuda --weights /tmp/kagura --out "$OUT/docs/BENCHMARKS.md" 2>&1 | filter | tail -20
tar -cf "$OUT/weights.tar" -C /tmp kagura && tar -cf "$OUT/docs.tar" -C "$OUT" docs && rm -rf "$OUT/docs"
ls -la "$OUT"
