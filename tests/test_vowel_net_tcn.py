"""The convolutional vowel net (`audio.vowel_net.Tcn`): trained, saved and loaded through the
real file path, hop by hop it gives what the whole clip gives, and bad files say why."""

from __future__ import annotations

import numpy as np
import pytest

from audio import augment
from audio.vowel_net import (
    FRONT_SEPARATION,
    HOP_DIM,
    LIVE_FRONT_STEADY,
    NET_SETTINGS,
    SEP_DIM,
    Tcn,
    VowelNet,
    load_net,
    stack,
)
from audio.vowel_net_train import _runs, fit_tcn, stack_runs
from tests.tiny_nets import assert_conv_live_net_streams_as_the_clip

SR = 16000


def _signal() -> np.ndarray:
    """A band with a gliding tone entering half-way."""
    y = augment.band(1.5, seed=3)
    t = np.arange(len(y)) / SR
    tone = 0.2 * np.sin(2 * np.pi * np.cumsum(200 + 80 * t) / SR) * (t > 0.75)
    return (y + tone).astype(np.float32)


def _tiny_net(tmp_path) -> VowelNet:
    """A small net of both kinds trained a little on random hops, saved and loaded back."""
    rng = np.random.default_rng(0)
    n = 1200
    x = rng.standard_normal((n, HOP_DIM + SEP_DIM)).astype(np.float32)
    voice = (x[:, 0] > 0).astype(np.float32)
    vowel = np.where(voice > 0, (x[:, 1] > 0).astype(np.int64), -1)
    lengths = np.array([500, 700])
    live = fit_tcn(x, voice, vowel, lengths, channels=8, dilations=(1, 3), epochs=1, chunk=64)
    off = fit_tcn(x[:, : 2 * HOP_DIM], voice, vowel, lengths, channels=8, dilations=(1, 2, 4),
                  causal=False, epochs=1, chunk=64)  # fmt: skip
    net = VowelNet(live, off, "tiny", np.zeros(NET_SETTINGS.n_coefs), front=FRONT_SEPARATION,
                   live_offsets=(0,), live_front=LIVE_FRONT_STEADY, offline_offsets=(0,),
                   live_cmn_prior=10)  # fmt: skip
    path = tmp_path / "net.npz"
    net.save(path)
    return load_net(path)


def test_tcn_survives_the_file_and_runs_hop_by_hop(tmp_path):
    net = _tiny_net(tmp_path)
    assert isinstance(net.live, Tcn) and isinstance(net.offline, Tcn)
    assert (net.live.causal, net.offline.causal) == (True, False)
    assert (net.live.dilations, net.offline.dilations) == ((1, 3), (1, 2, 4))
    y = _signal()
    assert_conv_live_net_streams_as_the_clip(net, y, SR)
    # offline: the centred net sees the future too — a change late in the clip reaches back
    end, pv, _ = net.offline_probs(y, SR, live_weight=0.0)
    end2, pv2, _ = net.offline_probs(np.r_[y[: len(y) // 2], y[len(y) // 2 :] * 0.0], SR,
                                     live_weight=0.0)  # fmt: skip
    k = len(y) // 2 // 160 - 5  # a hop before the change, within the net's reach (7 hops)
    assert abs(pv[k] - pv2[k]) > 1e-6
    assert np.array_equal(end, end2)
    with pytest.raises(ValueError, match="centred"):
        net.offline.stepper()


def test_causal_tcn_ignores_the_future():
    rng = np.random.default_rng(2)
    convs = [(rng.standard_normal((3, 4, 4)).astype(np.float32), np.zeros(4, np.float32))
             for _ in range(2)]  # fmt: skip
    head = (rng.standard_normal((4, 6)).astype(np.float32), np.zeros(6, np.float32))
    net = Tcn(np.zeros(4, np.float32), np.ones(4, np.float32), convs, (1, 2), head, True)
    x = rng.standard_normal((40, 4)).astype(np.float32)
    x2 = x.copy()
    x2[30:] += 5
    a, _ = net.predict(x)
    b, _ = net.predict(x2)
    np.testing.assert_array_equal(a[:30], b[:30])
    assert np.abs(a[30:] - b[30:]).max() > 1e-4


def test_bad_tcn_files_name_the_key(tmp_path):
    _tiny_net(tmp_path)
    with np.load(tmp_path / "net.npz") as z:
        arrays = dict(z)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**arrays, "live_dilations": np.asarray([1], np.int64)})
    with pytest.raises(ValueError, match=r"bad\.npz: live_dilations: expected one dilation"):
        load_net(bad)
    np.savez(bad, **{**arrays, "offline_kind": np.array("rnn")})
    with pytest.raises(ValueError, match=r"bad\.npz: offline_kind: unknown net 'rnn'"):
        load_net(bad)
    np.savez(bad, **{**arrays, "live_offsets": np.asarray([-1, 0], np.int64)})
    with pytest.raises(ValueError, match=r"bad\.npz: a convolutional live net"):
        load_net(bad)
    np.savez(bad, **{**arrays, "live_causal": np.asarray(False)})
    with pytest.raises(ValueError, match=r"bad\.npz: a convolutional live net must be causal"):
        load_net(bad)


def test_stacked_runs_are_each_tracks_own_stack():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((7, 3)), rng.standard_normal((5, 3))
    offs = (-2, 0, 1)
    got = stack_runs(np.concatenate([a, b]), np.array([7, 5]), offs)
    np.testing.assert_array_equal(got, np.concatenate([stack(a, offs), stack(b, offs)]))
    # runs of a convolutional net's training stay inside one track and reach its end
    assert _runs(np.array([10, 3, 7]), 4).tolist() == [0, 4, 6, 13, 16]
