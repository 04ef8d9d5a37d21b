"""The compiled parts of the live MFCC hop (`audio.mfcc._Plan.analyse_hop`): what comes before
the frame's FFT (level, pre-emphasis and window, periodicity) and after it (power, flatness).

Why: on one 25 ms frame numpy's calls cost more than their work, and the two extra FFTs the
periodicity took (an autocorrelation through a transform twice the frame's size) cost more
than the autocorrelation itself summed lag by lag here (issue 15, thirty-fourth round of
docs/BENCHMARKS.md). The numbers are `analyse`'s up to float rounding
(tests/test_live_lipsync.py). Compiled once per machine into the user cache, as
`audio.mel_conv_kernels` (whose import points numba at it).
"""

from __future__ import annotations

import math

# isort: off
import audio.mel_conv_kernels  # noqa: F401  (points numba's cache at Kagura's before numba's import)
import numba

# isort: on


@numba.njit(cache=True)
def hop_front(frame, window, preemph, level_n, lag_lo, ac_norm, y, xw, ac):  # pragma: no cover
    """frame (win + 1,): the pre-emphasis sample, then the window's. Writes the pre-emphasised,
    windowed frame to y (win,) and returns (level dB of the last level_n samples,
    periodicity): the windowed frame's autocorrelation at lags lag_lo .. len(ac_norm) - 1,
    over the window's own (ac_norm), at its peak, relative to lag 0."""
    win = len(window)
    tot = 0.0
    for t in range(win - level_n, win):
        tot += frame[t + 1] * frame[t + 1]
    level_db = 10.0 * math.log10(tot / level_n + 1e-12)
    for t in range(win):
        y[t] = (frame[t + 1] - preemph * frame[t]) * window[t]
        xw[t] = frame[t + 1] * window[t]
    lags = len(ac_norm)
    for k in range(lags):
        ac[k] = 0.0
    for t in range(win):  # lag by lag across, each sum its own (no reordering of a sum)
        a = xw[t]
        for k in range(min(lags, win - t)):
            ac[k] += a * xw[t + k]
    top = -math.inf
    for k in range(lag_lo, lags):
        top = max(top, ac[k] / ac_norm[k])
    return level_db, top / max(ac[0] / ac_norm[0], 1e-20)


@numba.njit(cache=True)
def hop_power(spec, lo, hi, power):  # pragma: no cover - compiled
    """spec (bins,) complex: the frame's spectrum -> its power into power (bins,); returns the
    spectral flatness over bins [lo, hi) (geometric over arithmetic mean)."""
    for k in range(len(spec)):
        power[k] = spec[k].real * spec[k].real + spec[k].imag * spec[k].imag
    return flatness(power, lo, hi)


@numba.njit(cache=True)
def flatness(power, lo, hi):  # pragma: no cover - compiled
    """The spectral flatness of power (bins,) over bins [lo, hi): geometric over arithmetic
    mean, each bin floored at 1e-20 (`audio.mfcc`'s)."""
    logs = 0.0
    tot = 0.0
    for k in range(lo, hi):
        b = power[k] + 1e-20
        logs += math.log(b)
        tot += b
    n = hi - lo
    return math.exp(logs / n) / (tot / n)
