"""`kagura calibrate` end to end: vowels played into a PulseAudio null sink, recorded through
Kagura's capture, saved as a profile that recognises them; the previous profile survives."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import soundfile

from app import cmd_calibrate
from audio.calibration import (
    HELDOUT_VOICES,
    VowelMatcher,
    load_profile,
    synth_vowel,
    user_profile_path,
    voiced_mask,
)
from audio.capture import CaptureError, record
from audio.features import resample_mono
from audio.mfcc import mfcc_frames
from core.avatar import VOWELS

SR = 16000
VOICE, PITCH = HELDOUT_VOICES[1]  # a voice the default profile was not built from


@pytest.fixture()
def vowel_wavs(tmp_path):
    """~3 s per vowel (two espeak-ng takes back to back), longer than the 2 s recording."""
    paths = {}
    for v in "AIUEO":
        x = synth_vowel(VOICE, PITCH, v, SR)
        paths[v] = tmp_path / f"{v}.wav"
        soundfile.write(paths[v], np.concatenate([x, x]), SR)
    return paths


def test_calibrate_through_a_null_sink(pulse, vowel_wavs, tmp_path, monkeypatch):
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "config"))
    path = user_profile_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": "kagura-lipsync-profile", "note": "an older profile"}))
    before = path.read_bytes()
    wavs = vowel_wavs
    players = []

    def ask(prompt: str) -> str:
        vowel = prompt[1]
        if vowel == "N":
            return "s"  # skip the optional hum
        players.append(pulse.play(wavs[vowel]))
        return ""

    args = argparse.Namespace(mic="pulse", seconds=2.0, profile=None)
    said: list[str] = []
    assert (
        cmd_calibrate.run(args, ask=ask, say=lambda *a, **k: said.append(" ".join(map(str, a))))
        == 0
    )
    for p in players:
        p.wait(timeout=10)

    backups = [p for p in path.parent.iterdir() if p != path]
    assert [b.read_bytes() for b in backups] == [before]  # the old profile was kept, unchanged
    # Then the user speaks again: fresh takes through the same sink and capture path.
    profile = load_profile(path)
    matcher = VowelMatcher(profile)
    for v in wavs:
        player = pulse.play(wavs[v])
        x, rate = record(2.0, "pulse")
        player.wait(timeout=10)
        x = resample_mono(x, rate, SR)
        f = mfcc_frames(x, SR, profile.mfcc)
        mask = voiced_mask(f.level_db, f.flatness, f.periodicity)
        guess = np.argmax(matcher.probs(f.mfcc[mask]), axis=1)
        accuracy = float(np.mean(guess == VOWELS.index(v)))
        print(v, f"{accuracy:.0%}", np.bincount(guess, minlength=6))
        assert accuracy >= 0.8, f"{v}: {accuracy:.0%} of frames recognised ({said})"


def test_calibrate_without_the_device(pulse, tmp_path, monkeypatch):
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "config"))
    args = argparse.Namespace(mic="no-such-microphone", seconds=1.0, profile=None)
    with pytest.raises(CaptureError, match="no-such-microphone"):
        cmd_calibrate.run(args, ask=lambda prompt: "", say=lambda *a, **k: None)
    assert not user_profile_path().exists()
