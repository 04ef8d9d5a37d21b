"""audio/beats.py against librosa (whose onset strength and beat tracker it replaces on the
render path), and the motion smoothing against scipy's filtfilt, on the shipped demo song."""

from __future__ import annotations

import numpy as np
import pytest

from audio import beats
from audio.decode import decode_audio
from audio.demo_song import demo_song_path
from audio.features import ONSET_HOP, import_librosa, resample_mono
from audio.motion import _smooth_fwd
from tests.signals import click_track

SR = 16_000


@pytest.fixture(scope="module")
def song() -> np.ndarray:
    clip = decode_audio(demo_song_path(), seconds=10.0, max_channels=2)
    return resample_mono(clip.mono(), clip.sample_rate, SR)


def test_onset_strength_and_beats_match_librosa(song):
    librosa = import_librosa()
    env = beats.onset_strength(song, SR, ONSET_HOP)
    ref = librosa.onset.onset_strength(y=song, sr=SR, hop_length=ONSET_HOP)
    assert env.shape == ref.shape
    assert np.abs(env - ref).max() <= 1e-4 * ref.max()
    tempo, times = beats.beat_track(env, SR, ONSET_HOP)
    ref_tempo, ref_times = librosa.beat.beat_track(
        onset_envelope=ref, sr=SR, hop_length=ONSET_HOP, units="time", trim=False
    )
    assert tempo == pytest.approx(float(np.atleast_1d(ref_tempo)[0]))
    assert len(times) == len(ref_times) > 15
    assert np.abs(times - ref_times).max() < 1e-9


def test_beats_fall_on_the_clicks():
    bpm = 100.0
    y = click_track(20.0, bpm, SR)
    tempo, times = beats.beat_track(beats.onset_strength(y, SR, ONSET_HOP), SR, ONSET_HOP)
    assert abs(tempo - bpm) < 3
    period = 60.0 / bpm
    err = np.abs((times + period / 2) % period - period / 2)
    assert np.median(err) < 0.03 and len(times) >= 30


def test_a_clip_shorter_than_a_beat_window():
    y = click_track(0.5, 240.0, SR)
    env = beats.onset_strength(y, SR, ONSET_HOP)
    tempo, times = beats.beat_track(env, SR, ONSET_HOP)
    assert tempo > 0 and np.all((times >= 0) & (times <= 0.5))


def test_silence_has_no_beats():
    env = beats.onset_strength(np.zeros(SR * 3, np.float32), SR, ONSET_HOP)
    assert beats.beat_track(env, SR, ONSET_HOP) == (0.0, pytest.approx(np.zeros(0)))


def test_smoothing_equals_scipy_filtfilt():
    from scipy.signal import filtfilt

    x = np.random.default_rng(3).random(900)
    for frames in (4.5, 9.0, 30.0):
        a = 1.0 - np.exp(-1.0 / frames)
        ref = filtfilt([a], [1.0, a - 1.0], x, padlen=min(len(x) - 1, 3 * int(frames)))
        np.testing.assert_allclose(_smooth_fwd(x, frames), ref, rtol=0, atol=1e-12)
