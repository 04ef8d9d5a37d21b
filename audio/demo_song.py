"""Kagura's built-in demo song, "Kagura Sparkle": made entirely by the project itself.

The song that ``kagura demo`` renders into a music video. Nothing in it is third-party
media: the backing track is synthesized here with numpy/scipy (kick, clap, hi-hats, bass,
supersaw pads, a plucky arpeggio, a little delay and reverb) and the vocal is sung by
espeak-ng, one syllable at a time, each syllable placed on the beat grid, tuned to its
melody note and stretched to its note length.

Song: 128 BPM in C major, 4/4, about 36 s.

====== ===== ======= ===========================================================
bars   beats section  lyrics
====== ===== ======= ===========================================================
0-1    0     intro    (instrumental)
2-5    8     verse    "Lights on, the stage is waiting" / "Doki doki, time to sing"
6-9    24    chorus   "Kagura, sing along with me" / "Kira kira, shining star"
10-11  40    break    "A, I, U, E, O" (sustained vowels)
12-15  48    chorus   "Kagura, sing along with me" / "Kira kira, shining star"
16-17  64    outro    "Arigato" (long "o"), "Kagura!"
18     72    ending   final chord, ringing out
====== ===== ======= ===========================================================

The committed rendering lives at ``audio/assets/demo_song.ogg`` (Opus in Ogg, 96 kbps) so
that ``kagura demo`` need not regenerate it; ``demo_song_path()`` returns it. To regenerate
it (needs the ``espeak-ng`` system package; takes a few seconds)::

    .venv/bin/python -m audio.demo_song audio/assets/demo_song.ogg

The output is deterministic for a given seed and espeak-ng version (made with espeak-ng
1.51); the .ogg file is written bit-exact, so re-encoding with the same av build gives the
same bytes. ``make_demo_song_stems`` returns the vocal and backing stems separately, for tests
and for checking lip-sync against the clean vocal.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# scipy is imported by the synthesis functions that use it: `demo_song_path()` (kagura demo,
# the live benches) must not wait for scipy.signal and scipy.ndimage
SAMPLE_RATE = 48_000
TEMPO_BPM = 128.0
BEATS_PER_BAR = 4
SAMPLES_PER_BEAT = 22_500  # 48000 * 60 / 128, exact
BEAT_SECONDS = SAMPLES_PER_BEAT / SAMPLE_RATE
PEAK_DBFS = -1.5  # the mix is limited to this peak (leaves room for lossy encoding)
END_BEAT = 74  # the final chord hits on beat 72 and rings for two beats, then a tail
TAIL_SECONDS = 1.2
N_SAMPLES = END_BEAT * SAMPLES_PER_BEAT + int(TAIL_SECONDS * SAMPLE_RATE)

ASSET_PATH = Path(__file__).resolve().parent / "assets" / "demo_song.ogg"

# (name, first bar, number of bars)
SECTIONS: tuple[tuple[str, int, int], ...] = (
    ("intro", 0, 2),
    ("verse", 2, 4),
    ("chorus", 6, 4),
    ("break", 10, 2),
    ("chorus", 12, 4),
    ("outro", 16, 2),
    ("ending", 18, 1),
)

# One chord per bar; the last entry is the final hit.
CHORDS: tuple[str, ...] = (
    "F", "G",  # intro
    "Am", "F", "C", "G",  # verse
    "F", "G", "Em", "Am",  # chorus ("royal road" progression)
    "Am", "G",  # break
    "F", "G", "Em", "Am",  # chorus
    "F", "G",  # outro
    "C",  # ending
)  # fmt: skip

# Pad voicings (MIDI notes, around C3..C4, under the vocal) and bass roots (octave 1-2).
_PAD_VOICING = {
    "C": (48, 55, 60, 64),
    "F": (53, 57, 60, 65),
    "G": (50, 55, 59, 62),
    "Am": (52, 57, 60, 64),
    "Em": (52, 55, 59, 64),
}
_BASS_ROOT = {"C": 36, "F": 29, "G": 31, "Am": 33, "Em": 28}
_ARP_TONES = {
    "C": (72, 76, 79, 84),
    "F": (72, 77, 81, 84),
    "G": (74, 79, 83, 86),
    "Am": (72, 76, 81, 84),
    "Em": (71, 76, 79, 83),
}


@dataclass(frozen=True)
class Note:
    """One sung syllable: starts at ``beat`` (from the song start), lasts ``beats``."""

    beat: float
    beats: float
    say: str  # what espeak-ng is given (respelled for English pronunciation)
    lyric: str  # the syllable as written in the lyrics
    midi: int


def _line(start_beat: float, notes: list[tuple[float, float, str, str, int]]) -> list[Note]:
    return [Note(start_beat + b, d, say, lyric, m) for b, d, say, lyric, m in notes]


# Original lyrics and melody (C major; the vocal stays within A3..A4).
_CHORUS_1 = [
    (0.0, 0.5, "kah", "Ka", 69),
    (0.5, 0.5, "goo", "gu", 67),
    (1.0, 1.0, "rah", "ra,", 65),
    (2.0, 1.0, "sing", "sing", 67),
    (3.0, 0.5, "uh", "a", 65),
    (3.5, 1.0, "long", "long", 67),
    (4.5, 0.5, "with", "with", 65),
    (5.0, 1.5, "me", "me", 67),
]
_CHORUS_2 = [
    (0.0, 0.5, "key", "Ki", 64),
    (0.5, 0.5, "rah", "ra", 67),
    (1.0, 0.5, "key", "ki", 64),
    (1.5, 0.5, "rah", "ra,", 67),
    (2.0, 1.0, "shy", "shi", 67),
    (3.0, 1.0, "ning", "ning", 64),
    (4.0, 2.5, "star", "star", 60),
]
MELODY: tuple[Note, ...] = tuple(
    # verse
    _line(
        8,
        [
            (0.0, 0.5, "lights", "Lights", 64),
            (0.5, 1.0, "on", "on,", 67),
            (2.0, 0.5, "the", "the", 67),
            (2.5, 1.0, "stage", "stage", 69),
            (3.5, 0.5, "is", "is", 67),
            (4.0, 1.0, "way", "wai", 64),
            (5.0, 1.5, "ting", "ting", 62),
        ],
    )
    + _line(
        16,
        [
            (0.0, 0.5, "doe", "Do", 60),
            (0.5, 0.5, "key", "ki", 62),
            (1.0, 0.5, "doe", "do", 64),
            (1.5, 0.5, "key", "ki,", 67),
            (2.0, 1.0, "time", "time", 64),
            (3.0, 1.0, "to", "to", 62),
            (4.0, 2.5, "sing", "sing!", 67),
        ],
    )
    + _line(24, _CHORUS_1)
    + _line(32, _CHORUS_2)
    # break: the Japanese vowels, sustained
    + _line(
        40,
        [
            (0.0, 1.0, " [[A:]] ", "A", 60),
            (1.5, 1.0, " [[i:]] ", "I", 62),
            (3.0, 1.0, " [[u:]] ", "U", 64),
            (4.5, 1.0, " [[E:]] ", "E", 65),
            (6.0, 1.5, " [[o:]] ", "O", 67),
        ],
    )
    + _line(48, _CHORUS_1)
    + _line(56, _CHORUS_2)
    + _line(
        64,
        [
            (0.0, 0.5, "ah", "A", 64),
            (0.5, 0.5, "ree", "ri", 65),
            (1.0, 1.0, "gah", "ga", 67),
            (2.0, 3.0, "toe", "to!", 69),
            (7.0, 0.5, "kah", "Ka", 64),
            (7.5, 0.5, "goo", "gu", 62),
            (8.0, 2.0, "rah", "ra!", 60),
        ],
    )
)

LYRICS = """\
Lights on, the stage is waiting
Doki doki, time to sing!
Kagura, sing along with me
Kira kira, shining star
A, I, U, E, O
Kagura, sing along with me
Kira kira, shining star
Arigato! Kagura!
"""

# espeak-ng: a bright female variant with its intonation range flattened (sung, not spoken).
_ESPEAK_VOICE = "en-us+linda"
_ESPEAK_SPEED = 150
# Measured for en-us+linda with range="x-low": -p 0 gives ~118 Hz, -p 99 ~399 Hz,
# log-linear in between (~0.213 semitones per step).
_ESPEAK_P0_MIDI = 46.4
_ESPEAK_SEMITONES_PER_STEP = 21.1 / 99.0


def demo_song_path() -> Path:
    """Path of the committed demo song (``audio/assets/demo_song.ogg``, Opus in Ogg)."""
    if not ASSET_PATH.is_file():
        raise FileNotFoundError(
            f"demo song asset missing: {ASSET_PATH}; regenerate it with "
            "`python -m audio.demo_song audio/assets/demo_song.ogg`"
        )
    return ASSET_PATH


def _midi_hz(m: float) -> float:
    return 440.0 * 2.0 ** ((m - 69.0) / 12.0)


def _beat_sample(beat: float) -> int:
    return round(beat * SAMPLES_PER_BEAT)


def _chord_at_bar(bar: int) -> str:
    return CHORDS[min(bar, len(CHORDS) - 1)]


def _section_at_bar(bar: int) -> str:
    for name, first, n in SECTIONS:
        if first <= bar < first + n:
            return name
    return "ending"


# ---------------------------------------------------------------------------------------
# Vocals
# ---------------------------------------------------------------------------------------


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def _espeak(say: str, pitch: int) -> tuple[np.ndarray, int]:
    """Synthesize one syllable with espeak-ng at espeak pitch ``pitch`` (0..99)."""
    import soundfile as sf

    ssml = f'<speak><prosody range="x-low">{say}</prosody></speak>'
    cmd = ["espeak-ng", "-m", "-v", _ESPEAK_VOICE, "-s", str(_ESPEAK_SPEED)]
    cmd += ["-p", str(pitch), "--stdout", ssml]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    y, sr = sf.read(io.BytesIO(out), dtype="float32", always_2d=False)
    if y.ndim > 1:
        y = y.mean(axis=1)
    return y, int(sr)


def _espeak_pitch_for(midi: int) -> int:
    return int(np.clip(round((midi - _ESPEAK_P0_MIDI) / _ESPEAK_SEMITONES_PER_STEP), 0, 99))


def _trim(y: np.ndarray, sr: int, db: float = -38.0) -> np.ndarray:
    hop = sr // 200
    n = len(y) // hop
    if n == 0:
        return y
    rms = np.sqrt(np.mean(y[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    on = np.flatnonzero(rms > rms.max() * 10 ** (db / 20))
    if len(on) == 0:
        return y
    a = max(0, (on[0] - 1) * hop)
    b = min(len(y), (on[-1] + 2) * hop)
    return y[a:b]


def _frame_rms(y: np.ndarray, hop: int) -> np.ndarray:
    n = max(1, len(y) // hop)
    yy = np.zeros(n * hop, dtype=np.float64)
    m = min(len(y), n * hop)
    yy[:m] = y[:m]
    return np.sqrt(np.mean(yy.reshape(n, hop) ** 2, axis=1) + 1e-12)


def _stretch(y: np.ndarray, target_len: int, sr: int) -> np.ndarray:
    """Time-stretch ``y`` to ``target_len`` samples, pitch kept.

    When lengthening, only the vowel nucleus (the loud voiced middle) is stretched, so the
    consonants keep their natural length; shortening squeezes the whole syllable.
    """
    import librosa

    target_len = max(target_len, 64)
    if abs(target_len - len(y)) < 0.03 * len(y):
        out = np.zeros(target_len, dtype=np.float32)
        m = min(target_len, len(y))
        out[:m] = y[:m]
        return out
    if target_len < len(y):
        rate = len(y) / target_len
        out = librosa.effects.time_stretch(y, rate=rate, n_fft=512, hop_length=128)
    else:
        hop = sr // 100
        rms = _frame_rms(y, hop)
        loud = np.flatnonzero(rms > 0.5 * rms.max())
        a = int(loud[0] * hop)
        b = int(min(len(y), (loud[-1] + 1) * hop))
        if b - a < 1024:
            a, b = 0, len(y)
        head, mid, tail = y[:a], y[a:b], y[b:]
        mid_len = target_len - len(head) - len(tail)
        rate = len(mid) / max(mid_len, 1)
        mid2 = librosa.effects.time_stretch(mid, rate=rate, n_fft=1024, hop_length=128)
        x = int(0.008 * sr)  # crossfade the joins
        out = mid2
        if len(head) > x and len(out) > x:
            r = np.linspace(0, 1, x, dtype=np.float32)
            out = np.concatenate([head[:-x], head[-x:] * (1 - r) + out[:x] * r, out[x:]])
        else:
            out = np.concatenate([head, out])
        if len(tail) > x and len(out) > x:
            r = np.linspace(0, 1, x, dtype=np.float32)
            out = np.concatenate([out[:-x], out[-x:] * (1 - r) + tail[:x] * r, tail[x:]])
        else:
            out = np.concatenate([out, tail])
    res = np.zeros(target_len, dtype=np.float32)
    m = min(target_len, len(out))
    res[:m] = out[:m]
    return res


def _f0_contour(y: np.ndarray, sr: int, expect_hz: float, hop: int) -> np.ndarray:
    """Per-frame F0 of a syllable, clamped near the expected pitch (unvoiced -> median)."""
    import librosa
    from scipy import ndimage

    f = librosa.yin(
        np.pad(y, (0, max(0, 2048 - len(y)))),
        fmin=70,
        fmax=900,
        sr=sr,
        frame_length=1024,
        hop_length=hop,
        center=True,
    )
    rms = _frame_rms(np.pad(y, (hop // 2, hop)), hop)[: len(f)]
    if len(rms) < len(f):
        rms = np.pad(rms, (0, len(f) - len(rms)))
    semis = 12 * np.log2(f / expect_hz)
    good = (np.abs(semis) < 3.0) & (rms > 0.15 * rms.max())
    med = float(np.median(f[good])) if good.any() else expect_hz
    # Keep only small deviations around the median (espeak's flattened intonation and
    # jitter); anything further away is a consonant or a tracking error.
    ok = good & (np.abs(12 * np.log2(f / med)) < 1.0)
    contour = np.where(ok, f, med)
    return ndimage.uniform_filter1d(contour, 5, mode="nearest")


def _sing_note(note: Note, clip: np.ndarray, sr_in: int, rng: np.random.Generator) -> np.ndarray:
    """Render one note at SAMPLE_RATE: tuned to ``note.midi``, ``note.beats`` long (gated)."""
    target_hz = _midi_hz(note.midi)
    dur_s = note.beats * BEAT_SECONDS
    # Release each note a little early so syllables are separated (the mouth closes).
    gate_s = dur_s - min(0.25 * BEAT_SECONDS, 0.12 * dur_s + 0.03)
    n_out = int(gate_s * SAMPLE_RATE)
    expect = _midi_hz(_ESPEAK_P0_MIDI + _ESPEAK_SEMITONES_PER_STEP * _espeak_pitch_for(note.midi))
    ratio_mean = target_hz / expect
    # Read the (stretched) source at `ratio` source-seconds per output-second: it has to be
    # n_out * ratio_mean / SAMPLE_RATE seconds long.
    src_len = int(n_out * ratio_mean * sr_in / SAMPLE_RATE) + 8
    y = _stretch(clip, src_len, sr_in)
    hop = 128
    f0 = _f0_contour(y, sr_in, expect, hop)
    t_out = np.arange(n_out) / SAMPLE_RATE
    # Vibrato on long notes, fading in after a quarter of a second.
    vib = np.zeros(n_out)
    if dur_s >= 0.45:
        depth = 0.35 * np.clip((t_out - 0.25) / 0.3, 0, 1)  # semitones
        phase = rng.uniform(0, 2 * np.pi)
        vib = depth * np.sin(2 * np.pi * 5.6 * t_out + phase)
    target = target_hz * 2.0 ** (vib / 12.0)
    # Where in the source each output sample reads (first pass at the mean ratio), then the
    # per-sample rate that makes the source's F0 contour land on the target.
    pos_est = t_out * ratio_mean * sr_in
    f_src = np.interp(pos_est / hop, np.arange(len(f0)), f0)
    rate = target / f_src * (sr_in / SAMPLE_RATE)
    pos = np.concatenate([[0.0], np.cumsum(rate[:-1])])
    pos = np.minimum(pos, len(y) - 1)
    out = np.interp(pos, np.arange(len(y)), y).astype(np.float32)
    # Even out loudness between syllables, then a short fade in and fade out.
    rms = _frame_rms(out, SAMPLE_RATE // 100)
    out /= np.percentile(rms, 90) + 1e-6
    fi, fo = int(0.004 * SAMPLE_RATE), int(0.035 * SAMPLE_RATE)
    out[:fi] *= np.linspace(0, 1, fi, dtype=np.float32)[: len(out[:fi])]
    if len(out) > fo:
        out[-fo:] *= np.linspace(1, 0, fo, dtype=np.float32) ** 2
    return out


def _render_vocals(rng: np.random.Generator) -> np.ndarray:
    """The dry lead vocal, mono, length N_SAMPLES."""
    from scipy import signal

    keys = sorted({(n.say, _espeak_pitch_for(n.midi)) for n in MELODY})
    with ThreadPoolExecutor(max_workers=4) as pool:
        clips = dict(zip(keys, pool.map(lambda k: _espeak(*k), keys), strict=True))
    vox = np.zeros(N_SAMPLES, dtype=np.float32)
    lead_in = int(0.03 * SAMPLE_RATE)  # consonants start a touch before the beat
    for note in MELODY:
        y, sr = clips[(note.say, _espeak_pitch_for(note.midi))]
        y = _trim(y, sr)
        sung = _sing_note(note, y, sr, rng)
        start = max(0, _beat_sample(note.beat) - lead_in)
        end = min(N_SAMPLES, start + len(sung))
        vox[start:end] += sung[: end - start]
    # Low cut: keep the vocal out of the kick and bass.
    sos = signal.butter(2, 150, "highpass", fs=SAMPLE_RATE, output="sos")
    vox = signal.sosfilt(sos, vox).astype(np.float32)
    return vox


# ---------------------------------------------------------------------------------------
# Backing track
# ---------------------------------------------------------------------------------------


def _add(buf: np.ndarray, at: int, x: np.ndarray) -> None:
    """Add ``x`` (mono (n,) or stereo (2, n)) into ``buf`` (2, N) at sample ``at``."""
    if at >= buf.shape[-1]:
        return
    n = min(x.shape[-1], buf.shape[-1] - at)
    if x.ndim == 1:
        buf[:, at : at + n] += x[:n]
    else:
        buf[:, at : at + n] += x[:, :n]


def _pan(x: np.ndarray, p: float) -> np.ndarray:
    """Equal-power pan of mono ``x``; p in [-1, 1]."""
    a = (p + 1) * np.pi / 4
    return np.stack([x * np.cos(a), x * np.sin(a)])


def _kick(rng: np.random.Generator) -> np.ndarray:
    n = int(0.35 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    freq = 48 + 110 * np.exp(-t / 0.035)
    phase = 2 * np.pi * np.cumsum(freq) / SAMPLE_RATE
    body = np.sin(phase) * np.exp(-t / 0.16)
    click = rng.standard_normal(n)
    click *= np.exp(-t / 0.003) * 0.4
    return (np.tanh(1.6 * (body + click)) * 0.9).astype(np.float32)


def _clap(rng: np.random.Generator) -> np.ndarray:
    from scipy import signal

    n = int(0.3 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    noise = rng.standard_normal(n)
    sos = signal.butter(2, [900, 5000], "bandpass", fs=SAMPLE_RATE, output="sos")
    noise = signal.sosfilt(sos, noise)
    env = np.zeros(n)
    for k, d in enumerate((0.0, 0.011, 0.022)):  # a few hands, then the tail
        tt = t - d
        env += np.where(tt >= 0, np.exp(-np.maximum(tt, 0) / (0.006 if k < 2 else 0.09)), 0)
    tone = np.sin(2 * np.pi * 190 * t) * np.exp(-t / 0.05) * 0.5
    return ((noise * env * 0.6 + tone) * 0.8).astype(np.float32)


def _hat(rng: np.random.Generator, open_: bool) -> np.ndarray:
    from scipy import signal

    n = int((0.25 if open_ else 0.06) * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    noise = rng.standard_normal(n)
    sos = signal.butter(4, 7000, "highpass", fs=SAMPLE_RATE, output="sos")
    noise = signal.sosfilt(sos, noise)
    return (noise * np.exp(-t / (0.07 if open_ else 0.014)) * 0.35).astype(np.float32)


def _crash(rng: np.random.Generator) -> np.ndarray:
    from scipy import signal

    n = int(2.2 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    noise = rng.standard_normal((2, n))
    sos = signal.butter(2, 4000, "highpass", fs=SAMPLE_RATE, output="sos")
    noise = signal.sosfilt(sos, noise, axis=-1)
    return (noise * np.exp(-t / 0.6) * 0.25).astype(np.float32)


def _saw(freq: float, n: int, phase0: float) -> np.ndarray:
    """A PolyBLEP band-limited sawtooth."""
    dt = freq / SAMPLE_RATE
    ph = (phase0 + dt * np.arange(n)) % 1.0
    y = 2 * ph - 1
    # PolyBLEP correction around the wrap.
    m1 = ph < dt
    x = ph[m1] / dt
    y[m1] -= x + x - x * x - 1
    m2 = ph > 1 - dt
    x = (ph[m2] - 1) / dt
    y[m2] -= x * x + x + x + 1
    return y


def _adsr(n: int, a: float, d: float, s: float, r: float) -> np.ndarray:
    t = np.arange(n) / SAMPLE_RATE
    env = np.where(t < a, t / max(a, 1e-4), s + (1 - s) * np.exp(-(t - a) / max(d, 1e-4)))
    rn = int(r * SAMPLE_RATE)
    if 0 < rn < n:
        env[-rn:] *= np.linspace(1, 0, rn)
    return env


def _pad_chord(chord: str, n: int, bright: float, rng: np.random.Generator) -> np.ndarray:
    """Detuned supersaw chord, stereo, lowpassed; ``bright`` in 0..1 opens the filter."""
    from scipy import signal

    out = np.zeros((2, n))
    for m in _PAD_VOICING[chord]:
        f = _midi_hz(m)
        for ch in range(2):
            for det in (-0.11, 0.0, 0.12):
                cents = det * 100 + (7 if ch else -7) * (1 if det else 0)
                out[ch] += _saw(f * 2 ** (cents / 1200), n, rng.uniform())
    cutoff = 1200 + 3000 * bright
    sos = signal.butter(2, cutoff, "lowpass", fs=SAMPLE_RATE, output="sos")
    out = signal.sosfilt(sos, out, axis=-1)
    return out * _adsr(n, 0.02, 0.5, 0.7, 0.05) * 0.045


def _pluck(midi: int, n: int) -> np.ndarray:
    f = _midi_hz(midi)
    t = np.arange(n) / SAMPLE_RATE
    ph = f * t
    # square-ish tone from a few odd harmonics, with a decaying brightness
    y = np.zeros(n)
    for k in (1, 3, 5, 7):
        y += np.sin(2 * np.pi * k * ph) / k * np.exp(-t * (6 + 9 * k))
    return y * np.exp(-t / 0.12) * 0.16


def _bass_note(midi: int, n: int) -> np.ndarray:
    from scipy import signal

    f = _midi_hz(midi)
    saw = _saw(f, n, 0.0)
    t = np.arange(n) / SAMPLE_RATE
    sos = signal.butter(2, 420, "lowpass", fs=SAMPLE_RATE, output="sos")
    y = signal.sosfilt(sos, saw) + 0.6 * np.sin(2 * np.pi * f * t)
    return y * _adsr(n, 0.004, 0.12, 0.75, 0.02) * 0.3


def _reverb_ir(rng: np.random.Generator, seconds: float = 1.4) -> np.ndarray:
    from scipy import signal

    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    ir = rng.standard_normal((2, n)) * np.exp(-t / (seconds / 6.9))  # -60 dB at the end
    sos = signal.butter(1, 5000, "lowpass", fs=SAMPLE_RATE, output="sos")
    ir = signal.sosfilt(sos, ir, axis=-1)
    ir[:, : int(0.012 * SAMPLE_RATE)] = 0  # pre-delay
    return ir / np.sqrt(np.sum(ir**2, axis=-1, keepdims=True))


def _render_backing(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Returns (drums, music), each stereo (2, N_SAMPLES)."""
    n_total = N_SAMPLES
    drums = np.zeros((2, n_total))
    music = np.zeros((2, n_total))
    kick, clap = _kick(rng), _clap(rng)
    hats = [_hat(rng, False) for _ in range(4)]
    ohat = _hat(rng, True)
    bar_len = BEATS_PER_BAR * SAMPLES_PER_BEAT
    n_bars = len(CHORDS)
    final_bar = n_bars - 1
    kick_env = np.zeros(n_total)  # for sidechain "pumping"
    duck = 1 - 0.55 * np.exp(-np.arange(SAMPLES_PER_BEAT) / (0.09 * SAMPLE_RATE))

    for bar in range(n_bars):
        sec = _section_at_bar(bar)
        chord = _chord_at_bar(bar)
        b0 = bar * bar_len
        if bar == final_bar:
            _add(drums, b0, kick * 1.0)
            _add(drums, b0, _crash(rng))
            _add(drums, b0, clap * 0.8)
            n = 2 * SAMPLES_PER_BEAT + int(1.2 * SAMPLE_RATE)
            pad = _pad_chord(chord, n, 0.8, rng)
            pad *= np.exp(-np.maximum(np.arange(n) - SAMPLES_PER_BEAT, 0) / (0.5 * SAMPLE_RATE))
            _add(music, b0, pad * 1.3)
            bass = _bass_note(_BASS_ROOT[chord], n) * np.exp(-np.arange(n) / (0.6 * SAMPLE_RATE))
            _add(music, b0, bass)
            for i, m in enumerate(_ARP_TONES[chord]):
                _add(music, b0 + i * 1200, _pan(_pluck(m, int(1.2 * SAMPLE_RATE)), 0.2))
            continue
        # Drums: four on the floor everywhere (a steady beat for the tracker), clap on 2 and
        # 4 except in the first intro bar, hats on the eighths, open hats in the choruses.
        for beat in range(4):
            at = b0 + beat * SAMPLES_PER_BEAT
            _add(drums, at, kick * rng.uniform(0.95, 1.0))
            kick_env[at : at + SAMPLES_PER_BEAT] = duck[
                : max(0, min(SAMPLES_PER_BEAT, n_total - at))
            ]
            if beat in (1, 3) and not (sec == "intro" and bar == 0):
                _add(drums, at, _pan(clap, 0.05) * rng.uniform(0.9, 1.0))
            for half in range(2):
                hat_at = at + half * SAMPLES_PER_BEAT // 2
                if sec == "break" and half == 0:
                    continue
                if sec in ("chorus", "outro") and half == 1:
                    _add(drums, hat_at, _pan(ohat, 0.3) * 0.8)
                else:
                    vel = (0.7 if half == 0 else 1.0) * rng.uniform(0.85, 1.0)
                    _add(drums, hat_at, _pan(hats[(beat * 2 + half) % 4], 0.35) * vel)
        if bar == final_bar - 1:  # a little clap fill into the ending
            for k in range(4):
                _add(drums, b0 + 3 * SAMPLES_PER_BEAT + k * SAMPLES_PER_BEAT // 4, clap * 0.5)

        # Pads
        bright = {"intro": 0.3, "verse": 0.35, "chorus": 0.85, "break": 0.6, "outro": 0.85}[sec]
        pad = _pad_chord(chord, bar_len + int(0.05 * SAMPLE_RATE), bright, rng)
        _add(music, b0, pad)
        # Bass: eighth notes, octave bounce in the chorus/outro
        if not (sec == "intro" and bar == 0):
            root = _BASS_ROOT[chord]
            eighth = SAMPLES_PER_BEAT // 2
            for k in range(8):
                if sec == "break" and k % 2 == 1:
                    continue
                m = root + (12 if sec in ("chorus", "outro") and k % 2 == 1 else 0)
                _add(music, b0 + k * eighth, _bass_note(m, int(eighth * 0.9)))
        # Arp: sixteenths in the chorus/outro, eighths elsewhere
        tones = _ARP_TONES[chord]
        step = SAMPLES_PER_BEAT // (4 if sec in ("chorus", "outro") else 2)
        pattern = (0, 1, 2, 3, 2, 1, 0, 2)
        for k in range(bar_len // step):
            m = tones[pattern[k % len(pattern)]]
            p = 0.45 * np.sin(k * 0.9)
            _add(music, b0 + k * step, _pan(_pluck(m, int(0.35 * SAMPLE_RATE)), p))

    # Sidechain pumping on the music bus (not on the final ring-out).
    end_pump = final_bar * bar_len
    kick_env[end_pump:] = 1.0
    kick_env[kick_env == 0] = 1.0
    music *= kick_env
    # Ping-pong delay for the music (dotted eighth), then a shared reverb.
    d = int(0.75 * SAMPLES_PER_BEAT)
    wet = np.zeros_like(music)
    src = 0.5 * (music[0] + music[1])
    for k in range(1, 5):
        ch = k % 2
        wet[ch, k * d :] += src[: n_total - k * d] * (0.32**k)
    music = music + 0.6 * wet
    return drums, music


def _reverb(x: np.ndarray, ir: np.ndarray) -> np.ndarray:
    from scipy import signal

    mono = x if x.ndim == 1 else x.mean(axis=0)
    wet = np.stack([signal.fftconvolve(mono, ir[c])[: len(mono)] for c in range(2)])
    return wet


def _limit(x: np.ndarray, peak_db: float) -> np.ndarray:
    """Look-ahead peak limiter (2.5 ms look-ahead, smooth gain), then a hard safety scale."""
    from scipy import ndimage

    thr = 10 ** (peak_db / 20)
    look = int(0.0025 * SAMPLE_RATE)
    amp = np.max(np.abs(x), axis=0)
    g = np.minimum(1.0, thr / np.maximum(amp, 1e-9))
    g = ndimage.minimum_filter1d(g, 2 * look + 1, mode="nearest")
    g = ndimage.uniform_filter1d(g, look, mode="nearest")
    # slow release so the gain doesn't flutter
    g = np.minimum(g, ndimage.minimum_filter1d(g, int(0.02 * SAMPLE_RATE), mode="nearest"))
    g = ndimage.uniform_filter1d(g, int(0.01 * SAMPLE_RATE), mode="nearest")
    y = x * g
    pk = np.max(np.abs(y))
    if pk > thr:
        y *= thr / pk
    return y


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def _render_stems(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rng_vox, rng_back, rng_fx = (np.random.default_rng(s) for s in rng.integers(0, 2**31, 3))
    vox = _render_vocals(rng_vox).astype(np.float64)
    drums, music = _render_backing(rng_back)
    ir = _reverb_ir(rng_fx)
    music_rev = _reverb(music, ir)
    vox_rev = _reverb(vox, ir)
    # Levels: the vocal sits well above the backing so lip-sync on the mix follows it.
    active = np.abs(vox) > 1e-4
    vox_rms = np.sqrt(np.mean(vox[active] ** 2)) if active.any() else 1.0
    backing = drums + music + 0.22 * music_rev
    back_rms = np.sqrt(np.mean(backing**2))
    vox_gain = 2.6 * back_rms / vox_rms
    vocals = np.stack([vox, vox]) * vox_gain + 0.05 * vox_gain * vox_rev
    # Overall gain: peak at the limiter threshold + 2 dB, so the limiter only shaves peaks.
    pre = vocals + backing
    g = 10 ** ((PEAK_DBFS + 2.0) / 20) / np.max(np.abs(pre))
    return (vocals * g).astype(np.float32), (backing * g).astype(np.float32)


def make_demo_song_stems(seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """Vocal and backing stems, each float32 stereo (2, n), and the sample rate (48000).

    Their sum, peak-limited to ``PEAK_DBFS``, is ``make_demo_song(seed)``. The vocal stem
    is the lead vocal with its (quiet) reverb; the backing stem is everything else.
    """
    if not espeak_available():
        raise RuntimeError("the demo song needs espeak-ng (apt-get install espeak-ng)")
    vocals, backing = _render_stems(seed)
    return vocals, backing, SAMPLE_RATE


def make_demo_song(seed: int = 0) -> tuple[np.ndarray, int]:
    """The demo song: float32 stereo (2, n) at 48000 Hz, peak at most PEAK_DBFS."""
    vocals, backing, sr = make_demo_song_stems(seed)
    mix = _limit(vocals.astype(np.float64) + backing, PEAK_DBFS)
    return mix.astype(np.float32), sr


def write_audio(path: str | Path, audio: np.ndarray, sr: int) -> None:
    """Encode stereo float ``audio`` (2, n) with av: .ogg/.opus (Opus 96 kbps), .flac, .wav."""
    import av

    path = Path(path)
    ext = path.suffix.lower()
    if ext in (".ogg", ".opus"):
        codec, fmt, bit_rate = "libopus", "flt", 96_000
    elif ext == ".flac":
        codec, fmt, bit_rate = "flac", "s16", None
    elif ext == ".wav":
        codec, fmt, bit_rate = "pcm_s16le", "s16", None
    else:
        raise ValueError(f"unsupported output format {ext!r}: use .ogg, .opus, .flac or .wav")
    x = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    if fmt == "s16":
        data = np.round(x.T * 32767).astype(np.int16).reshape(1, -1)
    else:
        data = np.ascontiguousarray(x.T).reshape(1, -1)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt_name = "ogg" if ext in (".ogg", ".opus") else None
    # bitexact: no random Ogg serial number or encoder tag, so the bytes are reproducible.
    with av.open(str(path), "w", format=fmt_name, options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(codec, rate=sr, layout="stereo")
        if bit_rate:
            stream.bit_rate = bit_rate
        block = 4800  # 0.1 s per frame
        for i in range(0, x.shape[1], block):
            chunk = np.ascontiguousarray(data[:, 2 * i : 2 * (i + block)])
            frame = av.AudioFrame.from_ndarray(chunk, format=fmt, layout="stereo")
            frame.sample_rate = sr
            frame.pts = i
            for pkt in stream.encode(frame):
                out.mux(pkt)
        for pkt in stream.encode(None):
            out.mux(pkt)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m audio.demo_song", description=__doc__.split("\n")[0]
    )
    ap.add_argument("output", type=Path, help="OUT.ogg (Opus), .opus, .flac or .wav")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    audio, sr = make_demo_song(args.seed)
    t1 = time.perf_counter()
    write_audio(args.output, audio, sr)
    t2 = time.perf_counter()
    print(
        f"wrote {args.output}: {audio.shape[1] / sr:.2f} s, {sr} Hz, peak "
        f"{20 * np.log10(np.max(np.abs(audio))):.2f} dBFS; generated in {t1 - t0:.1f} s, "
        f"encoded in {t2 - t1:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
