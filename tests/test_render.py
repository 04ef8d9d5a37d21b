"""The built-in idol renderer: image contract, features, motion vectors, the stage."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch

from core.avatar import VOWELS, AvatarParams
from core.frame import Frame
from core.stage import Context
from presets.schema import LineStyle, Preset, rgb
from render.idol import IdolRenderer, RenderedFrame
from render.rig import INDEX, PARTS
from render.stage import RenderStage

PRESET = Preset.model_validate(
    tomllib.loads((Path(__file__).parents[1] / "presets" / "studio.toml").read_text())
)
PAL, LINE = PRESET.palette, PRESET.line
FRAME_NS = 33_333_333


def vowel(name: str) -> np.ndarray:
    v = np.zeros(len(VOWELS), np.float32)
    v[VOWELS.index(name)] = 1.0
    return v


def to_px(r: IdolRenderer, x: float, y: float) -> tuple[int, int]:
    """Design units -> (col, row) pixel at rest pose."""
    px = r.view @ np.array([x, y, 1.0])
    return int(px[0]), int(px[1])


def crop(img: np.ndarray, r: IdolRenderer, x: float, y: float, half: float) -> np.ndarray:
    c0, r0 = to_px(r, x - half, y - half)
    c1, r1 = to_px(r, x + half, y + half)
    return img[r0:r1, c0:c1]


@pytest.fixture(scope="module")
def r720() -> IdolRenderer:
    return IdolRenderer(1280, 720, PAL, LINE)


def render1(r: IdolRenderer, **kw) -> RenderedFrame:
    r.reset()
    return r.render(AvatarParams(**kw))


@pytest.mark.parametrize("size", [(1280, 720), (720, 1280), (512, 512), (333, 187)])
def test_sizes_alpha_and_premultiplied(size):
    w, h = size
    r = IdolRenderer(w, h, PAL, LINE)
    out = r.render(AvatarParams())
    assert out.rgba.shape == (h, w, 4) and out.rgba.dtype == np.uint8
    assert out.rgba.flags.c_contiguous
    assert out.motion.shape == (h, w, 2) and out.motion.dtype == np.float32
    a = out.rgba[..., 3:4]
    assert (out.rgba[..., :3] <= a).all(), "premultiplied: colour never exceeds alpha"
    for y, x in [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)]:
        assert out.rgba[y, x, 3] == 0, f"corner {(x, y)} should be transparent at {size}"
    cx, cy = to_px(r, 0, 40)
    assert out.rgba[cy, cx, 3] == 255, "face centre is opaque"
    # the character fills a sensible share of the frame at every aspect ratio
    cover = (out.rgba[..., 3] > 0).mean()
    assert 0.2 < cover < 0.85
    assert not out.motion.any(), "first frame has zero motion"


def test_vowel_shapes_differ(r720):
    mouths = {}
    for v in "AIUEO":
        img = render1(r720, mouth_open=1.0, vowels=vowel(v)).rgba
        mouths[v] = crop(img, r720, 0, 86, 34).astype(np.float32)
    closed = crop(render1(r720, mouth_open=0.0, vowels=vowel("N")).rgba, r720, 0, 86, 34)
    mouths["N"] = closed.astype(np.float32)
    names = list(mouths)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            diff = np.abs(mouths[a] - mouths[b]).mean()
            assert diff > 2.0, f"mouth {a} vs {b} differ by only {diff:.2f}"
    # mouth_open scales the shape: A half open lies between closed and fully open
    half = crop(render1(r720, mouth_open=0.5, vowels=vowel("A")).rgba, r720, 0, 86, 34)
    d_full = np.abs(half.astype(np.float32) - mouths["A"]).mean()
    d_closed = np.abs(half.astype(np.float32) - mouths["N"]).mean()
    assert d_full > 1.0 and d_closed > 1.0


def iris_pixels(img: np.ndarray, r: IdolRenderer, side: float) -> int:
    eye = crop(img, r, side * 45, 15, 36).astype(np.int32)
    iris = np.array(rgb(PAL.iris))
    return int((np.abs(eye[..., :3] - iris).sum(-1) < 20).sum())


def test_blink_hides_iris(r720):
    open_ = render1(r720).rgba
    shut = render1(r720, eye_open_l=0.0, eye_open_r=0.0).rgba
    wink = render1(r720, eye_open_l=1.0, eye_open_r=0.0).rgba
    for side in (-1, 1):
        assert iris_pixels(open_, r720, side) > 100
        assert iris_pixels(shut, r720, side) == 0
    # eye_open_r is the eye on screen-right; the other one stays open
    assert iris_pixels(wink, r720, 1) == 0 and iris_pixels(wink, r720, -1) > 100


def test_gaze_and_expressions_change_the_face(r720):
    base = crop(render1(r720).rgba, r720, 0, 30, 110).astype(np.float32)
    for kw in [
        {"gaze_x": 1.0},
        {"expressions": {"happy": 1.0}},
        {"expressions": {"sad": 1.0}},
        {"expressions": {"surprised": 1.0}},
        {"expressions": {"angry": 1.0}},
        {"eye_smile": 1.0},
        {"brow_l": 1.0, "brow_r": 1.0},
        {"cheek": 1.0},
        {"mouth_form": 1.0},
    ]:
        img = crop(render1(r720, **kw).rgba, r720, 0, 30, 110).astype(np.float32)
        changed = int((np.abs(img - base).max(-1) > 16).sum())
        assert changed > 60, f"{kw} changed only {changed} pixels"


def test_line_styles():
    imgs = {}
    for style in ("clean", "brush", "none"):
        r = IdolRenderer(480, 270, PAL, LineStyle(width=3.0, style=style))
        imgs[style] = r.render(AvatarParams()).rgba.astype(np.int32)
    line = np.array(rgb(PAL.line))
    dark = {k: int((np.abs(v[..., :3] - line).sum(-1) < 40).sum()) for k, v in imgs.items()}
    assert dark["none"] < dark["clean"] and dark["none"] < dark["brush"]
    assert np.abs(imgs["brush"] - imgs["clean"]).mean() > 0.1


def warp(prev: np.ndarray, motion: np.ndarray) -> np.ndarray:
    """prev sampled at p - motion[p] (nearest): the prediction of the current frame."""
    h, w = motion.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    sx = np.clip(np.rint(xs - motion[..., 0]), 0, w - 1).astype(np.int64)
    sy = np.clip(np.rint(ys - motion[..., 1]), 0, h - 1).astype(np.int64)
    return prev[sy, sx]


@pytest.mark.parametrize(
    "change",
    [{"head_yaw": 4.0}, {"head_roll": 4.0, "head_pitch": 3.0}, {"body_roll": 3.0, "body_yaw": 3.0}],
)
def test_motion_predicts_next_frame(r720, change):
    r720.reset()
    a = r720.render(AvatarParams(pts_ns=0))
    b = r720.render(AvatarParams(pts_ns=FRAME_NS, **change))
    assert np.abs(b.motion).max() > 1.0
    prev, cur = a.rgba.astype(np.float32), b.rgba.astype(np.float32)
    covered = (a.rgba[..., 3] == 255) & (b.rgba[..., 3] == 255)
    err_still = np.abs(prev - cur)[covered].mean()
    err_warp = np.abs(warp(prev, b.motion) - cur)[covered].mean()
    assert err_warp < 0.35 * err_still, f"warped {err_warp:.2f} vs unwarped {err_still:.2f}"
    # motion points the right way: turning right moves the nose right
    if "head_yaw" in change:
        x, y = to_px(r720, 0, 55)
        assert b.motion[y, x, 0] > 0.5


def test_static_params_give_zero_motion(r720):
    r720.reset()
    p = AvatarParams(head_yaw=12.0, head_roll=-5.0, body_roll=3.0, breath=0.4, mouth_open=0.5)
    for i in range(4):
        out = r720.render(dataclasses.replace(p, pts_ns=i * FRAME_NS))
        assert not out.motion.any()
    # changes of shape only (blink, mouth) are not motion either
    out = r720.render(dataclasses.replace(p, pts_ns=5 * FRAME_NS, eye_open_l=0.0, mouth_open=1))
    assert not out.motion.any()


def test_hair_lags_then_settles():
    r = IdolRenderer(640, 360, PAL, LINE)
    t = 0
    for i in range(8):  # turn the head quickly, then hold it
        r.render(AvatarParams(pts_ns=t, head_yaw=3.0 * i, head_roll=2.0 * i))
        t += FRAME_NS
    held = AvatarParams(head_yaw=21.0, head_roll=14.0)
    moving = []
    for _ in range(150):
        out = r.render(dataclasses.replace(held, pts_ns=t))
        t += FRAME_NS
        moving.append(float(np.abs(out.motion).max()))
    assert all(m > 0.05 for m in moving[:4]), f"hair should keep swinging: {moving[:6]}"
    assert moving[-1] == 0.0, "hair settles to exactly zero motion"
    # only hair parts move while the head holds still
    r.reset()
    r.render(AvatarParams(pts_ns=0))
    r.render(AvatarParams(pts_ns=FRAME_NS, head_yaw=10.0))
    held_out = r.render(AvatarParams(pts_ns=2 * FRAME_NS, head_yaw=10.0))
    ids = np.repeat(np.repeat(r.motion.ids, 4, 0), 4, 1)[:360, :640].astype(int) - 1
    hair = {
        INDEX[n] for n in ("tail_l", "tail_r", "back_hair", "side_l", "side_r", "bangs", "ahoge")
    }
    moved = np.abs(held_out.motion).max(-1) > 0
    assert moved.any()
    assert set(np.unique(ids[moved])) <= hair, [PARTS[i].name for i in np.unique(ids[moved])]


def test_pts_gap_drives_the_spring():
    """The spring integrates time, not calls: a doubled frame gap moves hair further."""
    outs = []
    for gap in (FRAME_NS, 2 * FRAME_NS):
        r = IdolRenderer(320, 180, PAL, LINE)
        r.render(AvatarParams(pts_ns=0))
        r.render(AvatarParams(pts_ns=gap, head_roll=10.0))
        outs.append(r.rig.springs["tail_r"].pos.copy())
    assert abs(outs[1][2]) > abs(outs[0][2]) > 0


def test_render_stage_gives_tensors():
    stage = RenderStage(320, 180, PAL, LINE)
    assert stage.gives.size == (320, 180) and stage.gives.fields >= {"image", "motion"}
    stage.setup(Context(width=320, height=180, fps=30, sample_rate=48000))
    frames = [
        stage.process(Frame(pts_ns=i * FRAME_NS, index=i, params=AvatarParams(head_yaw=i)))
        for i in range(3)
    ]
    for f in frames:
        assert isinstance(f.image, torch.Tensor) and f.image.dtype == torch.uint8
        assert f.image.shape == (180, 320, 4) and f.image.device.type == "cpu"
        assert f.motion.dtype == torch.float32 and f.motion.shape == (180, 320, 2)
        assert "render" in f.timings
    # every frame owns its buffers (frames queue up downstream)
    assert frames[0].image.data_ptr() != frames[1].image.data_ptr()
    assert frames[2].motion.abs().max() > 0
    stage.close()
