"""Synthetic test signals shared by the motion tests."""

from __future__ import annotations

import numpy as np


def click_track(seconds: float, bpm: float, sr: int, dtype=np.float32) -> np.ndarray:
    """A 1.5 kHz, 5 ms-decay click on every beat at `bpm`, `seconds` long, in `dtype`."""
    y = np.zeros(int(seconds * sr), dtype)
    k = np.arange(int(0.03 * sr))
    click = 0.6 * np.sin(2 * np.pi * 1500 * k / sr) * np.exp(-k / (0.005 * sr))
    for b in np.arange(0.0, seconds, 60.0 / bpm):
        i = round(b * sr)
        y[i : i + len(click)] += click[: len(y) - i]
    return y
