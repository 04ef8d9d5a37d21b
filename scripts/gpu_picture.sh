#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: carry training of Kagura's own model
# on from the shipped weights (scripts/gpu_train.sh), then measure what the picture costs:
# the README's contact sheet ($OUT/contact_sheet.jpg), offline 1080p finished frames/s with the
# cuda defaults (640x360 x3) and at 960x540 x2, and the live audio-to-photon latency at 60 fps.
# Everything else returns in $OUT/weights.tar and $OUT/docs.tar (see gpu_train.sh); logs in
# $OUT/bench.log.
#   bash scripts/gpu_picture.sh MINUTES [more kagura train options, e.g. --loss-weight gan=0.1]
set -uo pipefail
minutes=${1:-3.5}
shift || true
bash scripts/gpu_train.sh --init pipeline/diffusion/kagura --steps 6000 --ae-steps 0 \
    --gan-start 0 --minutes "$minutes" --export-partial "$@"
source scripts/gpu_env.sh || exit 1
mkdir -p /tmp/docs && tar -xf "$OUT/docs.tar" -C /tmp && B=/tmp/docs/BENCHMARKS.md
export KAGURA_WEIGHTS_DIR=/tmp/kagura  # the weights just trained
{
python3 scripts/contact_sheet.py --device cuda --out "$OUT/contact_sheet.jpg" 2>&1 | filter
for extra in "--upscale 3" "--diffusion-size 960x540 --upscale 2"; do
    python3 -m app.cli bench offline --device cuda --size 1920x1080 --seconds 12 --preset studio \
        --diffusion kagura $extra --encoders 4 --x264-preset ultrafast --out "$B" 2>&1 | filter | tail -2
done
python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 --seconds 10 \
    --preset studio --diffusion kagura --upscale 3 --out "$B" 2>&1 | filter | grep -A2 "audio→photon median" | tail -1
} 2>&1 | tee "$OUT/bench.log"
tar -cf "$OUT/docs.tar" -C /tmp docs
