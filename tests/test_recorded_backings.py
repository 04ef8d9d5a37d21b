"""Recorded music as backings (`audio.recorded_backings`): files the test writes (Vorbis and
FLAC, stereo, at other rates) decoded by the real code into 16 kHz mono, cached, excerpted by
seed; an empty pool names the packages to install; and the training examples take recorded
music only where asked, every other draw unchanged."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import soundfile

from audio import recorded_backings as rb
from audio.lipsync_eval import Track
from audio.vowel_net import NET_SETTINGS
from audio.vowel_net_train import examples

SR = 16000


def _song(path, seconds: float, rate: int, hz: float, fmt: str) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    left = 0.4 * np.sin(2 * np.pi * hz * t)
    right = 0.2 * np.sin(2 * np.pi * 2 * hz * t)
    soundfile.write(str(path), np.stack([left, right], axis=1), rate, format=fmt)
    return left


@pytest.fixture
def pools(tmp_path, monkeypatch):
    """Two pools of the test's own files; the cache in the test's folder."""
    music = tmp_path / "music"
    music.mkdir()
    _song(music / "long.ogg", 30.0, 44100, 220.0, "OGG")
    _song(music / "other.flac", 25.0, 22050, 330.0, "FLAC")
    _song(music / "jingle.ogg", 3.0, 44100, 440.0, "OGG")  # under MIN_TRACK_S: left out
    monkeypatch.setenv("KAGURA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rb, "_POOL_CACHE", {})
    monkeypatch.setattr(
        rb,
        "POOLS",
        {
            "train": (rb.Soundtrack("test-music", str(music / "*")),),
            "valid": (rb.Soundtrack("no-such-music-package", str(tmp_path / "none" / "*.ogg")),),
        },
    )
    return tmp_path


def test_the_pool_is_decoded_to_16k_mono_cached_and_excerpted_by_seed(pools):
    tracks = rb.pool_tracks("train")
    assert sorted(len(t) for t in tracks) == [25 * SR, 30 * SR]  # the 3 s jingle left out
    assert all(t.dtype == np.float32 for t in tracks)
    # mono: both channels' tones (220 Hz and 440 Hz) in the Vorbis file's one row
    long = next(t for t in tracks if len(t) == 30 * SR)
    spec = np.abs(np.fft.rfft(long[SR : 2 * SR]))
    assert spec[220] > 0.1 * spec.max() and spec[440] > 0.1 * spec.max()
    cached = sorted((pools / "cache").rglob("*.npy"))
    assert len(cached) == 3  # the jingle too: decoded once, whatever its length
    # a second process's pool comes from the cache: the same samples
    rb._POOL_CACHE.clear()
    again = rb.pool_tracks("train")
    for a, b in zip(sorted(tracks, key=len), sorted(again, key=len), strict=True):
        np.testing.assert_array_equal(a, b)
    y = rb.recorded_backing(2.5, seed=7)
    assert y.dtype == np.float32 and len(y) == int(2.5 * SR)
    assert abs(float(np.abs(y).max()) - 0.5) < 1e-6
    np.testing.assert_array_equal(y, rb.recorded_backing(2.5, seed=7))
    assert not np.array_equal(y, rb.recorded_backing(2.5, seed=8))
    # longer than any track: tracks joined, the length exact
    assert len(rb.recorded_backing(70.0, seed=1)) == 70 * SR


def test_an_empty_pool_names_the_packages_to_install(pools):
    with pytest.raises(
        FileNotFoundError, match="install the Debian packages no-such-music-package"
    ):
        rb.pool_tracks("valid")


def _tone_track() -> Track:
    t = np.arange(SR) / SR
    y = (0.1 * np.sin(2 * np.pi * 150 * t) * ((t > 0.2) & (t < 0.8))).astype(np.float32)
    return Track("tone", None, y, [(0.0, 0.2, "-"), (0.2, 0.8, "A"), (0.8, 1.0, "-")], y)


def test_examples_take_recorded_music_only_where_asked(pools):
    init = np.zeros(NET_SETTINGS.n_coefs)
    kw = {"n_aug": 4, "seed": 3, "offline": False, "band_share": 1.0, "live_offsets": (0,)}
    before = examples([_tone_track()], init, **kw)
    none = examples([_tone_track()], init, recorded_share=0.0, **kw)
    every = examples([_tone_track()], init, recorded_share=1.0, **kw)
    # a share of 0 is the recipe without it, to the bit
    np.testing.assert_array_equal(none.live, before.live)
    # recorded music under every banded copy: the clean copy and every label the same, the
    # augmented copies heard otherwise
    n = before.lengths[0]
    np.testing.assert_array_equal(every.lengths, before.lengths)
    np.testing.assert_array_equal(every.voice, before.voice)
    np.testing.assert_array_equal(every.live[:n], before.live[:n])
    starts = np.r_[0, np.cumsum(before.lengths)]
    for a, b in itertools.pairwise(starts[1:]):
        assert not np.allclose(every.live[a:b], before.live[a:b])


def test_recorded_copies_can_teach_the_voice_alone(pools):
    """`recorded_vowels=False`: the copies over recorded music keep their voice targets and
    lose their vowel targets (-1: none); the clean copy keeps both."""
    init = np.zeros(NET_SETTINGS.n_coefs)
    kw = {"n_aug": 3, "seed": 4, "offline": False, "band_share": 1.0, "live_offsets": (0,)}
    taught = examples([_tone_track()], init, recorded_share=1.0, **kw)
    voice_only = examples([_tone_track()], init, recorded_share=1.0, recorded_vowels=False, **kw)
    n = taught.lengths[0]
    np.testing.assert_array_equal(voice_only.live, taught.live)
    np.testing.assert_array_equal(voice_only.voice, taught.voice)
    np.testing.assert_array_equal(voice_only.vowel[:n], taught.vowel[:n])
    assert (taught.vowel[n:] >= 0).any()
    assert (voice_only.vowel[n:] == -1).all()
