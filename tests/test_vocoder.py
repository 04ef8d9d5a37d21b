"""The LPC vocoder of the training copies (`audio.vocoder`): espeak-ng's vowels re-made keep
their vowel (the envelope), their pitch, their timing and their level; the copy is another
sound, not the same samples; a draw is its seed's."""

from __future__ import annotations

import numpy as np
from scipy import signal

from audio.calibration import synth_vowel
from audio.mfcc import mfcc_frames
from audio.vocoder import lpc_vocode
from audio.vowel_net import NET_SETTINGS

SR = 16000


def _mean_cepstrum(x: np.ndarray) -> np.ndarray:
    f = mfcc_frames(x, SR, NET_SETTINGS)
    loud = f.level_db > f.level_db.max() - 20
    return f.mfcc[loud].mean(axis=0)


def _pitch_lag(x: np.ndarray) -> int:
    """The pitch period (samples) 0.2-0.3 s in (espeak-ng's vowel sounds for its first 0.8 s),
    from the autocorrelation of the band under 900 Hz (where the formants do not answer)."""
    b, a = signal.butter(4, 900, fs=SR)
    mid = signal.lfilter(b, a, x.astype(np.float64))[SR // 5 : 3 * SR // 10]
    ac = np.correlate(mid, mid, "full")[len(mid) - 1 :]
    lo, hi = SR // 500, SR // 60
    return lo + int(np.argmax(ac[lo:hi]))


def test_vocoded_vowels_keep_vowel_pitch_timing_and_level():
    gap = np.zeros(SR // 2, np.float32)
    vowels = {v: synth_vowel("en-us+m3", 50, v) for v in "AIU"}
    rng = np.random.default_rng(0)
    made = {v: lpc_vocode(x, rng) for v, x in vowels.items()}
    for v, x in vowels.items():
        y = made[v]
        assert y.dtype == np.float32 and len(y) == len(x) and np.isfinite(y).all()
        assert not np.allclose(y, x, atol=1e-3)  # another sound
        assert 0.9 < np.sqrt(np.mean(y**2)) / np.sqrt(np.mean(x**2)) < 1.1
        assert abs(_pitch_lag(y) - _pitch_lag(x)) <= 2
        # nearer its own vowel's envelope than any other vowel's
        own = np.linalg.norm(_mean_cepstrum(y) - _mean_cepstrum(x))
        others = [np.linalg.norm(_mean_cepstrum(y) - _mean_cepstrum(o))
                  for w, o in vowels.items() if w != v]  # fmt: skip
        assert own < min(others), (v, own, others)
    # the timing holds: a pause stays a pause, the vowel after it starts where it did
    x = np.concatenate([gap, vowels["A"], gap]).astype(np.float32)
    y = lpc_vocode(x, np.random.default_rng(1))
    env = lambda s: np.sqrt(np.convolve(s.astype(np.float64) ** 2, np.ones(160) / 160, "same"))  # noqa: E731
    ex, ey = env(x), env(y)
    assert ey[: SR // 2 - 400].max() < 0.01 * ey.max()
    onset = lambda e: int(np.argmax(e > 0.3 * e.max()))  # noqa: E731
    assert abs(onset(ey) - onset(ex)) < 0.01 * SR
    # a draw is its seed's
    a = lpc_vocode(vowels["I"], np.random.default_rng(5))
    np.testing.assert_array_equal(a, lpc_vocode(vowels["I"], np.random.default_rng(5)))
