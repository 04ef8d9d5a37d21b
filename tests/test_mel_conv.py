"""The offline vowel net of mel and time convolutions (`audio.mel_conv.MelConv`): trained,
saved and loaded through the real file path; numpy gives what torch trained; the engine's
offline path runs it beside an MLP; bad files say which key is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from audio import augment
from audio.mel_conv import MelConv, cepstrum_to_mel
from audio.mfcc import _plan, mfcc_frames
from audio.vowel_net import (
    FRONT_SEPARATION,
    HOP_DIM,
    NET_SETTINGS,
    Mlp,
    VowelNet,
    load_net,
    offline_inputs,
    stack,
)
from audio.vowel_net_train import fit_mel_conv, mel_conv_torch_logits
from tests.tiny_nets import random_mlp

SR = 16000
OFFS = (-3, -1, 0, 1, 3)


def _signal() -> np.ndarray:
    """A band with a gliding tone entering half-way."""
    y = augment.band(1.5, seed=3)
    t = np.arange(len(y)) / SR
    tone = 0.2 * np.sin(2 * np.pi * np.cumsum(200 + 80 * t) / SR) * (t > 0.75)
    return (y + tone).astype(np.float32)


def _hops(n: int = 1200, seed: int = 0):
    """Random hop vectors of two tracks (the mix's block and the separated voice's), labels that
    depend on them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2 * HOP_DIM)).astype(np.float32)
    voice = (x[:, 0] > 0).astype(np.float32)
    vowel = np.where(voice > 0, (x[:, 1] > 0).astype(np.int64), -1)
    return x, voice, vowel, np.array([500, n - 500])


def _tiny_net(tmp_path) -> tuple[VowelNet, VowelNet]:
    """(as trained, as loaded from its file): an MLP offline net with a mel-convolution net
    averaged beside it, as the shipped recipe may build."""
    x, voice, vowel, lengths = _hops()
    mel = fit_mel_conv(
        x, voice, vowel, lengths, OFFS, epochs=1, run=64, channels=(4, 8), hidden=(16,)
    )
    rng = np.random.default_rng(5)
    dim = len(OFFS) * 2 * HOP_DIM

    def mlp(d):
        return random_mlp(d, rng)

    net = VowelNet(mlp(HOP_DIM), mlp(dim), "tiny", np.zeros(NET_SETTINGS.n_coefs),
                   front=FRONT_SEPARATION, live_offsets=(0,), offline_offsets=OFFS,
                   offline_more=[mel])  # fmt: skip
    path = tmp_path / "net.npz"
    net.save(path)
    return net, load_net(path)


def test_the_mel_shape_is_the_cepstrums_own():
    """A smooth log-mel shape comes back from its cepstrum; a rough one comes back smoothed."""
    plan = _plan(NET_SETTINGS, SR)
    to_mel = cepstrum_to_mel(NET_SETTINGS.n_coefs, NET_SETTINGS.n_mels, NET_SETTINGS.first_coef)
    # a shape made of the kept coefficients' cosines alone (no mean, nothing finer)
    smooth = np.random.default_rng(3).standard_normal(NET_SETTINGS.n_coefs) @ plan.dct_t.T
    np.testing.assert_allclose((smooth @ plan.dct_t) @ to_mel, smooth, atol=1e-5)
    rough = np.random.default_rng(4).standard_normal((3, NET_SETTINGS.n_mels))
    rough -= rough.mean(axis=1, keepdims=True)
    back = (rough @ plan.dct_t) @ to_mel
    assert 0.5 < np.corrcoef(back.ravel(), rough.ravel())[0, 1] < 0.95


def test_numpy_inference_is_what_torch_trained(tmp_path):
    net, loaded = _tiny_net(tmp_path)
    x, _, _, _ = _hops(n=300, seed=9)
    trained = net.offline_more[0]
    want = mel_conv_torch_logits(trained, x)
    assert want[:, 0].std() > 1e-3  # the output moves with the input: the check can fail
    np.testing.assert_allclose(trained.logits(x), want, atol=1e-4)
    # the file keeps float16 weights: close to the trained net, and its own numpy and torch
    # numbers the same
    got = loaded.offline_more[0]
    assert isinstance(got, MelConv) and isinstance(loaded.offline, Mlp)
    assert (got.offsets, got.dilation) == (OFFS, trained.dilation)
    np.testing.assert_allclose(got.logits(x), want, atol=0.05)
    np.testing.assert_allclose(got.logits(x), mel_conv_torch_logits(got, x), atol=1e-4)


def test_the_convolutions_see_neighbouring_hops_on_both_sides(tmp_path):
    _, net = _tiny_net(tmp_path)
    m = net.offline_more[0]
    x, _, _, _ = _hops(n=100, seed=3)
    x2 = x.copy()
    x2[50] += 3.0  # one hop changed: hops within the taps and offsets around it change
    a, b = m.logits(x), m.logits(x2)
    moved = np.flatnonzero(np.abs(a - b).max(axis=1) > 1e-5)
    reach = len(m.convs) * m.dilation + max(OFFS)  # each convolution reaches one tap further
    assert moved.min() < 50 < moved.max()
    assert (moved.min(), moved.max()) == (50 - reach, 50 + reach)


def test_the_engine_averages_it_with_the_mlp(tmp_path):
    _, net = _tiny_net(tmp_path)
    y = _signal()
    f = mfcc_frames(y, SR, NET_SETTINGS)
    v = offline_inputs(y, SR, f, net.cmn_init, FRONT_SEPARATION, offsets=(0,))
    a_v, a_w = net.offline.predict(stack(v, OFFS))
    b_v, b_w = net.offline_more[0].predict_hops(v)
    assert b_v.std() > 1e-3
    _, pv, pw = net.offline_probs(y, SR, f, live_weight=0.0)
    np.testing.assert_allclose(pv, (a_v + b_v) / 2, atol=1e-5)
    np.testing.assert_allclose(pw, (a_w + b_w) / 2, atol=1e-5)


def test_bad_mel_conv_files_name_the_key(tmp_path):
    _tiny_net(tmp_path)
    with np.load(tmp_path / "net.npz") as z:
        arrays = dict(z)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{k: a for k, a in arrays.items() if k != "offline1_cue_std"})
    with pytest.raises(ValueError, match=r"bad\.npz: offline1_cue_std: missing"):
        load_net(bad)
    np.savez(bad, **{**arrays, "offline1_c1_w": arrays["offline1_c1_w"][:, :, :-1]})
    with pytest.raises(ValueError, match=r"bad\.npz: offline1_c\*_w: expected convolutions"):
        load_net(bad)
    np.savez(bad, **{**arrays, "offline1_offsets": np.asarray([0, 1], np.int64)})
    with pytest.raises(ValueError, match=r"bad\.npz: offline1_w0: takes \d+ inputs"):
        load_net(bad)
    live = {k.replace("offline1_", "live_"): a for k, a in arrays.items() if "offline1_" in k}
    np.savez(bad, **{**arrays, **live})
    with pytest.raises(ValueError, match=r"bad\.npz: live_kind: a mel-convolution net runs"):
        load_net(bad)
