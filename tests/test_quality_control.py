"""The quality ladder in a real running Graph under a simulated slow stage.

Real stages: tiny random-weight diffusion models (pipeline/diffusion/models.py random_weights),
the temporal stage and realesr-animevideov3-shaped upscalers with random weights, all on the
CPU. The only fake is the slow stage — something outside the thing under test whose cost the
test controls, standing in for the GPU time the ladder is fed: the controller is fed the slow
stage's wall time (the measurement path on the CPU: `frame.timings`), so its decisions do not
hang on how the tiny models' CPU times wobble on a 2-core machine; the real stages still get
every rung and are measured (stage_stats).
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.graph import Graph
from pipeline.ladder import (
    DiffusionLadder,
    QualityControl,
    TemporalLadder,
    VsrLadder,
    fit_ladder,
    resize_rgba,
)
from pipeline.quality import DEFAULT_LADDER, QualityController, Rung

pytest.importorskip("diffusers")

RENDER = (64, 48)
OUT = (256, 192)  # render x 4
BUDGET = 100.0
LOAD_MS = 150.0
# best -> cheapest; latent sizes are read as scales of the top rung (0.6 -> 40x32 here)
LADDER = (
    Rung("top", 2, (100, 100), True, 4),
    Rung("one step", 1, (100, 100), True, 4),
    Rung("small, no temporal", 1, (60, 60), False, 4),
    Rung("vsr x2", 1, (60, 60), False, 2),
)


@pytest.fixture(scope="module")
def models():
    from pipeline.diffusion import random_weights

    torch.manual_seed(0)
    m = random_weights("tiny", device="cpu")
    with torch.no_grad():  # as tests/test_diffusion.py: keep the signal through the autoencoder,
        for mod in m.vae.modules():  # so a blank (black/brown) frame would show
            if isinstance(mod, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
                if mod.bias is not None:
                    mod.bias.zero_()
        m.vae.decoder.layers[-1].weight.mul_(0.08)
        m.vae.decoder.layers[-1].bias.fill_(0.5)
    return m


@pytest.fixture(scope="module")
def preset():
    from presets.loader import load_preset

    return load_preset("cyberpunk")  # 2 diffusion steps


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # the graph's stage threads share the 2 cores
    yield
    torch.set_num_threads(n)


def make_upscalers():
    from pipeline.live_gpu import shared_upscalers
    from pipeline.upscale.animevideov3 import ScaledSR, SRVGGNetCompact
    from pipeline.upscale.stage import UpscaleStage

    def make_x4(in_size):
        st = UpscaleStage(4, device="cpu", in_size=in_size, max_batch=1)
        st.model = ScaledSR(SRVGGNetCompact(), 4, 4).eval().requires_grad_(False)
        st.model_name = "realesr-animevideov3 (RANDOM weights)"
        return st

    return shared_upscalers(make_x4)


def _cpu_live_gpu(models, **options):
    """kagura live's GPU chain spec on the CPU with the tiny models and random upscalers."""
    from pipeline.live_gpu import LiveGpu

    kw = {"render_size": RENDER, "budget_ms": 1000.0, **options}
    return LiveGpu(device="cpu", models=models, make_upscaler=make_upscalers(), **kw)


def picture(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    img = torch.randint(0, 256, (RENDER[1], RENDER[0], 4), generator=g, dtype=torch.uint8)
    img[..., 3] = 255
    return img


class SlowStage(BaseStage):
    """Test-only: sleeps `load_ms` per frame (set by the test while the graph runs)."""

    name = "slow"

    def __init__(self):
        self.load_ms = 0.0

    def process(self, frame: Frame) -> Frame:
        if self.load_ms:
            time.sleep(self.load_ms / 1000.0)
        return frame


class Probe(BaseStage):
    """Records the size and spread of the picture diffusion produced for each frame."""

    name = "probe"

    def __init__(self):
        self.sizes: dict[int, tuple[int, int]] = {}
        self.spread: dict[int, float] = {}

    def process(self, frame: Frame) -> Frame:
        self.sizes[frame.index] = (frame.image.shape[1], frame.image.shape[0])
        self.spread[frame.index] = float(frame.image[..., :3].float().std())
        return frame


class ListSink:
    name = "sink"
    needs = spec("image", size=OUT)

    def __init__(self):
        self.frames: list[Frame] = []

    def setup(self, ctx):
        pass

    def write(self, frame):
        self.frames.append(frame)

    def finish(self):
        pass

    def abort(self):
        pass


def build_chain(models, preset):
    from pipeline.diffusion import DiffusionStage
    from pipeline.temporal import TemporalStage

    plan = fit_ladder(LADDER, render_size=RENDER, diffusion=True, steps=2, temporal=True, upscale=4)
    variants = [
        DiffusionStage(models, preset, *RENDER, device="cpu", max_steps=plan.max_steps,
                       latent_scale=s)
        for s in plan.latent_scales.values()
    ]  # fmt: skip
    diff = DiffusionLadder(variants, preset)
    temp = TemporalLadder(TemporalStage(device="cpu", max_batch=1))
    vsr = VsrLadder.build(make_upscalers(), plan.vsr_inputs, OUT, top_scale=4)
    return plan, diff, temp, vsr


def test_fit_default_ladder_to_chains(models, preset):
    from pipeline.diffusion import DiffusionStage

    plan = fit_ladder(
        DEFAULT_LADDER, render_size=(640, 360), diffusion=True, steps=2, temporal=True, upscale=4
    )
    assert [(r.steps, r.latent, r.temporal, r.vsr_scale) for r in plan.rungs] == [
        (r.steps, r.latent, r.temporal, r.vsr_scale) for r in DEFAULT_LADDER
    ]
    assert plan.max_steps == 2 and not plan.merged
    for size, scale in plan.latent_scales.items():  # the same work size as the stage's own
        st = DiffusionStage(models, preset, 640, 360, latent_scale=scale, max_steps=2)
        assert st.work_size == size
    # a 1-step preset, x2 upscaler: the rungs that change nothing any more are merged
    plan = fit_ladder(
        DEFAULT_LADDER, render_size=(640, 360), diffusion=True, steps=1, temporal=True, upscale=2
    )
    assert [r.name for r in plan.rungs] == [
        "1 step 640x360 temporal vsr x2",
        "1 step 512x288 temporal vsr x2",
        "1 step 512x288 vsr x2",
        "1 step 384x216 vsr x2",
    ]
    assert len(plan.merged) == 3
    # nothing the ladder can change: one rung
    plan = fit_ladder(
        DEFAULT_LADDER, render_size=(640, 360), diffusion=False, temporal=False, upscale=1
    )
    assert [r.name for r in plan.rungs] == ["render 640x360"]


def test_vsr_rungs_keep_the_output_size_and_cost_less(one_thread):
    plan = fit_ladder(LADDER, render_size=RENDER, diffusion=True, steps=2, temporal=True, upscale=4)
    vsr = VsrLadder.build(make_upscalers(), plan.vsr_inputs, OUT, top_scale=4)
    vsr.setup(Context(*OUT, 30, 48000))
    assert len({id(n.model.net if hasattr(n.model, "net") else n.model) for n in vsr.nets}) == 1
    for (w, h, s), v in vsr.variants.items():
        img = picture(s)[:h, :w].contiguous()
        out = v.apply(img)
        assert tuple(out.shape) == (OUT[1], OUT[0], 4)  # one output size for every rung
        assert bool((out[..., :3] <= out[..., 3:]).all())  # still valid premultiplied
        if s == 2:  # the x4 network sees the picture shrunk to half: a quarter of the pixels
            assert v.net.in_size == (w // 2, h // 2) and v.shrink_to == (w // 2, h // 2)
        else:
            assert v.net.in_size == (w, h)
    x = picture(1)
    assert torch.equal(resize_rgba(x, RENDER), x)


def test_motion_resized_as_the_diffusion_stage_does(models, preset):
    from pipeline.diffusion import DiffusionStage
    from pipeline.ladder import resize_motion

    st = DiffusionStage(models, preset, *RENDER, device="cpu", latent_scale=0.6)
    motion = torch.randn(RENDER[1], RENDER[0], 2)
    ours = resize_motion(motion, RENDER, st.work_size)
    assert torch.allclose(ours, st._motion(motion, RENDER), atol=1e-6)


def test_ladder_in_a_running_graph_under_a_slow_stage(models, preset, caplog, one_thread):
    plan, diff, temp, vsr = build_chain(models, preset)
    slow, probe, sink = SlowStage(), Probe(), ListSink()
    ctl = QualityController(BUDGET, plan.rungs, window=6, min_samples=3, up_frames=4)
    fed_at_event: list[int] = []
    qc = QualityControl(
        ctl,
        [diff, temp, vsr],
        measure=["slow"],
        on_event=lambda ev: fed_at_event.append(qc.fed),
    )
    bottom = len(plan.rungs) - 1
    state = {"phase": "calm", "loaded_from": None, "unloaded_at_fed": None, "top_again": None}
    stop = threading.Event()

    def source():
        for i in range(400):  # a hard cap; the test stops it much earlier
            if stop.is_set():
                return
            yield Frame(i * 33_333_333, i, AvatarParams(), image=picture(i % 7),
                        motion=torch.zeros(RENDER[1], RENDER[0], 2))  # fmt: skip

    def on_frame(frame: Frame) -> None:
        qc.observe(frame)
        n = len(sink.frames)
        if state["phase"] == "calm" and n >= 8:  # 8 frames at full quality, then slow
            state["phase"], state["loaded_from"] = "loaded", frame.index + 1
            slow.load_ms = LOAD_MS
        elif state["phase"] == "loaded" and qc.level == bottom:
            state["phase"], state["unloaded_at_fed"] = "recovering", qc.fed
            slow.load_ms = 0.0
        elif state["phase"] == "recovering" and qc.level == 0:
            state["phase"], state["top_again"] = "done", n
        elif state["phase"] == "done" and n >= state["top_again"] + 6:
            stop.set()

    gives = spec("params", "image", "motion", size=RENDER, device="cpu")
    graph = Graph(source(), gives, [slow, diff, probe, temp, vsr], sink, queue_capacity=1)
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="kagura.quality"):
        graph.run(Context(*OUT, 30, 48000), on_frame=on_frame)
    took = time.monotonic() - t0
    frames = sink.frames
    assert state["phase"] == "done", f"ladder did not go down and back ({state}, {ctl.events})"

    # down one rung at a time while slow, each with its reason; then back up, one at a time
    moves = [(e.from_rung, e.to_rung) for e in ctl.events]
    downs = [(i, i + 1) for i in range(bottom)]
    ups = [(i + 1, i) for i in reversed(range(bottom))]
    assert moves == downs + ups, moves
    for e in ctl.events[:bottom]:
        assert f"over the {BUDGET:.2f} ms budget" in e.reason
        assert e.pts_ns >= state["loaded_from"] * 33_333_333  # nothing moved before the load
    for e in ctl.events[bottom:]:
        assert "under 0.75 x budget" in e.reason
    downs_logged = [r for r in caplog.records if "quality down" in r.message]
    ups_logged = [r for r in caplog.records if "quality up" in r.message]
    assert len(downs_logged) == bottom and len(ups_logged) == bottom
    assert all("budget" in r.getMessage() for r in downs_logged + ups_logged)
    # hysteresis: every climb waited for up_frames calm frames fed at its rung
    assert fed_at_event[bottom] - state["unloaded_at_fed"] >= ctl.up_frames
    for a, b in zip(fed_at_event[bottom:], fed_at_event[bottom + 1 :], strict=False):
        assert b - a >= ctl.up_frames

    # no frame lost or reordered across the switches; one output size throughout; not blank
    assert [f.index for f in frames] == list(range(len(frames)))
    for f in frames:
        assert tuple(f.image.shape) == (OUT[1], OUT[0], 4) and f.image.dtype == torch.uint8
        assert int(f.image[..., 3].min()) == 255
        assert probe.spread[f.index] > 5.0, f"diffusion painted frame {f.index} flat"

    # every rung reached the real stages, and each stage did what its rung says
    seen = set()
    for f in frames:
        ld, lt, lv = (
            int(f.timings[k]) for k in ("diffusion.rung", "temporal.rung", "upscale.rung")
        )
        seen.add(ld)
        assert probe.sizes[f.index] == tuple(plan.rungs[ld].latent)
        assert f.timings["diffusion.steps"] == plan.rungs[ld].steps
        assert bool(f.timings["temporal.on"]) == plan.rungs[lt].temporal
        assert f.timings["upscale.scale"] == plan.rungs[lv].vsr_scale
    assert seen == set(range(len(plan.rungs)))
    assert diff.switches >= 2 and temp.stage.resets >= 1
    assert qc.fed + qc.transition_frames == len(frames)
    stats = qc.stage_stats()
    assert {"diffusion", "temporal", "upscale", "slow", "ladder total"} <= set(stats)
    status = qc.status()
    assert status["level"] == 0 and status["changes"] == 2 * bottom
    assert status["last_event"]["direction"] == "up"
    print(f"ladder down and back in {took:.1f} s, {len(frames)} frames")


def test_live_chain_refits_the_ladder_when_the_preset_changes(models, one_thread):
    """The live session's chain (pipeline/live_gpu.py) on the CPU: set up and warmed at every
    rung, then a preset with more diffusion steps arrives between frames."""
    from pipeline.look import build_look

    look = build_look("studio", RENDER, 30, False)  # studio: 1 diffusion step
    spec = _cpu_live_gpu(models, upscale=2)
    chain = spec.build(look.preset, RENDER, (128, 96), 30)
    chain.setup(look)
    try:
        names = [r.name for r in chain.plan.rungs]
        assert names[0] == "1 step 64x48 temporal vsr x2" and chain.plan.max_steps == 2

        def frame(i):
            f = look.render.process(Frame(i * 33_333_333, i, AvatarParams()))
            return chain.submit(f, look.stylize)

        out = [frame(i) for i in range(3)]
        assert all(tuple(f.image.shape) == (96, 128, 4) for f in out)
        assert out[-1].timings["diffusion.steps"] == 1
        cyber = build_look("cyberpunk", RENDER, 30, False)
        chain.set_preset(cyber.preset)  # 2 steps: the ladder gets its 2-step top rung back
        assert [r.name for r in chain.plan.rungs][:2] == [
            "2 steps 64x48 temporal vsr x2",
            "1 step 64x48 temporal vsr x2",
        ]
        assert chain.qc.level == 1  # the same settings as before: 1 step, full size
        f = look.render.process(Frame(4 * 33_333_333, 4, AvatarParams()))
        g = chain.submit(f, cyber.stylize)
        assert g.timings["diffusion.steps"] == 1 and g.timings["diffusion.rung"] == 1
        assert chain.diffusion.active.preset.prompt == cyber.preset.diffusion.prompt
        assert {"diffusion", "temporal", "upscale", "stylize"} <= set(chain.stage_stats())
    finally:
        chain.close()


# -- the lower rungs, set up beside the first frames (pipeline/ladder/prepare.py) -------------


def test_a_held_ladder_measures_but_does_not_step_and_starts_afresh_when_released():
    """Frames over budget while held (the lower rungs' set-up shares the GPU) change nothing;
    released, the controller decides on frames measured from then on only."""
    ladder = DEFAULT_LADDER[:3]
    qc = QualityControl(
        QualityController(10.0, ladder, min_samples=5), [], measure=["gpu"], device="cpu"
    )

    def frame(i: int, ms: float) -> list:
        return qc.observe(Frame(i, i, AvatarParams(), timings={"gpu": ms}))

    qc.hold(True)
    assert all(frame(i, 50.0) == [] for i in range(20))
    assert qc.level == 0 and qc.held_frames == 20 and qc.fed == 0
    assert qc.stage_stats()["gpu"]["median"] == 50.0  # still measured
    qc.hold(False)
    assert all(frame(20 + i, 5.0) == [] for i in range(10))  # a fresh window, within budget
    events = [ev for i in range(5) for ev in frame(30 + i, 50.0)]
    assert qc.fed == 15 and [ev.to_rung for ev in events] == [1]


def _lower_rung_chain(models):
    """A CPU live chain of the test ladder, set up; its frame function and its 40x32
    diffusion variant (the lower rungs'). The tests below make that variant's set-up wait or
    fail (standing in for a slow or failing CUDA-graph capture; the stage itself is real)."""
    from pipeline.look import build_look

    look = build_look("cyberpunk", RENDER, 30, False)  # 2 steps: the ladder's top rung runs
    spec = _cpu_live_gpu(models, upscale=4, ladder=LADDER)
    chain = spec.build(look.preset, RENDER, OUT, 30)

    def frame(i):
        f = look.render.process(Frame(i * 33_333_333, i, AvatarParams()))
        return chain.submit(f, look.stylize)

    chain.setup(look)
    small = chain.diffusion.variants[(40, 32)]
    return look, chain, frame, small, spec


def test_live_chain_paints_each_frame_of_a_two_step_preset_itself(models, one_thread):
    """Live runs a 2-step preset's steps one after another (no stream-batch lag: the picture
    is the frame's own, as in `kagura render`); LiveGpu(stream_batch=True) lags a frame."""
    look, chain, frame, _small, _spec = _lower_rung_chain(models)
    try:
        f = frame(0)
        assert f.timings["diffusion.steps"] == 2 and chain.status()["stream_batch_lag"] == 0
    finally:
        chain.close()
    batched = _cpu_live_gpu(models, upscale=4, ladder=LADDER, stream_batch=True)
    chain = batched.build(look.preset, RENDER, OUT, 30)
    chain.setup(look)
    try:
        assert chain.status()["stream_batch_lag"] == 1
    finally:
        chain.close()


def test_live_chain_shows_frames_before_its_lower_rungs_are_set_up(models, one_thread):
    from pipeline.diffusion import DiffusionStage

    gate = threading.Event()
    real_setup = DiffusionStage.setup

    def gated(self, ctx=None):
        if self.work_size == (40, 32):
            assert gate.wait(30)
        return real_setup(self, ctx)

    DiffusionStage.setup = gated
    try:
        look, chain, frame, small, _ = _lower_rung_chain(models)
        try:
            # the first rung's variant is ready, the smaller one is still being set up
            assert chain.diffusion.variants[(64, 48)].setup_done and not small.setup_done
            out = [frame(i) for i in range(3)]
            assert all(tuple(f.image.shape) == (OUT[1], OUT[0], 4) for f in out)
            assert out[-1].timings["diffusion.rung"] == 0 and not small.setup_done
            assert chain.status()["lower_rungs_s"] is None
            # frames beside the set-up share the device with it: measured, never decided on
            assert chain.qc.held and chain.qc.held_frames == 3 and chain.qc.fed == 0
            assert chain.status()["held"] and chain.status()["held_frames"] == 3
            # the ladder steps down to the small rung before it is ready: the next frame waits
            chain.qc.force(2, 0, "test")
            done: list = []
            t = threading.Thread(target=lambda: done.append(frame(3)))
            t.start()
            t.join(0.5)
            assert t.is_alive() and not done  # waiting for the set-up, not running un-set-up
            gate.set()
            t.join(30)
            g = done[0]
            assert small.setup_done and g.timings["diffusion.rung"] == 2
            assert tuple(g.image.shape) == (OUT[1], OUT[0], 4)
            assert chain.diffusion.active is small
            frame(4)
            assert chain.status()["lower_rungs_s"] > 0
            assert not chain.qc.held and chain.qc.fed == 2 and chain.qc.held_frames == 3
        finally:
            gate.set()
            chain.close()
            look.close()
    finally:
        DiffusionStage.setup = real_setup


def test_live_chain_whose_lower_rungs_fail_keeps_the_rung_it_runs(models, one_thread):
    from pipeline.diffusion import DiffusionStage

    real_setup = DiffusionStage.setup

    def failing(self, ctx=None):
        if self.work_size == (40, 32):
            raise RuntimeError("out of memory (simulated)")
        return real_setup(self, ctx)

    DiffusionStage.setup = failing
    try:
        look, chain, frame, small, spec = _lower_rung_chain(models)
        try:
            assert chain.wait_ladder(30) is False  # the set-up ended, and failed
            frame(0)  # the next frame takes the outcome: the ladder keeps the rungs that run
            assert [r.latent for r in chain.plan.rungs] == [(64, 48), (64, 48)]
            assert any("lower rungs could not be set up" in n for n in spec.notices)
            assert "out of memory (simulated)" in spec.notices[-1]
            chain.qc.force(1, 0, "test")  # its cheapest rung now: one step, full size
            g = frame(1)
            assert g.timings["diffusion.rung"] == 1 and g.timings["diffusion.steps"] == 1
            assert tuple(g.image.shape) == (OUT[1], OUT[0], 4) and not small.setup_done
            with pytest.raises(ValueError, match="index the ladder"):
                chain.qc.force(2, 0, "test")  # the small rung is no longer on the ladder
        finally:
            chain.close()
            look.close()
    finally:
        DiffusionStage.setup = real_setup


def test_live_chain_paints_once_its_diffusion_is_set_up_beside_the_first_frames(models, one_thread):
    """LiveGpu(paint_beside=True) (the CUDA default): the start rung's diffusion is set up on
    the helper thread; the first frames pass it by unpainted, at the output size; a preset
    switched meanwhile is the one painted with; the temporal history of the unpainted
    pictures is forgotten when painting starts."""
    from pipeline.diffusion import DiffusionStage
    from pipeline.look import build_look
    from presets.loader import load_preset

    gate = threading.Event()
    in_setup = threading.Event()
    real_setup = DiffusionStage.setup

    def gated(self, ctx=None):
        if self.work_size == RENDER:
            in_setup.set()
            assert gate.wait(30)
        return real_setup(self, ctx)

    DiffusionStage.setup = gated
    look = build_look("cyberpunk", RENDER, 30, False)  # 2 steps
    spec = _cpu_live_gpu(models, upscale=4, ladder=LADDER, paint_beside=True)
    chain = spec.build(look.preset, RENDER, OUT, 30)
    try:

        def frame(i):
            f = look.render.process(Frame(i * 33_333_333, i, AvatarParams()))
            return chain.submit(f, look.stylize)

        chain.setup(look)  # returns with the start variant not set up
        start = chain.diffusion.variants[RENDER]
        assert in_setup.wait(30) and not start.setup_done
        first = [frame(i) for i in range(3)]
        assert all(tuple(f.image.shape) == (OUT[1], OUT[0], 4) for f in first)
        assert all(f.timings["diffusion.steps"] == 0 for f in first)  # unpainted
        assert chain.status()["painting_after_s"] is None and chain.ladder_pending
        chain.set_preset(load_preset("studio"))  # 1 step, while the variant is set up
        frame(3)
        assert not start.setup_done  # the switch waited for it
        resets = chain.temporal.stage.resets
        gate.set()
        assert chain.wait_ladder(30), spec.notices
        g = frame(4)
        assert start.setup_done and g.timings["diffusion.steps"] == 1  # studio's
        assert chain.temporal.stage.resets == resets + 1
        assert chain.status()["painting_after_s"] > 0
        painted = float((g.image.float() - first[-1].image.float()).abs().mean())
        assert painted > 1.0  # the model's picture, not the one it was given
    finally:
        gate.set()
        DiffusionStage.setup = real_setup
        chain.close()
        look.close()


def test_live_chain_whose_diffusion_fails_beside_the_first_frames_stops_them(models, one_thread):
    from pipeline.diffusion import DiffusionStage
    from pipeline.look import build_look

    real_setup = DiffusionStage.setup

    def failing(self, ctx=None):
        if self.work_size == RENDER:
            raise RuntimeError("out of memory (simulated)")
        return real_setup(self, ctx)

    DiffusionStage.setup = failing
    look = build_look("cyberpunk", RENDER, 30, False)
    spec = _cpu_live_gpu(models, upscale=4, ladder=LADDER, paint_beside=True)
    chain = spec.build(look.preset, RENDER, OUT, 30)
    try:
        chain.setup(look)
        assert chain.wait_ladder(30) is False
        f = look.render.process(Frame(0, 0, AvatarParams()))
        with pytest.raises(RuntimeError, match=r"diffusion could not be set up.*out of memory"):
            chain.submit(f, look.stylize)
    finally:
        DiffusionStage.setup = real_setup
        chain.close()
        look.close()
