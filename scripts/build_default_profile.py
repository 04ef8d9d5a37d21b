"""Build audio/profiles/default.json from espeak-ng vowels (reproducible: same espeak-ng, same file).

    .venv/bin/python scripts/build_default_profile.py [--out audio/profiles/default.json]

Training voices: `audio.calibration.TRAIN_VOICES` (male and female, English and Japanese,
several pitches). `audio.calibration.HELDOUT_VOICES` are never used here; tests and
`kagura bench lipsync` measure accuracy on them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audio.calibration import (
    DEFAULT_PROFILE,
    TRAIN_VOICES,
    Profile,
    save_profile,
    synth_vowel,
    templates_from_signal,
)
from audio.mfcc import MfccSettings
from pipeline.avatar import VOWELS


def build(templates_per_voice: int = 3) -> Profile:
    s = MfccSettings()
    sr = 16000
    templates: dict[str, list[np.ndarray]] = {v: [] for v in VOWELS[:5]}
    for voice, pitch in TRAIN_VOICES:
        for v in VOWELS[:5]:  # no N: espeak-ng's English voices do not sustain a hum
            x = synth_vowel(voice, pitch, v, sr)
            t, _ = templates_from_signal(x, sr, s, templates_per_voice)
            templates[v].append(t)
    voices = ", ".join(f"{v} -p {p}" for v, p in TRAIN_VOICES)
    return Profile(
        sr,
        s,
        {v: np.concatenate(t) for v, t in templates.items()},
        -60.0,
        "",  # no timestamp: the file is reproducible
        f"scripts/build_default_profile.py: espeak-ng sustained vowels of {voices}",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_PROFILE)
    args = ap.parse_args()
    prof = build()
    if args.out.exists():
        args.out.unlink()  # the shipped default is regenerated, not backed up
    save_profile(prof, args.out)
    n = sum(len(t) for t in prof.templates.values())
    print(f"wrote {args.out}: {n} templates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
