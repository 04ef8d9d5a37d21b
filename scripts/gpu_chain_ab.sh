#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: the GPU chain as one node (issue 13,
# pipeline/gpu_chain.py) checked and timed against the tree before it, in one machine's call.
#   bash scripts/gpu_chain_ab.sh tests   the GPU tests of the chain, live and offline
#   bash scripts/gpu_chain_ab.sh live    A/B, interleaved, ROUNDS (4) of bench live --headless
#                                        60 fps x3 (studio), then (OFFLINE=1, default) one round
#                                        of bench offline 1080p x3; LIVE_MODEL replaces the model
#                                        options, e.g. "--diffusion-random sd-turbo --upscale 4"
#   bash scripts/gpu_chain_ab.sh ab      A/B, interleaved (this tree, then the base, twice):
#                                        bench offline 1080p x3, kagura render and live from
#                                        the shell (bench e2e), bench live --headless 60 fps x3
#   bash scripts/gpu_chain_ab.sh pipeline  A/B, interleaved, ROUNDS (2) of bench pipeline: the live
#                                        chain held on its top rung and the render's chain
# The base tree is this one with REV's files put back (.ab/base.tar.xz, written here by
#   `bash scripts/gpu_chain_ab.sh base REV`, which needs git; REMOVED lists the files REV lacks;
#   packed: the call carries 64 MiB in all).
# Logs into $OUT/ab.log, this tree's figures into $OUT/BENCHMARKS.md.
set -uo pipefail
PART=${1:?tests, ab, live, pipeline or base REV}
if [ "$PART" = base ]; then
    REV=${2:?base REV}; rm -rf .ab /tmp/ab && mkdir -p .ab /tmp/ab
    git diff --name-only --diff-filter=M "$REV" -- . ':!docs' | while read -r f; do
        mkdir -p "/tmp/ab/$(dirname "$f")"; git show "$REV:$f" >"/tmp/ab/$f"; done
    git ls-files --others --exclude-standard -- '*.py' >/tmp/ab/REMOVED
    git diff --name-only --diff-filter=A "$REV" -- '*.py' >>/tmp/ab/REMOVED
    XZ_OPT=-9e tar -cJf .ab/base.tar.xz -C /tmp/ab .
    exit 0
fi
source scripts/gpu_env.sh || exit 1
cp docs/BENCHMARKS.md "$OUT/BENCHMARKS.md"; B=$OUT/BENCHMARKS.md
{
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())'
if [ "$PART" = tests ]; then
    timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_chain.py \
        tests/test_live_rungs_gpu.py tests/test_render_gpu_stages.py tests/test_temporal.py \
        tests/test_diffusion_gpu.py tests/test_bench_live_headless.py 2>&1 | tail -15
    timeout 120 python3 -m app.cli bench pipeline --device cuda --model pipeline/diffusion/kagura \
        --size 640x360 --out-size 1920x1080 --frames 200 --offline --out "$B" 2>&1 | filter | tail -30
fi
if [ "$PART" = ab ] || [ "$PART" = live ] || [ "$PART" = pipeline ]; then
    rm -rf /tmp/base; mkdir -p /tmp/base
    tar --exclude=./.whl --exclude=./.gl --exclude=./.ab -cf - . | tar -xf - -C /tmp/base
    tar -xJf .ab/base.tar.xz -C /tmp/base
    while read -r f; do rm -f "/tmp/base/$f"; done </tmp/base/REMOVED
fi
live() {  # $1: the tree; the rest: --no-write for the base
    ( cd "$1" && shift && export PYTHONPATH=/tmp/site:$PWD
      timeout 60 python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
          --seconds 10 --preset studio ${LIVE_MODEL:---diffusion kagura --upscale 3} --out "$B" "$@" 2>&1 | filter \
          | grep -A2 "audio→photon median" | tail -1 )
}
offline() {
    ( cd "$1" && shift && export PYTHONPATH=/tmp/site:$PWD
      timeout 150 python3 -m app.cli bench offline --device cuda --size 1920x1080 --seconds 12 \
          --preset studio --diffusion kagura --upscale 3 --encoders 4 --x264-preset ultrafast \
          --no-encode-only --out "$B" "$@" 2>&1 | filter | grep "fps," )
}
if [ "$PART" = live ]; then
    for round in $(seq "${ROUNDS:-4}"); do
        echo "=== round $round, new"; live "$PWD"
        echo "=== round $round, base"; live /tmp/base --no-write
    done
    if [ "${OFFLINE:-1}" = 1 ]; then
        echo "=== offline, new"; offline "$PWD"
        echo "=== offline, base"; offline /tmp/base --no-write
    fi
fi
if [ "$PART" = pipeline ]; then
    for round in $(seq "${ROUNDS:-2}"); do
        for arm in new base; do
            tree=$PWD; [ $arm = base ] && tree=/tmp/base
            echo "=== round $round, $arm"
            ( cd "$tree" && export PYTHONPATH=/tmp/site:$tree
              timeout 140 python3 -m app.cli bench pipeline --device cuda --model pipeline/diffusion/kagura \
                  --size 640x360 --out-size 1920x1080 --frames 300 --steps 1 --offline --batch 8 \
                  --out "$B" $([ $arm = base ] && echo --no-write) 2>&1 | filter \
                  | grep "end to end GPU\|GPU per frame\|^| CUDA graphs" )
        done
    done
fi
if [ "$PART" = ab ]; then
    for round in 1 2; do
        for arm in new base; do
            tree=$PWD; [ $arm = base ] && tree=/tmp/base
            echo "=== round $round, $arm"
            ( cd "$tree" && export PYTHONPATH=/tmp/site:$tree
              timeout 150 python3 -m app.cli bench offline --device cuda --size 1920x1080 --seconds 12 \
                  --preset studio --diffusion kagura --upscale 3 --encoders 4 --x264-preset ultrafast \
                  --no-encode-only --out "$B" $([ $arm = base ] && echo --no-write) 2>&1 | filter | grep "fps,"
              timeout 120 python3 -m app.cli bench e2e --device cuda --commands render live \
                  --size 1920x1080 --upscale 3 --repeats 1 --cold-repeats 0 --no-imports --out "$B" \
                  $([ $arm = base ] && echo --no-write) 2>&1 | filter | grep "^| .kagura\|^- .live. warm\|^- .render. warm"
              timeout 60 python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
                  --seconds 10 --preset studio --diffusion kagura --upscale 3 --out "$B" \
                  $([ $arm = base ] && echo --no-write) 2>&1 | filter | grep -A2 "audio→photon median" | tail -1 )
        done
    done
fi
} 2>&1 | tee "$OUT/ab.log"
