"""Body language from audio features: blinks, idle breathing sway, beat nods and sway, gaze.

Deterministic: every random choice comes from one ``numpy.random.Generator`` seeded by the
caller, so the same audio and seed give the same track bit for bit. All values stay inside
Live2D's standard ranges (docs/ARCHITECTURE.md, "Outside facts"); amplitudes below are far from the limits.

Numbers used (Live2D SDK habits): blinks at random intervals within 0-7 s, each
closing in 0.10 s, holding 0.05 s and opening in 0.15 s; idle motion as sums of slow sines with
incommensurate periods between ~3.2 s and ~15.5 s so it never visibly repeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from audio.features import AudioFeatures
from core.avatar import RANGES

__all__ = [
    "BLINK_CLOSE_S",
    "BLINK_HOLD_S",
    "BLINK_OPEN_S",
    "BLINK_TOTAL_S",
    "BREATH_PERIOD_S",
    "IDLE_PERIODS_S",
    "SACCADE_S",
    "Motion",
    "MotionParams",
    "beat_divisor",
    "blink_gap",
    "blink_openness",
    "idle_terms",
    "idle_value",
    "motion",
    "next_fixation",
    "pulse",
    "saccade_ease",
]

BLINK_CLOSE_S, BLINK_HOLD_S, BLINK_OPEN_S = 0.10, 0.05, 0.15
BLINK_TOTAL_S = BLINK_CLOSE_S + BLINK_HOLD_S + BLINK_OPEN_S

# Idle sway: incommensurate periods (s) per parameter (Live2D SDK habit: ~3.2..15.5 s). Each is
# jittered +-7 % per seed and gets a random phase (`idle_terms`). Breath is one slow sine.
IDLE_PERIODS_S: dict[str, tuple[float, ...]] = {
    "head_yaw": (6.83, 15.5),
    "head_pitch": (3.71, 11.3),
    "head_roll": (5.29, 13.7),
    "body_yaw": (9.1, 14.3),
    "body_roll": (7.37, 12.1),
}
BREATH_PERIOD_S = (3.2, 3.6)
SACCADE_S = 0.06  # eye jump duration
FIXATION_S = (0.8, 3.0)  # hold between saccades


@dataclass(frozen=True)
class MotionParams:
    """Tunable amplitudes (degrees for angles, Live2D units otherwise)."""

    blink_min_gap_s: float = 1.2  # shortest gap between blink starts (no "fluttering")
    blink_max_gap_s: float = 7.0  # Live2D SDK habit: 0-7 s
    idle_head_deg: tuple[float, float, float] = (4.0, 2.5, 2.5)  # yaw, pitch, roll
    idle_body_deg: tuple[float, float] = (2.0, 1.5)  # body yaw, body roll
    nod_deg: float = 5.0  # head pitch dip on a beat at full excitement
    nod_peak_s: float = 0.08  # the dip is deepest this long after the beat
    sway_deg: float = 4.0  # body roll swing locked to the beat (one side per beat)
    tilt_deg: float = 4.0  # head roll accent on strong onsets
    gaze_amp: tuple[float, float] = (0.35, 0.2)
    prosody_pitch_deg: float = 3.0  # head lifts with the melody
    min_excitement: float = 0.25  # fraction of beat motion kept when quiet


@dataclass
class Motion:
    """Scalar curves (name -> float32 (n,)) plus the events that made them."""

    scalars: dict[str, np.ndarray]
    blink_times_s: np.ndarray
    nod_times_s: np.ndarray
    tilt_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0))


# ---- Shared building blocks (offline `motion` and live `audio.live_motion`) ----


def blink_openness(u):
    """Eye openness 0..1 at `u` seconds after a blink starts (float or array): eased close,
    hold shut, eased open; 1 outside [0, BLINK_TOTAL_S)."""
    u = np.asarray(u, np.float64)
    opening = np.clip((u - BLINK_CLOSE_S - BLINK_HOLD_S) / BLINK_OPEN_S, 0.0, 1.0)
    v = np.where(
        u < BLINK_CLOSE_S,
        0.5 + 0.5 * np.cos(np.pi * np.clip(u / BLINK_CLOSE_S, 0.0, 1.0)),
        np.where(u < BLINK_CLOSE_S + BLINK_HOLD_S, 0.0, 0.5 - 0.5 * np.cos(np.pi * opening)),
    )
    v = np.where((u < 0) | (u >= BLINK_TOTAL_S), 1.0, v)
    return float(v) if v.ndim == 0 else v


def blink_gap(rng: np.random.Generator, p: MotionParams) -> float:
    """A random gap (s) between blink starts, uniform in [min, max] (Live2D SDK habit: 0-7 s)."""
    return float(rng.uniform(p.blink_min_gap_s, p.blink_max_gap_s))


def idle_terms(rng: np.random.Generator, periods: tuple[float, ...]) -> tuple:
    """((omega rad/s, phase rad, weight), ...) for a sum of sines with seed-jittered periods."""
    w = 1.0 / len(periods)
    terms = []
    for period in periods:
        period *= float(rng.uniform(0.93, 1.07))
        terms.append((2 * np.pi / period, float(rng.uniform(0, 2 * np.pi)), w))
    return tuple(terms)


def idle_value(terms: tuple, t):
    """Sum of the sines of `idle_terms` at `t` (float or array), peak <= 1."""
    if isinstance(t, np.ndarray):
        out = np.zeros_like(t)
        for om, ph, w in terms:
            out += w * np.sin(om * t + ph)
        return out
    return sum(w * math.sin(om * t + ph) for om, ph, w in terms)


def pulse(x):
    """Smooth one-sided pulse x*exp(1-x) (peak 1 at x = 1, 0 for x < 0); float or array."""
    if isinstance(x, np.ndarray):
        return np.where(x >= 0, x * np.exp(1.0 - np.maximum(x, 0.0)), 0.0)
    return x * math.exp(1.0 - x) if x >= 0 else 0.0


def next_fixation(rng: np.random.Generator, p: MotionParams) -> tuple[float, float, float]:
    """(hold s, gaze x, gaze y) of the next fixation: half the time back to the camera."""
    hold = float(rng.uniform(*FIXATION_S))
    if rng.random() < 0.5:
        return hold, 0.0, 0.0
    x = float(rng.uniform(-1, 1)) * p.gaze_amp[0]
    y = float(rng.uniform(-1, 1)) * p.gaze_amp[1]
    return hold, x, y


def saccade_ease(dt):
    """0..1 progress of a saccade `dt` seconds after it starts (smoothstep over SACCADE_S)."""
    u = np.clip(np.asarray(dt, np.float64) / SACCADE_S, 0.0, 1.0)
    v = u * u * (3 - 2 * u)
    return float(v) if v.ndim == 0 else v


def beat_divisor(tempo_bpm: float) -> int:
    """Beats per nod / per sway side: every beat up to 140 BPM, every other beat faster."""
    return 2 if tempo_bpm > 140 else 1


# ---- Offline motion ----


def _blink_curve(t: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Eye openness 0..1 at times t for blinks starting at `starts` (eased close/hold/open)."""
    eye = np.ones_like(t)
    total = BLINK_TOTAL_S
    for s in starts:
        lo, hi = np.searchsorted(t, [s, s + total])
        if hi <= lo:
            continue
        v = blink_openness(t[lo:hi] - s)
        # At low frame rates the hold may fall between frames: close the frame nearest to it.
        mid = s + BLINK_CLOSE_S + BLINK_HOLD_S / 2
        j = int(np.argmin(np.abs(t[lo:hi] - mid)))
        v[j] = 0.0
        eye[lo:hi] = np.minimum(eye[lo:hi], v)
    return eye


def _blink_times(rng: np.random.Generator, duration: float, p: MotionParams) -> np.ndarray:
    # First blink somewhere in the first couple of seconds, then uniform gaps in [min, max].
    times = []
    t = float(rng.uniform(0.3, 2.5))
    while t < duration:
        times.append(t)
        t += blink_gap(rng, p)
    return np.asarray(times)


def _idle(rng: np.random.Generator, t: np.ndarray, amp: float, periods: tuple[float, ...]):
    """Sum of sines with incommensurate periods (jittered per seed), peak ~amp."""
    return amp * idle_value(idle_terms(rng, periods), t)


def _bump(t: np.ndarray, events: np.ndarray, gains: np.ndarray, peak_s: float, width_s: float):
    """Sum of smooth one-sided pulses k(t - e) = x*exp(1-x), x = (t-e)/peak_s, peak 1 at peak_s."""
    out = np.zeros_like(t)
    for e, g in zip(events, gains, strict=True):
        lo, hi = np.searchsorted(t, [e - 1e-9, e + width_s])
        out[lo:hi] += g * pulse((t[lo:hi] - e) / peak_s)
    return out


def _gaze(rng: np.random.Generator, t: np.ndarray, duration: float, p: MotionParams):
    gx = np.zeros_like(t)
    gy = np.zeros_like(t)
    s, x0, y0 = 0.0, 0.0, 0.0
    while s < duration:
        hold, x1, y1 = next_fixation(rng, p)
        nxt = s + hold
        lo, hi = np.searchsorted(t, [s, nxt])
        ease = saccade_ease(t[lo:hi] - s)
        gx[lo:hi] = x0 + (x1 - x0) * ease
        gy[lo:hi] = y0 + (y1 - y0) * ease
        s, x0, y0 = nxt, x1, y1
    return gx, gy


def motion(feat: AudioFeatures, seed: int = 0, params: MotionParams | None = None) -> Motion:
    """Motion curves for every frame of `feat` (deterministic in `seed`)."""
    p = params or MotionParams()
    rng = np.random.default_rng(seed)
    t = feat.times_s.astype(np.float64)
    n = len(t)
    fps = feat.fps
    duration = float(t[-1] + 1.0 / fps) if n else 0.0
    exc = feat.excitement.astype(np.float64)
    beat_gain = p.min_excitement + (1 - p.min_excitement) * exc

    # Blinks (same for both eyes).
    blinks = _blink_times(rng, duration, p)
    eye = _blink_curve(t, blinks)

    # Idle breathing sway: incommensurate periods in ~3.2..15.5 s.
    hy, hp, hr = p.idle_head_deg
    head_yaw = _idle(rng, t, hy, IDLE_PERIODS_S["head_yaw"])
    head_pitch = _idle(rng, t, hp, IDLE_PERIODS_S["head_pitch"])
    head_roll = _idle(rng, t, hr, IDLE_PERIODS_S["head_roll"])
    body_yaw = _idle(rng, t, p.idle_body_deg[0], IDLE_PERIODS_S["body_yaw"])
    body_roll = _idle(rng, t, p.idle_body_deg[1], IDLE_PERIODS_S["body_roll"])
    breath_period = float(rng.uniform(*BREATH_PERIOD_S))
    breath = 0.5 + 0.5 * np.sin(2 * np.pi * t / breath_period + float(rng.uniform(0, 2 * np.pi)))

    # Nods on beats (every beat up to 140 BPM, every other beat when faster).
    beats = np.asarray(feat.beat_times_s, np.float64)
    div = beat_divisor(feat.tempo_bpm)
    if div > 1 and len(beats) > 1:
        beats = beats[::div]
    if len(beats) and n:
        bi = np.clip(np.searchsorted(t, beats), 0, n - 1)
        gains = beat_gain[bi] * feat.activity[bi].clip(0.3, 1.0)
        nod = _bump(t, beats, gains, p.nod_peak_s, 0.6)
        head_pitch = head_pitch - p.nod_deg * nod
        nod_times = beats + p.nod_peak_s
    else:
        nod_times = np.zeros(0)

    # Body sway locked to the beat: one side per beat, amplitude with excitement.
    if len(feat.beat_times_s):
        # Sound present within the last/next ~2 s (music between the hits counts); quiet
        # stretches fade the sway out.
        present = np.clip(_smooth_fwd(feat.activity.astype(np.float64), 1.0 * fps) * 4.0, 0.0, 1.0)
        # One side per beat; at fast tempos one side per two beats (tempo aware, as the nods).
        sway = np.sin(np.pi * feat.beat_pos / div) * (0.5 + 0.5 * exc) * present
        body_roll = body_roll + p.sway_deg * sway
        body_yaw = body_yaw + 0.4 * p.sway_deg * sway

    # Head tilts on strong accents, alternating sides with a random start.
    acc = feat.accent.astype(np.float64)
    tilt_times = np.zeros(0)
    if n > 2:
        peaks = (
            np.flatnonzero((acc[1:-1] > acc[:-2]) & (acc[1:-1] >= acc[2:]) & (acc[1:-1] > 0.6)) + 1
        )
        keep: list[int] = []
        for i in peaks:  # at most one tilt per 1.5 s
            if not keep or t[i] - t[keep[-1]] > 1.5:
                keep.append(int(i))
        if keep:
            side = rng.choice([-1.0, 1.0])
            signs = side * np.where(np.arange(len(keep)) % 2 == 0, 1.0, -1.0)
            tilt_times = t[keep]
            head_roll = head_roll + p.tilt_deg * _bump(
                t, tilt_times, signs * beat_gain[keep], 0.15, 1.5
            )

    # Prosody: the head rises a little and the brows lift with the melody.
    f0 = feat.f0_hz.astype(np.float64)
    voiced = np.isfinite(f0)
    rel = np.zeros(n)
    if voiced.sum() > 5:
        lf = np.log2(np.where(voiced, f0, 1.0))
        rel = np.where(voiced, np.clip(lf - np.median(lf[voiced]), -1.0, 1.0), 0.0)
        rel = _smooth_fwd(rel, 0.15 * fps)
    head_pitch = head_pitch + p.prosody_pitch_deg * rel
    brow = 0.35 * rel + 0.15 * exc

    gaze_x, gaze_y = _gaze(rng, t, duration, p)
    # Eyes follow the head a little (look where the face turns).
    gaze_x = gaze_x + 0.01 * head_yaw

    # Singing loudly looks happy.
    singing = _smooth_fwd(feat.activity.astype(np.float64) * (feat.periodicity > 0.4), 0.3 * fps)
    happy = exc * singing
    mouth_form = 0.1 + 0.35 * happy
    eye_smile = 0.3 * happy
    cheek = 0.1 + 0.25 * exc

    scalars = {
        "head_yaw": head_yaw,
        "head_pitch": head_pitch,
        "head_roll": head_roll,
        "body_yaw": body_yaw,
        "body_roll": body_roll,
        "eye_open_l": eye,
        "eye_open_r": eye.copy(),
        "eye_smile": eye_smile,
        "gaze_x": gaze_x,
        "gaze_y": gaze_y,
        "brow_l": brow,
        "brow_r": brow.copy(),
        "mouth_form": mouth_form,
        "breath": breath,
        "cheek": cheek,
    }
    out = {k: np.clip(v, RANGES[k][0], RANGES[k][1]).astype(np.float32) for k, v in scalars.items()}
    return Motion(out, blinks, nod_times, tilt_times)


def _smooth_fwd(x: np.ndarray, frames: float) -> np.ndarray:
    """Zero-phase exponential smoothing (forward then backward) with time constant in frames."""
    if frames <= 1 or len(x) == 0:
        return x
    a = 1.0 - np.exp(-1.0 / frames)
    if len(x) <= 9:
        return x
    # scipy.signal.filtfilt's method in numpy (scipy's import is seconds of the render's start):
    # odd extension at both ends, each pass started in its steady state
    pad = min(len(x) - 1, 3 * int(frames))
    x = np.asarray(x, np.float64)
    ext = np.concatenate([2 * x[0] - x[pad:0:-1], x, 2 * x[-1] - x[-2 : -pad - 2 : -1]])
    y = _ema(_ema(ext, a)[::-1], a)[::-1]
    return y[pad : pad + len(x)]


def _ema(x: np.ndarray, a: float) -> np.ndarray:
    """y[n] = a x[n] + (1 - a) y[n - 1], starting from y[-1] = x[0]."""
    out = np.empty_like(x)
    prev, keep = float(x[0]), 1.0 - a
    for i, v in enumerate(x.tolist()):
        prev = a * v + keep * prev
        out[i] = prev
    return out
