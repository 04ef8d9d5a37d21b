"""Offline lip-sync: mouth openness and vowel weights (A I U E O N) per video frame.

`LipSync` is the interface every engine implements (the calibrated live MFCC engine of a later
issue fills the same protocol). `FormantLipSync` is the first, calibration-free engine:

* **Openness** from loudness: uLipSync maps RMS linearly from -50 dBFS (closed) to -30 dBFS
  (open) (docs/ARCHITECTURE.md, "Outside facts"). We keep the 20 dB span but anchor it to the clip's own loud
  reference (95th percentile), so a quiet recording still moves, and multiply by a gate
  (relative loudness x periodicity) so silence, hiss and noise keep the mouth shut.
* **Vowels** from LPC formants: F1/F2 of each frame (autocorrelation LPC, Levinson-Durbin,
  roots of the predictor) compared on the Bark scale with prototype formants of the Japanese
  vowels, F1 weighted double (it separates U/O and I/E). N (closed/hum) takes the weight the
  mouth is not open.
* **Timing**: the mouth leads the sound by one frame on attacks (max of this and the next
  frame), then an attack/release smoother (fast open, slower close, ~20/50 ms) and a short
  zero-phase smoothing of vowel weights plus a minimum vowel length keep shapes from flickering.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from audio import fft
from audio.features import (
    ANALYSIS_RATE,
    PERIOD_WINDOW,
    WINDOW,
    frame_centres,
    frame_windows,
    loudness_activity,
    periodicity,
    resample_mono,
    rms_dbfs,
)
from core.avatar import VOWELS

__all__ = ["VOWEL_FORMANTS", "FormantLipSync", "LipSync", "LipSyncResult", "formants"]

N_IDX = VOWELS.index("N")

# Prototype (F1, F2) in Hz for adult male Japanese vowels, rounded from published measurements
# (e.g. Keating & Huffman 1984, "Vowel variation in Japanese", Phonetica 41; Hirahara & Kato
# 1992). /u/ is unrounded and fairly central in Tokyo Japanese ([ɯ], F2 ~1300); a rounded back
# [u] prototype (F2 ~800) is added because singers and synthesizers often produce it. Female
# and child voices are handled by scaling all prototypes up (see `_speaker_scale`).
VOWEL_FORMANTS: dict[str, tuple[tuple[float, float], ...]] = {
    "A": ((750.0, 1250.0),),
    "I": ((300.0, 2250.0),),
    "U": ((340.0, 1350.0), (330.0, 800.0)),
    "E": ((480.0, 1900.0),),
    "O": ((510.0, 850.0),),
}


@dataclass
class LipSyncResult:
    """Per-frame mouth: ``open`` float32 (n,) 0..1; ``vowels`` float32 (n, 6) rows sum to 1."""

    open: np.ndarray
    vowels: np.ndarray

    def dominant(self) -> np.ndarray:
        """Index into VOWELS of the strongest weight per frame."""
        return np.argmax(self.vowels, axis=1)


@runtime_checkable
class LipSync(Protocol):
    def analyze(
        self, mono: np.ndarray, sample_rate: int, fps: int, num_frames: int
    ) -> LipSyncResult: ...


def _bark(f: np.ndarray | float) -> np.ndarray:
    """Traunmüller (1990) Hz -> Bark."""
    f = np.asarray(f, np.float64)
    return 26.81 * f / (1960.0 + f) - 0.53


def _levinson(r: np.ndarray, order: int) -> np.ndarray:
    """Batched Levinson-Durbin: autocorrelation (n, order+1) -> predictor (n, order+1), a0 = 1."""
    n = r.shape[0]
    a = np.zeros((n, order + 1))
    a[:, 0] = 1.0
    err = r[:, 0].copy()
    for i in range(1, order + 1):
        acc = np.einsum("nj,nj->n", a[:, :i], r[:, i:0:-1])
        k = -acc / np.maximum(err, 1e-12)
        a[:, 1 : i + 1] = a[:, 1 : i + 1] + k[:, None] * a[:, i - 1 :: -1][:, :i]
        err = err * (1.0 - k * k)
    return a


def formants(windows: np.ndarray, rate: int, order: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """F1, F2 (Hz) of each window row by LPC; NaN where no pair of resonances is found."""
    n, w = windows.shape
    x = windows.astype(np.float64)
    x = np.concatenate([x[:, :1], x[:, 1:] - 0.97 * x[:, :-1]], axis=1) * np.hamming(w)
    nfft = 1 << int(np.ceil(np.log2(2 * w)))
    r = fft.irfft(np.abs(fft.rfft(x, nfft, axis=1)) ** 2, nfft, axis=1)[:, : order + 1]
    r[:, 0] *= 1.0 + 1e-6  # white-noise correction keeps the recursion stable
    ok = r[:, 0] > 1e-12
    f1 = np.full(n, np.nan)
    f2 = np.full(n, np.nan)
    if not ok.any():
        return f1, f2
    a = _levinson(r[ok], order)
    comp = np.zeros((a.shape[0], order, order))
    comp[:, 0, :] = -a[:, 1:]
    comp[:, np.arange(1, order), np.arange(order - 1)] = 1.0
    roots = np.linalg.eigvals(comp)
    freq = np.angle(roots) * rate / (2 * np.pi)
    bw = -rate / np.pi * np.log(np.maximum(np.abs(roots), 1e-12))
    valid = (roots.imag > 0) & (freq > 180) & (freq < rate / 2 - 200) & (bw < 500)
    freq = np.where(valid, freq, np.inf)
    freq.sort(axis=1)
    good = np.isfinite(freq[:, 1])
    idx = np.flatnonzero(ok)
    f1[idx[good]] = freq[good, 0]
    f2[idx[good]] = freq[good, 1]
    return f1, f2


def _running_median(x: np.ndarray, k: int) -> np.ndarray:
    """NaN-aware running median over k frames."""
    if k <= 1 or len(x) < k:
        return x
    pad = np.pad(x, (k // 2, k - 1 - k // 2), mode="edge")
    view = np.lib.stride_tricks.sliding_window_view(pad, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows stay NaN
        return np.nanmedian(view, axis=1)


def _gauss_smooth(x: np.ndarray, sigma: float) -> np.ndarray:
    """Zero-phase Gaussian smoothing along axis 0 (sigma in frames)."""
    if sigma < 0.3 or len(x) < 2:
        return x
    r = int(np.ceil(3 * sigma))
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    k /= k.sum()
    pad = np.pad(x, [(r, r)] + [(0, 0)] * (x.ndim - 1), mode="edge")
    out = np.zeros_like(x, dtype=np.float64)
    for j, kj in enumerate(k):
        out += kj * pad[j : j + len(x)]
    return out


def _attack_release(x: np.ndarray, a_att: float, a_rel: float) -> np.ndarray:
    y = np.empty_like(x)
    v = 0.0
    for i, xi in enumerate(x.tolist()):
        v += (a_att if xi > v else a_rel) * (xi - v)
        y[i] = v
    return y


class FormantLipSync:
    """Calibration-free offline lip-sync from loudness and LPC formants."""

    def __init__(
        self,
        span_db: float = 20.0,
        headroom_db: float = 3.0,
        lead_frames: int = 1,
        attack_s: float = 0.02,
        release_s: float = 0.05,
        vowel_sigma_bark: float = 1.0,
        min_vowel_s: float = 0.07,
    ) -> None:
        self.span_db = span_db  # uLipSync: -50 .. -30 dBFS is 20 dB
        self.headroom_db = headroom_db  # fully open this far under the clip's loud reference
        self.lead_frames = lead_frames
        self.attack_s = attack_s
        self.release_s = release_s
        self.vowel_sigma_bark = vowel_sigma_bark
        self.min_vowel_s = min_vowel_s  # Rhubarb's minimum mouth-shape length is 70 ms

    def analyze(
        self, mono: np.ndarray, sample_rate: int, fps: int, num_frames: int
    ) -> LipSyncResult:
        n = int(num_frames)
        if n == 0:
            return LipSyncResult(np.zeros(0, np.float32), np.zeros((0, len(VOWELS)), np.float32))
        sr = ANALYSIS_RATE
        y = resample_mono(mono, sample_rate, sr)
        win = frame_windows(y, frame_centres(n, fps, sr), WINDOW)

        # --- openness -------------------------------------------------------------------
        db = rms_dbfs(win)
        activity, ref_db, _ = loudness_activity(db)
        centres = frame_centres(n, fps, sr)
        per, f0 = periodicity(frame_windows(y, centres, PERIOD_WINDOW), sr)
        voice = np.clip((per - 0.2) / 0.25, 0.0, 1.0)
        top = ref_db - self.headroom_db
        raw = np.clip((db - (top - self.span_db)) / self.span_db, 0.0, 1.0)
        raw = raw * activity * voice
        raw = self._lead(raw)
        dt = 1.0 / fps
        a_att = 1.0 - np.exp(-dt / self.attack_s)
        a_rel = 1.0 - np.exp(-dt / self.release_s)
        mouth = _attack_release(raw.astype(np.float64), a_att, a_rel)
        mouth[mouth < 0.02] = 0.0

        # --- vowels ---------------------------------------------------------------------
        f1, f2 = formants(win, sr)
        med = max(round(0.05 * fps) | 1, 1)
        f1, f2 = _running_median(f1, med), _running_median(f2, med)
        voiced = (voice > 0.5) & (activity > 0.5)
        scale = self._speaker_scale(f0[voiced & (per > 0.5)])
        probs = self._vowel_probs(f1, f2, scale)  # (n, 5), NaN rows where unknown
        known = np.isfinite(probs[:, 0]) & voiced
        probs = np.where(known[:, None], probs, np.nan)
        probs = self._fill(probs)
        probs = self._lead(probs)
        probs = _gauss_smooth(probs, sigma=0.04 * fps)
        probs = self._min_length(probs, max(round(self.min_vowel_s * fps), 1))

        openness = np.clip(mouth / 0.25, 0.0, 1.0)  # how much of the shape is a vowel, not N
        vowels = np.zeros((n, len(VOWELS)), np.float64)
        vowels[:, :N_IDX] = probs * openness[:, None]
        vowels[:, N_IDX] = 1.0 - openness
        vowels /= vowels.sum(axis=1, keepdims=True)
        return LipSyncResult(mouth.astype(np.float32), vowels.astype(np.float32))

    # -- helpers ------------------------------------------------------------------------
    def _lead(self, x: np.ndarray) -> np.ndarray:
        """Mouth leads sound: frame i takes the max of frames i..i+lead (attacks come early)."""
        k = self.lead_frames
        if k <= 0 or len(x) == 0:
            return x
        shifted = [np.concatenate([x[j:], np.repeat(x[-1:], j, axis=0)]) for j in range(1, k + 1)]
        if x.ndim == 1:  # openness: open early, close on time
            return np.maximum.reduce([x, *shifted])
        return shifted[-1]  # vowel shapes: form the next vowel k frames early

    @staticmethod
    def _speaker_scale(f0: np.ndarray) -> float:
        """Formant scale from median pitch: 1.0 at <=120 Hz (male) .. 1.17 at >=220 Hz."""
        if len(f0) < 5:
            return 1.0
        m = float(np.median(f0))
        return 1.0 + 0.17 * float(np.clip((m - 120.0) / 100.0, 0.0, 1.0))

    def _vowel_probs(self, f1: np.ndarray, f2: np.ndarray, scale: float) -> np.ndarray:
        b1, b2 = _bark(f1), _bark(f2)
        d2 = np.empty((len(f1), 5))
        for j, v in enumerate(VOWELS[:N_IDX]):
            best = np.full(len(f1), np.inf)
            for p1, p2 in VOWEL_FORMANTS[v]:
                d = (2.0 * (b1 - _bark(p1 * scale))) ** 2 + (b2 - _bark(p2 * scale)) ** 2
                best = np.fmin(best, d)
            d2[:, j] = best
        unknown = ~np.isfinite(d2).all(axis=1)
        d2[unknown] = 0.0
        logit = -0.5 * d2 / self.vowel_sigma_bark**2
        p = np.exp(logit - logit.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[unknown] = np.nan
        return p

    @staticmethod
    def _fill(p: np.ndarray) -> np.ndarray:
        """Carry the last known vowel through unknown frames (initial gap: first known / A)."""
        out = p.copy()
        known = np.isfinite(out[:, 0])
        if not known.any():
            out[:] = 0.0
            out[:, 0] = 1.0
            return out
        idx = np.where(known, np.arange(len(p)), -1)
        idx = np.maximum.accumulate(idx)
        first = int(np.argmax(known))
        idx[idx < 0] = first
        return out[idx]

    @staticmethod
    def _min_length(p: np.ndarray, k: int) -> np.ndarray:
        """Runs of a dominant vowel shorter than k frames take the previous run's weights."""
        if k <= 1 or len(p) == 0:
            return p
        dom = np.argmax(p, axis=1)
        out = p.copy()
        start = 0
        prev_row = None
        for i in range(1, len(dom) + 1):
            if i == len(dom) or dom[i] != dom[start]:
                if i - start < k and prev_row is not None:
                    out[start:i] = prev_row
                else:
                    prev_row = out[i - 1].copy()
                start = i
        return out
