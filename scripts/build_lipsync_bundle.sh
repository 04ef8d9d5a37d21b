#!/usr/bin/env bash
# Build .lip/, what lip-sync training on the lent GPU machine needs (its 16 cores; the machine
# has no speech synthesizers): the corpus cache as FLAC, espeak-ng's sustained vowels and the
# onset signal (scripts/lipsync_bundle.py pack: the base recipes' entries and the Japanese
# and Kokoro-English sources'; the extra-* build settings' do not fit), and the few wheels the
# split bench imports there (librosa and its helpers, soundfile), taken from the GPU bundle
# (scripts/build_gpu_bundle.sh) without its picture packages, so that it fits the device tool's
# 64 MiB with the working tree.
#   bash scripts/build_lipsync_bundle.sh     # then scripts/gpu_lipsync_split.sh there
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qs '^/.lip/$' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.lip/ >>.git/info/exclude; }
[ -f .whl/site.tar.xz ] || bash scripts/build_gpu_bundle.sh
rm -rf .lip /tmp/kagura-lip-site && mkdir -p .lip /tmp/kagura-lip-site
tar -xJf .whl/site.tar.xz -C /tmp/kagura-lip-site \
    --exclude='./av*' --exclude='./diffusers*' --exclude='./skia*' --exclude='./psd_tools*' \
    --exclude='./realesrgan*' --exclude='./pydantic*' --exclude='./annotated*' \
    --exclude='./typing_insp*' --exclude='./importlib_metadata*' --exclude='./attr*' \
    --exclude='./licensing'
XZ_OPT="-9 -T2" tar -cJf .lip/site.tar.xz -C /tmp/kagura-lip-site .
PYTHONPATH=$PWD .venv/bin/python scripts/lipsync_bundle.py pack .lip
# what a call carries: the working tree and .lip, 64 MiB at most
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
lip=$(du -cb .lip/* | tail -1 | cut -f1)
echo "working tree $tree bytes + .lip $lip bytes = $(( (tree + lip) >> 20 )) MiB of the 64 a call carries"
