"""Rebuild the held-out clips that the evaluation of Kagura's own model measures flicker and
ghosting on; they are stored because the GPU machine that trains has no librosa.

    training/heldout_clip.npz          the demo song's motion from 12 s to 20 s at 30 fps: the
                                       clip settings are chosen on
    training/heldout_clip_speech.npz   8 s of espeak-ng speech (another voice, another source:
                                       speech, not singing) at 30 fps: the clip that confirms
                                       them, which nothing is tuned on

    .venv/bin/python scripts/build_heldout_clip.py [song|speech|all]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from audio.analysis import analyze_clip
from audio.decode import decode_audio
from audio.demo_song import demo_song_path
from core.avatar import AvatarTrack
from training.poses import CLIP_FILE, SPEECH_CLIP_FILE, save_clip

START_S, END_S, FPS = 12.0, 20.0, 30
SPEECH_S = 8.0
# a male voice, faster than the tests' (en-us+f3, 150 wpm), with pauses: the head settles and
# restarts, which the song's steady sway never does
SPEECH_VOICE, SPEECH_WPM = "en-us+m3", "165"
SPEECH_TEXT = (
    "Good evening, everyone, and welcome back to the stream. [[_:_:_:]] Tonight we are going "
    "to try something new. [[_:_:]] Are you ready? Wow, look at all of you! [[_:_:_:]] "
    "Okay, okay, let me read the chat first."
)


def cut(track: AvatarTrack, a: int, b: int) -> AvatarTrack:
    return AvatarTrack(
        fps=track.fps,
        pts_ns=track.pts_ns[a:b] - track.pts_ns[a],
        scalars={k: v[a:b].copy() for k, v in track.scalars.items()},
        vowels=track.vowels[a:b].copy(),
        expressions={k: v[a:b].copy() for k, v in track.expressions.items()},
    )


def song_clip() -> AvatarTrack:
    track = analyze_clip(decode_audio(demo_song_path()), FPS, seed=0)
    return cut(track, int(START_S * FPS), int(END_S * FPS))


def speech_clip() -> AvatarTrack:
    if shutil.which("espeak-ng") is None:
        raise SystemExit("espeak-ng is missing: run scripts/setup.sh (it installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        cmd = ["espeak-ng", "-v", SPEECH_VOICE, "-s", SPEECH_WPM, "-w", str(wav), SPEECH_TEXT]
        subprocess.run(cmd, check=True)
        track = analyze_clip(decode_audio(wav), FPS, seed=1)
    n = int(SPEECH_S * FPS)
    if len(track) < n:
        raise SystemExit(f"speech clip: {len(track)} frames, expected at least {n}")
    return cut(track, 0, n)


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which not in ("song", "speech", "all"):
        raise SystemExit(f"build_heldout_clip: expected song, speech or all, got {which!r}")
    for name, make, path in (
        ("song", song_clip, CLIP_FILE),
        ("speech", speech_clip, SPEECH_CLIP_FILE),
    ):
        if which in (name, "all"):
            track = make()
            save_clip(track, path)
            print(
                f"{path}: {len(track)} frames, mouth open mean "
                f"{np.mean(track.scalars['mouth_open']):.2f}"
            )


if __name__ == "__main__":
    main()
