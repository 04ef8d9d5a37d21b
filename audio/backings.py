"""Backing tracks of several styles, for teaching the voice detector what is *not* a voice.

`audio.augment.band` is one band (kick, snare, hats, a bass line, a chord pad, a sine
arpeggio): a net trained over it alone learnt that band's timbre, not "music without a
singer", and heard a voice in most of another song's instrumental spans (docs/BENCHMARKS.md,
issue 15). Here each seed draws a style, a tempo, a key, a chord progression, the instruments'
timbres and which of them play in each section (drums alone, a break with only a pad ...),
then effects (delay, room, sidechain pumping, a tilt):

* ``band``: `audio.augment.band` as it was;
* ``lead``: drums and bass under a monophonic synth melody in phrases, with portamento and a
  delayed vibrato — the most voice-like thing a band plays;
* ``strings``: a legato saw ensemble, every voice with its own vibrato, slow attacks;
* ``pluck``: Karplus-Strong plucked arpeggios and a soft pad;
* ``edm``: detuned-saw pads pumped by a four-on-the-floor kick, off-beat bass, a filtered
  saw arpeggio;
* ``rock``: distorted power chords, busy drums, a crash every few bars;
* ``keys``: FM electric piano or a drawbar organ with tremolo, comping, shaker — **never
  trained on** (`VALID_STYLE`): the validation on which training settings are chosen.

Every style is written for this module (its own oscillators, envelopes and patterns); the demo
song's backing (`audio.demo_song`) is neither drawn from nor tuned against: it is the test.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

from audio import augment

__all__ = ["STYLES", "TRAIN_STYLES", "VALID_STYLE", "backing", "style_of"]

SR = 16000
STYLES = ("band", "lead", "strings", "pluck", "edm", "rock", "keys")
VALID_STYLE = "keys"
TRAIN_STYLES = tuple(s for s in STYLES if s != VALID_STYLE)

_MAJOR = (0, 2, 4, 5, 7, 9, 11)
_MINOR = (0, 2, 3, 5, 7, 8, 10)


def _hz(m) -> np.ndarray | float:
    return 440.0 * 2.0 ** ((np.asarray(m, np.float64) - 69.0) / 12.0)


def _phase(f: np.ndarray | float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Cycles (not radians) of a tone of frequency `f` (Hz, scalar or per sample)."""
    inc = np.broadcast_to(np.asarray(f, np.float64) / SR, (n,))
    return rng.uniform() + np.cumsum(inc)


def _wave(kind: str, ph: np.ndarray, width: float = 0.5) -> np.ndarray:
    p = ph % 1.0
    if kind == "saw":
        return 2.0 * p - 1.0
    if kind == "square":
        return np.where(p < width, 1.0, -1.0)
    if kind == "tri":
        return 4.0 * np.abs(p - 0.5) - 1.0
    return np.sin(2 * np.pi * ph)


def _ar(n: int, attack: float, release: float, sustain: float = 1.0, decay: float = 0.2):
    """Attack, decay to `sustain`, release at the end (seconds)."""
    t = np.arange(n) / SR
    env = np.minimum(t / max(attack, 1e-3), 1.0)
    env = env * (sustain + (1 - sustain) * np.exp(-np.maximum(t - attack, 0) / max(decay, 1e-3)))
    r = min(int(release * SR), n)
    if r > 0:
        env[n - r :] *= np.linspace(1.0, 0.0, r)
    return env


def _lp(x: np.ndarray, cutoff: float, order: int = 2, q: float = 0.0) -> np.ndarray:
    cutoff = float(np.clip(cutoff, 60.0, 0.45 * SR))
    y = signal.sosfilt(signal.butter(order, cutoff, "lowpass", fs=SR, output="sos"), x)
    if q > 0:  # a resonant bump at the cutoff, as a synth filter's
        b, a = signal.iirpeak(cutoff, 4.0, fs=SR)
        y = y + q * signal.lfilter(b, a, y)
    return y


def _add(buf: np.ndarray, at: int, x: np.ndarray) -> None:
    if at < 0:
        x, at = x[-at:], 0
    m = min(len(x), len(buf) - at)
    if m > 0:
        buf[at : at + m] += x[:m]


class _Song:
    """Tempo, key, chords and sections shared by the parts of one backing."""

    def __init__(self, seconds: float, rng: np.random.Generator, parts: list[str]) -> None:
        self.rng = rng
        self.n = int(seconds * SR)
        self.beat = 60.0 / rng.uniform(70, 160)
        self.bar = 4 * self.beat
        self.key = 40 + int(rng.integers(0, 12))  # the bass's octave
        self.scale = _MAJOR if rng.uniform() < 0.6 else _MINOR
        degrees = [0, 3, 4, 5] if self.scale is _MAJOR else [0, 5, 2, 6]
        rng.shuffle(degrees)
        if rng.uniform() < 0.5:
            degrees = [int(d) for d in rng.integers(0, 7, 4)]
        self.prog = [self.triad(d) for d in degrees]
        self.n_bars = int(seconds / self.bar) + 2
        # which parts play in each 2-bar section: most of the time all, sometimes a few
        self.plays = {}
        for sec in range(self.n_bars // 2 + 1):
            on = {p: rng.uniform() < 0.8 for p in parts}
            if not any(on.values()):
                on[parts[int(rng.integers(len(parts)))]] = True
            self.plays[sec] = on

    def triad(self, degree: int) -> tuple[int, int, int]:
        s = self.scale
        return tuple(s[(degree + k) % 7] + 12 * ((degree + k) // 7) for k in (0, 2, 4))

    def chord(self, bar: int) -> tuple[int, int, int]:
        return self.prog[bar % len(self.prog)]

    def on(self, part: str, bar: int) -> bool:
        return self.plays[bar // 2].get(part, True)

    def at(self, beats: float) -> int:
        return int(beats * self.beat * SR)


# --- instruments --------------------------------------------------------------------------


def _drums(s: _Song, out: np.ndarray, busy: float, crash: bool) -> None:
    rng = s.rng
    f_lo, f_hi, kdec = rng.uniform(40, 65), rng.uniform(80, 200), rng.uniform(0.08, 0.3)
    tt = np.arange(int(0.4 * SR)) / SR
    kick = np.sin(2 * np.pi * np.cumsum(f_lo + f_hi * np.exp(-tt / 0.04)) / SR)
    kick = np.tanh(rng.uniform(1, 3) * kick * np.exp(-tt / kdec))
    sn_band = sorted(rng.uniform(400, 6000, 2))
    sos_sn = signal.butter(2, sn_band, "bandpass", fs=SR, output="sos")
    sos_hat = signal.butter(2, rng.uniform(4000, 7000), "highpass", fs=SR, output="sos")
    hat_dec = rng.uniform(0.01, 0.05)
    pattern = int(rng.integers(3))  # 0 four on the floor, 1 backbeat, 2 broken
    g = rng.uniform(0.5, 1.2, 3)
    for bar in range(s.n_bars):
        if not s.on("drums", bar):
            continue
        b0 = bar * 4
        for k in range(16):  # sixteenths
            at = s.at(b0 + k / 4)
            if at >= s.n:
                break
            hit_k = (
                k % 4 == 0
                if pattern == 0
                else k in (0, 8) or (pattern == 2 and k in (6, 11)) or rng.uniform() < 0.05
            )
            if hit_k:
                _add(out, at, g[0] * 0.9 * kick)
            if k in (4, 12) or (rng.uniform() < 0.06 * busy):
                m = int(0.25 * SR)
                sn = signal.sosfilt(sos_sn, rng.standard_normal(m)) * np.exp(
                    -np.arange(m) / (0.06 * SR)
                )
                sn += (
                    0.5
                    * np.sin(2 * np.pi * rng.uniform(150, 260) * np.arange(m) / SR)
                    * (np.exp(-np.arange(m) / (0.03 * SR)))
                )
                _add(out, at, g[1] * 0.5 * sn)
            if k % 2 == 0 or rng.uniform() < busy:
                m = int(0.08 * SR)
                hat = signal.sosfilt(sos_hat, rng.standard_normal(m))
                _add(out, at, g[2] * 0.25 * hat * np.exp(-np.arange(m) / (hat_dec * SR)))
        if crash and bar % 4 == 0:
            m = int(1.5 * SR)
            cr = signal.sosfilt(sos_hat, rng.standard_normal(m)) * np.exp(
                -np.arange(m) / (0.5 * SR)
            )
            _add(out, s.at(b0), 0.2 * cr)


def _bass(s: _Song, out: np.ndarray) -> None:
    rng = s.rng
    kind = ("sine", "saw", "square", "tri")[int(rng.integers(4))]
    cutoff = rng.uniform(200, 1200)
    step = (1.0, 0.5, 0.5, 2.0)[int(rng.integers(4))]  # beats per note
    offbeat = rng.uniform() < 0.25
    for bar in range(s.n_bars):
        if not s.on("bass", bar):
            continue
        root = s.key + s.chord(bar)[0]
        for k in range(int(4 / step)):
            beat = bar * 4 + k * step + (0.5 * step if offbeat else 0.0)
            m = int(0.9 * step * s.beat * SR)
            note = root + (12 if rng.uniform() < 0.2 else 0) + (7 if rng.uniform() < 0.15 else 0)
            y = _wave(kind, _phase(_hz(note), m, rng))
            y = _lp(y, cutoff) * _ar(m, 0.005, 0.03, 0.7, 0.15)
            _add(out, s.at(beat), 0.35 * y)


def _pad(s: _Song, out: np.ndarray, voices: int, detune: float, attack: float) -> None:
    rng = s.rng
    kind = "saw" if rng.uniform() < 0.7 else "square"
    cutoff = rng.uniform(600, 4000)
    octave = 12 * int(rng.integers(1, 3))
    for bar in range(s.n_bars):
        if not s.on("pad", bar):
            continue
        m = int(s.bar * SR * 1.02)
        y = np.zeros(m)
        for iv in s.chord(bar):
            f = _hz(s.key + octave + iv)
            for v in range(voices):
                cents = detune * (v - (voices - 1) / 2) / max(voices - 1, 1) * 2
                y += _wave(kind, _phase(f * 2 ** (cents / 1200), m, rng))
        y = _lp(y, cutoff) * _ar(m, attack, 0.05, 0.8, 0.5)
        _add(out, s.at(bar * 4), 0.05 * y / np.sqrt(voices))


def _strings(s: _Song, out: np.ndarray) -> None:
    """A section: per chord tone several saws, each with its own slow vibrato."""
    rng = s.rng
    cutoff = rng.uniform(1500, 3500)
    attack = rng.uniform(0.15, 0.6)
    for bar in range(s.n_bars):
        if not s.on("strings", bar):
            continue
        m = int(s.bar * SR * 1.05)
        t = np.arange(m) / SR
        y = np.zeros(m)
        for iv in (*s.chord(bar), s.chord(bar)[0] + 12):
            f = _hz(s.key + 24 + iv)
            for _ in range(3):
                vib = 1 + 0.004 * np.sin(2 * np.pi * rng.uniform(4.5, 6.5) * t + rng.uniform(0, 6))
                y += _wave("saw", _phase(f * vib * 2 ** (rng.normal(0, 6) / 1200), m, rng))
        y = _lp(y, cutoff, 2, rng.uniform(0, 1.0)) * _ar(m, attack, 0.15, 1.0)
        _add(out, s.at(bar * 4), 0.03 * y)


def _lead(s: _Song, out: np.ndarray) -> None:
    """A monophonic melody in phrases of 1-2 bars with rests between: glides between notes,
    vibrato that sets in after the attack."""
    rng = s.rng
    kind = ("saw", "square", "tri", "sine")[int(rng.integers(4))]
    width = rng.uniform(0.2, 0.5)
    cutoff = rng.uniform(1200, 6000)
    glide = rng.uniform(0.01, 0.08)
    vib_rate, vib_depth = rng.uniform(4.5, 7.0), rng.uniform(0.1, 0.8)  # Hz, semitones
    base = s.key + 24 + 12 * int(rng.integers(0, 2))
    beat = 0.0
    total = s.n_bars * 4
    while beat < total:
        phrase = float(rng.choice((4.0, 8.0)))
        if not s.on("lead", int(beat // 4)):
            beat += phrase
            continue
        # the phrase's notes: lengths in beats, scale degrees walking
        lens, degs, b, d = [], [], 0.0, int(rng.integers(0, 7))
        while b < phrase - 0.5:
            ln = float(rng.choice((0.5, 0.5, 1.0, 1.0, 1.5, 2.0)))
            lens.append(min(ln, phrase - b))
            d = int(np.clip(d + rng.integers(-2, 3), -3, 10))
            degs.append(d)
            b += ln
        m = s.at(sum(lens))
        if m < 64:
            beat += phrase
            continue
        pitch = np.zeros(m)
        env = np.zeros(m)
        pos = 0
        for ln, dg in zip(lens, degs, strict=True):
            k = min(s.at(ln), m - pos)
            note = base + s.scale[dg % 7] + 12 * (dg // 7)
            pitch[pos : pos + k] = note
            env[pos : pos + k] = _ar(k, 0.01, 0.04, rng.uniform(0.6, 1.0), 0.2)
            pos += k
        g = max(int(glide * SR), 1)
        pitch = signal.lfilter(
            [1.0 / g], [1.0, 1.0 / g - 1.0], pitch, zi=[pitch[0] * (1 - 1.0 / g)]
        )[0]
        t = np.arange(m) / SR
        vib = vib_depth * np.clip((t % (s.beat * 2) - 0.2) / 0.3, 0, 1)
        pitch = pitch + vib * np.sin(2 * np.pi * vib_rate * t)
        y = _wave(kind, _phase(_hz(pitch), m, rng), width)
        y = _lp(y, cutoff, 2, rng.uniform(0, 1.5)) * env
        _add(out, s.at(beat), 0.12 * y)
        beat += phrase + float(rng.choice((0.0, 1.0, 2.0, 4.0)))


def _plucks(s: _Song, out: np.ndarray) -> None:
    """Karplus-Strong strings (a noise burst through a damped delay line) in arpeggios."""
    rng = s.rng
    step = float(rng.choice((0.25, 0.5, 0.5, 1.0)))
    damp = rng.uniform(0.985, 0.998)
    octave = 12 * int(rng.integers(2, 4))
    order = rng.permutation(4)
    for bar in range(s.n_bars):
        if not s.on("pluck", bar):
            continue
        ch = s.chord(bar)
        tones = (*ch, ch[0] + 12)
        for k in range(int(4 / step)):
            note = s.key + octave + tones[order[k % 4]]
            period = max(round(float(SR / _hz(note))), 2)
            m = int(min(1.0, 4 * step * s.beat) * SR)
            x = np.zeros(m)
            x[:period] = rng.uniform(-1, 1, period)
            a = np.zeros(period + 2)
            a[0], a[period], a[period + 1] = 1.0, -damp / 2, -damp / 2
            y = signal.lfilter([1.0], a, x)
            _add(out, s.at(bar * 4 + k * step), 0.15 * y)


def _arp_saw(s: _Song, out: np.ndarray) -> None:
    rng = s.rng
    step = float(rng.choice((0.25, 0.5)))
    cut0 = rng.uniform(800, 3000)
    for bar in range(s.n_bars):
        if not s.on("arp", bar):
            continue
        ch = s.chord(bar)
        for k in range(int(4 / step)):
            note = s.key + 24 + ch[k % 3] + 12 * ((k // 3) % 2)
            m = int(step * s.beat * SR)
            y = _wave("saw", _phase(_hz(note), m, rng))
            y = _lp(y, cut0 * rng.uniform(0.7, 1.4), 2, 0.8) * _ar(m, 0.002, 0.01, 0.0, 0.08)
            _add(out, s.at(bar * 4 + k * step), 0.08 * y)


def _power_chords(s: _Song, out: np.ndarray) -> None:
    rng = s.rng
    drive = rng.uniform(3, 10)
    step = float(rng.choice((0.5, 1.0, 2.0)))
    cutoff = rng.uniform(1500, 4000)
    for bar in range(s.n_bars):
        if not s.on("guitar", bar):
            continue
        root = s.key + 12 + s.chord(bar)[0]
        for k in range(int(4 / step)):
            m = int(step * s.beat * SR)
            y = sum(_wave("saw", _phase(_hz(root + iv) * 2 ** (rng.normal(0, 5) / 1200), m, rng))
                    for iv in (0, 7, 12))  # fmt: skip
            y = _lp(np.tanh(drive * y / 3), cutoff) * _ar(m, 0.003, 0.02, 0.6, 0.3)
            _add(out, s.at(bar * 4 + k * step), 0.12 * y)


def _keys(s: _Song, out: np.ndarray) -> None:
    """FM electric piano (1:1, decaying index) or a drawbar organ with tremolo, comping."""
    rng = s.rng
    organ = rng.uniform() < 0.4
    rhythm = [0.0, 1.5, 2.5] if rng.uniform() < 0.5 else [0.0, 1.0, 2.0, 3.0]
    trem = rng.uniform(4, 7)
    for bar in range(s.n_bars):
        if not s.on("keys", bar):
            continue
        for r in rhythm:
            m = int((1.5 if organ else 2.0) * s.beat * SR)
            t = np.arange(m) / SR
            y = np.zeros(m)
            for iv in s.chord(bar):
                f = float(_hz(s.key + 24 + iv))
                if organ:
                    for h, w in ((1, 1.0), (2, 0.6), (3, 0.4), (4, 0.3), (8, 0.15)):
                        y += w * np.sin(2 * np.pi * f * h * t + rng.uniform(0, 6))
                else:
                    idx = rng.uniform(1.0, 3.0) * np.exp(-t / 0.3)
                    y += np.sin(2 * np.pi * f * t + idx * np.sin(2 * np.pi * f * t))
            if organ:
                y *= (1 + 0.3 * np.sin(2 * np.pi * trem * t)) * _ar(m, 0.01, 0.05, 1.0)
            else:
                y *= np.exp(-t / rng.uniform(0.4, 1.2)) * _ar(m, 0.003, 0.05, 1.0)
            _add(out, s.at(bar * 4 + r), 0.05 * y)
    # a shaker on the sixteenths
    sos = signal.butter(2, [3000, 7000], "bandpass", fs=SR, output="sos")
    for k in range(s.n_bars * 16):
        at = s.at(k / 4)
        if at >= s.n:
            break
        m = int(0.05 * SR)
        _add(out, at, (0.08 if k % 2 else 0.04) * signal.sosfilt(sos, rng.standard_normal(m))
             * _ar(m, 0.01, 0.03, 1.0))  # fmt: skip


_PARTS = {
    "lead": ("drums", "bass", "lead", "pad"),
    "strings": ("strings", "bass", "drums"),
    "pluck": ("pluck", "pad", "bass", "drums"),
    "edm": ("drums", "bass", "pad", "arp"),
    "rock": ("drums", "bass", "guitar"),
    "keys": ("keys", "bass", "drums"),
}


def _effects(y: np.ndarray, s: _Song, style: str) -> np.ndarray:
    rng = s.rng
    if style == "edm" or rng.uniform() < 0.2:  # sidechain pumping on the beat
        t = (np.arange(len(y)) / SR) % s.beat
        y = y * (1 - rng.uniform(0.3, 0.7) * np.exp(-t / rng.uniform(0.05, 0.15)))
    if rng.uniform() < 0.5:  # a feedback delay of a fraction of a beat
        d = max(int(s.beat * float(rng.choice((0.5, 0.75, 1.0))) * SR), 1)
        fb, wet = rng.uniform(0.2, 0.5), rng.uniform(0.2, 0.6)
        echoes = np.zeros_like(y)
        for k in range(1, 6):  # the echoes as shifted copies (a long IIR costs n x d)
            if k * d >= len(y):  # past a short clip's end
                break
            echoes[k * d :] += fb ** (k - 1) * y[: len(y) - k * d]
        y = y + wet * echoes
    if rng.uniform() < 0.6:
        y = augment.reverb(y, rng.uniform(0.3, 2.0), rng, rng.uniform(0.1, 0.4)).astype(np.float64)
    if rng.uniform() < 0.5:  # brighter or darker
        hp = signal.sosfilt(signal.butter(1, 1500, "highpass", fs=SR, output="sos"), y)
        y = y + rng.uniform(-0.6, 0.8) * hp
    return y


def style_of(seed: int, styles: tuple[str, ...] = TRAIN_STYLES) -> str:
    """The style `backing(..., seed, styles=styles)` draws."""
    return styles[int(np.random.default_rng(seed).integers(len(styles)))]


def backing(seconds: float, seed: int = 0, style: str | None = None,
            styles: tuple[str, ...] = TRAIN_STYLES) -> np.ndarray:  # fmt: skip
    """A backing track, float32 mono at 16 kHz, peak ~0.5, deterministic in `seed`; the style
    is `style`, or drawn from `styles`."""
    rng = np.random.default_rng(seed)
    drawn = styles[int(rng.integers(len(styles)))]  # drawn either way: the rest is the same
    style = drawn if style is None else style
    if style not in STYLES:
        raise ValueError(f"unknown backing style {style!r} (expected one of {STYLES})")
    if style == "band":
        return augment.band(seconds, int(rng.integers(1 << 30)))
    parts = list(_PARTS[style])
    s = _Song(seconds, rng, parts)
    out = np.zeros(s.n + 2 * SR)
    for p in parts:
        buf = np.zeros_like(out)
        if p == "drums":
            _drums(s, buf, busy=0.6 if style == "rock" else rng.uniform(0, 0.4),
                   crash=style == "rock" or rng.uniform() < 0.3)  # fmt: skip
        elif p == "bass":
            _bass(s, buf)
        elif p == "pad":
            if style == "edm":
                _pad(s, buf, int(rng.integers(4, 8)), rng.uniform(10, 30), rng.uniform(0.01, 0.1))
            else:
                _pad(s, buf, int(rng.integers(1, 4)), rng.uniform(3, 12), rng.uniform(0.1, 0.8))
        elif p == "strings":
            _strings(s, buf)
        elif p == "lead":
            _lead(s, buf)
        elif p == "pluck":
            _plucks(s, buf)
        elif p == "arp":
            _arp_saw(s, buf)
        elif p == "guitar":
            _power_chords(s, buf)
        elif p == "keys":
            _keys(s, buf)
        out += rng.uniform(0.5, 1.5) * buf / (np.sqrt(np.mean(buf**2)) + 1e-9) * 0.1
    y = _effects(out, s, style)[: s.n]
    return (0.5 * y / (np.max(np.abs(y)) + 1e-9)).astype(np.float32)
