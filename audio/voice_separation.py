"""The voice out of a full mix: two-stage harmonic/percussive separation (offline front-end).

A band's chords, pads and bass hold their pitch for a beat or a bar; its drums are broadband
clicks; a voice is neither — its harmonics glide with the pitch and the formants within tens
of milliseconds. Two passes of harmonic/percussive separation split the three apart (the
two-stage scheme of Tachibana et al. for singing voice enhancement):

1. a long window (64 ms): what stays put in time for `STEADY_S` is the band's harmony; the rest
   (voice and drums) goes on;
2. a short window (16 ms): within that rest, what is smooth in time over a few hops is the
   voice, what is smooth across frequency is a drum hit.

The smoothing is a grey-scale opening (a running minimum then maximum) instead of the usual
median filter: it keeps what lasts at least the filter's length, costs a few passes per bin
(`_slide`) and makes the front-end cheap enough for a 4-minute song (figures in
docs/BENCHMARKS.md). The masks are soft (Wiener-like, squared magnitudes). The result is audio
at the input's rate: the vowel net (`audio.vowel_net`) hears it next to the raw mix and was
trained on the same front-end.
"""

from __future__ import annotations

import math

import numpy as np

from audio import fft

__all__ = ["residual_grid", "residual_reach", "voice_residual"]

SR = 16000
STEADY_S = 0.4  # a partial that holds this long is the band's (a sung note glides or ends)
LONG_NFFT, LONG_HOP = 1024, 256
SHORT_NFFT, SHORT_HOP = 256, 64
VOICE_SMOOTH = 9  # short-pass hops (and bins) a voice's partial is smooth over


def _along(a: np.ndarray, axis: int, start: int, stop: int | None) -> np.ndarray:
    return a[(slice(None),) * (axis % a.ndim) + (slice(start, stop),)]


def _slide(pad: np.ndarray, k: int, n: int, axis: int, pick) -> np.ndarray:
    """out[i] = `pick` (np.minimum / np.maximum) over pad[i : i + k] along `axis`, i < n, as
    a few elementwise passes over shifted slices (windows of 2, 4, 8 ... then k; min and max
    are exact), which costs less than scipy's per-line filters on a whole spectrogram."""
    w, m = 1, pad
    while 2 * w <= k:  # m[i] covers pad[i : i + 2w]
        m = pick(_along(m, axis, None, -w), _along(m, axis, w, None))
        w *= 2
    # m[i] covers pad[i : i + w]; with m[i + k - w] that is pad[i : i + k]
    return pick(_along(m, axis, 0, n), _along(m, axis, k - w, k - w + n))


def _running(x: np.ndarray, k: int, axis: int, pick) -> np.ndarray:
    """Running `pick` over odd `k` samples along `axis`, centred, edges mirrored: scipy's
    minimum/maximum filters in their default 'reflect' mode (for a line at least k // 2 long)."""
    h, n = k // 2, x.shape[axis]
    left, right = _along(x, axis, 0, h), _along(x, axis, n - h, n)
    pad = np.concatenate([np.flip(left, axis), x, np.flip(right, axis)], axis)
    return _slide(pad, k, n, axis, pick)


def _opening(x: np.ndarray, k: int, axis: int) -> np.ndarray:
    """scipy.ndimage.grey_opening of `x` with a flat window of odd `k` along `axis`."""
    if x.shape[axis] <= k or k % 2 == 0:  # too short to mirror once, or not centred: scipy
        ndimage = fft.scipy_part("ndimage")  # (the analysis calls this on threads)
        size = [1] * x.ndim
        size[axis] = k
        return ndimage.grey_opening(x, size=tuple(size))
    return _running(_running(x, k, axis, np.minimum), k, axis, np.maximum)


def _mask(mag: np.ndarray, k_time: int, k_freq: int, broadband: bool) -> np.ndarray:
    """The steady-in-time mask (or with `broadband` the broadband one) of a magnitude
    spectrogram (bins, frames); the two sum to 1, each stage keeps one of them."""
    # here, not at the top: the live front-end (SteadySuppressor) never needs scipy's filters,
    # and their import costs a part of `kagura live`'s start (docs/BENCHMARKS.md); under
    # `scipy_part`'s lock, for the analysis makes this beside its other features on threads
    ndimage = fft.scipy_part("ndimage")

    h = _opening(mag, k_time, 1)
    p = _opening(mag, k_freq, 0)
    h = ndimage.uniform_filter1d(h, 3, axis=1) ** 2
    p = ndimage.uniform_filter1d(p, 3, axis=0) ** 2
    tot = h + p + 1e-20
    return (p if broadband else h) / tot


# STFT pairs with 75 % overlap, written out with numpy: the overlap-add is four shifted sums
# (library ISTFTs loop in Python or compile on first use, which a render would wait for)


def _window(n: int) -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)  # periodic


def _stft(x: np.ndarray, n: int, hop: int) -> np.ndarray:
    """(bins, frames); frame j is centred on sample j * hop (zeros around the signal)."""
    frames = -(-len(x) // hop) + 1
    pad = np.zeros((frames + 3) * hop, np.float32)
    pad[n // 2 : n // 2 + len(x)] = x
    rows = np.lib.stride_tricks.sliding_window_view(pad, n)[::hop][:frames]
    return fft.rfft(rows * _window(n), axis=1).T


def _istft(s: np.ndarray, n: int, hop: int, length: int) -> np.ndarray:
    rows = fft.irfft(s.T, n, axis=1).astype(np.float32) * _window(n)
    frames = len(rows)
    out = np.zeros((frames + 3) * hop, np.float32)
    k = n // hop
    for i in range(k):  # part i of every frame lands at frame * hop + i * hop
        seg = rows[:, i * hop : (i + 1) * hop].reshape(-1)
        out[i * hop : i * hop + len(seg)] += seg
    out /= float(np.sum(_window(n) ** 2) / hop)  # the window's overlap-added square
    return out[n // 2 : n // 2 + length]


def voice_residual(y: np.ndarray, sr: int = SR) -> np.ndarray:
    """The voice-like part of mono `y` (float32, same length and rate)."""
    x = np.asarray(y, np.float32).reshape(-1)
    scale = sr / SR  # the same time spans at any rate
    n1, h1 = round(LONG_NFFT * scale), round(LONG_HOP * scale)
    if len(x) < n1:
        return x.copy()
    s = _stft(x, n1, h1)
    rest = _mask(np.abs(s), max(round(STEADY_S * sr / h1), 3), 13, broadband=True)
    x1 = _istft(s * rest, n1, h1, len(x))
    n2, h2 = round(SHORT_NFFT * scale), round(SHORT_HOP * scale)
    s2 = _stft(x1, n2, h2)
    smooth = _mask(np.abs(s2), VOICE_SMOOTH, VOICE_SMOOTH, broadband=False)
    return _istft(s2 * smooth, n2, h2, len(x)).astype(np.float32)


def residual_grid(sr: int = SR) -> int:
    """Samples after which both passes' frame grids repeat: a piece of a song cut on a
    multiple of this is analysed on the whole song's frames (`audio.time_chunks`)."""
    scale = sr / SR
    return math.lcm(round(LONG_HOP * scale), round(SHORT_HOP * scale))


def residual_reach(sr: int = SR) -> int:
    """Samples on either side of a residual sample that can change it, with room to spare:
    each pass's opening in time and smoothing (counted twice over), and its windows."""
    scale = sr / SR
    long_frames = 2 * max(round(STEADY_S * SR / LONG_HOP), 3) + 2 + LONG_NFFT // LONG_HOP
    short_frames = 2 * VOICE_SMOOTH + 2 + SHORT_NFFT // SHORT_HOP
    return round((long_frames * LONG_HOP + short_frames * SHORT_HOP) * scale)


# --- live: the same idea, causal, on the spectrum the MFCC window already has ---------------
#
# Live there is no future to look at, and no time for a second pair of transforms: each 10 ms
# hop's power spectrum (the 25 ms MFCC window) is compared with the bin-wise minimum of the last
# `LIVE_STEADY_HOPS` hops — what has been sounding all along is the band's, subtracted twice
# over — and with its own opening across `LIVE_HIT_BINS` bins (a broadband drum hit). What is
# left is summarised for the live net next to the mix's features (`audio.vowel_net`).

LIVE_STEADY_HOPS = 30
LIVE_HIT_BINS = 9


def _clean(power: np.ndarray, steady: np.ndarray) -> np.ndarray:
    """Rows of `power` less their steady floor and their broadband part (soft gains)."""
    p = np.maximum(power, 1e-20)
    g = np.clip(1.0 - 2.0 * steady / p, 0.0, 1.0)
    # an opening across frequency (what is as wide as LIVE_HIT_BINS bins is a hit)
    hits = _running(_running(p, LIVE_HIT_BINS, -1, np.minimum), LIVE_HIT_BINS, -1, np.maximum)
    # p * g * (p * p / (p * p + hits * hits)), in place (whole songs: arrays of megabytes)
    pp = p * p
    hits *= hits
    hits += pp
    pp /= hits
    g *= p
    g *= pp
    return g


def suppress_steady(power: np.ndarray) -> np.ndarray:
    """(n, bins) power spectra of consecutive hops -> the same, band taken out (causal)."""
    p = np.asarray(power, np.float64)
    if len(p) == 0:
        return p.copy()
    k = LIVE_STEADY_HOPS
    pad = np.concatenate([np.repeat(p[:1], k - 1, axis=0), p])
    # trailing minimum over the last k hops (this one included)
    steady = _slide(pad, k, len(p), 0, np.minimum)
    return _clean(p, steady)


class SteadySuppressor:
    """`suppress_steady` one hop at a time (the same numbers), with few numpy calls per hop:
    the ring of past hops and the gather of the opening's windows are kept, not rebuilt
    (scipy's filters cost more in their call than in their work on one short row)."""

    def __init__(self) -> None:
        self.ring: np.ndarray | None = None
        self.pos = 0
        self._win: np.ndarray | None = None  # (LIVE_HIT_BINS, bins) gather of the windows

    def step(self, power: np.ndarray, commit: bool = True) -> np.ndarray:
        p = np.asarray(power, np.float64).reshape(-1)
        if self.ring is None:
            ring = np.repeat(p[None], LIVE_STEADY_HOPS, axis=0)
            if commit:
                self.ring = ring
                self.pos = 1 % LIVE_STEADY_HOPS
            return self._clean_row(p, ring.min(axis=0))
        # the oldest row (at pos) gives way to this hop; put back unless committed
        old = None if commit else self.ring[self.pos].copy()
        self.ring[self.pos] = p
        steady = self.ring.min(axis=0)
        if commit:
            self.pos = (self.pos + 1) % LIVE_STEADY_HOPS
        else:
            self.ring[self.pos] = old
        return self._clean_row(p, steady)

    def _clean_row(self, power: np.ndarray, steady: np.ndarray) -> np.ndarray:
        """`_clean` of one row (the same expression, the opening by `_opening`)."""
        p = np.maximum(power, 1e-20)
        # steady is a minimum over hops that include this one (steady <= p): no clip at 1
        g = np.maximum(1.0 - 2.0 * steady / p, 0.0)
        hits = self._opening(p)
        pp = p * p
        return p * g * (pp / (pp + hits * hits))

    def _opening(self, row: np.ndarray) -> np.ndarray:
        """`_running` min then max across bins: each a gather of the row's mirrored windows
        (one index array, kept between hops) and one reduction down its columns — two numpy
        calls a pass where shifted slices took eight (their call overhead was the cost)."""
        n = len(row)
        if self._win is None or self._win.shape[1] != n:
            h = LIVE_HIT_BINS // 2
            # padded position j holds row[mirror[j]] (scipy's 'reflect' edges)
            mirror = np.r_[np.arange(h - 1, -1, -1), np.arange(n), np.arange(n - 1, n - h - 1, -1)]
            self._win = mirror[np.arange(LIVE_HIT_BINS)[:, None] + np.arange(n)[None, :]]
        return row[self._win].min(axis=0)[self._win].max(axis=0)
