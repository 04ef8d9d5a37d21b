"""The live net's voice targets at a voice's end: the pause hops just after it weighted up, the
last voice hops shown as the pause (issue 15, sixteenth round)."""

from __future__ import annotations

import numpy as np
import pytest

from audio.vowel_net import NET_SETTINGS, Mlp
from audio.vowel_net_train import Examples, since_voice, train, voice_end


def _ex(voice, lengths, x=None) -> Examples:
    voice = np.asarray(voice, np.float32)
    x = np.zeros((len(voice), 1), np.float32) if x is None else x
    return Examples(x, np.zeros((len(voice), 0), np.float32), voice,
                    np.full(len(voice), -1, np.int64), np.asarray(lengths))  # fmt: skip


def test_voice_end_targets_and_weights_stay_inside_each_track():
    v = [0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0]
    ex = _ex(v, [10, 5])
    since = since_voice(ex.voice, ex.lengths)
    assert since[0] > 1000  # no voice yet in the first track
    np.testing.assert_array_equal(since[1:], [0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 1, 2, 3])
    hop = NET_SETTINGS.hop_ms
    t, w = voice_end(ex, ex.voice, end_hops=1, tail_ms=2 * hop, tail_weight=3.0,
                     pause_weight=1.5)  # fmt: skip
    # the last voice hop before each pause is shown as the pause; a track's last hop is not
    # (no pause follows it in its own track)
    np.testing.assert_array_equal(t, [0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(w, [1.5, 1, 1, 1.5, 3, 3, 1.5, 1.5, 1, 1, 1, 1.5, 3, 3, 1.5])
    # nothing asked: the targets as given, every weight 1
    t, w = voice_end(ex, ex.voice)
    np.testing.assert_array_equal(t, ex.voice)
    assert (w == 1).all()
    with pytest.raises(ValueError, match="lengths"):
        voice_end(Examples(ex.live, ex.offline, ex.voice, ex.vowel), ex.voice, tail_ms=20)
    # the tail weighted where no band plays under the copy only (here: the second track)
    with pytest.raises(ValueError, match="banded"):
        voice_end(ex, ex.voice, tail_ms=20, tail_band=False)
    ex.banded = np.arange(15) < 10
    _, w = voice_end(ex, ex.voice, tail_ms=2 * hop, tail_weight=3.0, tail_band=False)
    np.testing.assert_array_equal(w, [1] * 12 + [3, 3, 1])
    # both sides of each end: the voice hops up to tail_ms before it too
    ex.banded = None
    _, w = voice_end(ex, ex.voice, tail_ms=2 * hop, tail_weight=3.0, tail_both=True)
    np.testing.assert_array_equal(w, [1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 1])


def test_train_weighs_the_pause_just_after_a_voice_up():
    """Rows that look the same, half a voice, half the pause hop right after it: with the tail
    weighted up the live net calls them a pause."""
    rng = np.random.default_rng(4)
    period = [1] + [0] * 14  # a voice hop, its tail hop, then a long pause (odd: stride 2)
    voice = np.tile(period, 400).astype(np.float32)
    since = since_voice(voice, np.array([len(voice)]))
    near = since <= 1  # the voice hops and their tail hops: the same feature
    x = np.stack([np.where(near, 1.0, -1.0) + 0.05 * rng.standard_normal(len(voice)),
                  rng.standard_normal(len(voice))], 1).astype(np.float32)  # fmt: skip
    ex = _ex(voice, [len(voice)], x)
    off = Mlp(np.zeros(1, np.float32), np.ones(1, np.float32),
              [(np.zeros((1, 6), np.float32), np.zeros(6, np.float32))])  # fmt: skip
    kw = {"cmn_init": np.zeros(NET_SETTINGS.n_coefs), "epochs": 20, "live_offsets": (0,),
          "offline": off}  # fmt: skip
    plain = train(ex, **kw).live.predict(x)[0]
    tail = {"tail_ms": NET_SETTINGS.hop_ms, "tail_weight": 4.0}
    ended = train(ex, live_fit=tail, **kw).live.predict(x)[0]
    assert 0.35 < np.mean(plain[near]) < 0.65
    assert np.mean(ended[near]) < 0.3
    assert np.mean(ended[~near] < 0.1) > 0.95


def test_voice_end_tail_in_the_copies_heard_in_a_room_only():
    """`tail_room` (issue 15, eighteenth round): the tail weighted where the copy is heard in
    a room (its reverberation fades on into the pause), nowhere else."""
    ex = _ex([0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0], [10, 5])
    hop = NET_SETTINGS.hop_ms
    with pytest.raises(ValueError, match="roomed"):
        voice_end(ex, ex.voice, tail_ms=2 * hop, tail_room=True)
    ex.roomed = np.arange(15) >= 10
    _, w = voice_end(ex, ex.voice, tail_ms=2 * hop, tail_weight=3.0, tail_room=True)
    np.testing.assert_array_equal(w, [1] * 12 + [3, 3, 1])


def test_examples_mark_the_copies_heard_in_a_room():
    """`examples` marks each hop of a copy put in a room (`Examples.roomed`, kept by `concat`);
    `room_share` is that share of the augmented copies (the clean copy never)."""
    from audio.lipsync_eval import Track
    from audio.vowel_net_train import examples

    sr = 16000
    t = np.arange(sr // 2) / sr
    y = (0.1 * np.sin(2 * np.pi * 150 * t) * ((t > 0.1) & (t < 0.4))).astype(np.float32)
    tr = Track("tone", None, y, [(0.0, 0.1, "-"), (0.1, 0.4, "a"), (0.4, 0.5, "-")], y)
    init = np.zeros(NET_SETTINGS.n_coefs)
    for share, want in ((0.0, [False] * 4), (1.0, [True] * 4)):
        ex = examples([tr], init, n_aug=4, seed=3, offline=False, room_share=share)
        assert len(ex.roomed) == len(ex.voice)
        starts = np.r_[0, np.cumsum(ex.lengths)[:-1]]
        assert not ex.roomed[: ex.lengths[0]].any()  # the clean copy
        assert [bool(ex.roomed[a]) for a in starts[1:]] == want
        for a, n in zip(starts, ex.lengths, strict=True):
            assert len(set(ex.roomed[a : a + n].tolist())) == 1  # one mark per copy
