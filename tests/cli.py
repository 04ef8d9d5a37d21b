"""The real `kagura` command line in a fresh process, and what a rendered file holds: shared by
the end-to-end test modules (imported from here, not from one another)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import av

REPO = Path(__file__).resolve().parent.parent


def kagura(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real command line in a fresh process, as a user would (`env`: extra variables)."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


def probe(path: Path, fps: float) -> dict:
    """Streams, codecs, frame count and the video's and audio's seconds of a rendered file
    (`fps`: the render's, for the last frame's duration)."""
    with av.open(str(path)) as c:
        video = [s for s in c.streams if s.type == "video"]
        audio = [s for s in c.streams if s.type == "audio"]
        info = {"n_video": len(video), "n_audio": len(audio)}
        v, a = video[0], audio[0]
        info["vcodec"], info["acodec"] = v.codec_context.name, a.codec_context.name
        frames = [f for f in c.decode(video=0)]
    info["frames"] = len(frames)
    info["video_s"] = float(frames[-1].pts * frames[-1].time_base) + 1.0 / fps
    with av.open(str(path)) as c:
        samples = 0
        rate = c.streams.audio[0].rate
        first_pts = None
        for f in c.decode(audio=0):
            if first_pts is None:
                first_pts = float(f.pts * f.time_base)
            samples += f.samples
    info["audio_s"] = samples / rate
    return info
