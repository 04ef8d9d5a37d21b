"""The live analysis' low-delay resampler: its delay, and lip-sync as good as with soxr HQ."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from audio.live_resample import LowDelayResampler


def _stream(r, x: np.ndarray, block: int) -> np.ndarray:
    return np.concatenate([r.resample_chunk(x[i : i + block]) for i in range(0, len(x), block)])


@pytest.mark.parametrize("src", [48000, 44100, 22050])
def test_impulse_comes_out_at_its_time_plus_the_stated_delay(src):
    x = np.zeros(src, np.float32)
    x[src // 2] = 1.0
    r = LowDelayResampler(src, 16000)
    y = _stream(r, x, 237)  # an odd block size: positions must carry across blocks
    assert len(y) == 16000  # no output withheld
    peak = int(np.argmax(y))
    assert abs(peak - (8000 + r.delay_s * 16000)) <= 1
    assert r.delay_s < 0.0015  # soxr HQ: 21 ms at 48 kHz


def test_a_tone_keeps_its_level_and_an_alias_is_damped():
    t = np.arange(48000) / 48000
    r = LowDelayResampler(48000, 16000)
    tone = _stream(r, np.sin(2 * np.pi * 1000 * t).astype(np.float32), 240)[1000:]
    assert np.sqrt(np.mean(tone**2)) == pytest.approx(np.sqrt(0.5), rel=0.01)
    r = LowDelayResampler(48000, 16000)
    alias = _stream(r, np.sin(2 * np.pi * 12000 * t).astype(np.float32), 240)[1000:]
    assert np.sqrt(np.mean(alias**2)) < 0.01  # 12 kHz would fold onto 4 kHz


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
def test_live_lipsync_vowels_match_soxr_hq_at_48k():
    soxr = pytest.importorskip("soxr")
    from audio.calibration import HELDOUT_VOICES, default_profile_path, load_profile, synth_vowel
    from audio.live_lipsync import LiveLipSync

    profile = load_profile(default_profile_path())
    acc = {}
    for kind in ("hq", "low"):
        ok = tot = 0
        for voice, pitch in HELDOUT_VOICES[:3]:
            for v in "AIUEO":
                pad = np.zeros(12000, np.float32)
                x = np.concatenate([pad, synth_vowel(voice, pitch, v, 48000), pad])
                r = (
                    LowDelayResampler(48000, 16000)
                    if kind == "low"
                    else soxr.ResampleStream(48000, 16000, 1, dtype="float32", quality="HQ")
                )
                frames = [
                    f for f in LiveLipSync(profile).process(_stream(r, x, 240)) if not f.silent
                ]
                ok += sum(f.vowel == v for f in frames)
                tot += len(frames)
        acc[kind] = ok / tot
    print(f"vowel accuracy at 48 kHz: soxr HQ {acc['hq']:.1%}, low-delay {acc['low']:.1%}")
    # held synthetic vowels: the shipped voice/vowel net reads them at ~85 % (sentences of
    # unseen voices far better than the templates before it, held vowels worse: past ~0.3 s
    # the live front-end takes a held vowel's partials for a band's held chord)
    assert acc["low"] >= 0.8
    assert acc["low"] >= acc["hq"] - 0.03  # measured 85.5 % vs 87.7 % with the front-end
