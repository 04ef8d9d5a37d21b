#!/usr/bin/env bash
# On the GPU machine (the device tool), from the repo root: the GPU tests of the picture's
# stages (temporal, diffusion, Kagura's model), then the live bench at 60 fps with the built-in
# idol and with an imported layered avatar (.avatar/art2048.psd.gz, written here by
# tests/avatar_art.write_psd and gzipped to travel), in one call so the two are comparable.
set -uo pipefail
source scripts/gpu_env.sh || exit 1
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_temporal.py \
    tests/test_diffusion_gpu.py tests/test_kagura_model_gpu.py 2>&1 | tail -4
gunzip -c .avatar/art2048.psd.gz > /tmp/art2048.psd
for avatar in "" "--avatar /tmp/art2048.psd"; do
    python3 -m app.cli bench live --headless --device cuda --fps 60 --present-lead-ms 4 \
        --seconds 10 --preset studio --diffusion kagura --upscale 3 $avatar --no-write 2>&1 \
        | grep -A2 "audio→photon median" | tail -1
done
