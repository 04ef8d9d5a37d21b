#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: issue 16's first frames, checked and
# timed against the tree before the change in one call — `kagura live`'s diffusion set up beside
# the first frames (LiveGpu.paint_beside: the GPU tests, then bench e2e of live, ROUNDS (3)
# interleaved rounds, then the live path at 60 fps), and with SERVED=1 a served `kagura render`
# of a 3-minute song the server has not analysed (the analysis's parts on threads), new then
# base. The base tree is .ab/base.tar.xz (`bash scripts/gpu_chain_ab.sh base REV` writes it;
# REV e81a9c0 for this script's changes). Every step logs into $OUT/first.log as it goes and
# has its own time limit; this tree's figures go into $OUT/BENCHMARKS.md. TESTS=0 and LIVE=0 leave
# out the GPU tests and the 60 fps bench live; ROUNDS=0 the e2e rounds (to fit one call's limit);
# SERVED_ARMS=new serves this tree only.
#   bash scripts/gpu_first_frames.sh
set -uo pipefail
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"; B=$OUT/BENCHMARKS.md; L=$OUT/first.log
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())' >>"$L" 2>&1
date -u >>"$L"
if [ "${TESTS:-1}" = 1 ]; then
    timeout 150 python3 -m pytest -q -s -p no:cacheprovider -m gpu tests/test_live_rungs_gpu.py \
        tests/test_bench_live_headless.py >"$OUT/gpu-tests.txt" 2>&1
    tail -8 "$OUT/gpu-tests.txt" >>"$L"
fi
rm -rf /tmp/base; mkdir -p /tmp/base
tar --exclude=./.whl --exclude=./.gl --exclude=./.ab -cf - . | tar -xf - -C /tmp/base
tar -xJf .ab/base.tar.xz -C /tmp/base
while read -r f; do rm -f "/tmp/base/$f"; done </tmp/base/REMOVED
e2e() {  # $1 arm, $2 round, $3 commands
    local tree=$PWD; [ "$1" = base ] && tree=/tmp/base
    ( cd "$tree" && export PYTHONPATH=/tmp/site:$tree
      timeout 150 python3 -m app.cli bench e2e --device cuda --commands $3 --size 1920x1080 \
          --upscale 3 --repeats 2 --cold-repeats 0 --no-imports --out "$B" \
          $([ "$1" = base ] && echo --no-write) >"$OUT/e2e-$1-$2.txt" 2>&1 )
    echo "=== $1 round $2 ($3)" >>"$L"
    grep "^| .kagura\|^- .live. warm\|^- .app. warm" "$OUT/e2e-$1-$2.txt" >>"$L"
}
for round in $(seq "${ROUNDS:-3}"); do
    e2e new "$round" live; e2e base "$round" live
done

for arm in $([ "${LIVE:-1}" = 1 ] && echo new base); do
    tree=$PWD; [ $arm = base ] && tree=/tmp/base
    ( cd "$tree" && export PYTHONPATH=/tmp/site:$tree
      timeout 60 python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
          --seconds 10 --preset studio --diffusion kagura --upscale 3 --out "$B" \
          $([ $arm = base ] && echo --no-write) >"$OUT/live-$arm.txt" 2>&1 )
    echo "=== bench live, $arm" >>"$L"
    grep -A2 "audio→photon median" "$OUT/live-$arm.txt" | head -3 >>"$L"
done
date -u >>"$L"
if [ "${SERVED:-0}" = 1 ]; then
    SONG=/tmp/song-3min.flac
    python3 - "$SONG" <<'PY' >>"$L" 2>&1
import sys
import numpy as np
import soundfile as sf
from audio.demo_song import demo_song_path
audio, rate = sf.read(demo_song_path(), dtype="float32", always_2d=True)
n = 180 * rate
sf.write(sys.argv[1], np.tile(audio, (n // len(audio) + 1, 1))[:n], rate)
PY
    for arm in ${SERVED_ARMS:-new base}; do
        tree=$PWD; [ $arm = base ] && tree=/tmp/base
        ( cd "$tree" && export PYTHONPATH=/tmp/site:$tree
          timeout 280 python3 -m app.cli bench e2e --device cuda --commands render --audio "$SONG" \
              --size 1920x1080 --upscale 3 --repeats 0 --cold-repeats 0 --served 2 --no-imports \
              --section e2e-cuda-render-3min-served --out "$B" \
              $([ $arm = base ] && echo --no-write) >"$OUT/served-$arm.txt" 2>&1 )
        echo "=== served 3-min render, $arm" >>"$L"
        grep "^| .kagura\|^- .render. served" "$OUT/served-$arm.txt" >>"$L"
    done
fi
date -u >>"$L"
