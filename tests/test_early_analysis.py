"""The analysis process gives the render exactly the track the in-process analysis gives."""

from __future__ import annotations

import numpy as np

from app.early_analysis import AnalysisProcess
from audio.analysis import analyze_clip
from audio.decode import decode_audio
from audio.demo_song import demo_song_path


def test_the_child_returns_the_same_track():
    clip = decode_audio(demo_song_path(), start_s=8.0, seconds=1.5)
    got = AnalysisProcess().analyze(clip, 30, seed=3)
    want = analyze_clip(clip, 30, seed=3)
    assert got.fps == want.fps
    np.testing.assert_array_equal(got.pts_ns, want.pts_ns)
    assert got.scalars.keys() == want.scalars.keys()
    for name in want.scalars:
        np.testing.assert_array_equal(got.scalars[name], want.scalars[name], err_msg=name)
    np.testing.assert_array_equal(got.vowels, want.vowels)
    for name in want.expressions:
        np.testing.assert_array_equal(got.expressions[name], want.expressions[name])
