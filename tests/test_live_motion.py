"""Live (causal) motion: blinks, idle, prosody, running tempo and beat lock, cost, determinism.

Inputs are fed one video frame at a time, as the live path does: the RMS level (dBFS) of the
samples heard during the last frame, voicing and pitch. Run with -s to see the measured numbers.
"""

from __future__ import annotations

import dataclasses
import time
import tracemalloc

import numpy as np
import pytest

from audio.live_motion import LiveMotion, MotionState, apply
from audio.live_pitch import LivePitch
from audio.motion import BLINK_TOTAL_S
from core.avatar import RANGES, AvatarParams
from tests.signals import click_track

SR = 16_000
FPS = 60

_STATE_RANGES = {
    "head_yaw": "head_yaw",
    "head_pitch": "head_pitch",
    "head_roll": "head_roll",
    "body_yaw": "body_yaw",
    "body_roll": "body_roll",
    "eye_open": "eye_open_l",
    "eye_smile": "eye_smile",
    "gaze_x": "gaze_x",
    "gaze_y": "gaze_y",
    "brow": "brow_l",
    "mouth_form": "mouth_form",
    "breath": "breath",
    "cheek": "cheek",
}


def _clicks(seconds: float, bpm: float, sr: int = SR) -> np.ndarray:
    return click_track(seconds, bpm, sr, np.float64)


def _frame_levels(y: np.ndarray, fps: int = FPS, sr: int = SR) -> np.ndarray:
    """RMS dBFS of the samples of each frame: frame k covers [k*sr//fps, (k+1)*sr//fps)."""
    n = len(y) * fps // sr
    edges = np.arange(n + 1) * sr // fps
    sq = np.add.reduceat(np.square(y[: edges[-1]]), edges[:-1]) / np.diff(edges)
    return 10 * np.log10(np.maximum(sq, 1e-10))


def _run(levels, voiced=None, pitch=None, seed=0, fps=FPS) -> list[MotionState]:
    m = LiveMotion(seed=seed, fps=fps)
    out = []
    for i, lev in enumerate(levels):
        v = bool(voiced[i]) if voiced is not None else False
        f0 = float(pitch[i]) if pitch is not None and v else None
        out.append(m.update((i + 1) / fps, float(lev), v, f0))
    return out


def _arr(states, name):
    return np.array([getattr(s, name) for s in states], np.float64)


def _blink_gaps(states) -> np.ndarray:
    t = _arr(states, "t_s")
    return np.diff(t[_arr(states, "blink_started") > 0])


def test_blink_intervals_calm_and_excited():
    n = 600 * FPS  # ten minutes
    calm = _run(np.full(n, -90.0), seed=3)
    t = np.arange(1, n + 1) / FPS
    loud = -12.0 + 3.0 * np.sin(2 * np.pi * 0.7 * t)  # loud, steadily sung
    excited = _run(loud, voiced=np.ones(n, bool), pitch=np.full(n, 330.0), seed=3)
    g_calm, g_exc = _blink_gaps(calm), _blink_gaps(excited)
    print(
        f"\nblink gaps: calm mean {g_calm.mean():.2f} s (n={len(g_calm)}), "
        f"excited mean {g_exc.mean():.2f} s (n={len(g_exc)}), "
        f"excitement {np.mean(_arr(excited, 'excitement')[FPS * 10 :]):.2f}"
    )
    assert 2.0 <= g_calm.mean() <= 6.0
    assert g_calm.min() >= 0.8 and g_calm.max() <= 7.0 + 1.0 / FPS
    assert g_calm.std() > 0.8  # irregular
    assert np.mean(_arr(excited, "excitement")[FPS * 10 :]) > 0.8
    assert g_exc.mean() < 0.75 * g_calm.mean()
    assert g_exc.min() >= 0.8


def test_blinks_close_fully_and_avoid_syllable_onsets():
    for fps in (60, 24):
        n = 60 * fps
        t = np.arange(1, n + 1) / fps
        # Syllables every 0.3 s: a hard onset to -15 dB, then a decay.
        level = -15.0 - 40.0 * ((t % 0.3) / 0.3)
        states = _run(level, voiced=np.ones(n, bool), pitch=np.full(n, 220.0), seed=2, fps=fps)
        eye = _arr(states, "eye_open")
        starts = np.flatnonzero(_arr(states, "blink_started") > 0)
        assert len(starts) >= 8
        span = int(np.ceil(BLINK_TOTAL_S * fps)) + 2
        for i in starts[starts + span <= n]:
            seg = eye[i : i + span]
            assert seg.min() == 0.0  # fully closed at least one frame
            assert seg[-1] == 1.0  # and open again
        onset_t = t[_arr(states, "onset") > 0.2]
        for i in starts:  # never right on a syllable onset
            before = onset_t[onset_t <= t[i]]
            assert len(before) == 0 or t[i] - before[-1] >= 0.1 - 1e-9, (fps, t[i])


def _varied_input(seconds: float, fps: int = FPS):
    """Clicks at 128 BPM, a sung glide and silence: exercises every branch."""
    y = _clicks(seconds, 128) * 0.5
    tt = np.arange(len(y)) / SR
    f0 = 200 * 2 ** (np.sin(2 * np.pi * tt / 5.0))
    sung = 0.4 * np.sin(2 * np.pi * np.cumsum(f0) / SR) * (np.sin(2 * np.pi * tt / 7) > -0.3)
    y = y + sung
    levels = _frame_levels(y, fps)
    n = len(levels)
    ft = np.arange(1, n + 1) / fps
    pitch = 200 * 2 ** (np.sin(2 * np.pi * ft / 5.0))
    voiced = np.sin(2 * np.pi * ft / 7) > -0.3
    return levels, voiced, pitch


def test_everything_in_live2d_ranges_and_apply():
    levels, voiced, pitch = _varied_input(40.0)
    states = _run(levels, voiced, pitch, seed=9)
    for name, rng_name in _STATE_RANGES.items():
        lo, hi, _ = RANGES[rng_name]
        v = _arr(states, name)
        assert np.all(np.isfinite(v)) and v.min() >= lo and v.max() <= hi, name
    for name in ("head_yaw", "head_pitch", "head_roll", "body_roll"):
        assert 0.5 < np.ptp(_arr(states, name)) < 30, name
    rng = np.random.default_rng(0)
    vowels = np.array([0.5, 0.1, 0.1, 0.1, 0.1, 0.1], np.float32)
    for s in states[::97]:
        base = AvatarParams(
            pts_ns=123,
            head_yaw=float(rng.uniform(-29, 29)),
            body_roll=float(rng.uniform(-9.5, 9.5)),
            mouth_open=0.7,
            mouth_form=0.9,
            gaze_x=0.9,
            vowels=vowels,
        )
        out = apply(s, base)
        assert out.pts_ns == 123 and out.mouth_open == pytest.approx(0.7)
        np.testing.assert_allclose(out.vowels, vowels, atol=1e-6)
        for name, (lo, hi, _) in RANGES.items():
            assert lo <= getattr(out, name) <= hi, name
        assert out.eye_open_l == pytest.approx(s.eye_open)


@pytest.mark.parametrize("bpm", [120, 100])
def test_click_track_tempo_converges_and_sway_locks(bpm):
    seconds = 14.0
    levels = _frame_levels(_clicks(seconds, bpm))
    states = _run(levels, seed=1)
    t = _arr(states, "t_s")
    tempo = _arr(states, "tempo_bpm")
    # Within 3 % of the tempo or of an octave of it, from some time on.
    ratio = np.log2(np.maximum(tempo, 1e-9) / bpm)
    ok = np.abs(ratio - np.round(ratio)) < np.log2(1.03)
    bad = np.flatnonzero(~ok)
    converged_at = t[bad[-1] + 1] if len(bad) else t[0]
    print(f"\n{bpm} BPM: converged at {converged_at:.2f} s, final {tempo[-1]:.2f} BPM")
    assert converged_at <= 6.0
    assert abs(tempo[-1] - bpm) / bpm < 0.03
    # Beat phase at the frame holding each click (after convergence): close to an integer.
    period = 60.0 / bpm
    edges = np.arange(1, len(levels) + 1) * SR // FPS
    clicks = np.arange(np.ceil(6.0 / period) * period, seconds - 0.1, period)
    idx = np.searchsorted(edges, np.round(clicks * SR).astype(int), side="right")
    phase = _arr(states, "beat_phase")[idx]
    err = (phase + 0.5) % 1.0 - 0.5
    print(f"{bpm} BPM: beat phase error median {np.median(np.abs(err)):.3f} beats")
    assert np.median(np.abs(err)) < 0.06 and np.max(np.abs(err)) < 0.15
    # Body roll sways one side per beat, in step with the clicks.
    late = t > 6.0
    roll = _arr(states, "body_roll")[late]
    ref = np.sin(np.pi * t[late] / period)
    corr = np.corrcoef(roll, ref)[0, 1]
    print(f"{bpm} BPM: body roll vs ideal sway correlation {corr:.2f}")
    assert abs(corr) > 0.6 and np.ptp(roll) > 3.0
    assert min(s.beat_confidence for s in states[-FPS:]) > 0.8


def test_rising_pitch_raises_and_tilts_head():
    n = 5 * FPS
    t = np.arange(1, n + 1) / FPS
    level = np.full(n, -20.0)
    voiced = np.ones(n, bool)
    flat = _run(level, voiced, np.full(n, 220.0), seed=4)
    glide = _run(level, voiced, 220.0 * 2 ** np.clip((t - 1.0) / 3.0, 0, 1), seed=4)
    late = t > 2.0
    d_pitch = (_arr(glide, "head_pitch") - _arr(flat, "head_pitch"))[late]
    d_roll = (_arr(glide, "head_roll") - _arr(flat, "head_roll"))[late]
    print(
        f"\nglide vs flat: head up {d_pitch.mean():.2f} deg, tilt {np.abs(d_roll).mean():.2f} deg"
    )
    assert d_pitch.mean() > 1.0
    assert np.abs(d_roll).mean() > 0.4
    assert (_arr(glide, "brow") - _arr(flat, "brow"))[late].mean() > 0.05


def test_silence_is_calm_idle_without_nods():
    n = 60 * FPS
    m = LiveMotion(seed=5, fps=FPS)
    states = [m.update((i + 1) / FPS, -90.0, False, None) for i in range(n)]
    assert m.nod_count == 0 and not any(s.nod_started for s in states)
    assert max(s.excitement for s in states) == 0.0
    assert max(s.beat_confidence for s in states) == 0.0
    assert all(s.tempo_bpm == 0.0 for s in states)
    for name, lim in (("head_yaw", 4.0), ("head_pitch", 2.5), ("head_roll", 2.5)):
        v = _arr(states, name)
        assert np.abs(v).max() <= lim + 1e-9 and np.ptp(v) > 0.3 * lim, name
    assert np.abs(_arr(states, "body_roll")).max() <= 1.5 + 1e-9
    assert np.ptp(_arr(states, "breath")) > 0.9
    assert m.blink_count >= 8
    assert np.ptp(_arr(states, "gaze_x")) > 0.05


def test_deterministic_per_seed():
    levels, voiced, pitch = _varied_input(15.0)
    a = _run(levels, voiced, pitch, seed=11)
    b = _run(levels, voiced, pitch, seed=11)
    c = _run(levels, voiced, pitch, seed=12)
    assert a == b
    assert any(
        dataclasses.astuple(x)[1:14] != dataclasses.astuple(y)[1:14]
        for x, y in zip(a, c, strict=True)
    )


def test_one_hour_is_bounded_in_time_and_memory():
    levels, voiced, pitch = _varied_input(60.0)  # one minute of input, cycled
    levels, voiced, pitch = levels.tolist(), voiced.tolist(), pitch.tolist()
    n = len(levels)
    m = LiveMotion(seed=0, fps=FPS)
    total = 3600 * FPS

    def run(k0, k1):
        for k in range(k0, k1):
            j = k % n
            m.update((k + 1) / FPS, levels[j], voiced[j], pitch[j])

    t0 = time.perf_counter()
    run(0, total)
    elapsed = time.perf_counter() - t0
    us = elapsed / total * 1e6
    tracemalloc.start()
    run(total, total + 60 * FPS)
    first, _ = tracemalloc.get_traced_memory()
    run(total + 60 * FPS, total + 180 * FPS)
    second, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"\n1 h at {FPS} Hz: {elapsed:.1f} s, {us:.1f} us/update; "
        f"traced memory after 1 min {first} B, after 3 min {second} B"
    )
    assert us < 150  # ~25 us measured; loose for shared CPUs
    assert second - first < 4096  # no growth
    assert m._env.shape == (6 * FPS,)


def test_live_pitch_tracks_a_tone_causally():
    lp = LivePitch()
    t = np.arange(SR) / SR
    tone = 0.3 * np.sin(2 * np.pi * 220 * t)
    frames = []
    for i in range(0, len(tone), 256):  # odd chunk size: frames come per 10 ms hop anyway
        frames += lp.push(tone[i : i + 256])
    assert len(frames) == SR // lp.hop
    late = frames[5:]
    assert all(f.voiced for f in late)
    assert np.median([f.pitch_hz for f in late]) == pytest.approx(220, rel=0.03)
    noise = np.random.default_rng(0).standard_normal(SR // 2) * 0.1
    nf = lp.push(np.zeros(SR // 4)) + lp.push(noise)
    assert np.mean([f.voiced for f in nf[len(nf) // 2 :]]) < 0.1
    hop = tone[: lp.hop]
    t0 = time.perf_counter()
    for _ in range(300):
        lp.push(hop)
    ms = (time.perf_counter() - t0) / 300 * 1e3
    print(f"\nLivePitch: {ms * 1000:.0f} us per 10 ms hop")
    assert ms < 1.0  # ~0.15 ms measured; loose for shared CPUs
