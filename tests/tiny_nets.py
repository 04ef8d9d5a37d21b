"""Tiny random lip-sync nets shared by several test modules (diffusers-style tiny models: the
real classes, random weights, saved and loaded by the real code)."""

from __future__ import annotations

import numpy as np

from audio.vowel_net import Mlp


def random_mlp(d: int, rng: np.random.Generator) -> Mlp:
    """A random one-layer net of `d` inputs: p(voice) and five vowels out."""
    w = rng.standard_normal((d, 6)).astype(np.float32) * 0.1
    return Mlp(np.zeros(d, np.float32), np.ones(d, np.float32), [(w, np.zeros(6, np.float32))])


def stream_live(live, y: np.ndarray, sr: int) -> tuple[list[float], np.ndarray]:
    """A clip through `audio.vowel_net.LiveNet` `live` in 5 ms blocks, as the live engine feeds
    it: each hop first looked at provisionally (commit=False, a changed spectrum: it must change
    nothing), then committed. -> (p(voice) per hop, p(vowel) (hops, 5))."""
    from audio.mfcc import MfccStream
    from audio.vowel_net import NET_SETTINGS

    stream = MfccStream(sr, NET_SETTINGS, NET_SETTINGS, also_cepstrum=False)
    got, got_w = [], []
    for i in range(0, len(y), sr // 200):
        for _end, _cep, lev, flat, per, ncep, power in stream.push(y[i : i + sr // 200]):
            live.step(ncep, lev, per, flat, False, power * 3)
            pv, pw = live.step(ncep, lev, per, flat, True, power)
            got.append(pv)
            got_w.append(pw)
    return got, np.array(got_w)


def assert_conv_live_net_streams_as_the_clip(net, y: np.ndarray, sr: int) -> None:
    """A VowelNet whose live net is convolutional (offsets (0,), the steady front-end, a running
    mean worth 10 hops): hop by hop through `LiveNet` (`stream_live`) it gives what the net gives
    over the whole clip's hop vectors."""
    from audio.mfcc import mfcc_frames
    from audio.vowel_net import LIVE_FRONT_STEADY, NET_SETTINGS, LiveNet, live_inputs

    f = mfcc_frames(y, sr, NET_SETTINGS, keep_power=True)
    want, want_w = net.live.predict(live_inputs(f, sr, net.cmn_init, (0,), LIVE_FRONT_STEADY, 10))
    assert want.std() > 1e-3  # the net's output moves with the sound: the check can fail
    live = LiveNet(net.live, net.cmn_init, (0,), LIVE_FRONT_STEADY, sr, cmn_prior=10)
    got, got_w = stream_live(live, y, sr)
    assert len(got) == len(want)
    np.testing.assert_allclose(got, want, atol=1e-4)
    np.testing.assert_allclose(got_w, want_w, atol=1e-4)
