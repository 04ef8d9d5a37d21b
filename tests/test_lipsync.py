"""Offline lip-sync on real (synthesized) speech from espeak-ng.

espeak-ng is a system dependency of these tests (``apt-get install -y espeak-ng``).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from scipy.stats import spearmanr

from audio.decode import decode_audio
from audio.lipsync import FormantLipSync, LipSync
from core.avatar import VOWELS
from core.clock import NS_PER_S, frame_count, frame_pts_ns

FPS = 30
ESPEAK = shutil.which("espeak-ng")
needs_espeak = pytest.mark.skipif(
    ESPEAK is None, reason="needs espeak-ng (apt-get install espeak-ng)"
)
N = VOWELS.index("N")


def _say(tmp_path, text: str, voice: str = "en-us", speed: int = 150) -> tuple[np.ndarray, int]:
    path = tmp_path / f"say_{abs(hash((text, voice, speed)))}.wav"
    subprocess.run([ESPEAK, "-v", voice, "-s", str(speed), "-w", str(path), text], check=True)
    clip = decode_audio(path)
    return clip.mono(), clip.sample_rate


def _frame_rms(y: np.ndarray, sr: int, n: int) -> np.ndarray:
    """Reference loudness per frame: RMS over the frame's own 1/FPS span starting at its pts."""
    out = np.zeros(n)
    for i in range(n):
        a = frame_pts_ns(i, FPS) * sr // NS_PER_S
        b = frame_pts_ns(i + 1, FPS) * sr // NS_PER_S
        seg = y[a:b]
        out[i] = np.sqrt(np.mean(seg**2)) if len(seg) else 0.0
    return out


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    if ESPEAK is None:
        pytest.skip("needs espeak-ng")
    tmp = tmp_path_factory.mktemp("speech")
    a, sr = _say(tmp, "The quick brown fox jumps over the lazy dog, and sings about the moon.")
    b, _ = _say(tmp, "Hello everyone, welcome to my first live show tonight!")
    gap = np.zeros(int(0.8 * sr), np.float32)
    y = np.concatenate([gap, a, gap, b, gap])
    n = frame_count(len(y), sr, FPS)
    res = FormantLipSync().analyze(y, sr, FPS, n)
    return y, sr, n, res, len(gap), len(a), len(b)


def test_protocol_and_shapes(speech):
    _, _, n, res, *_ = speech
    assert isinstance(FormantLipSync(), LipSync)
    assert res.open.shape == (n,) and res.open.dtype == np.float32
    assert res.vowels.shape == (n, len(VOWELS)) and res.vowels.dtype == np.float32
    assert res.open.min() >= 0.0 and res.open.max() <= 1.0
    assert res.vowels.min() >= 0.0
    np.testing.assert_allclose(res.vowels.sum(axis=1), 1.0, atol=1e-5)
    empty = FormantLipSync().analyze(np.zeros(0, np.float32), 16000, FPS, 0)
    assert empty.open.shape == (0,) and empty.vowels.shape == (0, 6)


@needs_espeak
def test_open_follows_loudness(speech):
    y, sr, n, res, *_ = speech
    rms = _frame_rms(y, sr, n)
    rho = spearmanr(res.open, rms).statistic
    print(f"Spearman rho(open, RMS) = {rho:.3f}")
    assert rho > 0.5
    assert res.open.max() > 0.8  # the loud parts open the mouth fully


@needs_espeak
def test_silence_is_closed(speech):
    _, sr, n, res, gap, la, lb = speech
    fr = lambda s: int(s * FPS / sr)  # noqa: E731
    guard = 3  # frames of anticipation/release allowed at the edges of speech
    silent = np.r_[
        0 : fr(gap) - guard,
        fr(gap + la) + guard : fr(2 * gap + la) - guard,
        fr(2 * gap + la + lb) + guard : n,
    ]
    assert len(silent) > 40
    assert np.all(res.open[silent] == 0.0)
    assert np.all(res.dominant()[silent] == N)
    np.testing.assert_allclose(res.vowels[silent, N], 1.0, atol=1e-6)


@needs_espeak
def test_quiet_recording_still_moves(speech):
    y, sr, n, res, *_ = speech
    quiet = FormantLipSync().analyze(y * 0.01, sr, FPS, n)  # -40 dB
    assert quiet.open.max() > 0.8
    assert np.mean(np.abs(quiet.open - res.open)) < 0.05


def test_noise_stays_closed():
    rng = np.random.default_rng(0)
    sr = 16000
    y = (rng.standard_normal(3 * sr) * 0.03).astype(np.float32)  # about -30 dBFS hiss
    n = frame_count(len(y), sr, FPS)
    res = FormantLipSync().analyze(y, sr, FPS, n)
    assert np.mean(res.open < 0.05) > 0.95
    assert np.mean(res.dominant() == N) > 0.95


def test_mouth_leads_the_sound():
    sr = 16000
    t = np.arange(2 * sr) / sr
    y = np.where(
        t >= 1.0, 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + 0.3 * np.sin(2 * np.pi * 660 * t)), 0.0
    )
    y = y.astype(np.float32)
    n = frame_count(len(y), sr, FPS)
    res = FormantLipSync().analyze(y, sr, FPS, n)
    onset_frame = FPS  # the frame whose pts is 1.0 s
    first_open = int(np.argmax(res.open > 0.1))
    assert first_open <= onset_frame
    assert np.all(res.open[: onset_frame - 2] == 0.0)


@needs_espeak
def test_vowel_shapes_do_not_flicker(speech):
    _, _, n, res, *_ = speech
    dom = res.dominant()
    changes = np.count_nonzero(np.diff(dom))
    # Speech has ~4 syllables/s; each may change the shape and pass through N once or twice.
    per_s = changes / (n / FPS)
    print(f"dominant-shape changes per second: {per_s:.2f}")
    assert per_s < 10
    runs = np.diff(np.flatnonzero(np.r_[True, np.diff(dom) != 0, True]))
    assert np.median(runs) >= 2


SUSTAINED_VOICES = ("ja", "en-us", "ja+f3", "en-us+f2", "ja+m3")


@needs_espeak
def test_sustained_vowels(tmp_path):
    """Long vowels from espeak-ng phoneme input should mostly get their own shape."""
    lip = FormantLipSync()
    hits = total = 0
    table = {}
    for voice in SUSTAINED_VOICES:
        for v in "aiueo":
            y, sr = _say(tmp_path, f"[[{v}::::]]", voice=voice, speed=60)
            n = frame_count(len(y), sr, FPS)
            res = lip.analyze(y, sr, FPS, n)
            sounding = res.open > 0.3
            dom = res.dominant()[sounding]
            ok = int(np.count_nonzero(dom == VOWELS.index(v.upper())))
            table[(voice, v)] = ok / max(len(dom), 1)
            hits += ok
            total += len(dom)
    acc = hits / total
    print("sustained-vowel accuracy per voice/vowel:")
    for (voice, v), a in table.items():
        print(f"  {voice:9s} {v}: {a:.2f}")
    print(f"overall frame accuracy: {acc:.3f} over {total} frames")
    assert total > 300
    assert acc >= 0.85
