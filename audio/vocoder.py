"""Speech re-made through a pulse-and-noise LPC vocoder: the sound of parametric synthesizers.

Many voices a user's idol hears were never a throat's: statistical-parametric and diphone
synthesizers (flite's clustergen voices, HTS voices such as Open JTalk's) rebuild speech from a
smooth spectral envelope excited by pulses and noise. A training copy made the same way teaches
the vowel nets that sound without their test voices: each 5 ms hop's envelope is an LPC fit of
the 25 ms around it (an order drawn per copy: a smoother or sharper envelope), excited by a
pulse train at the voice's own pitch where it is voiced and white noise where it is not, the
pulses drawn sharp or rounded (a glottal pulse's tilt). Timing is kept, so the phone labels
hold. Used by `audio.vowel_net_train.examples` (`vocode_share`), a build setting.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

SR = 16000
FRAME = 400  # samples an envelope is fitted on (25 ms)
HOP = 80  # samples each envelope excites (5 ms)
PREEMPH = 0.97
ORDER_RANGE = (12, 24)  # LPC orders drawn per copy
VOICED_AC = 0.45  # normalised autocorrelation at the pitch period above which a hop is voiced


def _frames(x: np.ndarray) -> np.ndarray:
    """(hops, FRAME): the window centred on each hop's samples (zeros beyond the edges)."""
    n_hops = -(-len(x) // HOP)
    pad = np.pad(x, ((FRAME - HOP) // 2, FRAME + n_hops * HOP - len(x)))
    idx = np.arange(n_hops)[:, None] * HOP + np.arange(FRAME)[None, :]
    return pad[idx]


def _lpc(frames: np.ndarray, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Autocorrelation-method LPC of each windowed frame -> (coefficients (hops, order + 1)
    with a[0] = 1, prediction error power per sample (hops,))."""
    from scipy.linalg import solve_toeplitz

    w = frames * np.hanning(FRAME)
    r = np.stack([(w[:, : FRAME - k] * w[:, k:]).sum(axis=1) for k in range(order + 1)], axis=1)
    r[:, 0] = r[:, 0] * (1 + 1e-6) + 1e-9  # a little white noise: silent frames stay solvable
    a = np.empty((len(r), order + 1))
    a[:, 0] = 1.0
    err = np.empty(len(r))
    for i, row in enumerate(r):
        coef = solve_toeplitz(row[:order], -row[1 : order + 1])
        a[i, 1:] = coef
        err[i] = max(row[0] + row[1:] @ coef, 1e-12)
    return a, err / (np.hanning(FRAME) ** 2).sum()


def _pitch(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each frame's pitch (Hz, 60-500) and voicing (normalised autocorrelation at its period)."""
    lo, hi = SR // 500, SR // 60
    x = frames - frames.mean(axis=1, keepdims=True)
    spec = np.fft.rfft(x, 2 * FRAME, axis=1)
    ac = np.fft.irfft(np.abs(spec) ** 2, axis=1)[:, : hi + 1]
    norm = np.maximum(ac[:, :1], 1e-12) * (FRAME - np.arange(hi + 1)) / FRAME
    ac = ac / norm
    lag = lo + np.argmax(ac[:, lo : hi + 1], axis=1)
    return SR / lag, ac[np.arange(len(ac)), lag]


def lpc_vocode(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`y` (16 kHz mono) re-made by a pulse-and-noise LPC vocoder; its level kept."""
    x = np.asarray(y, np.float64)
    if len(x) < FRAME:
        return np.asarray(y, np.float32).copy()
    order = int(rng.integers(ORDER_RANGE[0], ORDER_RANGE[1] + 1))
    rounded = float(rng.uniform(0.0, 0.9))  # the pulse's one-pole smoothing
    pe = signal.lfilter([1.0, -PREEMPH], [1.0], x)
    frames = _frames(pe)
    a, err = _lpc(frames, order)
    f0, ac = _pitch(_frames(x))
    voiced = np.clip((ac - VOICED_AC) / 0.2, 0.0, 1.0)  # a soft edge between pulses and noise
    n_hops = len(a)
    out = np.zeros(n_hops * HOP)
    zi = np.zeros(order)
    phase = 0.0
    noise = rng.standard_normal(n_hops * HOP)
    for h in range(n_hops):
        period = SR / f0[h]
        pulses = np.zeros(HOP)
        t = phase
        while t < HOP:
            pulses[int(t)] = np.sqrt(period)  # unit power per sample
            t += period
        phase = t - HOP
        exc = (
            np.sqrt(voiced[h]) * pulses + np.sqrt(1.0 - voiced[h]) * noise[h * HOP : (h + 1) * HOP]
        )
        seg, zi = signal.lfilter([np.sqrt(err[h])], a[h], exc, zi=zi)
        out[h * HOP : (h + 1) * HOP] = seg
    if rounded > 0:
        out = signal.lfilter([1.0 - rounded], [1.0, -rounded], out)
    out = signal.lfilter([1.0], [1.0, -PREEMPH], out)[: len(x)]
    rms_in = np.sqrt(np.mean(x**2))
    rms_out = np.sqrt(np.mean(out**2))
    if not np.isfinite(rms_out) or rms_out < 1e-12:
        return np.asarray(y, np.float32).copy()
    return (out * (rms_in / rms_out)).astype(np.float32)
