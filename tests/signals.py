"""Test signals shared by several test modules: synthetic ones, and real speech from espeak-ng."""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest


def espeak_speech(path: Path, text: str) -> Path:
    """`text` spoken by espeak-ng (en-us+f3, 150 words/min) into the WAV `path` (22.05 kHz);
    `[[_:_:_:]]` in the text is a pause."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is missing: run scripts/setup.sh (it installs it)")
    subprocess.run(["espeak-ng", "-v", "en-us+f3", "-s", "150", "-w", str(path), text], check=True)
    return path


def click_track(seconds: float, bpm: float, sr: int, dtype=np.float32) -> np.ndarray:
    """A 1.5 kHz, 5 ms-decay click on every beat at `bpm`, `seconds` long, in `dtype`."""
    y = np.zeros(int(seconds * sr), dtype)
    k = np.arange(int(0.03 * sr))
    click = 0.6 * np.sin(2 * np.pi * 1500 * k / sr) * np.exp(-k / (0.005 * sr))
    for b in np.arange(0.0, seconds, 60.0 / bpm):
        i = round(b * sr)
        y[i : i + len(click)] += click[: len(y) - i]
    return y


def speech_then_silence(path: Path, speech_s: float = 1.0, silence_s: float = 1.6) -> None:
    """espeak-ng speech trimmed to `speech_s`, then `silence_s` of digital silence (16-bit
    WAV)."""
    raw = path.with_suffix(".espeak.wav")
    subprocess.run(
        ["espeak-ng", "-w", str(raw), "Hello, I am Kagura and I love singing"], check=True
    )
    with wave.open(str(raw)) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    x = x[: int(speech_s * rate)]
    x = np.concatenate([x, np.zeros(int(silence_s * rate), np.int16)])
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())
