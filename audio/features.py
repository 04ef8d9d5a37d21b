"""Frame-rate audio features, sampled at the video frames' time stamps.

Everything here works on a mono signal. `compute_features` resamples it to `ANALYSIS_RATE`
(16 kHz: enough for voice formants and onsets, and cheap), then:

* frame-exact quantities (loudness, periodicity, spectral shape) are computed on a short window
  *centred on each frame's pts* (``core.clock.frame_pts_ns``), so frame ``i`` describes the
  sound heard at ``pts_i``;
* quantities computed on their own hop grid (onset strength and beats, audio/beats.py;
  optional YIN, librosa's) are computed at a 16-20 ms hop and linearly interpolated to the
  frame times.

Nothing here imports Qt or torch.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from audio import fft
from audio.beats import beat_track, onset_strength
from core.clock import NS_PER_S, frame_pts_ns

__all__ = [
    "ANALYSIS_RATE",
    "AudioFeatures",
    "compute_features",
    "frame_centres",
    "frame_windows",
    "loudness_activity",
    "periodicity",
    "resample_mono",
    "rms_dbfs",
]

ANALYSIS_RATE = 16_000
WINDOW = 512  # 32 ms at 16 kHz: loudness / spectral window around each frame time
PERIOD_WINDOW = 1024  # 64 ms: periodicity needs two periods of the lowest pitch
PITCH_HOP = 320  # 20 ms (YIN is the costliest feature)
ONSET_HOP = 256  # 16 ms
FMIN, FMAX = 65.0, 1000.0  # pitch search range (Hz): low male speech .. high soprano
SILENCE_DB = -90.0  # floor for log loudness


NUMBA_CACHE_ENV = "NUMBA_CACHE_DIR"


def numba_cache_dir() -> str:
    """Where numba keeps librosa's compiled functions: $NUMBA_CACHE_DIR, else Kagura's user
    cache dir (core/paths.py) — writable for every user, unlike a system site-packages."""
    from core.paths import cache_dir

    return os.environ.get(NUMBA_CACHE_ENV) or str(cache_dir("numba"))


def import_librosa():
    """librosa, its numba functions compiled once per machine instead of once per process.

    numba reads NUMBA_CACHE_DIR when it is imported, so it is set first. librosa.beat declares
    one of its vectorized functions `cache=False`, which recompiles it in every process (seconds
    on a small CPU); while librosa.beat is imported, its decorator is asked to cache it too."""
    if "librosa.beat" in sys.modules:
        return sys.modules["librosa"]
    os.environ[NUMBA_CACHE_ENV] = numba_cache_dir()
    import numba

    numba.config.reload_config()  # numba may have been imported before the variable was set
    guvectorize = numba.guvectorize

    def cached_guvectorize(*args, **kwargs):
        kwargs["cache"] = True
        return guvectorize(*args, **kwargs)

    numba.guvectorize = cached_guvectorize
    try:
        import librosa.beat
        import librosa.onset
    finally:
        numba.guvectorize = guvectorize
    import librosa

    return librosa


def resample_mono(mono: np.ndarray, sample_rate: int, rate: int = ANALYSIS_RATE) -> np.ndarray:
    """float32 mono at `rate` (soxr high quality), same duration."""
    mono = np.asarray(mono, np.float32)
    if sample_rate == rate:
        return mono
    import soxr

    return np.asarray(soxr.resample(mono, sample_rate, rate, quality="HQ"), np.float32)


def frame_centres(num_frames: int, fps: int, rate: int) -> np.ndarray:
    """Sample index (at `rate`) of each video frame's pts: floor(pts_ns * rate / 1e9), int64."""
    pts = np.array([frame_pts_ns(i, fps) for i in range(num_frames)], np.int64)
    return pts * rate // NS_PER_S


def frame_windows(y: np.ndarray, centres: np.ndarray, width: int) -> np.ndarray:
    """(n, width) view of `y` on windows centred at `centres` (zero padded at the edges)."""
    half = width // 2
    pad = np.pad(np.asarray(y, np.float32), (half, width))
    view = np.lib.stride_tricks.sliding_window_view(pad, width)
    # Centre c in `y` is window start c in `pad`.
    return view[np.clip(centres, 0, len(view) - 1)]


def periodicity(windows: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalised autocorrelation peak (0..1) and its f0 (Hz) per window, by FFT.

    Voiced speech/singing scores ~0.5-0.95, noise and fricatives stay below ~0.3.
    """
    n, w = windows.shape
    x = windows - windows.mean(axis=1, keepdims=True)
    x = x * np.hanning(w).astype(np.float32)
    nfft = 1 << int(np.ceil(np.log2(2 * w)))
    spec = fft.rfft(x, nfft, axis=1)
    ac = fft.irfft(np.abs(spec) ** 2, nfft, axis=1)[:, :w]
    # Unbias by the window's own autocorrelation so longer lags are not penalised.
    win = np.hanning(w)
    wac = np.fft.irfft(np.abs(np.fft.rfft(win, nfft)) ** 2, nfft)[:w]
    ac = ac / np.maximum(wac / wac[0], 1e-3)
    lo = max(int(rate / FMAX), 2)
    hi = min(int(rate / FMIN), w // 2)
    seg = ac[:, lo:hi]
    best = seg.max(axis=1, keepdims=True)
    # Octave guard: the shortest lag that is a local peak within 10 % of the best one.
    local = np.zeros_like(seg, dtype=bool)
    local[:, 1:-1] = (seg[:, 1:-1] >= seg[:, :-2]) & (seg[:, 1:-1] >= seg[:, 2:])
    k = np.argmax(local & (seg >= 0.9 * best), axis=1)
    k = np.where(local.any(axis=1), k, np.argmax(seg, axis=1))
    peak = seg[np.arange(n), k] / np.maximum(ac[:, 0], 1e-12)
    peak = np.where(ac[:, 0] > 1e-10, peak, 0.0)
    return np.clip(peak, 0.0, 1.0).astype(np.float32), (rate / (k + lo)).astype(np.float32)


@dataclass
class AudioFeatures:
    """Per-frame features (arrays of length ``num_frames``) plus clip-level statistics."""

    fps: int
    times_s: np.ndarray  # float64 (n,): pts of each frame in seconds
    rms_db: np.ndarray  # float32 (n,): RMS loudness, dBFS (sine of amplitude 1 = -3 dB)
    periodicity: np.ndarray  # float32 (n,): 0..1 autocorrelation peak
    activity: np.ndarray  # float32 (n,): 0..1 "a voice/sound is active here"
    voiced: np.ndarray  # bool (n,): pitched and active
    f0_hz: np.ndarray  # float32 (n,): pitch (autocorrelation or YIN), NaN where unvoiced
    centroid_hz: np.ndarray  # float32 (n,): spectral centroid
    flatness: np.ndarray  # float32 (n,): spectral flatness 0..1
    onset: np.ndarray  # float32 (n,): onset strength normalised to ~0..1
    accent: np.ndarray  # float32 (n,): energy accents 0..1 (loudness rises)
    excitement: np.ndarray  # float32 (n,): slow 0..1 intensity of the performance
    beat_times_s: np.ndarray  # float64 (b,): beat times (audio/beats.py beat_track)
    beat_pos: np.ndarray  # float64 (n,): continuous beat count at each frame (0 at beat 0)
    tempo_bpm: float
    ref_db: float  # loud reference (95th percentile of active frames)
    noise_db: float  # noise floor estimate (10th percentile)

    @property
    def num_frames(self) -> int:
        return len(self.times_s)


def rms_dbfs(windows: np.ndarray) -> np.ndarray:
    """RMS of each window row in dBFS (floored at SILENCE_DB), float32."""
    rms = np.sqrt(np.mean(np.square(windows, dtype=np.float64), axis=1))
    return (20 * np.log10(np.maximum(rms, 10 ** (SILENCE_DB / 20)))).astype(np.float32)


def loudness_activity(rms_db: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Relative loudness gate: (activity 0..1 per frame, reference dB, noise-floor dB).

    The reference is the 95th percentile of frames well above the noise floor, so a quiet
    recording is judged against its own level. Where the clip has real pauses (reference more
    than 12 dB above the 10th-percentile floor) the gate sits 6 dB over the floor (at most 30 dB
    under the reference); otherwise (continuous sound, or steady noise) 35 dB under the
    reference. Never below -80 dBFS. Noise that passes this gate is the periodicity gate's job.
    """
    if len(rms_db) == 0:
        return np.zeros(0, np.float32), SILENCE_DB, SILENCE_DB
    noise_db = float(np.percentile(rms_db, 10))
    loud = rms_db[rms_db > max(noise_db + 6.0, -85.0)]
    ref_db = float(np.percentile(loud, 95)) if len(loud) else float(np.max(rms_db))
    gate_db = min(noise_db + 6.0, ref_db - 30.0) if ref_db - noise_db > 12 else ref_db - 35.0
    gate_db = max(gate_db, -80.0)
    activity = np.clip((rms_db - gate_db) / 6.0, 0.0, 1.0).astype(np.float32)
    return activity, ref_db, noise_db


def _smooth(x: np.ndarray, frames: float) -> np.ndarray:
    """Zero-phase moving average over about `frames` frames (edges held)."""
    k = max(round(frames), 1)
    if k <= 1 or len(x) == 0:
        return x.astype(np.float32)
    pad = np.pad(x.astype(np.float64), (k // 2, k - 1 - k // 2), mode="edge")
    c = np.cumsum(np.r_[0.0, pad])
    return ((c[k:] - c[:-k]) / k).astype(np.float32)


def _interp(times: np.ndarray, grid_t: np.ndarray, values: np.ndarray) -> np.ndarray:
    if len(grid_t) == 0:
        return np.zeros(len(times), np.float32)
    return np.interp(times, grid_t, values).astype(np.float32)


def compute_features(
    mono: np.ndarray,
    sample_rate: int,
    fps: int,
    num_frames: int,
    *,
    beats: bool = True,
    pitch: str = "acf",
) -> AudioFeatures:
    """Features of `mono` at `sample_rate` for frames 0..num_frames-1 at `fps`."""
    y = resample_mono(mono, sample_rate)
    sr = ANALYSIS_RATE
    n = int(num_frames)
    times = np.array([frame_pts_ns(i, fps) for i in range(n)], np.float64) / NS_PER_S
    centres = frame_centres(n, fps, sr)
    win = frame_windows(y, centres, WINDOW)
    # the onsets and beats read the signal alone: made beside the frames' features (numpy
    # leaves the GIL in its array work; the render's first frame waits for both)
    with ThreadPoolExecutor(1, thread_name_prefix="onsets") as pool:
        onsets = pool.submit(_onsets_and_beats, y, sr, beats)
        return _frame_features(y, sr, fps, n, times, centres, win, pitch, onsets)


def _onsets_and_beats(y: np.ndarray, sr: int, beats: bool) -> tuple[np.ndarray, float, np.ndarray]:
    """The onset envelope on a 16 ms grid (numpy: the render does not wait for librosa's
    import) and the tempo and beat times found in it."""
    env = onset_strength(y, sr, ONSET_HOP) if len(y) >= 4 * ONSET_HOP else np.zeros(0)
    tempo, beat_times = 0.0, np.zeros(0)
    if beats and len(env) > 8 and float(env.max()) > 0:
        tempo, beat_times = beat_track(env, sr, ONSET_HOP)
    return env, tempo, beat_times


def _frame_features(y, sr, fps, n, times, centres, win, pitch, onsets: Future) -> AudioFeatures:
    """`compute_features`' per-frame part, `onsets` (`_onsets_and_beats`) joined when read."""
    # Loudness.
    rms_db = rms_dbfs(win)

    # Periodicity and spectral shape on the same windows.
    per, acf_f0 = periodicity(frame_windows(y, centres, PERIOD_WINDOW), sr)
    mag = np.abs(fft.rfft(win * np.hanning(WINDOW).astype(np.float32), axis=1)) + 1e-10
    freqs = np.fft.rfftfreq(WINDOW, 1 / sr)
    centroid = (mag @ freqs) / mag.sum(axis=1)
    flat = np.exp(np.mean(np.log(mag), axis=1)) / np.mean(mag, axis=1)

    activity, ref_db, noise_db = loudness_activity(rms_db)

    # Pitch: by default the frame-exact autocorrelation pitch computed with the periodicity
    # (agrees with librosa.yin within 5 % on ~94 % of voiced frames of espeak-ng speech and
    # costs nothing extra); pitch="yin" runs librosa.yin on a 20 ms grid and interpolates
    # (about +0.3 s per 3 minutes, plus ~1.5 s of numba compilation once per process).
    if pitch == "yin" and len(y) >= 2048:
        f0 = import_librosa().yin(
            y, fmin=FMIN, fmax=FMAX, sr=sr, frame_length=1024, hop_length=PITCH_HOP
        )
        f0_t = np.arange(len(f0)) * PITCH_HOP / sr
        f0_frames = np.exp(_interp(times, f0_t, np.log(f0)))
    elif pitch in ("acf", "yin"):
        f0_frames = acf_f0
    else:
        raise ValueError(f"pitch must be 'acf' or 'yin', got {pitch!r}")
    voiced = (per > 0.45) & (activity > 0.5) & (flat < 0.3)
    f0_frames = np.where(voiced, f0_frames, np.nan).astype(np.float32)

    env, tempo, beat_times = onsets.result()
    if len(env):
        env_t = np.arange(len(env)) * ONSET_HOP / sr
        scale = float(np.percentile(env, 99)) or 1.0
        onset = np.clip(_interp(times, env_t, env) / scale, 0.0, 1.0)
    else:
        onset = np.zeros(n, np.float32)
    beat_pos = _beat_position(times, beat_times, tempo)

    # Energy accents: sharp rises of loudness (dB per frame) above the slow trend.
    rise = np.diff(rms_db, prepend=rms_db[:1] if n else rms_db)
    accent = np.clip(rise / 12.0, 0.0, 1.0) * activity
    accent = np.maximum(accent, onset * activity)

    # Excitement: loudness relative to the reference, smoothed over ~2 s.
    e = np.clip((rms_db - (ref_db - 18.0)) / 18.0, 0.0, 1.0) * activity
    excitement = np.clip(_smooth(e, 2.0 * fps) * 1.2, 0.0, 1.0)

    return AudioFeatures(
        fps=fps,
        times_s=times,
        rms_db=rms_db,
        periodicity=per,
        activity=activity,
        voiced=voiced,
        f0_hz=f0_frames,
        centroid_hz=centroid.astype(np.float32),
        flatness=flat.astype(np.float32),
        onset=onset.astype(np.float32),
        accent=accent.astype(np.float32),
        excitement=excitement.astype(np.float32),
        beat_times_s=beat_times,
        beat_pos=beat_pos,
        tempo_bpm=tempo,
        ref_db=ref_db,
        noise_db=noise_db,
    )


def _beat_position(times: np.ndarray, beat_times: np.ndarray, tempo: float) -> np.ndarray:
    """Continuous beat count at `times` (linear between beats, extrapolated at the tempo)."""
    if len(beat_times) >= 2:
        idx = np.arange(len(beat_times), dtype=np.float64)
        pos = np.interp(times, beat_times, idx)
        first_p = beat_times[1] - beat_times[0]
        last_p = beat_times[-1] - beat_times[-2]
        pos = np.where(times < beat_times[0], (times - beat_times[0]) / first_p, pos)
        return np.where(times > beat_times[-1], idx[-1] + (times - beat_times[-1]) / last_p, pos)
    period = 60.0 / tempo if tempo > 0 else 0.5
    start = beat_times[0] if len(beat_times) else 0.0
    return (times - start) / period
