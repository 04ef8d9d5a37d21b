"""The render's stages set up while the audio is still analysed (app/render_job.py
`PendingTrack`): the graph is built and set up from the clip's frame count, and its source waits
for the track at the first frame. The analysis here is the real one (`analyze_clip`), held back
by the test until it lets it finish."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import soundfile as sf

from app.render_job import RenderRequest, TrackInProgress, build_graph
from audio.analysis import analyze_clip
from core.stage import spec
from tests.sinks import Collect

RATE = 48000


class Marked(Collect):
    """Collects frames; notes when it was set up."""

    needs = spec("image")

    def __init__(self) -> None:
        super().__init__()
        self.set_up = threading.Event()
        self.aborted = False

    def setup(self, ctx) -> None:
        self.set_up.set()

    def abort(self) -> None:
        self.aborted = True


@pytest.fixture
def song(tmp_path):
    """1.3 s of a sung-vowel stand-in (180 Hz and harmonics) then quiet."""
    t = np.arange(round(1.3 * RATE)) / RATE
    x = sum((0.2 / k) * np.sin(2 * np.pi * 180 * k * t) for k in range(1, 8)) * (t < 0.8)
    path = tmp_path / "song.wav"
    sf.write(path, x.astype(np.float32), RATE)
    return path


def held_analysis(release: threading.Event, started: threading.Event, frames_off: int = 0):
    def analyze(clip, fps, seed=0, lipsync_model="default"):
        started.set()
        assert release.wait(30), "the test never let the analysis finish"
        track = analyze_clip(clip, fps, seed=seed, lipsync_model=lipsync_model)
        if frames_off:  # an analysis that disagrees with the clip's frame count
            track.pts_ns = track.pts_ns[:-frames_off]
        return track

    return analyze


def test_stages_set_up_before_the_analysis_ends_then_every_frame_is_rendered(song, tmp_path):
    req = RenderRequest(song, tmp_path / "unused.mp4", width=96, height=54, fps=20)
    release, started = threading.Event(), threading.Event()
    sink = Marked()
    early = TrackInProgress(req, held_analysis(release, started))
    graph, ctx, n = build_graph(req, sink_factory=lambda req, clip: sink, early=early)
    assert n == 26  # 1.3 s at 20 fps, known from the decoded clip, not from the analysis
    errors: list[BaseException] = []

    def run():
        try:
            graph.run(ctx)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    # the graph set its stages and sink up with the analysis still running: nothing written
    assert started.wait(10) and sink.set_up.wait(30)
    assert sink.frames == []
    release.set()
    runner.join(60)
    assert not runner.is_alive() and errors == []
    # every frame, in order, on the clip's clock, from the analysed track
    want = analyze_clip(early.clip, 20)
    assert [f.index for f in sink.frames] == list(range(n))
    assert [f.pts_ns for f in sink.frames] == [int(p) for p in want.pts_ns]
    assert [f.params.mouth_open for f in sink.frames] == [want[i].mouth_open for i in range(n)]


def test_an_analysis_of_another_length_fails_the_render_and_aborts_the_sink(song, tmp_path):
    req = RenderRequest(song, tmp_path / "unused.mp4", width=96, height=54, fps=20)
    release, started = threading.Event(), threading.Event()
    release.set()
    sink = Marked()
    early = TrackInProgress(req, held_analysis(release, started, frames_off=1))
    graph, ctx, _ = build_graph(req, sink_factory=lambda req, clip: sink, early=early)
    with pytest.raises(RuntimeError, match="made 25 frames, not 26"):
        graph.run(ctx)
    assert sink.aborted and sink.frames == []
