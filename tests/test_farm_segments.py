"""A long video cut by time (farm/segments.py): the joined file has the frames of one render.

The segments are encoded losslessly here (x264 CRF 0), so decoded frames can be compared bit
for bit with the pictures `kagura render`'s own graph hands its encoder (converted to yuv420p
the way the MP4 encoders convert them). With the default lossy CRF each segment's rate control
starts afresh, so only the pictures, not the decoded bytes, are identical then.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from app.render_job import RenderRequest, assemble_graph
from core.stage import spec
from farm import segments as seg
from pipeline.sinks.output import partial_path
from presets.loader import load_preset
from tests.signals import espeak_speech

W, H, FPS = 96, 64, 12


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    text = "Hello everyone. Welcome to my stage tonight! Are you ready to sing with me?"
    return espeak_speech(path, text)


class _Pictures:
    """A sink keeping what the graph hands the encoder, as yuv420p planes."""

    name = "video_file"

    def __init__(self):
        self.needs = spec("image", size=(W, H))
        self.frames: list[np.ndarray] = []

    def setup(self, ctx):
        pass

    def write(self, frame):
        self.frames.append(seg.to_yuv(np.ascontiguousarray(frame.image.numpy())).to_ndarray())

    def finish(self):
        pass

    def abort(self):
        pass


def test_plan_cuts_on_whole_seconds():
    assert seg.plan(100, 12, 3) == [(0, 36), (36, 72), (72, 100)]
    assert seg.plan(30, 12, 8) == [(0, 12), (12, 24), (24, 30)]  # 3 seconds: 3 segments
    assert seg.plan(5, 30, 4) == [(0, 5)]


def test_split_render_decodes_to_the_frames_of_one_render(speech, tmp_path):
    req = RenderRequest(
        audio=speech, output=tmp_path / "split.mp4", width=W, height=H, fps=FPS, seconds=3.0
    )
    clip, track = seg.prepare(req)
    one = _Pictures()
    graph, ctx, total = assemble_graph(
        req, load_preset(req.preset), None, track, clip.samples, clip.sample_rate, one
    )
    graph.run(ctx)
    parts = seg.plan(total, FPS, 3)
    assert len(parts) == 3
    packets = [seg.render_segment(req, track, a, b, crf=0) for a, b in parts]
    seg.join(req, clip, packets)

    with av.open(str(req.output)) as c:
        assert c.streams.video[0].codec_context.name == "h264"
        frames = list(c.decode(video=0))
        decoded = [f.to_ndarray() for f in frames]
        keys = {i for i, f in enumerate(frames) if f.key_frame}
    with av.open(str(req.output)) as c:
        samples = sum(f.samples for f in c.decode(audio=0))
    assert len(decoded) == total == len(one.frames)
    differ = [i for i, (a, b) in enumerate(zip(decoded, one.frames, strict=True)) if (a != b).any()]
    assert differ == []
    assert {a for a, _ in parts} <= keys  # every segment starts on a keyframe
    assert abs(samples - clip.samples.shape[1]) <= 2048  # the audio, once (AAC priming aside)
    assert not partial_path(req.output).exists()


def test_a_segment_drawn_without_the_rig_history_would_differ(speech, tmp_path):
    """The check above can fail: frames of a segment that did not step the rig from frame 0
    (hair springs, motion vectors) are not those of one render."""
    from render.stage import RenderStage

    req = RenderRequest(
        audio=speech, output=tmp_path / "x.mp4", width=W, height=H, fps=FPS, seconds=2.0
    )
    _, track = seg.prepare(req)
    preset = load_preset(req.preset)
    warm = seg._warm_render_stage(W, H, preset.palette, preset.line, None, track, FPS)
    cold = RenderStage(W, H, preset.palette, preset.line)
    for stage in (warm, cold):
        stage.setup(_Ctx())
    a = warm.process(_frame(track, FPS)).image.numpy()
    b = cold.process(_frame(track, FPS)).image.numpy()
    assert (a != b).any()


class _Ctx:
    def __init__(self):
        self.extras: dict = {}


def _frame(track, i):
    from core.frame import Frame

    return Frame(pts_ns=int(track.pts_ns[i]), index=i, params=track[i])
