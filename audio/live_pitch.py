"""Causal pitch and loudness for live input: 32 ms trailing window, 10 ms hop, 16 kHz.

A thin streaming wrapper around the offline feature code: each hop runs
`audio.features.periodicity` (FFT autocorrelation, window-unbiased, octave guard) and
`audio.features.rms_dbfs` on the last `window` samples, so live and offline agree on what
"voiced" and "pitch" mean. About 0.12-0.17 ms per hop on one CPU core
(see tests/test_live_motion.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audio.features import ANALYSIS_RATE, periodicity, rms_dbfs

__all__ = ["LivePitch", "PitchFrame"]


@dataclass(frozen=True, slots=True)
class PitchFrame:
    """What the last `window` samples sounded like, as of sample `end` (exclusive)."""

    end: int  # samples pushed so far when this frame was made
    level_db: float  # RMS dBFS of the window
    periodicity: float  # 0..1
    voiced: bool
    pitch_hz: float | None  # None when unvoiced


class LivePitch:
    """Push mono float samples at `rate`; get one `PitchFrame` per `hop` samples."""

    def __init__(
        self,
        rate: int = ANALYSIS_RATE,
        window_s: float = 0.032,
        hop_s: float = 0.010,
        voiced_periodicity: float = 0.45,
        gate_db: float = -55.0,
    ):
        self.rate = rate
        self.window = round(window_s * rate)
        self.hop = round(hop_s * rate)
        if self.window < 64 or not 0 < self.hop <= self.window:
            raise ValueError(f"bad window/hop: {self.window}/{self.hop} samples")
        self.voiced_periodicity = voiced_periodicity
        self.gate_db = gate_db
        self._buf = np.zeros((1, self.window), np.float32)  # the trailing window
        self._fill = 0  # samples of the current hop already in the buffer's tail
        self._total = 0

    def push(self, samples: np.ndarray) -> list[PitchFrame]:
        """Append `samples`; return the frames completed by them (oldest first)."""
        x = np.asarray(samples, np.float32).ravel()
        out: list[PitchFrame] = []
        buf = self._buf[0]
        i = 0
        while i < len(x):
            take = min(self.hop - self._fill, len(x) - i)
            buf[:-take] = buf[take:]
            buf[-take:] = x[i : i + take]
            i += take
            self._fill += take
            self._total += take
            if self._fill == self.hop:
                self._fill = 0
                out.append(self._frame())
        return out

    def _frame(self) -> PitchFrame:
        level = float(rms_dbfs(self._buf)[0])
        per, f0 = periodicity(self._buf, self.rate)
        p = float(per[0])
        voiced = p > self.voiced_periodicity and level > self.gate_db
        return PitchFrame(self._total, level, p, voiced, float(f0[0]) if voiced else None)
