#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root, carrying .whl/ and .gl/: the temporal
# stage with a history weight of its own where nothing moves (`blend`) and near motion
# (`moving_blend`), on the shipped model's painting of both held-out clips, every preset
# (scripts/temporal_variants.py; docs/BENCHMARKS.md, "still-history-2026-12-04"). Logs in $OUT.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cat >/tmp/variants.json <<'JSON'
{"preset": {},
 "still 0.9 moving 0.4": {"blend": 0.9, "moving_blend": 0.4},
 "still 0.9 moving 0.5": {"blend": 0.9, "moving_blend": 0.5},
 "still 0.9 moving 0.7": {"blend": 0.9, "moving_blend": 0.7},
 "still 0.95 moving 0.4": {"blend": 0.95, "moving_blend": 0.4},
 "still 0.95 moving 0.5": {"blend": 0.95, "moving_blend": 0.5},
 "still 0.95 moving 0.65": {"blend": 0.95, "moving_blend": 0.65},
 "still 0.95 moving 0.7": {"blend": 0.95, "moving_blend": 0.7},
 "still 0.95 moving 0.75": {"blend": 0.95, "moving_blend": 0.75},
 "still 0.97 moving 0.65": {"blend": 0.97, "moving_blend": 0.65},
 "still 0.97 moving 0.7": {"blend": 0.97, "moving_blend": 0.7}}
JSON
for clip in song speech; do
  python3 scripts/temporal_variants.py --device cuda --frames 240 --clip $clip \
    --presets cyberpunk,studio,ink-wash --variants /tmp/variants.json 2>&1 | filter \
    | grep -v "^Loading\|^Cannot\|float32" | tee $OUT/temporal_$clip.log
done
