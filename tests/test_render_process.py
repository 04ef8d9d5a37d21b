"""The live idol render in its own process: the same pixels and motion vectors as the
in-process RenderStage, frame by frame, and a dead worker is one clear error."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from app.bench_offline import synthetic_track
from pipeline.frame import Frame
from pipeline.sources import track_frames
from pipeline.stage import Context
from presets.loader import load_preset
from render.pool import RenderWorkerError
from render.process import RenderProcessStage
from render.stage import RenderStage

W, H, FPS = 320, 180, 30


@pytest.fixture(scope="module")
def preset():
    return load_preset("cyberpunk")


def test_same_frames_as_in_process(preset):
    frames = list(track_frames(synthetic_track(24, FPS, seed=3)))
    ctx = Context(W, H, FPS, 48000, mode="live")
    here = RenderStage(W, H, preset.palette, preset.line)
    there = RenderProcessStage(W, H, preset.palette, preset.line)
    here.setup(ctx)
    there.setup(ctx)
    try:
        for run in range(2):  # the second setup() resets the rig and the motion history only
            pid = there._proc.pid
            for f in frames[:12] if run == 0 else frames[12:]:
                a, b = here.process(f), there.process(f)
                assert np.array_equal(a.image.numpy(), b.image.numpy()), f.index
                assert np.array_equal(a.motion.numpy(), b.motion.numpy()), f.index
                assert b.timings["render"] >= b.timings["render_worker"] > 0
            assert np.abs(b.motion.numpy()).max() > 0.5  # the idol moved: motion was compared
            here.setup(ctx)
            there.setup(ctx)
            assert there._proc.pid == pid  # one worker for the stage's whole life
    finally:
        there.close()
    assert there._proc is None


def test_a_dead_worker_is_one_clear_error(preset):
    stage = RenderProcessStage(W, H, preset.palette, preset.line)
    stage.setup(Context(W, H, FPS, 48000, mode="live"))
    try:
        f = next(iter(track_frames(synthetic_track(1, FPS))))
        stage.process(f)
        os.kill(stage._proc.pid, signal.SIGKILL)
        with pytest.raises(RenderWorkerError, match=r"render process .*SIGKILL.*\(frame 7\)"):
            stage.process(Frame(f.pts_ns, 7, f.params))
    finally:
        stage.close()
    with pytest.raises(RenderWorkerError, match="before setup"):
        stage.process(f)


def test_a_live_look_can_draw_in_its_own_process():
    """build_look(render_process=True), as GPU sessions ask: the look's render is the worker
    process, warmed up (one frame) and reset, and closing the look stops the process."""
    from pipeline.live import build_look

    look = build_look("studio", (W, H), FPS, False, render_process=True)
    try:
        assert isinstance(look.render, RenderProcessStage)
        proc = look.render._proc
        assert proc.is_alive()
        f = look.render.process(next(iter(track_frames(synthetic_track(1, FPS)))))
        assert f.image.shape == (H, W, 4) and f.timings["render_worker"] > 0
    finally:
        look.close()
    proc.join(5.0)
    assert not proc.is_alive()
