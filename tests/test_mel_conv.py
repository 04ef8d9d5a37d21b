"""The vowel net of mel and time convolutions (`audio.mel_conv.MelConv`): trained, saved and
loaded through the real file path; numpy gives what torch trained; the engine's offline path
runs it beside an MLP; the causal one runs live hop by hop as over the whole clip; bad files
say which key is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from audio import augment
from audio.mel_conv import MelConv, cepstrum_to_mel
from audio.mfcc import _plan, mfcc_frames
from audio.vowel_net import (
    FRONT_SEPARATION,
    HOP_DIM,
    LIVE_FRONT_STEADY,
    NET_SETTINGS,
    SEP_DIM,
    LiveNet,
    Mlp,
    VowelNet,
    live_inputs,
    load_net,
    offline_inputs,
    stack,
)
from audio.vowel_net_train import fit_mel_conv, mel_conv_torch_logits
from tests.tiny_nets import assert_conv_live_net_streams_as_the_clip, random_mlp, stream_live

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
    np.savez(bad, **{**arrays, "offline1_head_offsets": np.asarray([0, 1], np.int64)})
    with pytest.raises(ValueError, match=r"bad\.npz: offline1_w0: takes \d+ inputs"):
        load_net(bad)
    # the centred net as the live one: it would read the future
    live = {k.replace("offline1_", "live_"): a for k, a in arrays.items() if "offline1_" in k}
    np.savez(bad, **{**arrays, **live})
    with pytest.raises(ValueError, match=r"bad\.npz: a convolutional live net must be causal"):
        load_net(bad)
    np.savez(bad, **{**arrays, **live, "live_causal": np.asarray(True)})
    with pytest.raises(ValueError, match=r"bad\.npz: live_head_offsets: a causal net reads no"):
        load_net(bad)


LIVE_OFFS = (-4, -2, 0)


def _live_net(tmp_path) -> tuple[MelConv, VowelNet]:
    """(as trained, the file loaded back): a causal mel-convolution live net (the mix's block
    and the live front-end's) beside a random offline MLP."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1200, HOP_DIM + SEP_DIM)).astype(np.float32)
    voice = (x[:, 0] > 0).astype(np.float32)
    vowel = np.where(voice > 0, (x[:, 1] > 0).astype(np.int64), -1)
    live = fit_mel_conv(x, voice, vowel, np.array([500, 700]), LIVE_OFFS, epochs=1, run=64,
                        channels=(4, 8), hidden=(16,), causal=True)  # fmt: skip
    net = VowelNet(live, random_mlp(HOP_DIM, rng), "tiny", np.zeros(NET_SETTINGS.n_coefs),
                   live_offsets=(0,), live_front=LIVE_FRONT_STEADY, offline_offsets=(0,),
                   live_cmn_prior=10)  # fmt: skip
    path = tmp_path / "live.npz"
    net.save(path)
    return live, load_net(path)


def test_a_causal_net_reads_the_past_alone(tmp_path):
    trained, net = _live_net(tmp_path)
    m = net.live
    assert isinstance(m, MelConv) and m.causal and m.offsets == LIVE_OFFS
    x = np.random.default_rng(4).standard_normal((100, HOP_DIM + SEP_DIM)).astype(np.float32)
    want = mel_conv_torch_logits(trained, x)
    assert want[:, 0].std() > 1e-3
    np.testing.assert_allclose(trained.logits(x), want, atol=1e-4)
    x2 = x.copy()
    x2[50] += 3.0  # one hop changed: it and the hops within the taps and offsets after it
    moved = np.flatnonzero(np.abs(m.logits(x) - m.logits(x2)).max(axis=1) > 1e-5)
    reach = 2 * len(m.convs) * m.dilation - min(LIVE_OFFS)
    assert (moved.min(), moved.max()) == (50, 50 + reach)
    with pytest.raises(ValueError, match="centred"):
        _tiny_net(tmp_path)[1].offline_more[0].stepper()


def test_the_causal_net_hop_by_hop_is_the_clips(tmp_path):
    _, net = _live_net(tmp_path)
    y = _signal()
    assert_conv_live_net_streams_as_the_clip(net, y, SR)


def test_a_mel_net_beside_the_live_mlp_gives_vowels_alone(tmp_path):
    """`VowelNet.live_more`: the causal mel net's vowels averaged with the live MLP's, p(voice)
    (the gate's timing) the MLP's alone; through the file, hop by hop as over the clip."""
    mel, _ = _live_net(tmp_path)
    rng = np.random.default_rng(6)
    offs = (-2, -1, 0)
    mlp = random_mlp(len(offs) * (HOP_DIM + SEP_DIM), rng)
    alone = VowelNet(mlp, random_mlp(HOP_DIM, rng), "tiny", np.zeros(NET_SETTINGS.n_coefs),
                     live_offsets=offs, live_front=LIVE_FRONT_STEADY, offline_offsets=(0,),
                     live_cmn_prior=10)  # fmt: skip
    beside = VowelNet(**{**alone.__dict__, "live_more": [mel]})
    beside.save(tmp_path / "beside.npz")
    net = load_net(tmp_path / "beside.npz")
    assert isinstance(net.live, Mlp) and [type(m) for m in net.live_more] == [MelConv]
    y = _signal()
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    hops = live_inputs(f, SR, net.cmn_init, (0,), LIVE_FRONT_STEADY, 10)
    pv, pw = net.live_probs(hops)
    mlp_v, mlp_w = alone.live_probs(hops)
    np.testing.assert_allclose(pv, mlp_v, atol=1e-2)  # float16 in the file
    np.testing.assert_allclose(pw, (mlp_w + mel.predict(hops)[1]) / 2, atol=1e-2)
    assert np.abs(pw - mlp_w).max() > 0.05  # the mel net's vowels count
    live = LiveNet(net.live, net.cmn_init, offs, LIVE_FRONT_STEADY, SR, cmn_prior=10,
                   more=net.live_more)  # fmt: skip
    got, got_w = stream_live(live, y, SR)
    np.testing.assert_allclose(got, pv, atol=1e-4)
    np.testing.assert_allclose(got_w, pw, atol=1e-4)
    # LiveLipSync.MEL_VOICE: the gate's p(voice) mixes the mel net's in at that share
    mel_v = mel.predict(hops)[0]
    assert np.abs(mel_v - mlp_v).max() > 0.05
    for share in (0.5, 1.0):
        mixed = LiveNet(net.live, net.cmn_init, offs, LIVE_FRONT_STEADY, SR, cmn_prior=10,
                        more=net.live_more, more_voice=share)  # fmt: skip
        got_mixed, got_mixed_w = stream_live(mixed, y, SR)
        np.testing.assert_allclose(got_mixed, (1 - share) * pv + share * mel_v, atol=1e-2)
        np.testing.assert_allclose(got_mixed_w, pw, atol=1e-4)
    # a more-live net that reads stacked rows (an MLP) is named
    with np.load(tmp_path / "beside.npz") as z:
        arrays = dict(z)
    mlp_keys = {k.replace("live_", "live1_", 1): a for k, a in arrays.items()
                if k.startswith("live_") and k[5:6] in "wbms"}  # fmt: skip
    rest = {k: a for k, a in arrays.items() if not k.startswith("live1_")}
    np.savez(tmp_path / "bad.npz", **rest, **mlp_keys)
    with pytest.raises(ValueError, match=r"bad\.npz: live1_kind: expected a causal"):
        load_net(tmp_path / "bad.npz")
    # the compiled hop runs a hidden layer: a causal head of one layer is named on load
    one_layer = {k: a for k, a in arrays.items() if k not in ("live1_w1", "live1_b1")}
    np.savez(tmp_path / "bad.npz", **one_layer)
    with pytest.raises(ValueError, match=r"bad\.npz: live1_w1: missing"):
        load_net(tmp_path / "bad.npz")
