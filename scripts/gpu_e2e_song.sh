#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: issue 16's goal as it is written —
# `kagura render` of a 3-minute song with the cuda defaults (Kagura's model, temporal, x3 to
# 1080p), from the shell, cold and warm (bench e2e). The song is the demo song played MINUTES*60 s
# in a row (its own file, written here: nothing else of that length ships with the project).
#   bash scripts/gpu_e2e_song.sh            (MINUTES=3, REPEATS=2, COLD=1)
#   SERVED=N: also N runs handed to a `kagura serve` started with the same options (the new
#   tree only)
#   AB=1: then the same in the base tree of .ab/base.tar.xz (`bash scripts/gpu_chain_ab.sh base
#   REV`), its table printed, not written; ROUNDS (1) rounds of new, base
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
e2e() {  # $1: the tree; $2: where its section goes
    ( cd "$1" && export PYTHONPATH=/tmp/site:$1
      timeout 560 python3 -m app.cli bench e2e --device cuda --commands render --audio "$SONG" \
          --size 1920x1080 --upscale 3 --repeats "${REPEATS:-2}" --cold-repeats "${COLD:-1}" \
          --no-imports --section "e2e-cuda-render-${MINUTES:-3}min" --out "$2" $3 2>&1 \
          | filter | grep -v "^\[" | tail -25 )
}
if [ "${AB:-0}" = 1 ]; then
    rm -rf /tmp/base; mkdir -p /tmp/base
    tar --exclude=./.whl --exclude=./.gl --exclude=./.ab -cf - . | tar -xf - -C /tmp/base
    tar -xJf .ab/base.tar.xz -C /tmp/base
    while read -r f; do rm -f "/tmp/base/$f"; done </tmp/base/REMOVED
    cp docs/BENCHMARKS.md /tmp/base.md
    for round in $(seq "${ROUNDS:-1}"); do
        echo "=== round $round, new"; e2e "$PWD" "$OUT/BENCHMARKS.md" "--served ${SERVED:-0}"
        echo "=== round $round, base"; e2e /tmp/base /tmp/base.md | grep "^| .kagura\|^- .render."
    done
else
    e2e "$PWD" "$OUT/BENCHMARKS.md" "--served ${SERVED:-0}"
fi
} 2>&1 | tee "$OUT/e2e_song.log"
