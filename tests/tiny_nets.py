"""Tiny random lip-sync nets shared by several test modules (diffusers-style tiny models: the
real classes, random weights, saved and loaded by the real code)."""

from __future__ import annotations

import numpy as np

from audio.vowel_net import Mlp


def random_mlp(d: int, rng: np.random.Generator) -> Mlp:
    """A random one-layer net of `d` inputs: p(voice) and five vowels out."""
    w = rng.standard_normal((d, 6)).astype(np.float32) * 0.1
    return Mlp(np.zeros(d, np.float32), np.ones(d, np.float32), [(w, np.zeros(6, np.float32))])
