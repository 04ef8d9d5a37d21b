"""`kagura calibrate [--mic NAME] [--seconds 2] [--profile PATH]`: record your vowels.

Prompts for A I U E O (and an optional hum for N), records each for `--seconds`, shows how
confidently the new profile recognises each recording, and saves it to your profile
(``core.paths.profile_file()``, or ``--profile``); an existing
profile is first copied to a timestamped backup beside it.

Recording goes through ``audio.capture.record`` — the same device choice, rate negotiation and
errors as live capture. The microphone is `--mic`, as in `kagura live` (`--device` means the
compute device everywhere; `--device NAME` here still works, with a deprecation notice).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

PROMPTS = {
    "A": "'aaa' as in 'father' (あ)",
    "I": "'iii' as in 'see' (い)",
    "U": "'uuu' as in 'food' (う)",
    "E": "'eee' as in 'bed' (え)",
    "O": "'ooo' as in 'go' (お)",
    "N": "a closed-mouth hum 'nnn' (ん) — press Enter, or type s to skip",
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("calibrate", help="record your vowels for live lip-sync")
    p.add_argument("--mic", default=None, help="microphone: name or index (default: system)")
    p.add_argument("--device", default=None, help="deprecated spelling of --mic")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per vowel (default 2)")
    p.add_argument("--profile", type=Path, default=None, help="where to save (default: yours)")
    return p


def microphone(args: argparse.Namespace) -> str | None:
    """--mic; the older `--device NAME` still picks the microphone, with a one-line notice."""
    mic, old = getattr(args, "mic", None), getattr(args, "device", None)
    if old is not None:
        print(
            f"kagura calibrate: --device {old!r} for the microphone is deprecated; "
            f"use --mic {old!r}",
            file=sys.stderr,
        )
    return mic if mic is not None else old


def _recorder():
    from audio.capture import record

    return record


def run(args: argparse.Namespace, ask=input, say=print) -> int:
    from app.errors import UsageError
    from audio.calibration import (
        VowelMatcher,
        calibrate_from_recordings,
        save_profile,
        user_profile_path,
        voiced_mask,
    )
    from audio.features import resample_mono
    from audio.mfcc import mfcc_frames

    if not (0.5 <= args.seconds <= 30):
        raise UsageError(f"--seconds must be between 0.5 and 30, got {args.seconds}")
    mic = microphone(args)
    record = _recorder()
    recs: dict[str, np.ndarray] = {}
    sr = 16000
    for v, prompt in PROMPTS.items():
        answer = ask(f"[{v}] Hold {prompt} for {args.seconds:g} s. Enter to start: ")
        if v == "N" and answer.strip().lower().startswith("s"):
            continue
        x, sr_v = record(args.seconds, mic)
        if sr_v != sr:  # profiles are made at the live engine's 16 kHz
            x = resample_mono(x, sr_v, sr)
        peak = float(np.max(np.abs(x))) if len(x) else 0.0
        say(f"    recorded {len(x) / sr:.1f} s, peak {20 * np.log10(peak + 1e-9):.0f} dBFS")
        recs[v] = np.asarray(x, np.float32)
    try:
        profile = calibrate_from_recordings(recs, sr, source="kagura calibrate")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    m = VowelMatcher(profile)
    from core.avatar import VOWELS

    for v, x in recs.items():
        f = mfcc_frames(x, sr, profile.mfcc)
        mask = voiced_mask(f.level_db, f.flatness, f.periodicity)
        p = m.probs(f.mfcc[mask]).mean(axis=0)
        best = VOWELS[int(np.argmax(p))]
        say(f"    {v}: recognised as {best} with confidence {p[VOWELS.index(v)]:.0%}")
    path = args.profile or user_profile_path()
    backup = save_profile(profile, path)
    if backup:
        say(f"kagura: previous profile kept as {backup}", file=sys.stderr)
    say(f"kagura: wrote {path}", file=sys.stderr)
    return 0
