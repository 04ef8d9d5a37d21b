"""The offline analysis in time chunks on threads gives the whole pass's numbers on a real song
(the committed demo song, decoded): equal but for a matrix product's rounding in the last bits
(audio/time_chunks.py), which a tolerance of 1e-9 of each array's scale allows and a chunk that
reads too little around it exceeds by far."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest

from audio import time_chunks
from audio.decode import decode_audio
from audio.demo_song import demo_song_path
from audio.features import ANALYSIS_RATE, resample_mono
from audio.mfcc import MfccSettings, _plan, mfcc_frames_pair
from audio.offline_lipsync import MfccLipSync, _live_front_rows
from audio.time_chunks import chunked_frames, chunked_rows, spans
from audio.voice_separation import LIVE_STEADY_HOPS, residual_grid, residual_reach
from audio.vowel_net import LIVE_FRONT_PITCH, NET_SETTINGS, live_front_columns, separated_features

SR = ANALYSIS_RATE
FIELDS = ("end", "mfcc", "level_db", "flatness", "periodicity", "power")


@pytest.fixture(scope="module")
def song() -> np.ndarray:
    """25 s of the demo song from 5 s in (voice and band), mono at the analysis rate; an odd
    length, so the last chunk ends off the hop grid."""
    clip = decode_audio(demo_song_path(), start_s=5.0, seconds=25.0)
    return resample_mono(clip.mono(), clip.sample_rate, SR)[:-123]


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(3) as p:
        yield p


def same(a, b) -> None:
    assert len(a) == len(b)
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype, name
            tol = 1e-9 * max(float(np.abs(x).max()), 1.0)
            assert np.allclose(x, y, rtol=0, atol=tol), f"{name} off by {np.abs(x - y).max()}"


def test_spans_tile_the_song_on_the_grid():
    got = spans(100_003, 7, 1280, 5000)
    assert got[0][2] == 0 and got[-1][3] == 100_003
    for (_, _, _, k1), (_, _, k0, _) in itertools.pairwise(got):
        assert k1 == k0  # kept spans touch, in order
    for r0, r1, k0, k1 in got:
        assert k0 % 1280 == 0 and r0 % 1280 == 0
        assert r0 == max(0, k0 - 5120) and r1 == min(100_003, k1 + 5120)  # margin rounded up


@pytest.mark.parametrize("parts", [2, 5, 11])
def test_separated_voice_features_in_chunks_are_the_whole_pass(song, pool, parts):
    hop = _plan(NET_SETTINGS, SR).hop
    whole = separated_features(song, SR)
    grid = np.lcm(residual_grid(SR), hop)
    chunks = chunked_frames(
        partial(separated_features, sr=SR), song, hop, int(grid), residual_reach(SR), pool, parts
    )
    same(chunks.result(), whole)


def test_too_little_margin_is_not_the_whole_pass(song, pool):
    """The check above can fail: chunks that read too little around them differ."""
    hop = _plan(NET_SETTINGS, SR).hop
    whole = separated_features(song, SR)
    short = chunked_frames(partial(separated_features, sr=SR), song, hop, 1280, 1280, pool, 5)
    off = np.abs(short.result().mfcc - whole.mfcc).max()
    assert off > 1e-3 * np.abs(whole.mfcc).max()


def test_mix_features_and_live_front_in_chunks_are_the_whole_pass(song, pool):
    settings = MfccSettings(hop_ms=10.0)
    pair = partial(mfcc_frames_pair, sample_rate=SR, settings=settings, also=NET_SETTINGS)
    whole = pair(song, keep_power=True)
    plan = _plan(NET_SETTINGS, SR)
    keep = partial(pair, keep_power=True)
    got = chunked_frames(keep, song, plan.hop, plan.hop, 2 * plan.win, pool, 6).result()
    same(got[0], whole[0])
    same(got[1], whole[1])

    front = live_front_columns(whole[1], SR, LIVE_FRONT_PITCH)
    rows = partial(_live_front_rows, whole[1], SR, LIVE_FRONT_PITCH)
    chunked = chunked_rows(rows, len(whole[1]), 2 * LIVE_STEADY_HOPS, pool, 6).result()
    assert np.allclose(chunked, front, rtol=0, atol=1e-9 * np.abs(front).max())


def test_the_offline_engine_is_the_same_on_one_core_and_on_many(song, monkeypatch):
    engine = MfccLipSync()
    n = 25 * 30 - 1
    monkeypatch.setattr(time_chunks, "CORES", 1)
    one = engine.analyze(song, SR, 30, n)
    monkeypatch.setattr(time_chunks, "CORES", 7)
    many = engine.analyze(song, SR, 30, n)
    assert np.allclose(one.open, many.open, rtol=0, atol=1e-6)
    assert np.allclose(one.vowels, many.vowels, rtol=0, atol=1e-6)
    assert one.open.max() > 0.3  # the song's voice moved the mouth


def test_a_short_clip_is_one_piece(pool):
    y = np.random.default_rng(0).normal(0, 0.1, 4000).astype(np.float32)
    hop = _plan(NET_SETTINGS, SR).hop
    grid = int(np.lcm(residual_grid(SR), hop))
    got = chunked_frames(partial(separated_features, sr=SR), y, hop, grid, residual_reach(SR), pool)
    same(got.result(), separated_features(y, SR))
