"""Lip-sync profiles: versioned JSON, safe saving with backups, calibration from recordings."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from audio.calibration import (
    ProfileError,
    default_profile_path,
    load_profile,
    save_profile,
    user_profile_path,
)
from audio.errors import AudioError

SR = 16000
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "cfg"))
    return tmp_path / "cfg"


def test_default_profile_loads_and_round_trips(tmp_path):
    p = load_profile(default_profile_path())
    assert set(p.templates) >= set("AIUEO") and p.sample_rate == 16000
    assert all(t.shape[1] == 12 and len(t) >= 4 for t in p.templates.values())
    out = tmp_path / "p.json"
    assert save_profile(p, out) is None  # nothing to back up
    q = load_profile(out)
    for v in p.templates:
        np.testing.assert_allclose(q.templates[v], p.templates[v], atol=1e-3)
    d = json.loads(out.read_text())
    assert d["format"] == "kagura-lipsync-profile" and d["version"] == 1


def test_user_profile_path_honours_env(config_dir):
    assert user_profile_path() == config_dir / "lipsync-profile.json"


def test_save_backs_up_and_never_loses_old(config_dir):
    p = load_profile(default_profile_path())
    path = user_profile_path()
    save_profile(p, path)
    old = path.read_text()
    p.source = "second"
    backup = save_profile(p, path)
    assert backup is not None and backup.exists() and backup.parent == path.parent
    assert backup.read_text() == old
    assert load_profile(path).source == "second"
    p.source = "third"
    backup2 = save_profile(p, path)
    assert backup2 != backup and backup.read_text() == old  # earlier backup untouched
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    "content, what",
    [
        ("{not json", "corrupt"),
        ('{"hello": 1}', "not a Kagura"),
        ("[1, 2]", "not a Kagura"),
        ('{"format": "kagura-lipsync-profile", "version": 99}', "newer"),
        ('{"format": "kagura-lipsync-profile", "version": "1"}', "version"),
        (
            '{"format": "kagura-lipsync-profile", "version": 1, "sample_rate": 16000, "templates": {"A": [[1, 2]]}}',
            "malformed",
        ),
    ],
)
def test_bad_profiles_one_line_error_and_user_profile_survives(config_dir, content, what):
    good = load_profile(default_profile_path())
    path = user_profile_path()
    save_profile(good, path)
    before = path.read_text()
    bad = config_dir / "bad.json"
    bad.write_text(content)
    with pytest.raises(ProfileError, match=what) as ei:
        load_profile(bad)
    msg = str(ei.value)
    assert "\n" not in msg and str(bad) in msg and "expected" in msg
    assert isinstance(ei.value, AudioError) and isinstance(ei.value, ValueError)
    assert path.read_text() == before
    with pytest.raises(ProfileError, match="no such file"):
        load_profile(config_dir / "missing.json")


@pytest.mark.parametrize(
    "key, value, what",
    [
        ("win_ms", float("nan"), "mfcc.win_ms is nan"),
        ("win_ms", float("inf"), "mfcc.win_ms is inf"),
        ("win_ms", 60000.0, "mfcc.win_ms is 60000.0; expected a number from 5 to 200"),
        ("hop_ms", -1.0, "mfcc.hop_ms"),
        ("hop_ms", 50.0, "longer than win_ms"),
        ("n_mels", 1e30, "mfcc.n_mels is 1e+30; expected a whole number"),
        ("n_mels", True, "mfcc.n_mels is True"),
        ("fmax", float("nan"), "mfcc.fmax is nan"),
        ("fmin", 9000.0, "not below fmax"),
        ("preemph", "0.97", "mfcc.preemph is '0.97'"),
        ("last_coef", 40, "last_coef < n_mels"),
        ("sample_rate", float("nan"), "sample_rate is nan"),
        ("sample_rate", 1e30, "sample_rate is 1e+30"),
        ("noise_floor_db", float("inf"), "noise_floor_db is inf"),
        ("noise_floor_db", 1e30, "noise_floor_db is 1e+30; expected dBFS"),
    ],
)
def test_non_finite_or_out_of_range_profile_values(tmp_path, key, value, what):
    d = json.loads(default_profile_path().read_text())
    (d["mfcc"] if key in d["mfcc"] else d)[key] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))  # json writes NaN / Infinity, as a hand-edited file may have
    with pytest.raises(ProfileError) as ei:
        load_profile(bad)
    msg = str(ei.value)
    assert "\n" not in msg and str(bad) in msg and what in msg, msg


def test_lipsync_with_a_nan_profile_is_one_line_exit_2(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import av

    wav = tmp_path / "a.wav"
    with av.open(str(wav), "w") as c:
        st = c.add_stream("pcm_s16le", rate=SR, layout="mono")
        pcm = (np.sin(np.arange(SR) * 0.05) * 8000).astype(np.int16)[None]
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = SR
        for p in [*st.encode(frame), *st.encode(None)]:
            c.mux(p)
    d = json.loads(default_profile_path().read_text())
    d["mfcc"]["win_ms"] = float("nan")
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(d))
    out = tmp_path / "o.json"
    cmd = [sys.executable, "-m", "app.cli", "lipsync", str(wav), "--json", str(out)]
    done = subprocess.run(
        [*cmd, "--profile", str(prof)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "p.json" in lines[0] and "mfcc.win_ms is nan" in lines[0]
    assert not out.exists()


@needs_espeak
def test_calibrate_from_recordings_classifies_its_voice():
    from audio.calibration import VowelMatcher, calibrate_from_recordings, synth_vowel, voiced_mask
    from audio.mfcc import mfcc_frames

    for voice, pitch in (("en-us+m5", 50), ("ja+f5", 60)):  # held-out voices
        recs = {v: synth_vowel(voice, pitch, v) for v in "AIUEO"}
        prof = calibrate_from_recordings(recs, SR)
        assert all(len(prof.templates[v]) == 4 for v in "AIUEO")
        m = VowelMatcher(prof)
        for j, v in enumerate("AIUEO"):
            f = mfcc_frames(recs[v], SR)
            mask = voiced_mask(f.level_db, f.flatness, f.periodicity)
            assert np.mean(m.probs(f.mfcc[mask]).argmax(axis=1) == j) > 0.95, (voice, v)
    with pytest.raises(ValueError, match="missing"):
        calibrate_from_recordings({"A": recs["A"]}, SR)
    with pytest.raises(ValueError, match="too short or too quiet"):
        calibrate_from_recordings({**recs, "O": np.zeros(SR, np.float32)}, SR)


@needs_espeak
def test_cmd_calibrate_saves_with_backup(config_dir, monkeypatch):
    import argparse

    from app import cmd_calibrate
    from audio.calibration import synth_vowel

    order = iter("AIUEO")
    monkeypatch.setattr(
        cmd_calibrate, "_recorder", lambda: lambda s, d: (synth_vowel("ja+m1", 40, next(order)), SR)
    )
    save_profile(load_profile(default_profile_path()), user_profile_path())
    answers = iter(["", "", "", "", "", "s"])
    out: list[str] = []
    args = argparse.Namespace(device=None, seconds=2.0, profile=None)
    assert (
        cmd_calibrate.run(args, ask=lambda _: next(answers), say=lambda *a, **k: out.append(a[0]))
        == 0
    )
    assert load_profile(user_profile_path()).source == "kagura calibrate"
    assert list(config_dir.glob("lipsync-profile.*.bak.json"))
    assert any("recognised as A" in line for line in out)
