"""Augmentation for the lip-sync corpus: a synthetic band, noise, room reverb, speed changes.

`band` writes a backing track (kick, snare or clap, hi-hats, bass line, chord pad and an
arpeggio, random tempo/key/timbre per seed) of a given length at 16 kHz — the "singer with a
band" case. `mix_at` puts a voice over it at a vocal-to-backing ratio (dB, RMS of the voice where
it sounds vs the whole backing). `reverb`, `add_noise` and `speed` (resampling: pitch, formants
and tempo together) cover rooms, microphones and speakers; formant shifts alone are done in
the feature domain (`audio.vowel_net`), where they are exact and cheap.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

from audio.features import resample_mono

__all__ = ["add_noise", "band", "mix_at", "reverb", "speed"]

SR = 16000


def _midi_hz(m: float) -> float:
    return 440.0 * 2 ** ((m - 69) / 12)


def _saw(f: float, n: int, rng: np.random.Generator) -> np.ndarray:
    ph = (rng.uniform() + f / SR * np.arange(n)) % 1.0
    y = 2 * ph - 1
    return y - np.convolve(y, np.ones(3) / 3, "same") * 0.0  # aliasing is part of the timbre


def _square(f: float, n: int, rng: np.random.Generator) -> np.ndarray:
    ph = (rng.uniform() + f / SR * np.arange(n)) % 1.0
    return np.where(ph < 0.5, 1.0, -1.0)


def _env(n: int, attack: float, decay: float) -> np.ndarray:
    t = np.arange(n) / SR
    return np.minimum(t / max(attack, 1e-4), 1.0) * np.exp(-t / max(decay, 1e-4))


_CHORDS = ((0, 4, 7), (9, 12, 16), (5, 9, 12), (7, 11, 14), (2, 5, 9), (4, 7, 11))


def _add(buf: np.ndarray, at: int, x: np.ndarray) -> None:
    m = min(len(x), len(buf) - at)
    if m > 0:
        buf[at : at + m] += x[:m]


def band(seconds: float, seed: int = 0) -> np.ndarray:
    """A backing track, float32 mono at 16 kHz, peak ~0.5 (deterministic in `seed`)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    out = np.zeros(n + SR)
    bpm = rng.uniform(85, 150)
    beat = 60.0 / bpm
    key = 36 + int(rng.integers(0, 12))
    prog = [_CHORDS[int(i)] for i in rng.permutation(len(_CHORDS))[:4]]
    swing = rng.uniform(0, 0.08)
    pad_wave = _saw if rng.uniform() < 0.6 else _square
    cutoff = rng.uniform(900, 4000)
    sos_pad = signal.butter(2, cutoff, "lowpass", fs=SR, output="sos")
    sos_hat = signal.butter(4, rng.uniform(5000, 7500), "highpass", fs=SR, output="sos")
    sos_sn = signal.butter(2, [rng.uniform(600, 1200), 5000], "bandpass", fs=SR, output="sos")
    gains = rng.uniform(0.5, 1.5, 5)  # kick, snare, hats, bass, chords
    n_beats = int(seconds / beat) + 2
    for b in range(n_beats):
        t0 = int(b * beat * SR)
        if t0 >= n:
            break
        # kick on 1 and 3 (plus random extras), snare on 2 and 4
        if b % 2 == 0 or rng.uniform() < 0.15:
            k = int(0.3 * SR)
            tt = np.arange(k) / SR
            f = rng.uniform(40, 60) + 100 * np.exp(-tt / 0.03)
            kick = np.sin(2 * np.pi * np.cumsum(f) / SR) * np.exp(-tt / 0.15)
            _add(out, t0, gains[0] * 0.9 * kick)
        if b % 2 == 1:
            k = int(0.25 * SR)
            sn = signal.sosfilt(sos_sn, rng.standard_normal(k)) * _env(k, 0.001, 0.07)
            sn += (
                0.4
                * np.sin(2 * np.pi * rng.uniform(160, 220) * np.arange(k) / SR)
                * _env(k, 0.001, 0.04)
            )
            _add(out, t0, gains[1] * 0.6 * sn)
        for h in range(2):  # eighth-note hats
            th = t0 + int((h * 0.5 + (swing if h else 0)) * beat * SR)
            k = int(0.06 * SR)
            hat = signal.sosfilt(sos_hat, rng.standard_normal(k)) * _env(k, 0.0005, 0.015)
            _add(out, th, gains[2] * 0.3 * hat)
        chord = prog[(b // 4) % len(prog)]
        # bass: root (or fifth) per beat
        m = key + chord[0] + (7 if rng.uniform() < 0.25 else 0)
        k = int(beat * SR)
        tt = np.arange(k) / SR
        bass = 0.6 * np.sin(2 * np.pi * _midi_hz(m) * tt) + 0.3 * _saw(_midi_hz(m), k, rng)
        _add(out, t0, gains[3] * 0.35 * bass * _env(k, 0.005, 0.4))
        if b % 4 == 0:  # a chord pad per bar, an octave or two above the bass
            k = int(4 * beat * SR)
            pad = np.zeros(k)
            for iv in chord:
                f = _midi_hz(key + 24 + iv)
                pad += pad_wave(f, k, rng) + pad_wave(f * 1.004, k, rng)
            pad = signal.sosfilt(sos_pad, pad) * _env(k, 0.03, 3.0)
            _add(out, t0, gains[4] * 0.08 * pad)
        if rng.uniform() < 0.5:  # arpeggio note (a lead-like synth between the singer's notes)
            k = int(0.5 * beat * SR)
            f = _midi_hz(key + 36 + chord[int(rng.integers(0, 3))])
            ar = np.sin(2 * np.pi * f * np.arange(k) / SR) + 0.3 * _square(f, k, rng)
            _add(out, t0, 0.08 * ar * _env(k, 0.003, 0.1))
    y = out[:n]
    return (0.5 * y / (np.max(np.abs(y)) + 1e-9)).astype(np.float32)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)) + 1e-20))


def mix_at(voice: np.ndarray, backing: np.ndarray, vbr_db: float) -> np.ndarray:
    """voice + backing scaled so voice (where it sounds) / backing RMS is `vbr_db` dB."""
    v, b = mix_parts(voice, backing, vbr_db)
    return (v + b).astype(np.float32)


def mix_parts(
    voice: np.ndarray, backing: np.ndarray, vbr_db: float
) -> tuple[np.ndarray, np.ndarray]:
    """The two parts of `mix_at`'s mix (float64, their sum is the mix): the voice and the
    backing as they sound in it (for a separation target)."""
    v = np.asarray(voice, np.float64)
    b = np.asarray(backing[: len(v)], np.float64)
    if len(b) < len(v):
        b = np.pad(b, (0, len(v) - len(b)))
    env = np.abs(v) > 0.02 * np.max(np.abs(v) + 1e-12)
    active = v[np.convolve(env, np.ones(160), "same") > 0]
    g = _rms(active if len(active) else v) / _rms(b) * 10 ** (-vbr_db / 20)
    peak = np.max(np.abs(v + g * b))
    k = 0.9 / peak if peak > 0.9 else 1.0
    return v * k, g * b * k


def add_noise(x: np.ndarray, snr_db: float, rng: np.random.Generator, pink: bool = False):
    """x plus white or pink noise `snr_db` under x's RMS."""
    z = rng.standard_normal(len(x))
    if pink:  # 1/f: integrate a little (a leaky first-order filter)
        z = signal.lfilter([1.0], [1.0, -0.97], z)
    z *= _rms(x) / _rms(z) * 10 ** (-snr_db / 20)
    return (x + z).astype(np.float32)


def reverb(x: np.ndarray, rt60: float, rng: np.random.Generator, wet: float = 0.5):
    """A room: exponentially decaying noise impulse response (rt60 s), mixed `wet`."""
    n = max(int(rt60 * SR), 16)
    t = np.arange(n) / SR
    ir = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
    ir[: int(0.005 * SR)] = 0.0
    ir /= np.sqrt(np.sum(ir**2))
    y = signal.fftconvolve(x, ir)[: len(x)]
    y = (1 - wet) * x + wet * y * (_rms(x) / (_rms(y) + 1e-12))
    return y.astype(np.float32)


def speed(x: np.ndarray, factor: float) -> np.ndarray:
    """Play `factor` times faster: pitch and formants x factor, duration / factor."""
    if abs(factor - 1.0) < 1e-6:
        return np.asarray(x, np.float32)
    return resample_mono(x, round(SR * factor), SR)
