"""Offline analysis: an `AudioClip` in, an `AvatarTrack` at the video frame rate out.

`analyze_clip` is the one call the music-video renderer makes. Frame ``i`` has
``pts_ns = core.clock.frame_pts_ns(i, fps)`` and the clip needs
``frame_count(clip.num_samples, clip.sample_rate, fps)`` frames (the last partial one included).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from audio.decode import AudioClip
from audio.features import ANALYSIS_RATE, AudioFeatures, compute_features, resample_mono
from audio.lipsync import FormantLipSync, LipSync
from audio.motion import Motion, MotionParams, motion
from core.avatar import RANGES, AvatarTrack
from core.clock import frame_count, frame_pts_ns

__all__ = ["analyze_clip", "analyze_mono", "default_lipsync"]


def default_lipsync(model: str = "default") -> LipSync:
    """The engine `render` and `demo` use: the MFCC engine with the shipped voice/vowel net of
    `model` (`audio.vowel_net.LIPSYNC_MODELS`; `audio.offline_lipsync.MfccLipSync`: it hears
    the voice over a band and shuts the mouth in vocal pauses; docs/BENCHMARKS.md), or the
    formant engine where the default net is missing. The MFCC engine reads the user's
    calibrated profile when there is one, as `kagura live` does (docs/ARCHITECTURE.md,
    "Lip-sync, offline and live")."""
    from audio.vowel_net import shipped_net

    if model == "default" and shipped_net() is None:
        return FormantLipSync()
    from audio.offline_lipsync import MfccLipSync

    return MfccLipSync(net=model)


def analyze_mono(
    mono: np.ndarray,
    sample_rate: int,
    fps: int,
    seed: int = 0,
    lipsync: LipSync | None = None,
    motion_params: MotionParams | None = None,
    lipsync_model: str = "default",
) -> tuple[AvatarTrack, AudioFeatures, Motion]:
    """Like `analyze_clip`, on a mono signal, also returning the features and motion events."""
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    n = frame_count(len(mono), sample_rate, fps)
    pts = np.array([frame_pts_ns(i, fps) for i in range(n)], np.int64)
    # Resample once; every engine accepts any rate, and 16 kHz is what ours use.
    y = resample_mono(mono, sample_rate, ANALYSIS_RATE)
    with ThreadPoolExecutor(1, thread_name_prefix="features") as pool:
        # the features and the lip-sync share nothing but the signal: side by side (numpy
        # leaves the GIL in its array work), for the render's first frame waits on both
        features = pool.submit(compute_features, y, ANALYSIS_RATE, fps, n)
        lips = (lipsync or default_lipsync(lipsync_model)).analyze(y, ANALYSIS_RATE, fps, n)
        feat = features.result()
    mot = motion(feat, seed=seed, params=motion_params)

    track = AvatarTrack.neutral(pts, fps)
    for name, arr in mot.scalars.items():
        track.scalars[name] = arr
    lo, hi, _ = RANGES["mouth_open"]
    track.scalars["mouth_open"] = np.clip(lips.open, lo, hi).astype(np.float32)
    track.vowels = np.asarray(lips.vowels, np.float32)
    happy = np.clip(0.5 * track.scalars["eye_smile"] + 0.5 * feat.excitement, 0.0, 1.0)
    track.expressions = {"happy": happy.astype(np.float32)}
    track.validate()
    return track, feat, mot


def analyze_clip(
    clip: AudioClip,
    fps: int,
    seed: int = 0,
    lipsync: LipSync | None = None,
    lipsync_model: str = "default",
) -> AvatarTrack:
    """Lip-sync and motion for every video frame of `clip` at `fps` (deterministic in `seed`);
    the lip-sync is `lipsync`, else `default_lipsync(lipsync_model)`."""
    track, _, _ = analyze_mono(
        clip.mono(), clip.sample_rate, fps, seed=seed, lipsync=lipsync, lipsync_model=lipsync_model
    )
    return track
