#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: issue 16's goal as it is written —
# `kagura render` of a 3-minute song with the cuda defaults (Kagura's model, temporal, x3 to
# 1080p), from the shell, cold and warm (bench e2e). The song is the demo song played MINUTES*60 s
# in a row (its own file, written here: nothing else of that length ships with the project).
#   bash scripts/gpu_e2e_song.sh            (MINUTES=3, REPEATS=2, COLD=1)
# Logs into $OUT/e2e_song.log, the section into $OUT/BENCHMARKS.md.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"
SONG=/tmp/song-${MINUTES:-3}min.flac
{
python3 - "$SONG" "${MINUTES:-3}" <<'PY'
import sys
import numpy as np
import soundfile as sf
from audio.demo_song import demo_song_path
DEMO_SONG = demo_song_path()
audio, rate = sf.read(DEMO_SONG, dtype="float32", always_2d=True)
n = round(float(sys.argv[2]) * 60 * rate)
sf.write(sys.argv[1], np.tile(audio, (n // len(audio) + 1, 1))[:n], rate)
print(f"{sys.argv[1]}: {n / rate:.1f} s at {rate} Hz from {DEMO_SONG}")
PY
timeout 560 python3 -m app.cli bench e2e --device cuda --commands render --audio "$SONG" \
    --size 1920x1080 --upscale 3 --repeats "${REPEATS:-2}" --cold-repeats "${COLD:-1}" \
    --no-imports --section "e2e-cuda-render-${MINUTES:-3}min" --out "$OUT/BENCHMARKS.md" 2>&1 \
    | filter | grep -v "^\[" | tail -25
} 2>&1 | tee "$OUT/e2e_song.log"
