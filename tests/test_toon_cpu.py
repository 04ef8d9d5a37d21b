"""The opaque toon's compiled CPU pass (pipeline/stylize/toon_cpu.py) against the torch code it
replaced, kept here as the plain definition: on rendered idol frames, each of the built-in
presets' colours and lines, the studio look and each branch it does not take (no shading,
saturation 1, grain), both outputs (RGBA frames and I420 planes) within one level."""

from __future__ import annotations

import pytest
import torch

from pipeline.accel.i420 import rgb_planes_to_i420, rgba_to_i420
from pipeline.stylize import StylizeStage
from pipeline.stylize import common as C
from pipeline.stylize.bench import idol_frames
from presets.loader import load_preset

W, H = 640, 360
BUILTINS = ("studio", "ink-wash", "cyberpunk")


def old_colour(e, q, win, box, g):
    """The torch version (before the compiled pass) of the colour math on planar q (4, h, w)
    in 0..255 at frame box `box` -> rgb (3, h, w) float, before clamping."""
    post = e.post
    y0, y1, x0, x1 = box
    a = q[3]
    sv = e.v255[y0:y1, x0:x1]
    if post.shading > 0:
        wy0, wy1, wx0, wx1 = win
        wh, ww = wy1 - wy0, wx1 - wx0
        inner = y0 - wy0, y1 - wy0, x0 - wx0, x1 - wx0
        low = C.pool_into(q[3:4], 8, -(-wh // 8), -(-ww // 8), inner)
        low = C.blur_p(low, 2, 3).mul_(-2.5 / 255.0).add_(2.5)
        t = C.upsample_part(low, 8, wh, ww, inner)[0].clamp_(0, 1).mul_(a)
        sv = torch.addcmul(sv, t, sv, value=-0.35 * post.shading / 255.0)
    s = post.saturation
    c = q[:3]
    if s != 1.0:
        k = (1.0 - s) / 255.0
        lum = torch.mul(c[0], C.LUMA[0] * k)
        lum.add_(c[1], alpha=C.LUMA[1] * k).add_(c[2], alpha=C.LUMA[2] * k)
        c = torch.add(lum, c, alpha=s / 255.0)
    else:
        sv = sv * (1.0 / 255.0)
    out = torch.addcmul(e.bgv_half[:, y0:y1, x0:x1], e.bgv_unit[:, y0:y1, x0:x1], a, value=-1.0)
    if e.grain_amount > 0:
        out.add_(e.grain255[g, y0:y1, x0:x1])
    return out.addcmul_(c, sv)


def old_frame(e, x, g):
    """(RGBA frame, I420 planes) of frame x as the torch version made them."""
    out = e._empty(x.device)[g].clone()
    planes = rgba_to_i420(out[None])[0]
    extent = C.alpha_extent(x)
    if extent is None:
        return out, planes
    win, box = e._boxes(extent)
    y0, y1, x0, x1 = box
    rgb = old_colour(e, C.planes_255(x[y0:y1, x0:x1]), win, box, g).clamp_(0, 255).floor_()
    out[y0:y1, x0:x1, :3] = rgb.permute(1, 2, 0).to(torch.uint8)
    out[y0:y1, x0:x1, 3] = 255
    luma, cb, cr = rgb_planes_to_i420(rgb)
    planes[y0:y1, x0:x1] = luma
    chroma = planes[H:].view(2, H // 2, W // 2)
    chroma[0, y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = cb
    chroma[1, y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = cr
    return out, planes


POSTS = (
    {},
    {"shading": 0.0},
    {"saturation": 1.0},
    {"shading": 0.0, "saturation": 1.0, "vignette": 0.0},
    {"grain": 0.3},
)


@pytest.fixture(scope="module")
def idols():
    """Rendered idol frames (moving head and body) in each built-in preset's colours, one
    pushed half out of the frame at the left and one empty frame."""
    out = {}
    for name in BUILTINS:
        x = idol_frames(load_preset(name), W, H, 5)
        edge = torch.zeros_like(x[0])
        edge[:, : W // 2] = x[1][:, W // 4 : W // 4 + W // 2]
        out[name] = [*x, edge, torch.zeros_like(x[0])]
    return out


@pytest.mark.parametrize("colours", BUILTINS)
@pytest.mark.parametrize("post", POSTS)
def test_compiled_pass_equals_the_torch_one(idols, colours, post):
    preset = load_preset("studio")
    preset = preset.model_copy(update={"post": preset.post.model_copy(update=post)})
    e = StylizeStage(preset, W, H).effect
    assert e.gives_i420
    worst_rgba = worst_i420 = 0
    with torch.inference_mode():
        for i, x in enumerate(idols[colours]):
            g = i % e.variants
            want_rgba, want_i420 = old_frame(e, x, g)
            got_rgba = torch.empty_like(x)
            e._one(x, got_rgba, g)
            got_i420 = e.i420(x, g)
            worst_rgba = max(worst_rgba, int((got_rgba.int() - want_rgba.int()).abs().max()))
            worst_i420 = max(worst_i420, int((got_i420.int() - want_i420.int()).abs().max()))
            # the hand-off's planes are the RGBA frame's, converted
            assert int((got_i420.int() - rgba_to_i420(got_rgba[None])[0].int()).abs().max()) <= 1
    assert worst_rgba <= 1 and worst_i420 <= 1


def test_the_frames_are_not_the_empty_frame(idols):
    """The comparison above is over frames that show the idol (not only the background)."""
    e = StylizeStage(load_preset("studio"), W, H).effect
    x = idols["studio"][0]
    out = torch.empty_like(x)
    e._one(x, out, 0)
    changed = (out != e._empty(x.device)[0]).any(-1)
    assert int(changed.sum()) > W * H // 10
