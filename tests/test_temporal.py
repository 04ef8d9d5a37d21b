"""The temporal alignment stage: warp geometry, disocclusion, reset, batch = sequential, and
flicker/sharpness on a short rendered clip with a simulated flickery stylizer."""

from __future__ import annotations

import pytest
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Stage
from pipeline.temporal import TemporalStage, flicker, ghosting, laplacian_rms, sharpness, warp
from pipeline.temporal.measure import flickery_stylizer, render_clip, run_stage


def rgba(h: int, w: int, seed: int = 0, alpha: int = 255) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a = torch.full((h, w, 1), alpha, dtype=torch.uint8)
    rgb = torch.randint(0, alpha + 1, (h, w, 3), generator=g, dtype=torch.uint8)
    return torch.cat((rgb, a), -1)


def frame(i: int, image: torch.Tensor, motion: torch.Tensor | None = None) -> Frame:
    h, w = image.shape[:2]
    if motion is None:
        motion = torch.zeros(h, w, 2)
    return Frame(pts_ns=i, index=i, params=AvatarParams(), image=image, motion=motion)


def test_protocol_and_spec():
    st = TemporalStage(blend=0.6)
    assert isinstance(st, Stage)
    assert st.name == "temporal"
    assert st.needs.fields == {"image", "motion"}
    assert st.gives.device == "cpu"
    with pytest.raises(ValueError):
        TemporalStage(blend=1.0)
    with pytest.raises(ValueError):
        TemporalStage(device="mps")


def test_warp_identity_and_translation():
    prev = torch.rand(1, 4, 12, 16)
    same, inside = warp(prev, torch.zeros(12, 16, 2))
    assert torch.allclose(same, prev, atol=1e-6)
    assert bool(inside.all())
    m = torch.zeros(12, 16, 2)
    m[..., 0] = 3.0  # moved 3 px right: pixel x samples x - 3
    m[..., 1] = -2.0  # moved 2 px up: pixel y samples y + 2
    out, inside = warp(prev, m)
    assert torch.allclose(out[..., :10, 3:], prev[..., 2:, :13], atol=1e-5)
    assert not bool(inside[..., :, :3].any()) and bool(inside[..., :10, 3:].all())
    assert not bool(inside[..., 11:, :].any())  # sources below the frame


def test_first_frame_passes_and_history_blends():
    st = TemporalStage(blend=0.5, color_tol=None, clamp_margin=None, smooth=1)
    a, b = rgba(8, 8, 1), rgba(8, 8, 2)
    assert torch.equal(st.apply(a, torch.zeros(8, 8, 2), 0), a)
    out = st.apply(b, torch.zeros(8, 8, 2), 1)
    want = (a.float() + b.float()) / 2
    assert (out.float() - want).abs().max() <= 1.0
    assert torch.equal(out[..., 3], a[..., 3])


def test_output_is_valid_premultiplied():
    st = TemporalStage(blend=0.7)
    for i in range(4):
        img = rgba(16, 16, i, alpha=128)
        m = torch.full((16, 16, 2), 0.37)
        out = st.apply(img, m, i)
        assert out.dtype == torch.uint8 and out.shape == (16, 16, 4)
        assert bool((out[..., :3] <= out[..., 3:]).all())


def test_disocclusion_and_outside_use_current_only():
    st = TemporalStage(blend=0.8, color_tol=None, clamp_margin=None, smooth=1)
    prev = rgba(8, 8, 3)
    prev[:, :4] = 0  # left half transparent in the previous frame
    st.apply(prev, torch.zeros(8, 8, 2), 0)
    cur = rgba(8, 8, 4)  # now opaque everywhere: the left half is uncovered
    out = st.apply(cur, torch.zeros(8, 8, 2), 1)
    assert torch.equal(out[:, :3], cur[:, :3])  # alpha disagrees -> current only
    assert not torch.equal(out[:, 5:], cur[:, 5:])  # agreeing alpha -> blended
    st.reset()
    st.apply(prev, torch.zeros(8, 8, 2), 0)
    m = torch.zeros(8, 8, 2)
    m[..., 1] = 20.0  # every source point is above the frame
    assert torch.equal(st.apply(cur, m, 1), cur)


def test_colour_tolerance_rejects_shape_changes():
    st = TemporalStage(blend=0.8, color_tol=0.3)
    dark = torch.zeros(8, 8, 4, dtype=torch.uint8)
    dark[..., 3] = 255
    light = dark.clone()
    light[..., :3] = 250
    st.apply(dark, torch.zeros(8, 8, 2), 0)
    assert torch.equal(st.apply(light, torch.zeros(8, 8, 2), 1), light)


def test_reset_and_index_gap():
    st = TemporalStage(blend=0.7, color_tol=None)
    a, b = rgba(8, 8, 5), rgba(8, 8, 6)
    st.apply(a, torch.zeros(8, 8, 2), 0)
    st.reset()
    assert torch.equal(st.apply(b, torch.zeros(8, 8, 2), 1), b)
    assert torch.equal(st.apply(a, torch.zeros(8, 8, 2), 5), a)  # gap: no history used
    assert st.resets == 2
    st.set_enabled(False)
    assert torch.equal(st.apply(b, torch.zeros(8, 8, 2), 6), b)


def test_batch_equals_sequential():
    imgs = [rgba(12, 10, 10 + i) for i in range(5)]
    mots = [torch.full((12, 10, 2), 0.25 * i) for i in range(5)]
    frames = [frame(i, imgs[i], mots[i]) for i in range(5)]
    one = TemporalStage(blend=0.7, color_tol=None)
    seq = [one.process(f).image for f in frames]
    many = TemporalStage(blend=0.7, color_tol=None, max_batch=4)
    bat = many.process_batch(frames[:3]) + many.process_batch(frames[3:])
    for s, b in zip(seq, bat, strict=True):
        assert torch.equal(s, b.image)
    assert "temporal" in bat[0].timings


def test_flicker_halved_sharpness_kept():
    torch.set_num_threads(1)
    clean, motions = render_clip(16, 320, 180)
    styl = flickery_stylizer(clean, seed=7)
    out = run_stage(TemporalStage(blend=0.7), styl, motions)
    f0, f1 = flicker(styl, motions), flicker(out, motions)
    # the default clamps the history to the current 3x3 range exactly (no echo lines on the
    # model's painting): jitter that moves that whole range is only partly averaged
    assert f1 <= 0.88 * f0, (f0, f1)
    # a margin above the range averages more of it — the trade the default declines
    margin = run_stage(TemporalStage(blend=0.7, clamp_margin=0.06), styl, motions)
    assert flicker(margin, motions) <= 0.65 * f0
    # near part boundaries the history is not used (guard): without it, more is averaged
    unguarded = run_stage(TemporalStage(blend=0.7, clamp_margin=0.06, guard=0), styl, motions)
    assert flicker(unguarded, motions) <= 0.5 * f0
    s0, s1 = sharpness(styl), sharpness(out)
    assert abs(s1 / s0 - 1.0) <= 0.10, (s0, s1)
    assert flicker(clean, motions) < f0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("weights", [{}, {"blend": 0.9, "moving_blend": 0.5}])
def test_cuda_matches_cpu(weights):
    imgs = [rgba(32, 48, 20 + i, alpha=200) for i in range(4)]
    mots = [torch.full((32, 48, 2), 0.6) for _ in range(4)]
    for m in mots:
        m[:, :16] = 0.0  # a still part: with moving_blend it takes the other weight
    cpu, gpu = TemporalStage(**weights), TemporalStage(device="cuda", **weights)
    for i in range(4):
        a = cpu.apply(imgs[i], mots[i], i)
        b = gpu.apply(imgs[i], mots[i], i)
        assert b.is_cuda
        assert (a.int() - b.cpu().int()).abs().max() <= 1


def moving_line(n: int, contrast: float, step: int = 3, h: int = 24, w: int = 64):
    """A thin grey vertical line moving `step` px right per frame over a light ground, as a
    stylized hair strand does; returns uint8 (n, h, w, 4) opaque frames."""
    frames = torch.zeros(n, h, w, 4, dtype=torch.uint8)
    bg = 0.85
    for i in range(n):
        img = torch.full((h, w, 3), bg)
        x = 8 + step * i
        img[:, x : x + 2] = bg - contrast
        frames[i, ..., :3] = (img * 255).round().to(torch.uint8)
        frames[i, ..., 3] = 255
    return frames


def test_missed_motion_leaves_no_echo_lines():
    # Vectors that miss the strand's motion (zero here: a spring bend inside a rigid part)
    # warp the old strand onto ground the current frame shows: echo lines, unless clamped.
    n = 8
    frames = moving_line(n, contrast=0.25)  # low contrast: inside the colour tolerance
    missed = torch.zeros(n, 24, 64, 2)
    true_motion = torch.zeros(n, 24, 64, 2)
    true_motion[..., 0] = 3.0
    on = run_stage(TemporalStage(blend=0.7), frames, missed)
    unclamped = run_stage(TemporalStage(blend=0.7, clamp_margin=None, smooth=1), frames, missed)
    g_on = ghosting(on, frames, true_motion)
    g_old = ghosting(unclamped, frames, true_motion)
    assert g_old > 4.0, g_old  # the measure sees the echo lines of the unclamped blend
    assert g_on <= 0.5 * g_old, (g_on, g_old)
    # beside the strand, no echo is deeper than the clamp margin's share of the blend
    beside = (on[-1, :, :28, :3].float() - frames[-1, :, :28, :3].float()).abs().max()
    assert beside <= 0.06 * 255 * 0.7 + 1, beside


def test_sharpness_of_a_clean_clip_is_kept():
    torch.set_num_threads(1)
    clean, motions = render_clip(12, 320, 180)
    out = run_stage(TemporalStage(blend=0.7), clean, motions)
    ratio = laplacian_rms(out) / laplacian_rms(clean)
    assert ratio >= 0.95, ratio
    # the unsmoothed correction (the stage before) lost more than that: the check can fail
    old = run_stage(TemporalStage(blend=0.7, clamp_margin=None, smooth=1), clean, motions)
    assert laplacian_rms(old) / laplacian_rms(clean) < ratio - 0.03


def test_the_preset_sets_blend_and_guard_and_a_switch_changes_them():
    """[temporal] of a preset reaches the stage: a pixel 6 px from a part boundary (a jump in
    the motion field) blends history with the default guard of 4 and not with a guard of 8;
    `use_preset` switches a running stage."""
    from presets.loader import load_preset
    from presets.schema import Temporal

    h, w = 32, 48
    motion = torch.zeros(h, w, 2)
    motion[:, 24:, 0] = 1.0  # the right part moves one pixel: a boundary at x = 24
    prev = torch.full((h, w, 4), 255, dtype=torch.uint8)
    prev[..., :3] = 110
    # columns of 120 and 100: the neighbourhood clamp lets the history's 110 through, and the
    # difference is within colour tolerance: history is blended wherever it is allowed
    cur = prev.clone()
    cur[:, 0::2, :3] = 120
    cur[:, 1::2, :3] = 100
    base = load_preset("cyberpunk").model_copy(update={"temporal": Temporal()})  # the defaults
    wide = base.model_copy(update={"temporal": base.temporal.model_copy(update={"guard": 8})})
    assert base.temporal.guard == 4 and base.temporal.blend == 0.7

    def out_at(stage: TemporalStage, x: int) -> int:
        stage.reset()
        stage.apply(prev, motion, 0)
        return int(stage.apply(cur, motion, 1)[h // 2, x, 0])

    stage = TemporalStage.for_preset(base)
    assert (stage.blend, stage.guard) == (0.7, 4)
    assert out_at(stage, 24 - 6) < 116  # history blended in (110 weighs 0.7)
    assert out_at(stage, 24 - 2) == 120  # inside the guard: the current frame alone
    stage.use_preset(wide)
    assert stage.guard == 8 and out_at(stage, 24 - 6) == 120
    assert out_at(stage, 24 - 12) < 116


def edge_over_flicker(n: int = 12, h: int = 32, w: int = 96, step: int = 3):
    """A dark bar (a hair strand) moving `step` px right per frame over a static ground whose
    colour jitters frame to frame (a model's flicker: a few levels, all over the ground), and
    vectors that miss the bar's motion (zero: a spring bend inside a rigid part). Returns the
    flickering frames, the clean ones, the missed and the true motion."""
    g = torch.Generator().manual_seed(3)
    clean = torch.zeros(n, h, w, 4, dtype=torch.uint8)
    noisy = clean.clone()
    for i in range(n):
        img = torch.full((h, w, 3), 0.6)
        x = 6 + step * i
        img[:, x : x + 3] = 0.35
        clean[i, ..., :3] = (img * 255).round().to(torch.uint8)
        jitter = 4.0 / 255 * torch.randn(1, 1, 3, generator=g)  # the whole ground moves
        grain = 1.0 / 255 * torch.randn(h, w, 3, generator=g)
        noisy[i, ..., :3] = ((img + jitter + grain).clamp(0, 1) * 255).round().to(torch.uint8)
    clean[..., 3] = noisy[..., 3] = 255
    true_motion = torch.zeros(n, h, w, 2)
    true_motion[..., 0] = float(step)
    return noisy, clean, torch.zeros(n, h, w, 2), true_motion


def test_tolerance_gate_leaves_no_echo_and_averages_static_flicker():
    """With `tolerance` the history is trusted per pixel only where it agrees with the current
    frame within the model's own frame-to-frame noise: beside a bar whose vectors miss, the
    echo falls below both the old uniform blend's and the exact clamp's (the shipped stage
    before), and on the static ground the jitter that moves a whole 3x3 range — which the
    exact clamp cannot average — is averaged."""
    noisy, clean, missed, true_motion = edge_over_flicker()
    uniform = run_stage(TemporalStage(blend=0.7, clamp_margin=None, smooth=1), noisy, missed)
    clamped = run_stage(TemporalStage(blend=0.7), noisy, missed)
    # the ground jitters by about 4 levels a channel: a tolerance a few times that
    gated = run_stage(TemporalStage(blend=0.7, tolerance=24.0), noisy, missed)
    echo = {
        k: ghosting(v, clean, true_motion)
        for k, v in (("uniform", uniform), ("clamped", clamped), ("gated", gated))
    }
    off = ghosting(noisy, clean, true_motion)
    assert echo["uniform"] > off + 5.0, (echo, off)  # the measure sees the old blend's echo
    assert echo["gated"] < echo["clamped"] and echo["gated"] < echo["uniform"], echo
    assert echo["gated"] <= off, (echo, off)  # no worse than the stage switched off
    # the static ground (left of where the bar starts, right of where it ends)
    ground = (slice(None), slice(None), slice(60, 96))
    f_in = flicker(noisy[ground], missed[ground])
    f_clamped = flicker(clamped[ground], missed[ground])
    f_gated = flicker(gated[ground], missed[ground])
    assert f_gated <= 0.6 * f_in, (f_in, f_gated)
    assert f_gated <= 0.75 * f_clamped, (f_clamped, f_gated)


def test_the_preset_sets_tolerance_and_bad_values_are_refused():
    from presets.loader import load_preset

    base = load_preset("studio")
    assert base.temporal.tolerance == 0.0  # off unless a preset asks: the stage as before
    tight = base.model_copy(
        update={"temporal": base.temporal.model_copy(update={"tolerance": 12.0})}
    )
    stage = TemporalStage.for_preset(tight)
    assert stage.tolerance == 12.0
    stage.use_preset(base)
    assert stage.tolerance == 0.0
    with pytest.raises(ValueError, match="tolerance"):
        TemporalStage(tolerance=100.0)
    with pytest.raises(ValueError, match="gate"):
        TemporalStage(tolerance=8.0, gate=2)


def test_still_pixels_take_blend_and_pixels_near_motion_take_moving_blend():
    """With `moving_blend` the history weighs `blend` where nothing moved within `moving_reach`
    px and `moving_blend` near motion; the preset's [temporal] sets it, None keeps one weight."""
    from presets.loader import load_preset

    h, w = 32, 64
    motion = torch.zeros(h, w, 2)
    motion[:, 40:, 0] = 1.0  # the right part moves one pixel
    prev = torch.full((h, w, 4), 255, dtype=torch.uint8)
    prev[..., :3] = 110
    cur = prev.clone()  # columns of 120 and 100: the history's 110 is inside the 3x3 range
    cur[:, 0::2, :3] = 120
    cur[:, 1::2, :3] = 100

    def out_at(stage: TemporalStage, x: int) -> int:
        stage.reset()
        stage.apply(prev, motion, 0)
        return int(stage.apply(cur, motion, 1)[h // 2, x, 0])

    stage = TemporalStage(blend=0.9, moving_blend=0.4, moving_reach=8, guard=0)
    assert out_at(stage, 20) == 111  # still: 120 + 0.9 x (110 - 120)
    assert out_at(stage, 40 - 6) == 116  # within reach of the motion: 120 + 0.4 x (110 - 120)
    assert out_at(stage, 50) == 116  # moving itself
    one = TemporalStage(blend=0.9, guard=0)
    assert out_at(one, 20) == out_at(one, 50) == 111

    base = load_preset("studio")
    split = base.model_copy(
        update={"temporal": base.temporal.model_copy(update={"blend": 0.9, "moving_blend": 0.4})}
    )
    stage = TemporalStage.for_preset(split)
    assert (stage.blend, stage.moving_blend) == (0.9, 0.4)
    stage.use_preset(base)
    assert stage.moving_blend == base.temporal.moving_blend
    with pytest.raises(ValueError, match="moving_blend"):
        TemporalStage(moving_blend=1.0)
    with pytest.raises(ValueError, match="moving_reach"):
        TemporalStage(moving_blend=0.5, moving_reach=-1)


@pytest.mark.parametrize("moving_blend", [None, 0.4])
def test_blend_with_weight_tensors_equals_the_stages_numbers(moving_blend):
    """The graphed path reads (blend, moving_blend) from device scalars and always tells moving
    from still pixels: the same numbers as the stage's own, bit for bit."""
    h, w = 32, 48
    cur = (rgba(h, w, 1, alpha=220).permute(2, 0, 1)[None].float() / 255.0).contiguous()
    hist = (rgba(h, w, 2, alpha=220).permute(2, 0, 1)[None].float() / 255.0).contiguous()
    motion = torch.zeros(1, h, w, 2)
    motion[:, :, 24:, 0] = 1.5  # the right half moves: both weights are used
    stage = TemporalStage(blend=0.9, moving_blend=moving_blend, color_tol=None)
    own = stage._blend(cur, hist.clone(), motion)
    b = torch.tensor(0.9)
    m = torch.tensor(0.9 if moving_blend is None else moving_blend)
    scalars = stage._blend(cur, hist.clone(), motion, (b, m))
    assert torch.equal(own, scalars)
    assert not torch.equal(own, cur)  # the history was blended in


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_graphed_stage_equals_eager_through_a_preset_switch_and_a_guard_change():
    """cuda_graph=True: the blend is replayed from a graph captured at setup. Over a rendered
    clip its frames equal the eager stage's; a preset switch (other weights) needs no new
    graph; a guard change (other kernels) drops the graphs and captures again."""
    from presets.loader import load_preset

    images, motions = render_clip(24, 160, 96)
    studio, cyber = load_preset("studio"), load_preset("cyberpunk")
    assert studio.temporal.moving_blend is None and cyber.temporal.moving_blend is not None
    eager = TemporalStage.for_preset(studio, device="cuda")
    graphed = TemporalStage.for_preset(studio, device="cuda", cuda_graph=True)
    graphed.capture([(160, 96)])
    assert len(graphed._graphs.buckets) == 1
    wide = cyber.model_copy(update={"temporal": cyber.temporal.model_copy(update={"guard": 8})})
    for i in range(images.shape[0]):
        if i == 8:
            eager.use_preset(cyber)
            graphed.use_preset(cyber)
        if i == 16:
            eager.use_preset(wide)
            graphed.use_preset(wide)
        a = eager.apply(images[i], motions[i], i)
        b = graphed.apply(images[i], motions[i], i)
        assert b.is_cuda and b.shape == a.shape
        assert torch.equal(a, b), f"frame {i}: graphed and eager differ"
        if i == 15:
            assert graphed._graphs.replays == 15 and len(graphed._graphs.buckets) == 1
    assert graphed._graphs.replays == 8  # captured again (guard 8) on frame 16, then replayed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_graph_keeps_its_pixel_grid_when_warp_has_seen_many_other_sizes():
    """A captured graph reads warp's pixel grid of its size by address. warp's own cache keeps
    only the latest sizes: after warps at 20 other sizes, and the freed memory taken by
    tensors of the grid's own shapes filled with nonsense, the graphed stage still gives the
    eager stage's frames. A second capture of a captured size adds no graph."""
    from pipeline.temporal.stage import _GRIDS, warp
    from presets.loader import load_preset

    images, motions = render_clip(12, 160, 96)
    studio = load_preset("studio")
    eager = TemporalStage.for_preset(studio, device="cuda")
    graphed = TemporalStage.for_preset(studio, device="cuda", cuda_graph=True)
    graphed.capture([(160, 96)])
    graphed.capture([(160, 96)])  # the ladder's second prepare
    assert len(graphed._graphs.buckets) == 1
    junk = []
    for i in range(images.shape[0]):
        if i == 4:
            for k in range(20):  # smaller sizes push (96, 160) out of warp's cache
                w, h = 100 + k, 60
                warp(torch.rand(1, 4, h, w, device="cuda"), torch.zeros(1, h, w, 2, device="cuda"))
            assert not any(key[:2] == (96, 160) for key in _GRIDS)
            for _ in range(16):  # whatever was freed, of the grid's shapes, now holds nonsense
                junk.append(torch.full((1, 96, 160, 2), 1e4, device="cuda"))
                junk.append(torch.full((2,), 1e4, device="cuda"))
        a = eager.apply(images[i], motions[i], i)
        b = graphed.apply(images[i], motions[i], i)
        assert torch.equal(a, b), f"frame {i}: graphed and eager differ"
    assert graphed._graphs.replays == images.shape[0] - 1
