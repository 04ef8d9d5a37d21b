#!/usr/bin/env bash
# Regenerate the pictures in the README from the demo song (run after scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/img
song=$(.venv/bin/python -c 'from audio.demo_song import demo_song_path; print(demo_song_path())')
AT=${AT:-12.0}
.venv/bin/kagura still "$song" --at "$AT" -o docs/img/demo.png -y --preset studio --size 1280x720
for preset in studio ink-wash cyberpunk; do
    .venv/bin/kagura still "$song" --at "$AT" -o "docs/img/preset-$preset.png" -y --preset "$preset" --size 640x360
done
