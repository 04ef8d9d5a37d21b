"""The separation front-end: a band's held chord and its drums out, a gliding voice kept."""

from __future__ import annotations

import numpy as np
import pytest

from audio.voice_separation import voice_residual

SR = 16000


def _energy(x: np.ndarray) -> float:
    return float(np.sum(np.square(x, dtype=np.float64)))


def _chord(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return sum(0.2 * np.sin(2 * np.pi * f * t) for f in (110.0, 220.0, 277.2, 329.6, 440.0))


def _drums(seconds: float, rng: np.random.Generator) -> np.ndarray:
    y = np.zeros(int(seconds * SR))
    for at in range(0, len(y) - 800, SR // 4):  # a click every 250 ms
        y[at : at + 800] += rng.standard_normal(800) * np.exp(-np.arange(800) / 80.0)
    return 0.5 * y


def _voice(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Spoken-like syllables: 5 harmonics, 200 ms each, every one on its own gliding pitch."""
    n = int(0.2 * SR)
    parts = []
    for _ in range(int(seconds / 0.2)):
        a, b = rng.uniform(140.0, 300.0, 2)
        ph = 2 * np.pi * np.cumsum(np.linspace(a, b, n)) / SR
        parts.append(np.hanning(n) * sum(0.3 / k * np.sin(k * ph) for k in range(1, 6)))
    return np.concatenate(parts)


def test_band_out_voice_kept():
    rng = np.random.default_rng(0)
    chord, drums, voice = _chord(2.0), _drums(2.0, rng), _voice(2.0, rng)
    core = slice(SR // 2, -SR // 2)  # away from the edges
    kept = {
        name: _energy(voice_residual(x.astype(np.float32), SR)[core]) / _energy(x[core])
        for name, x in (("chord", chord), ("drums", drums), ("voice", voice))
    }
    print({k: f"{v:.4f}" for k, v in kept.items()})
    # the soft masks take much of the voice too, but the band far more (> 15 dB apart)
    assert kept["voice"] > 0.02
    assert kept["chord"] < kept["voice"] / 30 and kept["drums"] < kept["voice"] / 30
    mix = (chord + drums + voice).astype(np.float32)
    out = voice_residual(mix, SR)
    assert out.shape == mix.shape and out.dtype == np.float32
    # what comes out of the mix is nearer the voice than the mix was
    c_in = np.corrcoef(mix[core], voice[core])[0, 1]
    c_out = np.corrcoef(out[core], voice[core])[0, 1]
    print(f"correlation with the voice: mix {c_in:.2f}, separated {c_out:.2f}")
    assert c_out > c_in


@pytest.mark.parametrize("sr", [8000, 44100])
def test_any_rate_and_short_input(sr):
    y = np.random.default_rng(1).standard_normal(sr // 20).astype(np.float32) * 0.1
    out = voice_residual(y, sr)
    assert out.shape == y.shape
    tiny = np.ones(100, np.float32)
    assert np.array_equal(voice_residual(tiny, sr), tiny)


@pytest.mark.parametrize(("shape", "k", "axis"), [((40, 300), 25, 1), ((60, 90), 13, 0),
                                                  ((9, 20), 9, 1), ((7, 5), 9, 1)])  # fmt: skip
def test_opening_is_scipys(shape, k, axis):
    """The front-end's openings (shifted-slice minima) are scipy's grey opening, exactly —
    also where a line is shorter than the window."""
    from scipy import ndimage

    from audio.voice_separation import _opening

    x = np.random.default_rng(k).random(shape).astype(np.float32)
    size = [1, 1]
    size[axis] = k
    np.testing.assert_array_equal(_opening(x, k, axis), ndimage.grey_opening(x, size=tuple(size)))
