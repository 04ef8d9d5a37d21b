"""The built-in demo song: the committed asset and the generator behind it."""

from __future__ import annotations

import numpy as np
import pytest

from audio import demo_song

needs_espeak = pytest.mark.skipif(
    not demo_song.espeak_available(),
    reason="espeak-ng is not installed (bash scripts/setup.sh installs it); it sings the vocal",
)


def _decode(path) -> tuple[np.ndarray, int, int]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate, channels = stream.rate, stream.codec_context.channels
        chunks = [f.to_ndarray() for f in container.decode(stream)]
    x = np.concatenate(chunks, axis=1).astype(np.float32)
    if x.shape[0] != channels:  # packed formats decode as (1, n * channels)
        x = x.reshape(-1, channels).T
    if np.issubdtype(chunks[0].dtype, np.integer):
        x /= np.iinfo(chunks[0].dtype).max
    return x, rate, channels


@pytest.fixture(scope="module")
def asset():
    return _decode(demo_song.demo_song_path())


@pytest.fixture(scope="module")
def stems():
    return demo_song.make_demo_song_stems(0)


def _octave_match(estimated: float, true: float, tol: float = 0.03) -> bool:
    return any(abs(estimated - true * k) <= tol * true * k for k in (0.5, 1.0, 2.0))


def _frame_rms_db(x: np.ndarray, hop: int) -> np.ndarray:
    mono = x.mean(axis=0) if x.ndim == 2 else x
    n = len(mono) // hop
    rms = np.sqrt(np.mean(mono[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    return 20 * np.log10(rms)


def test_asset_decodes_stereo_48k_not_clipped(asset):
    x, rate, channels = asset
    assert demo_song.demo_song_path().stat().st_size < 1_100_000
    assert rate == 48_000
    assert channels == 2
    assert 25.0 <= x.shape[1] / rate <= 45.0
    peak = float(np.max(np.abs(x)))
    assert peak < 10 ** (-0.5 / 20), f"peak {20 * np.log10(peak):.2f} dBFS"
    assert np.sqrt(np.mean(x**2)) > 0.03  # and not silent
    # actually stereo: the channels differ
    assert np.mean(np.abs(x[0] - x[1])) > 1e-3


def test_asset_beat_tracker_finds_the_tempo(asset):
    import librosa

    x, rate, _ = asset
    y = librosa.resample(x.mean(axis=0), orig_sr=rate, target_sr=22_050)
    tempo, beats = librosa.beat.beat_track(y=y, sr=22_050)
    tempo = float(np.atleast_1d(tempo)[0])
    assert _octave_match(tempo, demo_song.TEMPO_BPM), tempo
    assert len(beats) > 0.8 * (x.shape[1] / rate) * demo_song.TEMPO_BPM / 60 / 2


def test_asset_starts_with_an_instrumental_intro(asset):
    x, rate, _ = asset
    assert 2.0 <= demo_song.MELODY[0].beat * demo_song.BEAT_SECONDS <= 4.0
    assert np.sqrt(np.mean(x[:, : 2 * rate] ** 2)) > 0.02  # the intro is not silence


@needs_espeak
def test_stems_shape_and_mix(stems):
    vocals, backing, sr = stems
    assert sr == demo_song.SAMPLE_RATE == 48_000
    assert vocals.shape == backing.shape
    assert vocals.shape[0] == 2 and vocals.dtype == np.float32
    mix, sr2 = demo_song.make_demo_song(0)
    assert sr2 == sr and mix.shape == vocals.shape and mix.dtype == np.float32
    assert np.max(np.abs(mix)) <= 10 ** (-1.0 / 20)


@needs_espeak
def test_vocal_has_rests_and_voiced_parts(stems):
    vocals, backing, sr = stems
    hop = sr // 50  # 20 ms frames
    v = _frame_rms_db(vocals, hop)
    b = _frame_rms_db(backing, hop)
    voiced = v > -100
    med = float(np.median(v[voiced]))
    rest = v < med - 30
    # The intro is instrumental, and there are rests between phrases after it.
    intro_end = int(demo_song.MELODY[0].beat * demo_song.BEAT_SECONDS * 50) - 3
    assert rest[:intro_end].all()
    body = rest[intro_end : 34 * 50]
    runs, start = [], None
    for i, r in enumerate(body):
        if r and start is None:
            start = i
        elif not r and start is not None:
            runs.append(i - start)
            start = None
    long_rests = [n for n in runs if n >= 10]  # at least 0.2 s of silence
    assert len(long_rests) >= 6, runs
    # Voiced a good part of the time, and louder than the backing when singing.
    sung = v > med - 6
    assert 0.3 < sung.mean() < 0.8
    assert np.median(v[sung] - b[sung]) > 6.0


@needs_espeak
def test_vocal_follows_the_melody(stems):
    import librosa

    vocals, _, sr = stems
    y = librosa.resample(vocals.mean(axis=0), orig_sr=sr, target_sr=16_000)
    f0 = librosa.yin(y, fmin=150, fmax=600, sr=16_000, frame_length=1024, hop_length=160)
    errors = []
    for note in demo_song.MELODY:
        t0 = note.beat * demo_song.BEAT_SECONDS
        t1 = t0 + 0.75 * note.beats * demo_song.BEAT_SECONDS
        seg = f0[int((t0 + 0.4 * (t1 - t0)) * 100) : int(t1 * 100) + 1]
        errors.append(12 * np.log2(np.median(seg) / (440.0 * 2 ** ((note.midi - 69) / 12))))
    errors = np.abs(np.array(errors))
    assert np.mean(errors < 0.5) > 0.85, np.round(errors, 2)


@needs_espeak
def test_same_seed_is_deterministic(stems):
    vocals, backing, _ = stems
    vocals2, backing2, _ = demo_song.make_demo_song_stems(0)
    np.testing.assert_array_equal(vocals, vocals2)
    np.testing.assert_array_equal(backing, backing2)
