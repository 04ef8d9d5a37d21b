"""MFCC features for lip-sync, in the spirit of uLipSync but with a shorter window (less lag).

uLipSync (docs/ARCHITECTURE.md, "Outside facts") analyses a 64 ms window at 16 kHz: pre-emphasis 0.97, Hamming
window, FFT magnitude, 30 mel bands (mel = 1127·ln(1 + f/700), triangles normalised by area),
10·log10, DCT-II, keep coefficients 1-12. We keep that chain but default to a 25 ms window with a
10 ms hop, so a frame's centre is ~12 ms behind its last sample instead of ~32 ms.

Frame ``k`` always ends at sample ``(k + 1) * hop`` (exclusive): it uses the ``win`` samples
before that point, zero-padded before the start of the stream. The batch function (`mfcc_frames`)
and the incremental one (`MfccStream`) therefore give the same numbers for the same samples.

Besides the cepstrum each frame carries what the lip-sync gate needs, computed from the same
spectrum: the level (dBFS of the last ``level_ms`` samples), the spectral flatness in
100-4000 Hz (≈0.5 for white noise, ≪0.1 for a vowel) and a periodicity (peak of the
normalised autocorrelation for pitches 60-900 Hz).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from audio import fft

__all__ = [
    "FrameFeatures",
    "MfccSettings",
    "MfccStream",
    "mfcc_frames",
    "mfcc_frames_pair",
    "shares_spectrum",
]


@dataclass(frozen=True)
class MfccSettings:
    win_ms: float = 25.0
    hop_ms: float = 10.0
    n_mels: int = 30
    fmin: float = 0.0
    fmax: float = 8000.0
    preemph: float = 0.97
    first_coef: int = 1
    last_coef: int = 12  # inclusive, like uLipSync's 1..12
    level_ms: float = 12.0  # loudness window (the most recent samples only: low lag)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> MfccSettings:
        """Settings read from a file, checked: a NaN, a string or a window of a minute would
        otherwise fail deep in the analysis (or silently give nonsense). Raises ValueError
        naming the key and what was expected."""
        if not isinstance(d, dict):
            raise ValueError("mfcc is not an object")
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        s = cls(**known)
        for key, (lo, hi) in _RANGES.items():
            v = getattr(s, key)
            whole = key in _WHOLE
            ok_type = isinstance(v, int) if whole else isinstance(v, int | float)
            if isinstance(v, bool) or not ok_type or not (lo <= v <= hi):  # NaN fails too
                noun = "a whole number" if whole else "a number"
                raise ValueError(f"mfcc.{key} is {v!r}; expected {noun} from {lo:g} to {hi:g}")
        if not s.fmin < s.fmax:
            raise ValueError(f"mfcc.fmin {s.fmin:g} is not below fmax {s.fmax:g}")
        if s.hop_ms > s.win_ms:
            raise ValueError(f"mfcc.hop_ms {s.hop_ms:g} is longer than win_ms {s.win_ms:g}")
        if not s.first_coef <= s.last_coef < s.n_mels:
            raise ValueError(
                f"mfcc coefficients {s.first_coef}..{s.last_coef}: expected "
                f"first_coef <= last_coef < n_mels ({s.n_mels})"
            )
        return s

    @property
    def n_coefs(self) -> int:
        return self.last_coef - self.first_coef + 1


# what a profile file may hold (wide: any sensible analysis; the shipped one is 25 / 10 ms)
_RANGES = {
    "win_ms": (5.0, 200.0),
    "hop_ms": (1.0, 100.0),
    "n_mels": (4, 128),
    "fmin": (0.0, 20000.0),
    "fmax": (100.0, 96000.0),
    "preemph": (0.0, 0.999),
    "first_coef": (0, 127),
    "last_coef": (0, 127),
    "level_ms": (1.0, 1000.0),
}
_WHOLE = {"n_mels", "first_coef", "last_coef"}


@dataclass
class FrameFeatures:
    """Features of consecutive frames; row k of each array belongs to frame k."""

    end: np.ndarray  # int64: sample index one past the last sample used
    mfcc: np.ndarray  # float32 (n, n_coefs)
    level_db: np.ndarray  # float32 (n,)
    flatness: np.ndarray  # float32 (n,)
    periodicity: np.ndarray  # float32 (n,)
    power: np.ndarray | None = None  # (n, bins) pre-emphasised power spectra (keep_power)

    def __len__(self) -> int:
        return len(self.end)


def _mel(f: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)


def _mel_inv(m: np.ndarray) -> np.ndarray:
    return 700.0 * np.expm1(np.asarray(m, np.float64) / 1127.0)


def _direct_rfft():
    """rfft(x, n) for one float64 frame, as np.fft's, for the live hop.

    np.fft's per-call wrapper (argument checks, the norm's lookup, the output's allocation)
    costs about as much as the transform of one 25 ms frame: the live hop calls numpy's
    pocketfft ufunc (what np.fft calls) directly where it is there and gives np.fft's very
    numbers (checked once here), else np.fft itself."""
    try:
        from numpy.fft import _pocketfft_umath as pfu

        ax = [(0,), (), (0,)]

        def rfft(x: np.ndarray, n: int) -> np.ndarray:
            return pfu.rfft_n_even(x, 1.0, axes=ax, out=np.empty(n // 2 + 1, np.complex128))

        x = np.random.default_rng(0).standard_normal(300)
        if np.array_equal(rfft(x, 512), np.fft.rfft(x, 512)):
            return rfft
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    return lambda x, n: np.fft.rfft(x, n)


_RFFT = _direct_rfft()


def _hop_kernels():
    """`audio.mfcc_kernels`, imported on the first live hop (numba stays off batch paths)."""
    from audio import mfcc_kernels

    return mfcc_kernels


class _Plan:
    """Window, filterbank and DCT matrices for one (settings, sample rate)."""

    def __init__(self, s: MfccSettings, sr: int, warp: float = 1.0) -> None:
        if sr <= 0:
            raise ValueError(f"sample rate must be positive, got {sr}")
        self.s = s
        self.sr = sr
        self.win = max(round(s.win_ms * sr / 1000.0), 16)
        self.hop = max(round(s.hop_ms * sr / 1000.0), 1)
        self.level_n = min(max(round(s.level_ms * sr / 1000.0), 1), self.win)
        self.nfft = 1 << int(np.ceil(np.log2(self.win)))
        self.window = np.hamming(self.win)
        freqs = np.fft.rfftfreq(self.nfft, 1.0 / sr)
        fmax = min(s.fmax, sr / 2.0)
        edges = _mel_inv(np.linspace(_mel(s.fmin), _mel(fmax), s.n_mels + 2))
        # warp != 1: the features of the same sound with every formant `warp` times higher
        # (vocal-tract-length augmentation for training; 1 everywhere else)
        edges = edges / warp
        fb = np.zeros((s.n_mels, len(freqs)))
        for j in range(s.n_mels):
            lo, c, hi = edges[j], edges[j + 1], edges[j + 2]
            up = (freqs - lo) / max(c - lo, 1e-9)
            down = (hi - freqs) / max(hi - c, 1e-9)
            fb[j] = np.clip(np.minimum(up, down), 0.0, None)
            fb[j] /= max(fb[j].sum(), 1e-12)  # normalised by area
        self.fb_t = np.ascontiguousarray(fb.T)  # (bins, mels)
        k = np.arange(s.first_coef, s.last_coef + 1)
        m = np.arange(s.n_mels)
        self.dct_t = np.ascontiguousarray(
            (np.cos(np.pi * k[:, None] * (2 * m[None, :] + 1) / (2 * s.n_mels))).T
        )  # (mels, coefs), DCT-II
        self.flat_bins = (freqs >= 100.0) & (freqs <= min(4000.0, sr / 2.0))
        self.lag_lo = max(int(sr / 900.0), 1)
        self.lag_hi = min(int(sr / 60.0), self.win - 1)
        self.ac_norm = np.correlate(self.window, self.window, "full")[self.win - 1 :]
        self.ac_norm = self.ac_norm / self.ac_norm[0]
        # for `analyse_hop`: the flatness band as a slice, the normalisation cut to its lags
        band = np.flatnonzero(self.flat_bins)
        self.flat_slice = slice(int(band[0]), int(band[-1]) + 1) if len(band) else slice(0, 0)
        self.flat_n = len(band)
        self.ac_norm_hi = self.ac_norm[: self.lag_hi + 1]
        # the compiled hop's room: the windowed frame, pre-emphasised and not, the lags' sums
        self._hop_buffers = (np.empty(self.win), np.empty(self.win), np.empty(self.lag_hi + 1))

    def cepstrum(self, power: np.ndarray) -> np.ndarray:
        mel = power @ self.fb_t
        peak = mel.max(axis=1, keepdims=True)
        logmel = 10.0 * np.log10(mel + 1e-9 * peak + 1e-20)  # gain-invariant floor
        return (logmel @ self.dct_t).astype(np.float32)

    def cepstrum_hop(self, power: np.ndarray) -> np.ndarray:
        """`cepstrum` of one spectrum (bins,) -> (n_coefs,) float32."""
        mel = power @ self.fb_t
        logmel = 10.0 * np.log10(mel + 1e-9 * mel.max() + 1e-20)  # as `cepstrum`'s
        return (logmel @ self.dct_t).astype(np.float32)

    def analyse_hop(
        self,
        frame: np.ndarray,
        also: _Plan | None = None,
        cepstrum: bool = True,
        also_cepstrum: bool = True,
    ) -> tuple:
        """`analyse` of one frame (win + 1 float64 samples: the pre-emphasis sample, then the
        window) with as few numpy calls as it takes — the live engine's cost per hop is
        mostly their overhead: (end-less) (mfcc, level_db, flatness, periodicity) with Python
        floats rounded to float32 as `analyse`'s, and (`also`'s cepstrum, power) after them.
        `cepstrum=False`: no mfcc (None in its place) where only `also`'s is read;
        `also_cepstrum=False`: None in place of `also`'s, for a reader that computes it from
        the power spectrum itself (the live net, together with its front-end's)."""
        # the sums in compiled code (`audio.mfcc_kernels`), the transform numpy's
        k = _hop_kernels()
        y, xw, ac = self._hop_buffers
        level_db, per = k.hop_front(
            frame, self.window, self.s.preemph, self.level_n, self.lag_lo, self.ac_norm_hi,
            y, xw, ac,
        )  # fmt: skip
        power = np.empty(self.nfft // 2 + 1)
        flat = k.hop_power(_RFFT(y, self.nfft), self.flat_slice.start, self.flat_slice.stop, power)
        cep = self.cepstrum_hop(power) if cepstrum else None
        f32 = np.float32
        out = (cep, float(f32(level_db)), float(f32(flat)), float(f32(min(max(per, 0.0), 1.0))))
        if also is None:
            return out
        return (*out, also.cepstrum_hop(power) if also_cepstrum else None, power)

    def analyse(
        self, frames: np.ndarray, prev: np.ndarray, also: _Plan | None = None
    ) -> tuple[np.ndarray, ...]:
        """frames (n, win) float64, prev (n,) = the sample before each frame (pre-emphasis).

        `also`: a second plan with the same window whose cepstrum is appended (from the same
        spectrum: the live engine's network features cost one filterbank, not a second FFT),
        and then the power spectra too (the live separation front-end reads them)."""
        s = self.s
        x = frames
        level = np.mean(x[:, -self.level_n :] ** 2, axis=1)
        level_db = 10.0 * np.log10(level + 1e-12)
        y = np.empty_like(x)
        y[:, 1:] = x[:, 1:] - s.preemph * x[:, :-1]
        y[:, 0] = x[:, 0] - s.preemph * prev
        y *= self.window
        power = np.abs(fft.rfft(y, self.nfft, axis=1)) ** 2
        cep = self.cepstrum(power)
        band = power[:, self.flat_slice] + 1e-20  # the same bins as flat_bins
        flat = np.exp(np.mean(np.log(band), axis=1)) / np.mean(band, axis=1)
        # periodicity on the raw (windowed, not pre-emphasised) frame
        xw = x * self.window
        ac = fft.irfft(np.abs(fft.rfft(xw, 2 * self.nfft, axis=1)) ** 2, axis=1)
        ac = ac[:, : self.lag_hi + 1] / self.ac_norm[: self.lag_hi + 1]
        per = ac[:, self.lag_lo :].max(axis=1) / np.maximum(ac[:, 0], 1e-20)
        out = (
            cep,
            level_db.astype(np.float32),
            flat.astype(np.float32),
            np.clip(per, 0.0, 1.0).astype(np.float32),
        )
        return out if also is None else (*out, also.cepstrum(power), power)


_PLANS: dict[tuple, _Plan] = {}


def _plan(s: MfccSettings, sr: int, warp: float = 1.0) -> _Plan:
    key = (s, int(sr), float(warp))
    p = _PLANS.get(key)
    if p is None:
        if len(_PLANS) > 64:  # warped plans of training runs are not worth keeping
            _PLANS.clear()
        p = _PLANS[key] = _Plan(s, int(sr), float(warp))
    return p


def mfcc_frames(
    samples: np.ndarray,
    sample_rate: int,
    settings: MfccSettings | None = None,
    warp: float = 1.0,
    keep_power: bool = False,
) -> FrameFeatures:
    """Features of every complete hop of `samples` (mono), all frames at once (offline).

    `warp` (training only) gives the features as if every formant were `warp` times higher;
    `keep_power` keeps each hop's power spectrum (`FrameFeatures.power`)."""
    return _frames(samples, _plan(settings or MfccSettings(), sample_rate, warp), None, keep_power)[
        0
    ]


def shares_spectrum(a: MfccSettings, b: MfccSettings, sample_rate: int) -> bool:
    """Whether two settings analyse the same frames the same way up to the filterbank (then
    one FFT pass serves both: `mfcc_frames_pair`)."""
    p, q = _plan(a, sample_rate), _plan(b, sample_rate)
    return (p.win, p.hop, p.nfft, p.level_n, p.s.preemph) == (
        q.win,
        q.hop,
        q.nfft,
        q.level_n,
        q.s.preemph,
    )


def mfcc_frames_pair(
    samples: np.ndarray,
    sample_rate: int,
    settings: MfccSettings,
    also: MfccSettings,
    keep_power: bool = False,
) -> tuple[FrameFeatures, FrameFeatures]:
    """`mfcc_frames` for two settings that share their spectrum (`shares_spectrum`), from one
    pass: the same numbers as two calls, for the cost of one plus a filterbank. The level,
    flatness and periodicity arrays are shared; `keep_power` puts the spectra on the second."""
    if not shares_spectrum(settings, also, sample_rate):
        raise ValueError("mfcc_frames_pair: the settings must share window, hop and pre-emphasis")
    p, q = _plan(settings, sample_rate), _plan(also, sample_rate)
    return _frames(samples, p, q, keep_power)


def _frames(
    samples: np.ndarray, p: _Plan, also: _Plan | None, keep_power: bool
) -> tuple[FrameFeatures, FrameFeatures | None]:
    s = p.s
    x = np.asarray(samples, np.float64).reshape(-1)
    n = len(x) // p.hop
    if n == 0:
        z = np.zeros(0, np.float32)
        e = np.zeros(0, np.int64)
        ff = FrameFeatures(e, np.zeros((0, s.n_coefs), np.float32), z, z, z)
        fa = (
            None
            if also is None
            else FrameFeatures(e, np.zeros((0, also.s.n_coefs), np.float32), z, z, z)
        )
        return ff, fa
    pad = np.concatenate([np.zeros(p.win + 1), x[: n * p.hop]])
    ends = (np.arange(n) + 1) * p.hop
    view = np.lib.stride_tricks.sliding_window_view(pad, p.win + 1)  # row i: pad[i : i+win+1]
    rows = view[ends]  # x[end-win-1 : end]: the pre-emphasis sample + the window
    out = []
    step = 4096  # bounded memory for long files
    second = also if also is not None else (p if keep_power else None)
    for i in range(0, n, step):
        r = rows[i : i + step]
        out.append(p.analyse(r[:, 1:], r[:, 0], second))
    cols = [np.concatenate(parts) for parts in zip(*out, strict=True)]
    power = cols[5].astype(np.float32) if keep_power else None
    ends = ends.astype(np.int64)
    if also is None:
        return FrameFeatures(ends, *cols[:4], power=power), None
    first = FrameFeatures(ends, *cols[:4])
    return first, FrameFeatures(ends, cols[4], *cols[1:4], power=power)


class MfccStream:
    """Incremental features: `push` samples of any length, get the frames they complete."""

    def __init__(
        self,
        sample_rate: int,
        settings: MfccSettings | None = None,
        also: MfccSettings | None = None,
        cepstrum: bool = True,
        also_cepstrum: bool = True,
    ) -> None:
        """`also`: settings of a second cepstrum per frame (same window, hop and
        pre-emphasis), appended to each frame's tuple, then the frame's power spectrum.
        `cepstrum=False` (with `also`): the first cepstrum is not computed (None), for a reader
        of the second one only; `also_cepstrum=False`: nor the second (None), for a reader
        that computes it from the power spectrum."""
        self.settings = settings or MfccSettings()
        self.plan = _plan(self.settings, sample_rate)
        self.also = None if also is None else _plan(also, sample_rate)
        if self.also is not None:
            a, p = self.also, self.plan
            if (a.win, a.hop, a.nfft, a.s.preemph) != (p.win, p.hop, p.nfft, p.s.preemph):
                raise ValueError("MfccStream: `also` must share window, hop and pre-emphasis")
        self.cepstrum = bool(cepstrum) or self.also is None
        self.also_cepstrum = bool(also_cepstrum)
        self.sample_rate = int(sample_rate)
        p = self.plan
        # history: the win+1 samples before the next frame end, kept in a fixed buffer
        self._buf = np.zeros(p.win + 1 + p.hop, np.float64)
        self._fill = p.win + 1  # samples valid in _buf (the zero history counts)
        self._pos = 0  # samples consumed so far (absolute index of the next sample)

    @property
    def hop(self) -> int:
        return self.plan.hop

    @property
    def pushed(self) -> int:
        """Samples pushed so far."""
        return self._pos

    def newest(self) -> tuple[int, np.ndarray, float, float, float] | None:
        """(end, mfcc, level_db, flatness, periodicity) of a frame ending at the newest sample
        pushed — what `push` would return if a hop ended now — without changing the stream.
        None before a whole frame has been pushed."""
        p = self.plan
        if self._fill < p.win + 1:
            return None
        return self._pos, *p.analyse_hop(
            self._buf[self._fill - p.win - 1 : self._fill],
            self.also,
            self.cepstrum,
            self.also_cepstrum,
        )

    def push(self, samples: np.ndarray) -> list[tuple[int, np.ndarray, float, float, float]]:
        """Returns one (end, mfcc, level_db, flatness, periodicity) per completed frame."""
        p = self.plan
        x = np.asarray(samples, np.float64).reshape(-1)
        out = []
        i = 0
        n = len(x)
        buf = self._buf
        while i < n:
            need = len(buf) - self._fill
            take = min(need, n - i)
            buf[self._fill : self._fill + take] = x[i : i + take]
            self._fill += take
            i += take
            self._pos += take
            if self._fill == len(buf):
                # the last win+1 samples
                hop = p.analyse_hop(buf[p.hop :], self.also, self.cepstrum, self.also_cepstrum)
                out.append((self._pos, *hop))
                buf[: p.win + 1] = buf[p.hop :]
                self._fill = p.win + 1
        return out
