"""Live (causal, incremental) body language from the voice: the streaming twin of `audio.motion`.

`LiveMotion.update(t_s, level_db, voiced, pitch_hz)` is called once per video frame (about
`fps` times a second) with what was heard during the last frame: RMS loudness in dBFS, whether
it was pitched, and its pitch. It looks only at the past, costs O(1) per call (fixed-size state;
the tempo estimate runs a fixed-size FFT a few times a second) and returns a `MotionState`, which
`apply` lays onto the `AvatarParams` coming from lip-sync. Same seed and same inputs give the same
states bit for bit.

What it does (numbers shared with the offline module, audio/motion.py):

* blinks at random gaps (the offline gap law); excitement makes the blink clock run up to twice
  as fast, and a blink that falls due on a syllable onset waits for it (at most 0.4 s); every
  blink shuts the eyes fully for at least one frame at any frame rate;
* idle sway with the offline table of incommensurate periods on head, body and breath;
* nods on energy accents (a causal onset detector on the loudness), head tilts on the strongest
  ones, and the head rising / tilting a little while the pitch is above its running reference;
* a running tempo: half-wave rectified loudness rises kept for the last 6 s, autocorrelated four
  times a second (tempo prior around 120 BPM, octave-stable), driving a phase-locked oscillator
  that onsets pull into phase; body sway follows it with one side per beat (per two beats above
  140 BPM, as offline) and fades with the beat confidence;
* gaze saccades with fixation holds (shorter holds when excited);
* excitement 0..1 from loudness against a running loud reference, slow attack / release,
  scaling every amplitude.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from audio.motion import (
    BLINK_CLOSE_S,
    BLINK_TOTAL_S,
    BREATH_PERIOD_S,
    IDLE_PERIODS_S,
    MotionParams,
    beat_divisor,
    blink_gap,
    blink_openness,
    idle_terms,
    idle_value,
    next_fixation,
    pulse,
    saccade_ease,
)
from core.avatar import RANGES, AvatarParams

__all__ = ["LiveMotion", "MotionState", "apply"]

FLOOR_DB = -90.0
TEMPO_WINDOW_S = 6.0  # onset history autocorrelated for the tempo
TEMPO_EVERY_S = 0.25  # tempo re-estimated this often
TEMPO_MIN_HISTORY_S = 2.5
BPM_RANGE = (60.0, 200.0)
BPM_PRIOR = 120.0  # log-normal prior, one octave wide (resolves octave ambiguity)


@dataclass(slots=True)
class MotionState:
    """Motion offsets at one instant (angles in degrees), plus what the tracker believes."""

    t_s: float = 0.0
    head_yaw: float = 0.0
    head_pitch: float = 0.0
    head_roll: float = 0.0
    body_yaw: float = 0.0
    body_roll: float = 0.0
    eye_open: float = 1.0
    eye_smile: float = 0.0
    gaze_x: float = 0.0
    gaze_y: float = 0.0
    brow: float = 0.0
    mouth_form: float = 0.0
    breath: float = 0.0
    cheek: float = 0.0
    # Diagnostics / events.
    excitement: float = 0.0
    activity: float = 0.0
    onset: float = 0.0  # 0..1 onset strength of this frame
    blink_started: bool = False
    nod_started: bool = False
    tempo_bpm: float = 0.0  # 0 until a tempo is found
    beat_confidence: float = 0.0  # 0..1
    beat_phase: float = 0.0  # beats since an arbitrary origin, wrapped; integer = on the beat


_CLAMPED = {
    "head_yaw": RANGES["head_yaw"],
    "head_pitch": RANGES["head_pitch"],
    "head_roll": RANGES["head_roll"],
    "body_yaw": RANGES["body_yaw"],
    "body_roll": RANGES["body_roll"],
    "eye_open": RANGES["eye_open_l"],
    "eye_smile": RANGES["eye_smile"],
    "gaze_x": RANGES["gaze_x"],
    "gaze_y": RANGES["gaze_y"],
    "brow": RANGES["brow_l"],
    "mouth_form": RANGES["mouth_form"],
    "breath": RANGES["breath"],
    "cheek": RANGES["cheek"],
}


def _clip(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def _ema(y: float, x: float, dt: float, tau: float) -> float:
    return y + (x - y) * (1.0 - math.exp(-dt / tau))


class LiveMotion:
    """Causal motion generator; one `update` per video frame."""

    def __init__(self, seed: int = 0, fps: int = 60, params: MotionParams | None = None):
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.p = params or MotionParams()
        self.fps = fps
        ss = np.random.SeedSequence(seed)
        idle_ss, blink_ss, gaze_ss, tilt_ss = ss.spawn(4)
        # Independent streams: excitement changing the blink rate leaves gaze and idle alone.
        irng = np.random.default_rng(idle_ss)
        self._idle = {name: idle_terms(irng, per) for name, per in IDLE_PERIODS_S.items()}
        self._breath_om = 2 * math.pi / float(irng.uniform(*BREATH_PERIOD_S))
        self._breath_ph = float(irng.uniform(0, 2 * math.pi))
        self._blink_rng = np.random.default_rng(blink_ss)
        self._gaze_rng = np.random.default_rng(gaze_ss)
        self._tilt_side = float(np.random.default_rng(tilt_ss).choice([-1.0, 1.0]))

        self._t_prev: float | None = None
        # Loudness tracking.
        self._level_prev = FLOOR_DB
        self._noise_db = FLOOR_DB
        self._ref_db = -35.0
        self._exc = 0.0
        self._presence = 0.0
        self._singing = 0.0
        self._opeak = 0.0
        self._last_event_t = -1e9
        # Blinks.
        self._blink_target = float(self._blink_rng.uniform(0.3, 2.5))
        self._blink_progress = 0.0
        self._blink_t0 = -1e9
        self._blink_on = False
        self._blink_shut_seen = False
        self._blink_deferred = 0.0
        self.blink_count = 0
        # Nods and tilts: the last two of each (older ones have faded).
        self._nods = [(-1e9, 0.0), (-1e9, 0.0)]
        self._tilts = [(-1e9, 0.0), (-1e9, 0.0)]
        self._last_nod_t = -1e9
        self._last_tilt_t = -1e9
        self.nod_count = 0
        # Prosody.
        self._pitch_ref: float | None = None
        self._rel = 0.0
        # Gaze.
        self._fix_t0 = 0.0
        self._fix_end = 0.0
        self._gaze_from = (0.0, 0.0)
        self._gaze_to = (0.0, 0.0)
        # Tempo: ring buffer of onset strength, one value per update.
        self._n_env = max(round(TEMPO_WINDOW_S * fps), 8)
        self._env = np.zeros(self._n_env)
        self._env_i = 0
        self._env_count = 0
        self._nfft = 1 << math.ceil(math.log2(2 * self._n_env))
        self._tempo_every = max(round(TEMPO_EVERY_S * fps), 1)
        self._since_tempo = 0
        self._lag_lo = max(math.floor(fps * 60.0 / BPM_RANGE[1]), 1)
        self._lag_hi = math.ceil(fps * 60.0 / BPM_RANGE[0])
        lags = np.arange(self._lag_hi + 2, dtype=np.float64)
        bpm = 60.0 * fps / np.maximum(lags, 1e-9)
        self._prior = np.exp(-0.5 * np.log2(bpm / BPM_PRIOR) ** 2)
        self._period_s = 0.0  # 0 = no tempo yet
        self._pending: tuple[float, int] = (0.0, 0)  # disagreeing candidate period, count
        self._phase = 0.0
        self._beat_conf = 0.0
        self._conf_target = 0.0

    # ------------------------------------------------------------------ update

    def update(
        self, t_s: float, level_db: float, voiced: bool, pitch_hz: float | None
    ) -> MotionState:
        """Motion at `t_s` given the loudness / voicing / pitch heard over the last frame."""
        p = self.p
        t = float(t_s)
        dt = 1.0 / self.fps if self._t_prev is None else _clip(t - self._t_prev, 0.0, 0.25)
        self._t_prev = t
        st = MotionState(t_s=t)

        # --- Loudness: gate, excitement, onsets (as the offline features, but causal).
        level = FLOOR_DB if not math.isfinite(level_db) else max(float(level_db), FLOOR_DB)
        self._ref_db = max(level, self._ref_db - 1.0 * dt, -35.0)
        if level < self._noise_db:
            self._noise_db = level
        else:
            self._noise_db += 1.0 * dt
        gate = max(min(self._noise_db + 8.0, self._ref_db - 30.0), -70.0)
        act = _clip((level - gate) / 6.0, 0.0, 1.0)
        e = _clip((level - (self._ref_db - 18.0)) / 18.0, 0.0, 1.0) * act
        self._exc = _ema(self._exc, e, dt, 0.8 if e > self._exc else 2.5)
        exc = self._exc
        # Sound heard within the last second or two (music between the hits counts).
        self._presence = max(act, self._presence * math.exp(-dt / 1.5))
        is_voiced = bool(voiced) and pitch_hz is not None and pitch_hz > 0 and act > 0.5
        self._singing = _ema(self._singing, act if is_voiced else 0.0, dt, 0.3)

        onset = _clip(level - max(self._level_prev, gate), 0.0, 24.0) / 24.0
        self._level_prev = level
        self._opeak = max(onset, self._opeak * math.exp(-dt / 2.0))
        event = onset > max(0.12, 0.5 * self._opeak) and act > 0.5 and t - self._last_event_t > 0.12
        strength = min(onset / max(self._opeak, 1e-9), 1.0) if event else 0.0
        if event:
            self._last_event_t = t
        st.excitement, st.activity, st.onset = exc, act, onset

        # --- Tempo and the beat oscillator.
        self._env[self._env_i] = onset
        self._env_i = (self._env_i + 1) % self._n_env
        self._env_count = min(self._env_count + 1, self._n_env)
        self._since_tempo += 1
        if self._since_tempo >= self._tempo_every:
            self._since_tempo = 0
            self._estimate_tempo(t)
        self._beat_conf = _ema(self._beat_conf, self._conf_target, dt, 1.0)
        div = 1
        if self._period_s > 0:
            div = beat_divisor(60.0 / self._period_s)
            self._phase += dt / self._period_s
            if event:
                # Pull the oscillator towards the onset (it happened ~half a frame ago).
                ph = self._phase - 0.5 / self.fps / self._period_s
                err = (ph + 0.5) % 1.0 - 0.5
                if abs(err) < 0.3:
                    self._phase -= 0.3 * strength * err
                    self._period_s *= 1.0 + 0.02 * strength * err
            self._phase %= 4.0  # keeps sin(pi * phase / div) continuous for div in {1, 2}
        st.tempo_bpm = 60.0 / self._period_s if self._period_s > 0 else 0.0
        st.beat_confidence = self._beat_conf
        st.beat_phase = self._phase

        # --- Idle sway and breathing.
        hy, hp, hr = p.idle_head_deg
        idle = self._idle
        head_yaw = hy * idle_value(idle["head_yaw"], t)
        head_pitch = hp * idle_value(idle["head_pitch"], t)
        head_roll = hr * idle_value(idle["head_roll"], t)
        body_yaw = p.idle_body_deg[0] * idle_value(idle["body_yaw"], t)
        body_roll = p.idle_body_deg[1] * idle_value(idle["body_roll"], t)
        st.breath = 0.5 + 0.5 * math.sin(self._breath_om * t + self._breath_ph)
        gain = p.min_excitement + (1.0 - p.min_excitement) * exc

        # --- Beat sway (music only: scaled by the beat confidence and recent sound).
        if self._period_s > 0:
            sway = math.sin(math.pi * self._phase / div) * (0.5 + 0.5 * exc)
            sway *= self._beat_conf * min(self._presence * 2.0, 1.0)
            body_roll += p.sway_deg * sway
            body_yaw += 0.4 * p.sway_deg * sway

        # --- Nods on energy accents, tilts on the strongest.
        if event and t - self._last_nod_t >= 0.3 * div:
            self._nods = [self._nods[1], (t, gain * max(strength, 0.3))]
            self._last_nod_t = t
            self.nod_count += 1
            st.nod_started = True
        if event and strength > 0.9 and onset > 0.4 and t - self._last_tilt_t > 1.5:
            self._tilt_side = -self._tilt_side
            self._tilts = [self._tilts[1], (t, gain * self._tilt_side)]
            self._last_tilt_t = t
        nod = sum(g * pulse((t - t0) / p.nod_peak_s) for t0, g in self._nods if t - t0 < 0.8)
        tilt = sum(g * pulse((t - t0) / 0.15) for t0, g in self._tilts if t - t0 < 2.0)
        head_pitch -= p.nod_deg * nod
        head_roll += p.tilt_deg * tilt

        # --- Prosody: pitch above its running reference lifts and tilts the head.
        if is_voiced:
            lp = math.log2(float(pitch_hz))
            if self._pitch_ref is None:
                self._pitch_ref = lp
            self._pitch_ref = _ema(self._pitch_ref, lp, dt, 2.5)
            rel_target = _clip(lp - self._pitch_ref, -1.0, 1.0)
        else:
            rel_target = 0.0
        self._rel = _ema(self._rel, rel_target, dt, 0.15)
        rel = self._rel
        head_pitch += p.prosody_pitch_deg * rel
        head_roll += self._tilt_side * 0.5 * p.prosody_pitch_deg * max(rel, 0.0)
        st.brow = 0.35 * rel + 0.15 * exc

        # --- Blinks.
        st.eye_open = self._blink(t, dt, exc, onset)
        st.blink_started = self._blink_t0 == t and self._blink_on

        # --- Gaze: fixations and saccades; eyes follow the head a little.
        if t >= self._fix_end:
            self._gaze_from = self._gaze_at(t)
            hold, x1, y1 = next_fixation(self._gaze_rng, p)
            self._gaze_to = (x1, y1)
            self._fix_t0 = t
            self._fix_end = t + hold * (1.0 - 0.3 * exc)
        gx, gy = self._gaze_at(t)
        st.gaze_x = gx + 0.01 * head_yaw
        st.gaze_y = gy

        # --- Singing loudly looks happy.
        happy = exc * self._singing
        st.mouth_form = 0.1 + 0.35 * happy
        st.eye_smile = 0.3 * happy
        st.cheek = 0.1 + 0.25 * exc

        st.head_yaw, st.head_pitch, st.head_roll = head_yaw, head_pitch, head_roll
        st.body_yaw, st.body_roll = body_yaw, body_roll
        for name, (lo, hi, _) in _CLAMPED.items():
            setattr(st, name, _clip(getattr(st, name), lo, hi))
        return st

    # ------------------------------------------------------------------ parts

    def _gaze_at(self, t: float) -> tuple[float, float]:
        k = saccade_ease(t - self._fix_t0)
        (x0, y0), (x1, y1) = self._gaze_from, self._gaze_to
        return x0 + (x1 - x0) * k, y0 + (y1 - y0) * k

    def _blink(self, t: float, dt: float, exc: float, onset: float) -> float:
        # The blink clock (started with the last blink) runs faster when excited (up to 2x).
        self._blink_progress += dt * (1.0 + exc)
        if not self._blink_on:
            due = self._blink_progress >= self._blink_target and t - self._blink_t0 >= 0.8
            if due:
                # Not on a syllable onset: wait until it has passed (at most 0.4 s).
                busy = onset > 0.05 or t - self._last_event_t < 0.12
                if busy and self._blink_deferred < 0.4:
                    self._blink_deferred += dt
                    return 1.0
                self._blink_on = True
                self._blink_t0 = t
                self._blink_shut_seen = False
                self._blink_deferred = 0.0
                self._blink_progress = 0.0
                self._blink_target = blink_gap(self._blink_rng, self.p)
                self.blink_count += 1
            else:
                return 1.0
        u = t - self._blink_t0
        if u >= BLINK_TOTAL_S and self._blink_shut_seen:
            self._blink_on = False
            return 1.0
        v = blink_openness(u) if u < BLINK_TOTAL_S else 1.0
        if u >= BLINK_CLOSE_S and not self._blink_shut_seen:
            v = 0.0  # a low frame rate may step over the hold: shut this frame instead
        if v == 0.0:
            self._blink_shut_seen = True
        return v

    def _estimate_tempo(self, t: float) -> None:
        n = self._env_count
        if n < TEMPO_MIN_HISTORY_S * self.fps:
            return
        if n < self._n_env:
            x = self._env[:n].copy()
        else:
            x = np.concatenate((self._env[self._env_i :], self._env[: self._env_i]))
        # Light smoothing helps sub-frame peak interpolation.
        x[1:-1] = 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:]
        x -= x.mean()
        spec = np.fft.rfft(x, self._nfft)
        ac = np.fft.irfft(spec.real**2 + spec.imag**2, self._nfft)[:n]
        if ac[0] <= 1e-9:
            self._conf_target = 0.0
            return
        ac = ac / (n - np.arange(n))  # unbiased
        ac /= ac[0]
        lo = self._lag_lo
        hi = min(self._lag_hi, n // 2 - 1)
        if hi <= lo + 2:
            return
        lags = np.arange(lo, hi + 1)
        score = ac[lo : hi + 1].copy()
        dbl = 2 * lags
        ok = dbl < n - 1
        score[ok] += 0.5 * ac[dbl[ok]]
        score *= self._prior[lo : hi + 1]
        k = int(np.argmax(score))
        lag = lo + k
        conf = float(ac[lag])
        a, b, c = float(ac[lag - 1]), float(ac[lag]), float(ac[lag + 1])
        den = a - 2 * b + c
        frac = 0.5 * (a - c) / den if den < 0 else 0.0
        period = (lag + _clip(frac, -0.5, 0.5)) / self.fps
        self._conf_target = _clip((conf - 0.15) / 0.35, 0.0, 1.0)
        if self._conf_target <= 0.0:
            return
        if self._period_s <= 0:
            self._period_s = period
            # Start the oscillator on the most recent onset event.
            self._phase = (t - self._last_event_t) / period % 4.0
            return
        ratio = math.log(period / self._period_s)
        if abs(ratio) < 0.08:
            self._period_s *= math.exp(0.5 * ratio)
            self._pending = (0.0, 0)
            return
        cand, count = self._pending
        if cand > 0 and abs(math.log(period / cand)) < 0.08:
            count += 1
        else:
            cand, count = period, 1
        if count >= 3:  # a real tempo change (or octave switch) that persisted 0.75 s
            self._period_s = period  # the phase (in beats) carries on
            cand, count = 0.0, 0
        self._pending = (cand, count)


def apply(state: MotionState, base: AvatarParams) -> AvatarParams:
    """`base` (lip-sync: mouth, vowels) with the motion laid on top, clamped to Live2D ranges.

    Angles, gaze, brows and mouth form are added; eye openness multiplies (a blink closes the
    eyes whatever the base says); eye smile and cheek take the larger; breath is the motion's.
    """
    s = state
    out = replace(
        base,
        head_yaw=base.head_yaw + s.head_yaw,
        head_pitch=base.head_pitch + s.head_pitch,
        head_roll=base.head_roll + s.head_roll,
        body_yaw=base.body_yaw + s.body_yaw,
        body_roll=base.body_roll + s.body_roll,
        eye_open_l=base.eye_open_l * s.eye_open,
        eye_open_r=base.eye_open_r * s.eye_open,
        eye_smile=max(base.eye_smile, s.eye_smile),
        gaze_x=base.gaze_x + s.gaze_x,
        gaze_y=base.gaze_y + s.gaze_y,
        brow_l=base.brow_l + s.brow,
        brow_r=base.brow_r + s.brow,
        mouth_form=base.mouth_form + s.mouth_form,
        breath=s.breath,
        cheek=max(base.cheek, s.cheek),
    )
    return out.clamped()
