"""The real `kagura` command line in a fresh process, and what a rendered file holds: shared by
the end-to-end test modules (imported from here, not from one another)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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


def signal_when(
    proc: subprocess.Popen, ready: Callable[[], bool], sig: int, settle_s: float = 0.0
) -> str:
    """Wait (at most 120 s) until `ready()`, then `settle_s` more, send `proc` the signal `sig`
    and return its stderr once it ended; the process must still be running when signalled (it
    is killed if anything fails on the way)."""
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                break
            time.sleep(0.1)
        time.sleep(settle_s)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return stderr
