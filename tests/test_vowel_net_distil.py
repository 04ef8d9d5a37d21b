"""The live net's training: fused MLPs, a teacher's probabilities, the warped front-end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.bench_lipsync_split import load_build_script
from audio import augment
from audio.mfcc import _plan, mfcc_frames
from audio.voice_separation import suppress_steady
from audio.vowel_net import HOP_DIM, LIVE_FRONT_STEADY, NET_SETTINGS, Mlp, VowelNet, live_inputs
from audio.vowel_net_train import Examples, fit_live, fused_mlp

SR = 16000


def _mlp(rng, mean, std) -> Mlp:
    dims = [6, 8, 4, 6]
    layers = [
        (rng.standard_normal((a, b)).astype(np.float32), rng.standard_normal(b).astype(np.float32))
        for a, b in itertools.pairwise(dims)
    ]
    return Mlp(mean, std, layers)


def test_fused_mlps_give_the_mean_of_their_logits():
    rng = np.random.default_rng(1)
    mean, std = rng.standard_normal(6).astype(np.float32), np.full(6, 2.0, np.float32)
    nets = [_mlp(rng, mean, std) for _ in range(3)]
    x = rng.standard_normal((9, 6)).astype(np.float32)
    f = fused_mlp(nets)
    want = np.mean([m.logits(x) for m in nets], axis=0)
    np.testing.assert_allclose(f.logits(x), want, rtol=1e-5, atol=1e-5)
    pv, pw = f.predict_one(x[0])  # the live hop's path
    np.testing.assert_allclose([pv, *pw], np.concatenate(f.predict(x[:1]), axis=None), rtol=1e-5)
    other = _mlp(rng, mean + 1, std)
    with pytest.raises(ValueError, match="input scaling"):
        fused_mlp([nets[0], other])


def _clusters(n=3000, seed=0):
    """Rows from three clusters, the truth's vowel = the cluster; a teacher that reads each
    cluster as the next vowel."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, n)
    x = (rng.standard_normal((n, 4)) * 0.3 + np.eye(4)[c] * 3).astype(np.float32)
    soft = np.zeros((n, 6), np.float32)
    soft[:, 0] = 1.0
    soft[np.arange(n), 1 + (c + 1) % 5] = 1.0
    return x, c, soft


def test_a_teacher_with_full_weight_decides_the_vowel():
    x, c, soft = _clusters()
    voice = np.ones(len(x), np.float32)
    vowel = c.astype(np.int64)
    taught = fit_live(x, voice, vowel, epochs=30, hidden=(16,), soft=soft, soft_weight=1.0)
    plain = fit_live(x, voice, vowel, epochs=30, hidden=(16,))
    assert (plain.predict(x)[1].argmax(1) == c).mean() > 0.95
    assert (taught.predict(x)[1].argmax(1) == (c + 1) % 5).mean() > 0.95


def test_a_teacher_on_voiced_hops_teaches_the_consonants_too():
    x, c, soft = _clusters(seed=1)
    voice = np.ones(len(x), np.float32)
    vowel = np.where(c == 2, -1, c).astype(np.int64)  # cluster 2: a consonant, no vowel truth
    cons = c == 2
    on_vowels = fit_live(x, voice, vowel, epochs=30, hidden=(16,), soft=soft, soft_weight=1.0)
    on_voice = fit_live(x, voice, vowel, epochs=30, hidden=(16,), soft=soft, soft_weight=1.0,
                        soft_on="voice")  # fmt: skip
    assert (on_voice.predict(x[cons])[1].argmax(1) == 3).mean() > 0.95
    assert (on_vowels.predict(x[cons])[1].argmax(1) == 3).mean() < 0.5


def test_a_teachers_voice_replaces_the_truths_at_full_weight():
    x, c, soft = _clusters(seed=2)
    voice = np.ones(len(x), np.float32)  # the truth: a voice everywhere
    soft[c == 1, 0] = 0.0  # the teacher: no voice in cluster 1
    vowel = c.astype(np.int64)
    taught = fit_live(x, voice, vowel, epochs=30, hidden=(16,), soft=soft, voice_weight=1.0)
    pv = taught.predict(x)[0]
    assert np.mean(pv[c == 1] < 0.5) > 0.95
    assert np.mean(pv[c != 1] > 0.5) > 0.95


def test_teacher_is_the_offline_nets_mean_track_by_track():
    """The teacher's rows are the offline nets averaged as in use, each track stacked on its
    own (edges held per track, not across the next track's hops)."""
    rng = np.random.default_rng(2)
    offs = (-2, 0, 1)
    dim = 2 * len(offs)
    nets = [
        Mlp(
            np.zeros(dim, np.float32),
            np.ones(dim, np.float32),
            [(rng.standard_normal((dim, 6)).astype(np.float32), np.zeros(6, np.float32))],
        )
        for _ in range(2)
    ]
    lengths = np.array([5, 7])
    hops = rng.standard_normal((12, 2)).astype(np.float32)
    z = np.zeros(12, np.float32)
    ex = Examples(np.zeros((12, 0), np.float32), hops, z, z.astype(np.int64), lengths)
    teacher = VowelNet(None, nets[0], offline_offsets=offs, offline_more=[nets[1]])
    got = load_build_script()._teacher(teacher, ex)
    from audio.vowel_net import stack

    for a, b in ((0, 5), (5, 12)):
        x = stack(hops[a:b], offs)
        pv = np.mean([m.predict(x)[0] for m in nets], axis=0)
        pw = np.mean([m.predict(x)[1] for m in nets], axis=0)
        np.testing.assert_allclose(got[a:b, 0], pv, rtol=1e-5)
        np.testing.assert_allclose(got[a:b, 1:], pw, rtol=1e-5)


def test_front_warp_warps_the_front_ends_cepstrum_alone():
    y = augment.band(1.0, seed=4)
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    plain = live_inputs(f, SR, np.zeros(NET_SETTINGS.n_coefs), (0,), LIVE_FRONT_STEADY, 10)
    warped = live_inputs(f, SR, np.zeros(NET_SETTINGS.n_coefs), (0,), LIVE_FRONT_STEADY, 10,
                         front_warp=1.15)  # fmt: skip
    nc = NET_SETTINGS.n_coefs
    np.testing.assert_array_equal(warped[:, :HOP_DIM], plain[:, :HOP_DIM])
    np.testing.assert_array_equal(warped[:, HOP_DIM + nc :], plain[:, HOP_DIM + nc :])
    want = _plan(NET_SETTINGS, SR, 1.15).cepstrum(suppress_steady(f.power.astype(np.float64)))
    np.testing.assert_allclose(warped[:, HOP_DIM : HOP_DIM + nc], want, rtol=1e-5, atol=1e-4)
    assert not np.allclose(warped[:, HOP_DIM : HOP_DIM + nc], plain[:, HOP_DIM : HOP_DIM + nc])
