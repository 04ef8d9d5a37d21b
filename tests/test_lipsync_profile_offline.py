"""`kagura render` reads the user's calibrated lip-sync profile, as `kagura live` does."""

import dataclasses

import numpy as np

from audio.analysis import analyze_mono, default_lipsync
from audio.calibration import load_profile, save_profile, user_profile_path
from audio.decode import decode_audio
from audio.demo_song import demo_song_path
from audio.offline_lipsync import MfccLipSync
from core.avatar import VOWELS


def _vowel_track(seconds: float = 3.0) -> np.ndarray:
    clip = decode_audio(demo_song_path(), start_s=20.0, seconds=seconds)
    track, _, _ = analyze_mono(clip.mono(), clip.sample_rate, 30)  # render's default engine
    return track.vowels


def test_render_lipsync_uses_the_calibrated_profile_when_there_is_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "cfg"))
    assert not user_profile_path().exists()
    shipped = default_lipsync()
    assert isinstance(shipped, MfccLipSync)
    assert shipped.net_vowels  # the shipped profile names the vowel net: its vowels count
    before = _vowel_track()

    # a "calibration" whose A and O templates are swapped, as if this speaker's A sounded like
    # the default voice's O
    t = dict(shipped.profile.templates)
    t["A"], t["O"] = t["O"], t["A"]
    user = dataclasses.replace(shipped.profile, templates=t, source="calibration", extra={})
    save_profile(user, user_profile_path())
    calibrated = default_lipsync()
    assert isinstance(calibrated, MfccLipSync)
    assert np.array_equal(calibrated.profile.templates["A"], shipped.profile.templates["O"])
    assert not calibrated.net_vowels  # the user's templates give the vowels, not the net
    after = _vowel_track()

    a, o = VOWELS.index("A"), VOWELS.index("O")
    assert before.shape == after.shape
    # the render follows the calibration: its templates and the net vote together
    # (audio.vowel_net.fuse), so where the default profile heard a clear A, the swapped
    # templates pull the vote towards O (deterministic: an ignored profile changes nothing)
    # With the separation front-end's net (issue 15) the net's vote dominates the fusion: the
    # pull is small (about half a percent of O weight here), but an ignored profile gives
    # exactly the same track, so a strict rise still shows the profile was read.
    clear_a = before[:, a] > 0.5
    assert clear_a.sum() >= 3
    assert not np.array_equal(before, after)
    assert after[clear_a, o].mean() > before[clear_a, o].mean() + 0.002
    assert load_profile(user_profile_path()).source == "calibration"
