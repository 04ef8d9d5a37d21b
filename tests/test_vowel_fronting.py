"""The fronted-U augmentation moves a vowel's second formant and nothing else."""

import numpy as np
import pytest
from scipy import signal

from audio.lipsync_eval import Track
from audio.vowel_fronting import formants, front_spans
from audio.vowel_net_train import _fronted_u

SR = 16000


def _vowel(f0: float, formant_hz: tuple[float, ...], seconds: float) -> np.ndarray:
    """A source-filter vowel: a glottal pulse train through resonators at `formant_hz`."""
    n = int(seconds * SR)
    x = np.zeros(n)
    x[:: int(SR / f0)] = 1.0
    for f in formant_hz:
        r = np.exp(-np.pi * 80.0 / SR)  # 80 Hz bandwidth
        x = signal.lfilter([1.0 - r], [1.0, -2 * r * np.cos(2 * np.pi * f / SR), r * r], x)
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def _sentence() -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    """A back /u/, a pause, an /i/: 0.3 s each."""
    u = _vowel(120, (330, 850, 2400, 3400), 0.3)
    i = _vowel(120, (280, 2250, 2900, 3500), 0.3)
    y = np.concatenate([u, np.zeros(int(0.3 * SR), np.float32), i])
    return y, [(0.0, 0.3, "U"), (0.3, 0.6, "-"), (0.6, 0.9, "I")]


def _peak_hz(y: np.ndarray, lo: float, hi: float) -> float:
    """The strongest frequency between `lo` and `hi` Hz in the /u/'s middle."""
    f, p = signal.welch(y[int(0.08 * SR) : int(0.22 * SR)], SR, nperseg=1024)
    band = (f >= lo) & (f <= hi)
    return float(f[band][np.argmax(p[band])])


def test_the_second_formant_moves_to_the_drawn_share_of_the_third():
    y, _ = _sentence()
    _, f2, f3 = formants(y, SR, 0.05, 0.25)
    assert f2 == pytest.approx(850, rel=0.1)
    out = front_spans(y, SR, [(0.0, 0.3)], [0.65])
    # the stretched stretch between F1 and the new F2 is a comb of moved harmonics, which an
    # all-pole fit reads as one more formant: the peaks are looked at instead
    assert _peak_hz(y, 700, 2200) == pytest.approx(f2, rel=0.1)
    assert _peak_hz(out, 700, 2200) == pytest.approx(0.65 * f3, rel=0.1)
    assert _peak_hz(out, 200, 600) == pytest.approx(_peak_hz(y, 200, 600), abs=60)  # F1 stays
    assert _peak_hz(out, 2200, 3000) == pytest.approx(_peak_hz(y, 2200, 3000), abs=60)  # F3


def test_everything_a_window_away_from_the_span_is_untouched():
    y, _ = _sentence()
    out = front_spans(y, SR, [(0.0, 0.3)], [0.65])
    assert len(out) == len(y)
    away = int(0.3 * SR) + 512
    np.testing.assert_allclose(out[away:], y[away:], atol=1e-6)
    assert np.max(np.abs(out[: int(0.3 * SR)] - y[: int(0.3 * SR)])) > 0.01


def test_a_front_vowel_is_left_alone():
    y, _ = _sentence()
    out = front_spans(y, SR, [(0.6, 0.9)], [0.65])  # the /i/: F2 is high already
    np.testing.assert_array_equal(out, y)


def test_the_training_copy_fronts_only_u_phones():
    y, phones = _sentence()
    tr = Track(name="synthetic", spec=None, voice=y, phones=phones, audio=y)
    out = _fronted_u(tr, 1.0, np.random.default_rng(0))
    assert _peak_hz(out, 700, 2200) > 1.3 * 850
    np.testing.assert_allclose(out[int(0.3 * SR) + 512 :], y[int(0.3 * SR) + 512 :], atol=1e-6)
    untouched = _fronted_u(tr, 0.0, np.random.default_rng(0))
    np.testing.assert_array_equal(untouched, y)
