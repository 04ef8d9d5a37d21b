"""Fronted vowels for the lip-sync augmentation: a vowel's second formant raised in its span.

American English fronts /u/ after coronals ("news", "too", "shoes"): the lips round as for any
U, but the second formant sits far higher than in the back /u/ of the training voices, near
I's and E's. The shipped net reads such a U as I (issue 15, twenty-seventh round). Training
copies of the corpus's own U with the second formant raised teach "rounded U, high F2" without
a voice that speaks it.

How: the short-time magnitude spectrum of each chosen span is warped along frequency,
piecewise linear through the span's median formants (an all-pole fit per frame): F1 kept, F2
moved to a drawn share of F3, F3 and everything above left alone. Like the
feature-domain formant warp of `audio.vowel_net`, the harmonics move with the envelope (where
the synthesizers' own valleys are silent, an envelope filter has nothing to lift). The share is
drawn under I's: a fronted U keeps the low F1 that parts it from E, and F2 under I's.

Tried as the split bench's `front-u` recipes (issue 15, twenty-eighth round): it did not move
the far validation voice, whose fronted /u/ shares its F2 with his /ɪ/; not in the shipped build.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, signal

__all__ = ["F2_SHARE_RANGE", "formants", "front_spans"]

N_FFT = 512
HOP = 128  # a quarter window: a Hann window's overlap-add is flat, so untouched frames are exact
ORDER = 18  # all-pole order at 16 kHz: four or five formants and the source's tilt
PRE_EMPHASIS = 0.97
EDGE_FRAMES = 2  # frames over which the shift fades in and out at a span's ends
# a span is shifted only where its formants look like a back rounded vowel's: a low first
# formant and a second one under this (an all-pole fit that merged F1 and F2 would say F2 is
# the third formant: such a span is left alone)
BACK_F1_MAX_HZ = 550.0
BACK_F2_MAX_HZ = 1600.0
MIN_RAISE = 1.1  # a span whose F2 would move less than this is fronted already: left alone
# F2 / F3 of a fronted U, drawn in training: American men's /u/ after coronals has F2 near
# 1500-1800 Hz under an F3 near 2400 (Hillenbrand et al. 1995 give F3 and the back /u/; the
# fronted values are the sociophonetic literature's), their /i/ and /ɪ/ about 0.77
F2_SHARE_RANGE = (0.55, 0.72)


def _pre_emphasis_gain(freqs: np.ndarray, sr: int) -> np.ndarray:
    w = 2 * np.pi * freqs / sr
    return np.abs(1.0 - PRE_EMPHASIS * np.exp(-1j * w))


def _all_pole(power: np.ndarray) -> np.ndarray | None:
    """The all-pole polynomial (ORDER + 1,) fitted to one frame's power spectrum (rfft bins),
    or None for a silent frame."""
    r = np.fft.irfft(power)[: ORDER + 1]
    if r[0] <= 1e-12:
        return None
    r = r.copy()
    r[0] *= 1.0 + 1e-6  # a little white floor: a stable, well-conditioned fit
    a = linalg.solve_toeplitz(r[:ORDER], -r[1 : ORDER + 1])
    return np.r_[1.0, a]


def _formants_of(a: np.ndarray, sr: int) -> np.ndarray:
    """Formant frequencies (Hz, ascending) of an all-pole polynomial: its resonances above
    90 Hz narrower than 400 Hz."""
    roots = np.roots(a)
    roots = roots[np.imag(roots) > 0]
    f = np.angle(roots) * sr / (2 * np.pi)
    bw = -np.log(np.abs(roots)) * sr / np.pi
    return np.sort(f[(f > 90) & (bw < 400)])


def _frames_power(z: np.ndarray, freqs: np.ndarray, sr: int) -> np.ndarray:
    """Pre-emphasised power spectra (bins, frames) of STFT frames."""
    return (np.abs(z) * _pre_emphasis_gain(freqs, sr)[:, None]) ** 2


def formants(y: np.ndarray, sr: int, start_s: float, end_s: float) -> np.ndarray | None:
    """The median first three formants (Hz) of `y` between the two times, or None where fewer
    than half the frames show three."""
    freqs, times, z = signal.stft(y, sr, "hann", N_FFT, N_FFT - HOP)
    cols = np.flatnonzero((times >= start_s) & (times <= end_s))
    return _median_formants(_frames_power(z[:, cols], freqs, sr), sr)


def _median_formants(power: np.ndarray, sr: int) -> np.ndarray | None:
    """`formants` of pre-emphasised power spectra (bins, frames)."""
    found = []
    for k in range(power.shape[1]):
        a = _all_pole(power[:, k])
        f = _formants_of(a, sr) if a is not None else np.zeros(0)
        if len(f) >= 3:
            found.append(f[:3])
    if len(found) * 2 < max(power.shape[1], 1):
        return None
    return np.median(np.array(found), axis=0)


def front_spans(
    y: np.ndarray,
    sr: int,
    spans: list[tuple[float, float]],
    f2_shares: list[float],
) -> np.ndarray:
    """`y` with the second formant in each span (start_s, end_s) moved up to `f2_shares[i]`
    times the span's third formant (float32, same length). Spans whose formants are not a back
    vowel's, or whose F2 is that high already, are left as they are."""
    y = np.asarray(y, np.float64)
    freqs, times, z = signal.stft(y, sr, "hann", N_FFT, N_FFT - HOP)
    changed = False
    for (start, end), share in zip(spans, f2_shares, strict=True):
        cols = np.flatnonzero((times >= start) & (times <= end))
        if len(cols) == 0:
            continue
        f = _median_formants(_frames_power(z[:, cols], freqs, sr), sr)
        if f is None or f[0] > BACK_F1_MAX_HZ or f[1] > BACK_F2_MAX_HZ:
            continue
        f1, f2, f3 = f
        f2_new = share * f3
        if f2_new < f2 * MIN_RAISE:
            continue
        # the new spectrum at f is the old one at warp^-1(f) (an anchor between F1 and F2
        # instead of at F1 left a broad, split F2 on a third of the spans tried)
        back = np.interp(freqs, [0, f1, f2_new, f3], [0, f1, f2, f3])
        back = np.where(freqs > f3, freqs, back)
        fade = np.minimum(np.arange(len(cols)) + 1, np.arange(len(cols))[::-1] + 1)
        fade = np.minimum(fade / (EDGE_FRAMES + 1), 1.0)
        bins = np.arange(len(freqs))
        turned = np.zeros(len(freqs))  # each output bin's phase offset, carried frame to frame
        for j, col in enumerate(cols):
            src_hz = freqs + fade[j] * (back - freqs)
            src = np.clip(np.rint(src_hz / freqs[1]).astype(int), 0, len(freqs) - 1)
            # a source bin's content moved (bins - src) bins up turns that much faster: its
            # phase advances by a quarter turn per bin per hop, so frames still add up in phase
            turned += (bins - src) * (2 * np.pi * HOP / N_FFT)
            mag = np.interp(src_hz, freqs, np.abs(z[:, col]))
            z[:, col] = mag * np.exp(1j * (np.angle(z[src, col]) + turned))
            changed = True
    if not changed:
        return y.astype(np.float32)
    _, out = signal.istft(z, sr, "hann", N_FFT, N_FFT - HOP)
    out = out[: len(y)]
    if len(out) < len(y):
        out = np.pad(out, (0, len(y) - len(out)))
    return out.astype(np.float32)
