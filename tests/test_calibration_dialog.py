"""CalibrationDialog end to end: espeak-ng vowels played into a PulseAudio null sink while the
dialog records the sink's monitor through audio.capture; save (with backup), test mode,
restore and reset. Needs pulseaudio, pulseaudio-utils and espeak-ng (tests/pulse.py)."""

from __future__ import annotations

import os
import shutil
import subprocess

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
import scipy.io.wavfile

from app.ui.calibration_dialog import CalibrationDialog, find_backups
from audio.calibration import (
    VowelMatcher,
    default_profile_path,
    load_profile,
    save_profile,
    voiced_mask,
)
from audio.features import resample_mono
from audio.mfcc import mfcc_frames
from core.avatar import VOWELS

PHONEMES = {"A": "A:", "I": "i:", "U": "u:", "E": "e", "O": "o:"}

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture(scope="module")
def vowel_wavs(tmp_path_factory):
    d = tmp_path_factory.mktemp("vowels")
    out = {}
    for v, ph in PHONEMES.items():
        path = d / f"{v}.wav"
        subprocess.run(
            ["espeak-ng", "-v", "en-us", "-p", "50", "-s", "80", "-w", str(path), f"[[{ph}::::]]"],
            check=True,
            capture_output=True,
        )
        out[v] = path
    return out


def read16k(path) -> np.ndarray:
    sr, x = scipy.io.wavfile.read(path)
    return resample_mono(x.astype(np.float32) / 32768.0, sr, 16000)


def classify(profile, x) -> np.ndarray:
    f = mfcc_frames(x, profile.sample_rate, profile.mfcc)
    mask = voiced_mask(f.level_db, f.flatness, f.periodicity)
    return VowelMatcher(profile).probs(f.mfcc[mask]).argmax(axis=1)


def test_calibrate_through_pulseaudio(qtbot, pulse, vowel_wavs, tmp_path):
    user = tmp_path / "config" / "lipsync-profile.json"
    previous = load_profile(default_profile_path())
    previous.source = "the previous profile"
    save_profile(previous, user)
    pulse.wait_for_data()

    dlg = CalibrationDialog(device="pulse")
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.profile_path == user
    assert not dlg.save_button.isEnabled() and not dlg.restore_button.isEnabled()
    players = []
    dlg.recordingStarted.connect(lambda v: players.append(pulse.play(vowel_wavs[v])))
    levels = []
    dlg._bridge.level.connect(lambda v, db, c: levels.append((v, db, c)))

    for v in "AIUEO":
        assert dlg.current == v and dlg.record_button.isEnabled()
        with qtbot.waitSignal(dlg.vowelRecorded, timeout=10_000) as sig:
            dlg.record_button.click()
            assert dlg.recording and not dlg.record_button.isEnabled()  # UI not blocked
        assert sig.args == [v, ""], dlg.status_label.text()
    for p in players:
        assert p.wait(timeout=5) == 0
    assert dlg.current == "N" and dlg.skip_button.isVisible()
    dlg.skip_button.click()  # the hum is optional
    assert dlg.vowels() == ("A", "I", "U", "E", "O")

    # live meters moved while recording; every take is recognised as itself
    assert max(db for _, db, _ in levels) > -30
    assert max(c for _, _, c in levels) > 0.5
    assert dlg.profile is not None and dlg.save_button.isEnabled()
    for v in "AIUEO":
        heard, conf = dlg.results[v]
        assert heard == v and conf > 0.6, (v, dlg.results)
        assert dlg.result_labels[v].text().endswith("%")

    # save: the previous profile is backed up, the new one classifies the played vowels
    with qtbot.waitSignal(dlg.profileSaved) as saved:
        dlg.save_button.click()
    assert saved.args == [str(user)]
    backups = find_backups(user)
    assert len(backups) == 1 and load_profile(backups[0]).source == "the previous profile"
    mine = load_profile(user)
    assert mine.source == "kagura calibration dialog" and set(mine.templates) == set("AIUEO")
    for v, path in vowel_wavs.items():
        labels = classify(mine, read16k(path))
        assert np.mean(labels == VOWELS.index(v)) > 0.8, (v, np.bincount(labels, minlength=6))

    # test mode: the detected vowel follows the voice
    dlg.test_button.click()
    assert dlg._test is not None and not dlg.record_button.isEnabled()
    qtbot.wait(300)
    player = pulse.play(vowel_wavs["O"])
    # while the vowel plays, the big label names it (kana, letter, confidence)
    qtbot.waitUntil(
        lambda: dlg.detected_vowel == "O" and dlg.detected_label.text().startswith("お O "),
        timeout=5000,
    )
    qtbot.waitUntil(lambda: len(dlg._test.history) >= 40, timeout=5000)
    assert player.wait(timeout=5) == 0
    hist = dlg._test.history
    assert hist.count("O") / len(hist) > 0.7, hist
    # and once it has ended, silence: no vowel, the label says so
    qtbot.waitUntil(
        lambda: dlg.detected_vowel is None and dlg.detected_label.text() == "…", timeout=5000
    )
    dlg.test_button.click()
    assert dlg._test is None and dlg.record_button.isEnabled()

    # restore brings the previous profile back (and keeps the calibrated one as a backup)
    assert dlg.restore_button.isEnabled()
    with qtbot.waitSignal(dlg.profileSaved):
        dlg.restore_button.click()
    assert load_profile(user).source == "the previous profile"
    assert len(find_backups(user)) == 2
    assert load_profile(find_backups(user)[0]).source == "kagura calibration dialog"

    # reset gives the built-in default
    with qtbot.waitSignal(dlg.profileSaved):
        dlg.reset_button.click()
    default = load_profile(default_profile_path())
    now = load_profile(user)
    assert now.source == default.source
    for v in default.templates:
        np.testing.assert_allclose(now.templates[v], default.templates[v], atol=1e-3)
    assert len(find_backups(user)) == 3
    dlg.close()


def test_injected_recorder_and_a_bad_take(qtbot, tmp_path, vowel_wavs):
    """No audio device: a recorder callable feeds the takes; silence is refused with a hint."""
    takes = {v: read16k(p) for v, p in vowel_wavs.items()}
    calls = []

    def recorder(seconds, device):
        calls.append((seconds, device))
        v = "AIUEO"[min(len(calls) - 2, 4)] if len(calls) > 1 else None
        if v is None:  # the first take is silence
            return np.zeros(int(seconds * 16000), np.float32), 16000
        return takes[v], 16000

    dlg = CalibrationDialog(device="mic-x", recorder=recorder, seconds=1.5, include_hum=False)
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.vowelRecorded, timeout=5000) as sig:
        dlg.start_recording()
    assert sig.args[0] == "A" and sig.args[1].startswith("not enough steady voice")
    assert "not enough steady voice" in dlg.status_label.text()
    assert dlg.current == "A" and dlg.result_labels["A"].text() == "too quiet"
    for v in "AIUEO":
        with qtbot.waitSignal(dlg.vowelRecorded, timeout=5000) as sig:
            dlg.start_recording()
        assert sig.args == [v, ""]
    assert calls[0] == (1.5, "mic-x")
    assert dlg.profile is not None
    assert all(dlg.results[v][0] == v for v in "AIUEO"), dlg.results
    path = tmp_path / "config" / "lipsync-profile.json"
    assert not path.exists()
    with qtbot.waitSignal(dlg.profileSaved):
        assert dlg.save() is None  # nothing to back up yet
    assert path.exists() and find_backups(path) == []


def test_recorder_errors_are_shown(qtbot):
    def broken(seconds, device):
        raise RuntimeError("input device 'usb' not found;\navailable: none")

    dlg = CalibrationDialog(recorder=broken)
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.vowelRecorded, timeout=5000) as sig:
        dlg.start_recording()
    assert sig.args == ["A", "input device 'usb' not found; available: none"]
    assert dlg.status_label.text() == "A: input device 'usb' not found; available: none"
    assert dlg.record_button.isEnabled() and not dlg.recording
