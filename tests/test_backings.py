"""Backings of several styles (audio/backings.py): what the voice detector learns is no voice."""

from __future__ import annotations

import numpy as np
import pytest

from audio.backings import STYLES, TRAIN_STYLES, VALID_STYLE, backing, style_of

SR = 16000


@pytest.mark.parametrize("style", STYLES)
def test_every_style_is_a_bounded_deterministic_track(style):
    y = backing(3.0, seed=5, style=style)
    assert y.dtype == np.float32 and y.shape == (3 * SR,)
    assert np.all(np.isfinite(y))
    assert abs(float(np.max(np.abs(y))) - 0.5) < 1e-3
    assert np.array_equal(y, backing(3.0, seed=5, style=style))
    assert not np.allclose(y, backing(3.0, seed=6, style=style))
    # music all along: no 100 ms stretch is silent
    hop = SR // 10
    rms = np.sqrt(np.mean(np.square(y.reshape(-1, hop), dtype=np.float64), axis=1))
    assert rms.min() > 1e-3


def test_training_never_draws_the_validation_style():
    assert VALID_STYLE in STYLES and VALID_STYLE not in TRAIN_STYLES
    drawn = {style_of(seed) for seed in range(300)}
    assert drawn == set(TRAIN_STYLES)
    # a drawn backing is that style's track of the same seed
    for seed in (3, 4):
        assert np.array_equal(backing(2.0, seed), backing(2.0, seed, style=style_of(seed)))


def test_unknown_style_is_refused():
    with pytest.raises(ValueError, match="unknown backing style 'polka'"):
        backing(1.0, style="polka")


@pytest.mark.parametrize("style", STYLES)
def test_a_clip_shorter_than_the_delays_echoes_still_gets_its_backing(style):
    """A short held note's backing: the feedback delay's later echoes fall past its end (a
    `lead` backing of 0.6 s with seed 9 once crashed on them)."""
    for seed in range(12):
        y = backing(0.6, seed=seed, style=style)
        assert y.shape == (int(0.6 * SR),) and np.all(np.isfinite(y))
