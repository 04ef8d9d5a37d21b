"""`kagura lipsync AUDIO --json OUT [--live] [--profile PATH] [--method distance|cosine]
[--lipsync-model default|japanese]`.

Writes ``{"rate_hz": 100, "frames": [{"t": s, "open": 0..1, "A": w, ..., "N": w}, ...]}``;
vowel weights sum to 1 on every frame (N = 1 when silent). Offline (default): `MfccLipSync`
with look-ahead, ``t = i / rate_hz``. ``--live``: the causal `LiveLipSync` fed 5 ms blocks as a
sound card would; each frame's ``t`` is the audio time of the last sample it used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from core.avatar import VOWELS

RATE_HZ = 100


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("lipsync", help="mouth openness and vowels of an audio file → JSON")
    p.add_argument("audio", type=Path, help="audio file (anything FFmpeg reads)")
    p.add_argument("--json", type=Path, required=True, dest="json_out", help="output .json")
    p.add_argument("--live", action="store_true", help="causal live engine (5 ms blocks)")
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="lip-sync profile (default: yours, else built-in)",
    )
    p.add_argument("--method", choices=["distance", "cosine"], default="distance")
    from app.config import add_lipsync_model_option

    add_lipsync_model_option(p)
    p.add_argument(
        "-y", "--overwrite", action="store_true", help="replace the output file if it exists"
    )
    return p


def _profile(path: Path | None):
    from audio.calibration import load_profile, load_user_or_default

    return load_user_or_default() if path is None else load_profile(path)


def lipsync_frames(
    mono: np.ndarray,
    sample_rate: int,
    profile,
    live: bool,
    method: str = "distance",
    model: str = "default",
) -> list[dict]:
    from audio.features import resample_mono

    sr = profile.sample_rate
    y = resample_mono(np.asarray(mono, np.float32), sample_rate, sr)
    frames = []
    if live:
        from audio.live_lipsync import LiveLipSync

        eng = LiveLipSync(profile, sr, hop_ms=1000.0 / RATE_HZ, method=method, net=model)
        for f in eng.process(y, block=sr // 200):
            row = {"t": round(f.t, 6), "open": round(f.open, 4)}
            row.update({v: round(float(w), 4) for v, w in zip(VOWELS, f.vowels, strict=True)})
            frames.append(row)
        return frames
    from audio.offline_lipsync import MfccLipSync
    from core.clock import frame_count

    n = frame_count(len(y), sr, RATE_HZ)
    res = MfccLipSync(profile, method=method, net=model).analyze(y, sr, RATE_HZ, n)
    for i in range(n):
        row = {"t": round(i / RATE_HZ, 6), "open": round(float(res.open[i]), 4)}
        row.update({v: round(float(w), 4) for v, w in zip(VOWELS, res.vowels[i], strict=True)})
        frames.append(row)
    return frames


def run(args: argparse.Namespace) -> int:
    from app.errors import UsageError
    from audio.decode import decode_audio
    from core.atomic_write import atomic_write_text
    from pipeline.sinks.output import check_output

    out = Path(args.json_out)
    # never over the audio or the profile read, an existing file only with --overwrite
    check_output(
        out,
        [args.audio, args.profile],
        overwrite=getattr(args, "overwrite", False),
        option="--json",
    )
    if not out.parent.is_dir():
        raise UsageError(f"--json {out}: folder {out.parent} does not exist")
    profile = _profile(args.profile)  # before decoding: a bad profile fails fast
    model = args.lipsync_model or "default"
    from app.config import check_lipsync_model_option

    check_lipsync_model_option(model)
    if args.live and model != "default":
        # as `kagura live`: its live half did not beat the default's (docs/BENCHMARKS.md)
        raise UsageError(f"--lipsync-model {model}: offline only; --live uses the default model")
    clip = decode_audio(args.audio)  # non-finite samples are refused there: no NaN in the JSON
    frames = lipsync_frames(clip.mono(), clip.sample_rate, profile, args.live, args.method, model)
    doc = {"rate_hz": RATE_HZ, "live": bool(args.live), "frames": frames}
    # allow_nan=False: a value that is not a number is a bug, never invalid JSON on disk
    atomic_write_text(out, json.dumps(doc, separators=(",", ":"), allow_nan=False))
    return 0
