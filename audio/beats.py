"""Onset strength and beat tracking in plain numpy (no librosa, scipy or numba to import).

    env = onset_strength(y, sr, hop)             # spectral flux of a log-mel spectrogram
    tempo, beat_times = beat_track(env, sr, hop)  # global tempo (BPM), beat times (s)

The same methods, and the same defaults, as librosa's `onset.onset_strength` and
`beat.beat_track(trim=False)`: an autocorrelation tempogram weighted by a log-normal prior
around 120 BPM picks the tempo, then Ellis' dynamic program places beats that sit on strong
onsets and keep that period (D. Ellis, "Beat Tracking by Dynamic Programming", 2007). Why our
own: the offline render imported librosa only for these two calls, and importing it (scipy,
numba and their compiled caches) cost seconds of every render's start-up on a small CPU.
tests/test_beats.py checks the results against librosa's on real music.
"""

from __future__ import annotations

import numpy as np

from audio import fft

__all__ = ["beat_track", "mel_filters", "onset_strength"]

N_FFT = 2048
N_MELS = 128
TOP_DB = 80.0
TEMPO_WINDOW_S = 8.0  # the tempogram's autocorrelation window
START_BPM = 120.0  # centre of the tempo prior (log-normal, one octave standard deviation)
MAX_BPM = 320.0
TIGHTNESS = 100.0  # how strongly the beat spacing is held to the tempo's period
_CHUNK = 2048  # STFT frames per block: bounds the spectrogram's memory on long songs


def _hann(n: int) -> np.ndarray:
    """The periodic Hann window (the STFT's and the tempogram's)."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def _hz_to_mel(f):
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    f = np.asarray(f, np.float64)
    lin = f / (200.0 / 3)
    log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log, lin)


def _mel_to_hz(m):
    m = np.asarray(m, np.float64)
    lin = m * (200.0 / 3)
    log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
    return np.where(m >= 15.0, log, lin)


def mel_filters(sr: int, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """(n_mels, n_fft // 2 + 1) triangular filters from 0 Hz to sr / 2, area-normalised."""
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sr / 2.0), n_mels + 2))
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    width = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    rising = -ramps[:-2] / width[:-1, None]
    falling = ramps[2:] / width[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


def _mel_power(y: np.ndarray, sr: int, hop: int) -> np.ndarray:
    """(n_mels, 1 + len(y) // hop) mel power spectrogram of frames centred on k * hop (the
    signal zero-padded by half a window at both ends)."""
    pad = np.pad(np.asarray(y, np.float32), N_FFT // 2)
    frames = np.lib.stride_tricks.sliding_window_view(pad, N_FFT)[::hop]
    window = _hann(N_FFT).astype(np.float32)
    basis = mel_filters(sr)
    out = np.empty((N_MELS, len(frames)), np.float32)
    for i in range(0, len(frames), _CHUNK):
        spec = fft.rfft(frames[i : i + _CHUNK] * window, axis=1)
        power = np.square(spec.real) + np.square(spec.imag)
        out[:, i : i + _CHUNK] = basis @ power.T.astype(np.float32)
    return out


def onset_strength(y: np.ndarray, sr: int, hop: int) -> np.ndarray:
    """float32 (1 + len(y) // hop,): the mean rise of log-mel energy (dB, 80 dB range) from each
    frame to the next, aligned to the frame centres (frame k describes time k * hop / sr)."""
    mel = _mel_power(y, sr, hop)
    db = 10.0 * np.log10(np.maximum(mel, 1e-10))
    db = np.maximum(db, db.max() - TOP_DB) if db.size else db
    flux = np.maximum(0.0, db[:, 1:] - db[:, :-1]).mean(axis=0)
    # the first difference lands one frame late, and centred frames see half a window ahead
    lag = 1 + N_FFT // (2 * hop)
    env = np.concatenate([np.zeros(lag, np.float32), flux.astype(np.float32)])
    return env[: mel.shape[1]]


def _tempo(env: np.ndarray, sr: int, hop: int) -> float:
    """The global tempo (BPM): the autocorrelation lag, averaged over windows of the envelope,
    that scores best under a log-normal prior around START_BPM."""
    win = int(np.floor(TEMPO_WINDOW_S * sr / hop))
    n = len(env)
    half = win // 2
    # linear ramps to zero at both ends, like centred analysis windows
    padded = np.pad(env.astype(np.float64), half, mode="linear_ramp", end_values=0)
    frames = np.lib.stride_tricks.sliding_window_view(padded, win)[:n]
    window = _hann(win)
    size = 1 << int(np.ceil(np.log2(2 * win - 1)))  # no wrap-around for lags below win
    tg = np.zeros(win)
    for i in range(0, n, _CHUNK):  # each window's autocorrelation, peak-normalised, summed
        spec = fft.rfft(frames[i : i + _CHUNK] * window, size, axis=1)
        ac = fft.irfft(np.square(np.abs(spec)), size, axis=1)[:, :win]
        peak = np.abs(ac).max(axis=1, keepdims=True)
        tg += (ac / np.where(peak > np.finfo(ac.dtype).tiny, peak, 1.0)).sum(axis=0)
    tg /= n
    with np.errstate(divide="ignore"):
        bpms = 60.0 * sr / (hop * np.arange(win, dtype=np.float64))
    bpms[0] = np.inf
    prior = -0.5 * (np.log2(bpms) - np.log2(START_BPM)) ** 2
    prior[: int(np.argmax(bpms < MAX_BPM))] = -np.inf
    return float(bpms[int(np.argmax(np.log1p(1e6 * tg) + prior))])


def _local_score(onsets: np.ndarray, period: int) -> np.ndarray:
    """Onsets smoothed by a Gaussian of period / 32 frames' deviation (±1 period wide)."""
    window = np.exp(-0.5 * (np.arange(-period, period + 1) * 32.0 / period) ** 2)
    # centred on each frame, also when the window is longer than the envelope
    return np.convolve(onsets, window)[period : period + len(onsets)]


def _dp(score: np.ndarray, period: int) -> tuple[np.ndarray, np.ndarray]:
    """Ellis' dynamic program: for each frame the best previous beat between 2 periods and
    half a period back (the score there minus a penalty for straying from the period).
    Returns (back links, cumulative scores). Frames are solved a block of half a period at a
    time: every candidate of a block lies before it."""
    n = len(score)
    near = int(np.round(period / 2))
    gaps = np.arange(near, 2 * period + 1)  # candidate distances, nearest first
    penalty = TIGHTNESS * (np.log(gaps) - np.log(period)) ** 2
    cum = np.empty(n, np.float64)
    back = np.full(n, -1, np.int64)
    threshold = 0.01 * score.max()
    # leading frames without an onset start no chain of beats
    first = int(np.argmax(score >= threshold)) if (score >= threshold).any() else n
    step = max(near, 1)
    for b0 in range(0, n, step):
        idx = np.arange(b0, min(n, b0 + step))
        loc = idx[:, None] - gaps[None, :]
        ok = loc >= 0
        cand = np.where(ok, cum[np.maximum(loc, 0)] - penalty, -np.inf)
        best = np.argmax(cand, axis=1)  # the first maximum: the nearest of equal candidates
        value = cand[np.arange(len(idx)), best]
        has = ok[np.arange(len(idx)), best]
        cum[idx] = score[idx] + np.where(has, value, 0.0)
        back[idx] = np.where(has & (idx >= first), loc[np.arange(len(idx)), best], -1)
    return back, cum


def _last_beat(cum: np.ndarray) -> int:
    """The last local maximum of the cumulative score that reaches half their median."""
    prev = np.concatenate([cum[:1], cum[:-1]])
    nxt = np.concatenate([cum[1:], cum[-1:]])
    peaks = (cum > prev) & (cum >= nxt)
    if not peaks.any():
        return len(cum) - 1
    threshold = 0.5 * np.median(cum[peaks])
    good = np.flatnonzero(peaks & (cum >= threshold))
    return int(good[-1]) if len(good) else len(cum) - 1


def beat_track(env: np.ndarray, sr: int, hop: int) -> tuple[float, np.ndarray]:
    """(tempo in BPM, beat times in s, float64) of an onset envelope at `hop` samples per
    frame; (0.0, []) when the envelope is all zero. Beats are kept up to both ends (no trim
    of weak leading or trailing beats, only of frames with no onset energy at all)."""
    env = np.asarray(env, np.float64)
    if not env.any():
        return 0.0, np.zeros(0)
    tempo = _tempo(env, sr, hop)
    period = int(np.round(sr / hop * 60.0 / tempo))
    onsets = env / (env.std(ddof=1) + np.finfo(np.float64).tiny)
    score = _local_score(onsets, period)
    back, cum = _dp(score, period)
    beats = []
    k = _last_beat(cum)
    while k >= 0:
        beats.append(k)
        k = int(back[k])
    beats = np.array(beats[::-1], np.int64)
    # frames with no onset energy at all at either end are no beats
    nz = np.flatnonzero(score > 0)
    beats = beats[(beats >= nz[0]) & (beats <= nz[-1])] if len(nz) else beats[:0]
    return tempo, beats * hop / sr
