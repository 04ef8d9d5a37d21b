"""Sung vowels from synthesized speech: the spectral envelope of a voice's vowels, re-sung.

For each vowel of an utterance (at least 80 ms long) the all-pole (LPC) envelope of its middle
40 ms is kept. A note then sings that envelope: harmonics of a pitch contour (melody note,
vibrato of 5-6.5 Hz and up to ±0.8 semitone, sometimes a melisma of two or three pitches on one
vowel), each harmonic's amplitude read off the envelope, with a glottal tilt, a soft attack and
release. Pitch runs from a low chest voice to a soprano's ~1 kHz, where harmonics lie further
apart than the first formant — the hard case for any vowel reader.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, signal

from audio.speech_corpus import SR, Utterance

__all__ = ["sing", "vowel_envelopes"]

ORDER = 18


def vowel_envelopes(utts: list[Utterance], min_s: float = 0.08) -> list[tuple[str, np.ndarray]]:
    """(vowel, LPC coefficients a[0..ORDER]) of each long-enough vowel of `utts`."""
    out = []
    half = int(0.02 * SR)
    for u in utts:
        for a, b, lab in u.phones:
            if lab not in "AIUEO" or len(lab) != 1 or b - a < min_s:
                continue
            c = int(0.5 * (a + b) * SR)
            x = u.audio[max(c - half, 0) : c + half].astype(np.float64)
            if len(x) < 2 * half or np.max(np.abs(x)) < 1e-3:
                continue
            x = np.append(x[0], x[1:] - 0.9 * x[:-1]) * np.hamming(len(x))
            r = np.correlate(x, x, "full")[len(x) - 1 : len(x) + ORDER]
            r[0] *= 1.0 + 1e-4
            try:
                coef = linalg.solve_toeplitz(r[:ORDER], -r[1 : ORDER + 1])
            except (linalg.LinAlgError, ValueError):
                continue
            out.append((lab, np.concatenate([[1.0], coef])))
    return out


def _note(a: np.ndarray, f0: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(f0)
    fm = float(np.mean(f0))
    k = np.arange(1, int(7500 / fm) + 1)
    _, h = signal.freqz([1.0], a, worN=k * fm, fs=SR)
    amp = np.abs(h) * k**-0.5  # glottal tilt (pre-emphasis removed it from the envelope)
    amp /= np.max(amp)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    y = np.zeros(n)
    for kk, ak in zip(k, amp, strict=True):
        y += ak * np.sin(kk * phase + rng.uniform(0, 2 * np.pi))
    ramp = min(int(0.03 * SR), n // 4)
    env = np.ones(n)
    env[:ramp] = np.linspace(0, 1, ramp)
    env[-ramp:] = np.linspace(1, 0, ramp)
    return y * env


def sing(
    envs: list[tuple[str, np.ndarray]],
    n_notes: int,
    rng: np.random.Generator,
    f0_range: tuple[float, float] = (150.0, 1000.0),
) -> tuple[np.ndarray, list[tuple[float, float, str]]]:
    """`n_notes` sung vowels with pauses between -> (audio float32, phones)."""
    parts, phones = [], []
    pos = 0.0
    by_vowel = {v: [a for lab, a in envs if lab == v] for v in "AIUEO"}
    vowels = [v for v in "AIUEO" if by_vowel[v]]
    for i in range(n_notes):
        v = vowels[i % len(vowels)] if i < len(vowels) else vowels[int(rng.integers(len(vowels)))]
        a = by_vowel[v][int(rng.integers(len(by_vowel[v])))]
        dur = rng.uniform(0.3, 1.2)
        n = int(dur * SR)
        t = np.arange(n) / SR
        base = np.exp(rng.uniform(np.log(f0_range[0]), np.log(f0_range[1])))
        semis = np.zeros(n)
        if rng.uniform() < 0.3:  # melisma: two or three pitches on one vowel
            steps = int(rng.integers(2, 4))
            for s in range(1, steps):
                semis[int(s * n / steps) :] += rng.choice([-2, -1, 1, 2, 3])
        depth = rng.uniform(0.0, 0.8) * np.clip(t / 0.3, 0, 1)  # vibrato grows in
        semis = semis + depth * np.sin(2 * np.pi * rng.uniform(5.0, 6.5) * t)
        f0 = np.minimum(base * 2 ** (semis / 12), 1100.0)
        y = _note(a, f0, rng) * 10 ** (rng.uniform(-12, 0) / 20)
        phones.append((pos, pos + dur, v))
        parts.append(y)
        pos += dur
        gap = rng.uniform(0.25, 0.6)
        phones.append((pos, pos + gap, "-"))
        parts.append(np.zeros(int(gap * SR)))
        pos += gap
    y = np.concatenate(parts)
    return (0.5 * y / (np.max(np.abs(y)) + 1e-9)).astype(np.float32), phones
