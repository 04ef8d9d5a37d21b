"""Motion from audio: blinks, beat nods, sway, ranges and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from audio.analysis import analyze_clip, analyze_mono
from audio.decode import AudioClip
from audio.features import compute_features
from audio.motion import BLINK_CLOSE_S, BLINK_HOLD_S, BLINK_OPEN_S, motion
from core.avatar import RANGES, SCALARS, VOWELS
from core.clock import frame_count, frame_pts_ns
from tests.signals import click_track

FPS = 30
SR = 22050
BPM = 120


def _click_track(seconds: float, sr: int = SR, bpm: int = BPM) -> np.ndarray:
    return click_track(seconds, bpm, sr, np.float32)


@pytest.fixture(scope="module")
def clicks():
    y = _click_track(30.0)
    track, feat, mot = analyze_mono(y, SR, FPS, seed=7)
    return y, track, feat, mot


def test_blink_intervals_are_natural():
    n = 600 * FPS  # ten minutes of (silent) frames
    feat = compute_features(np.zeros(16000, np.float32), 16000, FPS, n, beats=False)
    mot = motion(feat, seed=3)
    gaps = np.diff(mot.blink_times_s)
    assert len(gaps) > 80
    assert gaps.min() >= 1.0  # no implausibly short gaps
    assert gaps.max() <= 7.0  # Live2D SDK habit: 0-7 s
    assert 3.0 <= gaps.mean() <= 5.0  # humans: roughly 10-20 blinks a minute
    assert gaps.std() > 1.0  # irregular, not a metronome


def test_blinks_close_both_eyes(clicks):
    _, track, _, mot = clicks
    left, right = track.scalars["eye_open_l"], track.scalars["eye_open_r"]
    np.testing.assert_array_equal(left, right)
    t = track.pts_ns / 1e9
    total = BLINK_CLOSE_S + BLINK_HOLD_S + BLINK_OPEN_S
    assert len(mot.blink_times_s) >= 4
    for s in mot.blink_times_s:
        if s + total > t[-1]:
            continue
        inside = (t >= s) & (t < s + total)
        assert left[inside].min() == 0.0  # fully closed
        assert np.count_nonzero(left[inside] < 0.5) >= 3  # for a few frames at 30 fps
    # Between blinks the eyes are open.
    busy = np.zeros(len(t), bool)
    for s in mot.blink_times_s:
        busy |= (t >= s - 1e-9) & (t < s + total)
    assert np.all(left[~busy] == 1.0)


def test_beats_and_nods_on_click_track(clicks):
    _, track, feat, mot = clicks
    assert abs(feat.tempo_bpm - BPM) < 3, feat.tempo_bpm
    period = 60.0 / BPM
    # Detected beats fall on the clicks.
    err = np.abs((feat.beat_times_s + period / 2) % period - period / 2)
    assert np.median(err) < 0.04 and len(feat.beat_times_s) > 50
    # Nods peak shortly after the clicks.
    nod_err = (mot.nod_times_s % period + period / 2) % period - period / 2
    assert np.mean(np.abs(nod_err) < 0.15) > 0.9
    # And the head really dips there: high-passed head pitch has its minima near clicks.
    hp = track.scalars["head_pitch"].astype(np.float64)
    k = FPS
    trend = np.convolve(np.pad(hp, k // 2, mode="edge"), np.ones(k) / k, mode="valid")[: len(hp)]
    d = hp - trend
    t = track.pts_ns / 1e9
    minima = np.flatnonzero((d[1:-1] < d[:-2]) & (d[1:-1] <= d[2:]) & (d[1:-1] < -0.5)) + 1
    assert len(minima) > 40
    off = (t[minima] % period + period / 2) % period - period / 2
    assert np.mean((off > -0.05) & (off < 0.2)) > 0.8


def test_body_sway_locked_to_beat(clicks):
    _, track, feat, _ = clicks
    roll = track.scalars["body_roll"].astype(np.float64)
    ref = np.sin(np.pi * feat.beat_pos)
    assert np.corrcoef(roll, ref)[0, 1] > 0.6


def test_everything_in_live2d_ranges(clicks):
    _, track, _, _ = clicks
    track.validate()
    assert set(track.scalars) == set(SCALARS)
    for name, (lo, hi, _) in RANGES.items():
        arr = track.scalars[name]
        assert arr.dtype == np.float32
        assert np.all(np.isfinite(arr)) and arr.min() >= lo and arr.max() <= hi, name
    assert track.vowels.shape == (len(track), len(VOWELS))
    np.testing.assert_allclose(track.vowels.sum(axis=1), 1.0, atol=1e-5)
    # Motion is visible but modest.
    for name in ("head_yaw", "head_pitch", "head_roll"):
        assert 0.5 < np.ptp(track.scalars[name]) < 30
    for name in ("body_yaw", "body_roll"):
        assert 0.5 < np.ptp(track.scalars[name]) < 15
    assert 0.0 < np.ptp(track.scalars["breath"]) <= 1.0
    assert np.ptp(track.scalars["gaze_x"]) > 0.05


def test_same_seed_same_track_and_clip_api():
    y = _click_track(8.0)
    clip = AudioClip(np.stack([y, 0.5 * y]), SR, "clicks")
    a = analyze_clip(clip, FPS, seed=5)
    b = analyze_clip(clip, FPS, seed=5)
    c = analyze_clip(clip, FPS, seed=6)
    n = frame_count(clip.num_samples, SR, FPS)
    assert len(a) == n
    np.testing.assert_array_equal(a.pts_ns, [frame_pts_ns(i, FPS) for i in range(n)])
    for name in SCALARS:
        np.testing.assert_array_equal(a.scalars[name], b.scalars[name])
    np.testing.assert_array_equal(a.vowels, b.vowels)
    assert any(not np.array_equal(a.scalars[k], c.scalars[k]) for k in ("head_yaw", "eye_open_l"))
    p = a[10]
    assert p.pts_ns == frame_pts_ns(10, FPS)
