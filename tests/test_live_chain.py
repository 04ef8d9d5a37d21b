"""The live chain's contract check (pipeline/live_chain.py): the offline graph's check, run on
real looks and a real GPU chain (on the CPU) when they are built, before anything is set up."""

from __future__ import annotations

import pytest

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import GraphError
from core.stats import Timings
from pipeline.graph import Graph
from pipeline.live_chain import LIVE_GIVES, LiveOutput, check_live, live_stages
from pipeline.live_gpu import LiveGpu
from pipeline.live_looks import LookSwitcher
from pipeline.look import build_look

SIZE = (64, 36)


def temporal_chain(look, render_size=SIZE):
    """The GPU chain with temporal refinement only, on the CPU (no models, no upscaler)."""
    spec = LiveGpu(device="cpu", temporal=True, render_process=False, budget_ms=1000.0)
    return spec.build(look.preset, render_size, render_size, 30)


def test_cpu_look_fits_and_the_chain_is_render_then_stylize():
    look = build_look("studio", SIZE, 30, False, fits=lambda look: check_live(look, None, SIZE))
    try:
        assert [s.name for s in live_stages(look)] == ["render", "stylize"]
        out = check_live(look, None, SIZE)
        assert "image" in out.fields and out.size == SIZE and out.device == "cpu"
    finally:
        look.close()


def test_a_look_that_does_not_fit_fails_at_build_with_the_graphs_message():
    with pytest.raises(GraphError, match="stage 'output' needs 128x72 images, gets 64x36") as e:
        build_look("studio", SIZE, 30, False, fits=lambda look: check_live(look, None, (128, 72)))
    # the same stages in an offline graph: the same check, the same words
    look = build_look("studio", SIZE, 30, False)
    try:
        graph = Graph([], LIVE_GIVES, list(live_stages(look)), LiveOutput((128, 72)))
        with pytest.raises(GraphError) as offline:
            graph.build()
        assert str(offline.value) == str(e.value)
    finally:
        look.close()


def test_the_fit_is_checked_before_the_look_is_set_up():
    seen = []

    def fits(look):
        seen.append(look.render.prepared_index)  # None: nothing drawn yet
        raise GraphError("refused")

    with pytest.raises(GraphError, match="refused"):
        build_look("studio", SIZE, 30, False, fits=fits)
    assert seen == [None]


def test_gpu_chain_checks_the_whole_chain_with_its_first_look_and_runs_it():
    look = build_look("studio", SIZE, 30, False)
    chain = temporal_chain(look)
    try:
        chain.setup(look)
        names = [s.name for s in live_stages(look, chain)]
        assert names == ["render", "upload", "stylize", "temporal", "readback"]
        # what submit runs is what the check walked
        assert [s.name for s in chain.parts(look.stylize)] == names[1:-1]
        f = look.render.process(Frame(0, 0, AvatarParams()))
        out = chain.submit(f, look.stylize)
        assert out.ready is None and tuple(out.image.shape) == (SIZE[1], SIZE[0], 4)
        assert {"stylize", "temporal"} <= set(out.timings)  # the CPU: wall times stamped
    finally:
        chain.close()
        look.close()


def test_gpu_chain_refuses_a_look_of_another_size_before_any_setup():
    look = build_look("studio", SIZE, 30, False)
    chain = temporal_chain(look, render_size=(32, 18))
    try:
        with pytest.raises(GraphError, match="stage 'upload' needs 32x18 images, gets 64x36"):
            chain.setup(look)
        assert chain.setup_s == 0.0 and chain.frames == 0  # nothing set up, nothing warmed
    finally:
        chain.close()
        look.close()


def test_gpu_chain_refuses_a_look_that_draws_no_motion():
    look = build_look("studio", SIZE, 30, False)
    look.render.drop_motion()  # temporal refinement warps by the motion vectors
    chain = temporal_chain(look)
    try:
        with pytest.raises(GraphError, match=r"stage 'upload' needs \['motion'\]"):
            chain.setup(look)
    finally:
        chain.close()
        look.close()


def test_a_later_look_that_does_not_fit_the_chain_is_refused_and_the_current_one_stays():
    """As a session's look thread: each look is checked against the chain before its swap."""
    first = build_look("studio", SIZE, 30, False)
    chain = temporal_chain(first)
    chain.setup(first)
    errors: list[str] = []

    def build(preset, transparent):
        size = SIZE if preset == "studio" else (32, 18)  # a look drawn at the wrong size
        return build_look(
            preset, size, 30, transparent, fits=lambda look: check_live(look, chain, SIZE)
        )

    looks = LookSwitcher(build, "studio", False, Timings(), errors.append, thread_name="t-look")
    try:
        current = looks.current
        looks.set_preset("cyberpunk")
        assert looks.wait(30)
        assert looks.current is current and looks.switches == 0
        assert len(errors) == 1 and "stage 'upload' needs 64x36 images, gets 32x18" in errors[0]
    finally:
        looks.current.close()
        chain.close()
        first.close()


def test_a_gpu_session_checks_its_first_look_with_the_chain_and_a_later_one_against_it(
    tmp_path,
):
    """LiveSession wiring, on the CPU: output 128x72 = render 64x36 x2 (the upscaler's random
    weights), so a look checked without the chain would be refused at the output; the session
    is built and a preset switch goes through, both checked against the whole chain."""
    from pipeline.live import FilePlayback, LiveSession
    from pipeline.live_gpu import shared_upscalers
    from pipeline.upscale.animevideov3 import ScaledSR, SRVGGNetCompact
    from pipeline.upscale.stage import UpscaleStage
    from tests.hostile import write_wav_s16

    def make_x4(in_size):
        st = UpscaleStage(4, device="cpu", in_size=in_size, max_batch=1)
        st.model = ScaledSR(SRVGGNetCompact(), 4, 4).eval().requires_grad_(False)
        return st

    gpu = LiveGpu(
        device="cpu",
        make_upscaler=shared_upscalers(make_x4),
        upscale=2,
        temporal=False,
        render_size=SIZE,
        render_process=False,
        budget_ms=1000.0,
    )
    src = FilePlayback(write_wav_s16(tmp_path / "a.wav", 1.0), start=False)
    session = LiveSession(src, "studio", size=(128, 72), fps=10, gpu=gpu)
    try:
        stages = live_stages(session.looks.current, session._gpu)
        assert [s.name for s in stages] == ["render", "upload", "stylize", "upscale", "readback"]
        session.set_preset("cyberpunk")
        assert session.wait_look(60)
        assert session.looks.current.name == "cyberpunk" and session.looks.errors == []
        # the same look against the CPU chain does not reach the output's size
        with pytest.raises(GraphError, match="stage 'output' needs 128x72 images, gets 64x36"):
            check_live(session.looks.current, None, (128, 72))
    finally:
        session.stop()


def test_a_gpu_session_shows_frames_while_its_diffusion_is_set_up_then_paints(tmp_path):
    """LiveSession with painting beside the first frames (the CUDA default, forced here on the
    CPU): the session starts before the diffusion is set up, its first frames come out
    unpainted at the output size, later ones painted — through the frame loop, the ladder's
    set-up thread and the output queue."""
    import threading
    import time

    import torch

    from pipeline.diffusion import DiffusionStage, random_weights
    from pipeline.live import FilePlayback, LiveSession
    from tests.hostile import write_wav_s16

    torch.manual_seed(0)
    gate = threading.Event()
    real_setup = DiffusionStage.setup

    def gated(self, ctx=None):  # the set-up waits until the first frames were seen
        assert gate.wait(60)
        return real_setup(self, ctx)

    gpu = LiveGpu(
        device="cpu",
        models=random_weights("tiny", device="cpu"),
        temporal=True,
        render_size=SIZE,
        render_process=False,
        budget_ms=1000.0,
        paint_beside=True,
    )
    # longer than the slowest set-up: the frames stop when the file ends
    src = FilePlayback(write_wav_s16(tmp_path / "a.wav", 30.0), start=False)
    DiffusionStage.setup = gated
    session = LiveSession(src, "studio", size=SIZE, fps=10, gpu=gpu)
    steps: list[float] = []
    try:
        session.start()
        deadline = time.monotonic() + 60
        while not (steps and steps[-1] > 0):
            assert time.monotonic() < deadline, f"no painted frame: {steps}"
            if not len(session.output):
                time.sleep(0.01)
                continue
            frame = session.output.get()
            assert (frame.image.shape[1], frame.image.shape[0]) == SIZE
            steps.append(frame.timings["diffusion.steps"])
            if len(steps) == 3:
                gate.set()
        assert steps[:3] == [0.0, 0.0, 0.0]  # unpainted while the diffusion was set up
        assert session.stats()["quality"]["painting_after_s"] > 0
    finally:
        gate.set()
        DiffusionStage.setup = real_setup
        session.stop()
    assert session.error is None, session.error
