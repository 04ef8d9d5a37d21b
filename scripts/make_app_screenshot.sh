#!/usr/bin/env bash
# Regenerate docs/img/app.png: the live app playing the demo song under Xvfb (after setup.sh).
# PRESET=cyberpunk and SECONDS_TO_RUN=8 change what is shown.
set -euo pipefail
cd "$(dirname "$0")/.."
song=$(.venv/bin/python -c 'from audio.demo_song import demo_song_path; print(demo_song_path())')
out=${1:-docs/img/app.png}
export KAGURA_CONFIG_DIR=$(mktemp -d)  # a fresh settings file: the screenshot shows defaults
trap 'rm -rf "$KAGURA_CONFIG_DIR"' EXIT
xvfb-run -a -s "-screen 0 1440x900x24" .venv/bin/kagura live --audio-file "$song" \
    --preset "${PRESET:-studio}" --no-play-out --quit-after "${SECONDS_TO_RUN:-6}" --screenshot "$out"
echo "wrote $out"
