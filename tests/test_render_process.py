"""The live idol render in its own process: the same pixels and motion vectors as the
in-process RenderStage, frame by frame — drawn whole, and drawn ahead with the mouth redrawn
late from newer params —, and a dead worker is one clear error."""

from __future__ import annotations

import dataclasses
import os
import signal

import numpy as np
import pytest

from app.bench_offline import synthetic_track
from core.frame import Frame
from core.stage import Context
from pipeline.sources import track_frames
from presets.loader import load_preset
from render.pool import RenderWorkerError
from render.process import RenderProcessStage
from render.stage import RenderStage

W, H, FPS = 320, 180, 30


@pytest.fixture(scope="module")
def preset():
    return load_preset("cyberpunk")


def _later_mouth(f: Frame, k: int) -> Frame:
    """`f` with another mouth (as the newest audio gives at the frame's start), pose kept."""
    p = f.params
    vowels = tuple(np.roll(np.asarray(p.vowels), 1 + k % 5))
    late = dataclasses.replace(
        p, mouth_open=1.0 - p.mouth_open, vowels=vowels, mouth_form=-p.mouth_form
    )
    return f.with_(params=late)


def test_same_frames_as_in_process(preset):
    """Whole frames (process) and late-mouth frames (prepare, then finish with a newer
    mouth) are identical in and out of process, and a late-mouth frame is exactly the frame
    drawn whole from the base's pose and the late mouth."""
    frames = list(track_frames(synthetic_track(24, FPS, seed=3)))
    ctx = Context(W, H, FPS, 48000, mode="live")
    here = RenderStage(W, H, preset.palette, preset.line)
    there = RenderProcessStage(W, H, preset.palette, preset.line)
    whole = RenderStage(W, H, preset.palette, preset.line)  # the reference for late mouths
    for stage in (here, there, whole):
        stage.setup(ctx)
    try:
        for run in range(2):  # the second setup() resets the rig and the motion history only
            pid = there._proc.pid
            for f in frames[:12] if run == 0 else frames[12:]:
                if f.index % 3 == 0:
                    a, b = here.process(f), there.process(f)
                    c = whole.process(f)
                else:
                    late = _later_mouth(f, f.index)
                    assert not np.array_equal(late.params.vowels, f.params.vowels)
                    here.prepare(f)
                    if there.prepared_index != f.index:  # not asked for by the last finish
                        there.prepare(f)
                    collected = f.index % 2 == 0
                    if collected:  # copied out before the start, as a live session does
                        there.collect(5.0)
                    # as a live session does: the next frame's idol asked for right behind
                    # this one's mouth (drawn into the other slot while this one is copied)
                    nxt = frames[f.index + 1] if f.index % 3 == 1 else None
                    a = here.finish(late)
                    b = there.finish(late, then=nxt.params if nxt else None)
                    assert there.prepared_index == (nxt.index if nxt else None)
                    c = whole.process(late)
                    assert b.timings["mouth"] > 0 and a.timings["mouth"] > 0
                    assert (b.timings["render_wait"] == 0) == collected
                assert np.array_equal(a.image.numpy(), b.image.numpy()), f.index
                assert np.array_equal(a.motion.numpy(), b.motion.numpy()), f.index
                assert np.array_equal(a.image.numpy(), c.image.numpy()), f.index
                # the motion vectors are the base's: its mouth marked the part-ID map (4x4
                # blocks), so they may differ from the whole frame's inside the mouth box only
                x0, y0, x1, y1 = here.renderer._mouth_box
                differ = np.argwhere((a.motion.numpy() != c.motion.numpy()).any(axis=2))
                if len(differ):
                    assert y0 - 4 <= differ[:, 0].min() and differ[:, 0].max() < y1 + 4
                    assert x0 - 4 <= differ[:, 1].min() and differ[:, 1].max() < x1 + 4
                assert b.timings["render"] > 0
            assert np.abs(b.motion.numpy()).max() > 0.5  # the idol moved: motion was compared
            for stage in (here, there, whole):
                stage.setup(ctx)
            assert there._proc.pid == pid  # one worker for the stage's whole life
    finally:
        there.close()
    assert there._proc is None


def test_the_late_mouth_changes_only_the_mouth_box(preset):
    """The late mouth redraws the mouth box alone: outside it the pixels are the base's;
    inside, the mouth drawn from the base's own params gives the base back exactly."""
    from render.idol import IdolRenderer

    r = IdolRenderer(W, H, preset.palette, preset.line)
    f = next(iter(track_frames(synthetic_track(1, FPS, seed=5))))
    base = r.render_base(f.params)
    same = base.rgba.copy()
    r.redraw_mouth(same, f.params)
    assert np.array_equal(same, base.rgba)
    later = base.rgba.copy()
    x0, y0, x1, y1 = r.redraw_mouth(later, _later_mouth(f, 2).params)
    assert 0 < x1 - x0 < W // 4 and 0 < y1 - y0 < H // 4
    changed = np.argwhere((later != base.rgba).any(axis=2))
    assert len(changed) > 20  # the mouth did change
    assert changed[:, 0].min() >= y0 and changed[:, 0].max() < y1
    assert changed[:, 1].min() >= x0 and changed[:, 1].max() < x1
    with pytest.raises(RuntimeError, match="render_base"):
        IdolRenderer(W, H, preset.palette, preset.line).redraw_mouth(later, f.params)


@pytest.mark.parametrize("name", ["studio", "cyberpunk", "ink-wash"])
def test_the_late_mouth_is_exact_in_any_pose(name):
    """Strong head turns and tilts put hair and brows over the mouth box, and expressions
    change the mouth's form: the late mouth still equals the whole frame drawn with it, bit for
    bit, for every line style (clean, brush) and in portrait frames too."""
    from core.avatar import AvatarParams
    from render.idol import IdolRenderer

    p = load_preset(name)
    rng = np.random.default_rng(7)
    for size in ((W, H), (H, W)):
        ahead = IdolRenderer(*size, p.palette, p.line)
        whole = IdolRenderer(*size, p.palette, p.line)
        for k in range(6):
            ex = {"surprised": 0.8} if k % 3 == 0 else {"happy": 0.6, "sad": 0.3}
            pose = AvatarParams(
                pts_ns=k * 16_666_667,
                head_yaw=float(rng.uniform(-30, 30)),
                head_pitch=float(rng.uniform(-20, 20)),
                head_roll=float(rng.uniform(-25, 25)),
                mouth_open=float(rng.random()),
                vowels=tuple(rng.random(6)),
                mouth_form=float(rng.uniform(-1, 1)),
                expressions=ex,
            )
            late = dataclasses.replace(
                pose,
                mouth_open=float(rng.random()),
                vowels=tuple(rng.random(6)),
                mouth_form=float(rng.uniform(-1, 1)),
            )
            image = ahead.render_base(pose).rgba
            ahead.redraw_mouth(image, late)
            assert np.array_equal(image, whole.render(late).rgba), (size, k)


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
        assert f.image.shape == (H, W, 4) and f.timings["render"] > 0
    finally:
        look.close()
    proc.join(5.0)
    assert not proc.is_alive()


def test_a_launched_worker_is_waited_for_by_setup_and_draws_the_same(preset):
    """launch() starts the worker and returns before it is ready (the live session's set-up
    goes on meanwhile); setup() waits for it; frames are the in-process ones."""
    frames = list(track_frames(synthetic_track(4, FPS, seed=5)))
    ctx = Context(W, H, FPS, 48000, mode="live")
    here = RenderStage(W, H, preset.palette, preset.line)
    there = RenderProcessStage(W, H, preset.palette, preset.line)
    here.setup(ctx)
    there.launch()
    try:
        assert there._proc.is_alive()
        there.launch()  # once only
        pid = there._proc.pid
        there.setup(ctx)
        assert there._proc.pid == pid
        for f in frames:
            assert np.array_equal(here.process(f).image.numpy(), there.process(f).image.numpy())
    finally:
        there.close()


def test_a_launched_worker_never_set_up_is_stopped_by_close(preset):
    stage = RenderProcessStage(W, H, preset.palette, preset.line)
    stage.launch()
    proc = stage._proc
    stage.close()
    proc.join(5.0)
    assert not proc.is_alive()


def test_a_look_made_with_a_launched_render_process():
    """What a GPU live session does for its first look: the render process is started before
    the session's other set-up, then the look is built with it."""
    from pipeline.look import build_look, launch_render_process

    early = launch_render_process("studio", (W, H))
    look = build_look("studio", (W, H), FPS, False, render_process=True, render=early)
    try:
        assert look.render is early and early._proc.is_alive()
        f = look.render.process(next(iter(track_frames(synthetic_track(1, FPS)))))
        assert f.image.shape == (H, W, 4)
    finally:
        look.close()
    assert early._proc is None


@pytest.mark.parametrize("size", [(W, H), (W + 2, H)])
def test_a_live_session_adopts_the_render_process_started_before_it(size):
    """`kagura live` starts the first look's render process before torch's import
    (app.live_gpu.launch_first_render); the session uses it when it is its first look's, and
    closes it (drawing with its own) when it is not."""
    from audio.demo_song import demo_song_path
    from pipeline.live import FilePlayback, LiveSession
    from pipeline.live_gpu import LiveGpu
    from pipeline.look import launch_render_process

    early = launch_render_process("studio", size)
    gpu = LiveGpu(device="cpu", temporal=True, render_process=True, render_size=(W, H))
    src = FilePlayback(demo_song_path(), loop=True, play_out=False, start=False)
    session = LiveSession(src, "studio", size=(W, H), fps=FPS, gpu=gpu, first_render=early)
    try:
        render = session.looks.current.render
        if size == (W, H):
            assert render is early and early._proc.is_alive()
        else:
            assert render is not early and early._proc is None  # closed: not this look's
            assert (render.width, render.height) == (W, H) and render._proc.is_alive()
    finally:
        session.stop()
        session.looks.current.close()
        early.close()


def test_a_realtime_worker_says_what_the_os_gave_it_and_draws_the_same(preset):
    """realtime=True: the worker's first task is to ask for real-time scheduling; its answer
    (core.priority's sentence) is read at setup, before any frame, and the frames that follow
    are the in-process stage's."""
    frames = list(track_frames(synthetic_track(4, FPS, seed=5)))
    ctx = Context(W, H, FPS, 48000, mode="live")
    here = RenderStage(W, H, preset.palette, preset.line)
    there = RenderProcessStage(W, H, preset.palette, preset.line, realtime=True)
    plain = RenderProcessStage(W, H, preset.palette, preset.line)
    for stage in (here, there, plain):
        stage.setup(ctx)
    try:
        assert plain.priority is None
        assert there.priority.startswith(
            ("This thread now runs with SCHED_FIFO", "Real-time scheduling")
        )
        for f in frames:
            a, b = here.process(f), there.process(f)
            assert np.array_equal(a.image.numpy(), b.image.numpy())
            assert np.array_equal(a.motion.numpy(), b.motion.numpy())
    finally:
        for stage in (here, there, plain):
            stage.close()
