"""Rebuild training/heldout_clip.npz: the demo song's motion from 12 s to 20 s at 30 fps.

The evaluation of Kagura's own model (kagura train) measures flicker on this audio-driven clip;
it is stored because the GPU machine that trains has no librosa.
    .venv/bin/python scripts/build_heldout_clip.py
"""

from __future__ import annotations

import numpy as np

from audio.analysis import analyze_clip
from audio.decode import decode_audio
from audio.demo_song import demo_song_path
from core.avatar import AvatarTrack
from training.poses import CLIP_FILE, save_clip

START_S, END_S, FPS = 12.0, 20.0, 30


def main() -> None:
    track = analyze_clip(decode_audio(demo_song_path()), FPS, seed=0)
    a, b = int(START_S * FPS), int(END_S * FPS)
    cut = AvatarTrack(
        fps=FPS,
        pts_ns=track.pts_ns[a:b] - track.pts_ns[a],
        scalars={k: v[a:b].copy() for k, v in track.scalars.items()},
        vowels=track.vowels[a:b].copy(),
        expressions={k: v[a:b].copy() for k, v in track.expressions.items()},
    )
    save_clip(cut)
    print(
        f"{CLIP_FILE}: {len(cut)} frames, mouth open mean {np.mean(cut.scalars['mouth_open']):.2f}"
    )


if __name__ == "__main__":
    main()
