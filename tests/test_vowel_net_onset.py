"""The live net's voice targets at an onset: shown once the window's newest ms hold the voice."""

from __future__ import annotations

import numpy as np
import pytest

from audio.lipsync_eval import Track
from audio.mfcc import mfcc_frames
from audio.vowel_net import NET_SETTINGS, Mlp
from audio.vowel_net_train import Examples, examples, onset_voice, train

SR = 16000
ON, OFF = 0.302, 0.6  # s; hops end every 10 ms: no end lies within 1 ms of an edge tested


def _tone_track() -> Track:
    t = np.arange(int(0.9 * SR)) / SR
    y = 0.3 * np.sin(2 * np.pi * 220 * t) * ((t >= ON) & (t < OFF))
    y = (y + 1e-4 * np.random.default_rng(0).standard_normal(len(t))).astype(np.float32)
    return Track("tone", None, y, [(ON, OFF, "A")], y)


def test_onset_targets_lead_the_centres_truth_at_onsets_only():
    tr = _tone_track()
    ex = examples([tr], np.zeros(NET_SETTINGS.n_coefs), n_aug=0, live_offsets=(0,),
                  offline=False)  # fmt: skip
    end = mfcc_frames(tr.voice, SR, NET_SETTINGS).end / SR
    centre = end - NET_SETTINGS.win_ms / 2000
    np.testing.assert_array_equal(ex.voice, (centre >= ON) & (centre < OFF))
    early = onset_voice(ex, 6)
    want = ((end >= ON + 0.006) & (end < OFF)) | ((centre >= ON) & (centre < OFF))
    np.testing.assert_array_equal(early, want)
    first = np.flatnonzero(early)[0]
    assert first == np.flatnonzero(ex.voice)[0] - 1  # one hop sooner
    assert np.flatnonzero(early)[-1] == np.flatnonzero(ex.voice)[-1]  # the offset unchanged
    # the whole window's worth: no sooner than the centre's truth
    np.testing.assert_array_equal(onset_voice(ex, 12), ex.voice)


def test_onset_targets_need_the_heard_column_and_a_lead_inside_the_half_window():
    z = np.zeros(4, np.float32)
    ex = Examples(np.zeros((4, 1), np.float32), np.zeros((4, 0), np.float32), z, z - 1)
    with pytest.raises(ValueError, match="heard"):
        onset_voice(ex, 6)
    ex.heard = z
    for bad in (0, 13):
        with pytest.raises(ValueError, match="onset_ms"):
            onset_voice(ex, bad)


def test_train_teaches_the_live_voice_its_onset_targets():
    """Rows whose one feature says how long the voice has sounded: trained with onset_ms the
    live net calls a voice from that many ms on, without it only from the centre's."""
    rng = np.random.default_rng(3)
    heard = rng.integers(0, 14, 6000).astype(np.float32)
    x = np.stack([heard / 13 + 0.01 * rng.standard_normal(len(heard)),
                  rng.standard_normal(len(heard))], 1).astype(np.float32)  # fmt: skip
    voice = (heard >= 13).astype(np.float32)
    ex = Examples(x, np.zeros((len(x), 0), np.float32), voice, np.full(len(x), -1), heard=heard)
    off = Mlp(np.zeros(1, np.float32), np.ones(1, np.float32),
              [(np.zeros((1, 6), np.float32), np.zeros(6, np.float32))])  # fmt: skip
    kw = {"cmn_init": np.zeros(NET_SETTINGS.n_coefs), "epochs": 20, "live_offsets": (0,),
          "offline": off}  # fmt: skip
    centre = train(ex, **kw).live.predict(x)[0]
    early = train(ex, live_fit={"onset_ms": 6}, **kw).live.predict(x)[0]
    # a teacher's p(voice) is its centre's too: with the whole voice loss on it the onsets
    # still show sooner
    soft = np.zeros((len(x), 6), np.float32)
    soft[:, 0] = voice
    soft[:, 1] = 1.0
    fit = {"onset_ms": 6, "voice_weight": 1.0}
    taught = train(ex, live_fit=fit, soft=soft, **kw).live.predict(x)[0]
    mid = (heard >= 7) & (heard <= 11)
    for pv in (early, taught):
        assert np.mean(pv[mid] > 0.5) > 0.95
        assert np.mean(pv[heard <= 4] < 0.5) > 0.95
    assert np.mean(centre[mid] < 0.5) > 0.95


def test_onset_targets_can_leave_the_copies_with_a_band_at_the_centres_truth():
    tr = _tone_track()
    kw = {"n_aug": 2, "live_offsets": (0,), "offline": False, "seed": 5}
    banded = examples([tr], np.zeros(NET_SETTINGS.n_coefs), band_share=1.0, **kw)
    bare = examples([tr], np.zeros(NET_SETTINGS.n_coefs), band_share=0.0, **kw)
    n = banded.lengths[0]  # the clean copy, then two augmented ones (played at other speeds)
    assert len(banded.lengths) == 3
    np.testing.assert_array_equal(banded.banded, np.arange(len(banded.voice)) >= n)
    assert not bare.banded.any()
    for ex in (banded, bare):
        everywhere = onset_voice(ex, 6)
        clean_only = onset_voice(ex, 6, over_band=False)
        np.testing.assert_array_equal(clean_only[~ex.banded], everywhere[~ex.banded])
        np.testing.assert_array_equal(clean_only[ex.banded], ex.voice[ex.banded])
    # the onsets do lead in every copy when asked to (the test above is not vacuous)
    assert (onset_voice(banded, 6)[banded.banded] > banded.voice[banded.banded]).sum() >= 2
