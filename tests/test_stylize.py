"""StylizeStage on a synthetic premultiplied test image (a disc with an outline, a red patch
and a bright highlight), at a small size so the file stays fast (eager torch, no compile)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from pipeline.stylize import StylizeStage
from presets.loader import load_preset

W, H = 320, 180
BUILTINS = ("studio", "ink-wash", "cyberpunk")


def synth(w: int = W, h: int = H, shift: float = 0.0) -> torch.Tensor:
    y, x = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    cx, cy, r = w / 2 + shift, h / 2, h * 0.35
    d = ((x - cx) ** 2 + (y - cy) ** 2).sqrt()
    a = (r - d + 0.5).clamp(0, 1)
    col = torch.empty(h, w, 3)
    col[:] = torch.tensor([0.55, 0.72, 1.0])  # light blue
    red = ((x - (cx + r * 0.35)) ** 2 + (y - (cy + r * 0.2)) ** 2).sqrt() < r * 0.25
    col[red] = torch.tensor([0.85, 0.2, 0.12])
    hi = ((x - (cx - r * 0.4)) ** 2 + (y - (cy - r * 0.4)) ** 2).sqrt() < r * 0.2
    col[hi] = 1.0
    col[(d - (r - 1.5)).abs() < 1.0] = torch.tensor([0.2, 0.15, 0.25])  # outline
    rgba = torch.cat([col * a[..., None], a[..., None]], -1)
    return (rgba * 255 + 0.5).to(torch.uint8)


def masks(w: int = W, h: int = H):
    y, x = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    cx, cy, r = w / 2, h / 2, h * 0.35
    d = ((x - cx) ** 2 + (y - cy) ** 2).sqrt()
    dr = ((x - (cx + r * 0.35)) ** 2 + (y - (cy + r * 0.2)) ** 2).sqrt()
    hi = ((x - (cx - r * 0.4)) ** 2 + (y - (cy - r * 0.4)) ** 2).sqrt() < r * 0.2
    return d, dr < r * 0.15, dr < r * 0.35, hi, r


def stage(name: str, transparent: bool = False) -> StylizeStage:
    st = StylizeStage(load_preset(name), W, H, transparent=transparent)
    st.setup(Context(W, H, 30, 48000))
    return st


def frames(n: int = 4) -> list[Frame]:
    return [Frame(i * 33_333_333, i, AvatarParams(), image=synth(shift=i)) for i in range(n)]


@pytest.mark.parametrize("name", BUILTINS)
def test_opaque(name):
    st = stage(name)
    assert st.name == "stylize" and "image" in st.needs.fields and "image" in st.gives.fields
    out = st.process_batch(frames(2))
    for f in out:
        assert f.image.shape == (H, W, 4) and f.image.dtype == torch.uint8
        assert bool((f.image[..., 3] == 255).all())
        assert "stylize" in f.timings


@pytest.mark.parametrize("name", BUILTINS)
def test_transparent(name):
    out = stage(name, transparent=True).process(frames(1)[0]).image
    assert out.shape == (H, W, 4) and out.dtype == torch.uint8
    for corner in (out[:8, :8], out[:8, -8:], out[-8:, :8], out[-8:, -8:]):
        assert int(corner[..., 3].max()) == 0 and int(corner[..., :3].max()) == 0
    assert bool((out[..., :3] <= out[..., 3:4]).all())  # still premultiplied
    assert int(out[H // 2, W // 2, 3]) == 255  # the idol itself stays opaque


@pytest.mark.parametrize("name", BUILTINS)
def test_batch_equals_single(name):
    st = stage(name)
    fs = frames(4)
    batch = [f.image for f in st.process_batch(fs)]
    single = [st.process(f).image for f in fs]
    for b, s in zip(batch, single, strict=True):
        assert int((b.int() - s.int()).abs().max()) <= 1


def test_ink_wash_is_monochrome_except_accent():
    out = stage("ink-wash", transparent=True).process(frames(1)[0]).image.float()
    d, red_core, red_zone, _, r = masks()
    u = out[..., :3] / out[..., 3:4].clamp(min=1)  # straight colour
    chroma = u.amax(-1) - u.amin(-1)
    mono = (d < r - 2) & ~red_zone
    assert float(chroma[mono].quantile(0.95)) < 0.12  # ink and paper: grey everywhere else
    rc = u[red_core]
    assert float((rc[:, 0] - rc[:, 1:].amax(-1)).mean()) > 0.3  # accent stays vermilion


def test_cyberpunk_bloom_brightens_outside_bright_areas():
    preset = load_preset("cyberpunk")
    no_bloom = preset.model_copy(update={"post": preset.post.model_copy(update={"bloom": 0.0})})
    img = synth()
    kw = {"transparent": True}
    with_b = StylizeStage(preset, W, H, **kw).apply(img[None])[0].float()
    without = StylizeStage(no_bloom, W, H, **kw).apply(img[None])[0].float()
    d, _, _, _, r = masks()
    ring = (d > r + 3) & (d < r + 12)  # just outside the disc
    assert float(with_b[ring][:, :3].mean()) > float(without[ring][:, :3].mean()) + 3
    assert float(with_b[ring][:, 3].mean()) > float(without[ring][:, 3].mean())


def test_styles_differ():
    img = synth()[None]
    outs = {n: StylizeStage(load_preset(n), W, H).apply(img)[0].float() for n in BUILTINS}
    for a in BUILTINS:
        for b in BUILTINS:
            if a < b:
                assert float((outs[a] - outs[b]).abs().mean()) > 10


def _crop_vs_full(name, transparent, img):
    st = stage(name, transparent)
    full = stage(name, transparent)
    full.effect.crop = False
    a, b = st.apply(img), full.apply(img)
    assert int((a.int() - b.int()).abs().max()) <= 1
    return a


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("transparent", (False, True))
def test_crop_equals_full_frame(name, transparent):
    _crop_vs_full(name, transparent, torch.stack([synth(shift=s) for s in (0, 30, -40)]))


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("transparent", (False, True))
def test_idol_touching_edges(name, transparent):
    img = torch.stack([synth(shift=W * 0.45), synth(shift=-W * 0.45)])
    img[:, -10:] = img[:, H // 2 : H // 2 + 1]  # runs off the bottom too
    _crop_vs_full(name, transparent, img)


@pytest.mark.parametrize("name", BUILTINS)
def test_empty_frame(name):
    z = torch.zeros(2, H, W, 4, dtype=torch.uint8)
    _crop_vs_full(name, False, z)
    assert int(_crop_vs_full(name, True, z).max()) == 0


# ---- the tight-box split (full math on the idol's box, glow only in the reach border) -------


def _solid(colour, box, w: int = W, h: int = H) -> torch.Tensor:
    """An opaque rectangle with a soft left edge, premultiplied uint8 (h, w, 4)."""
    y0, y1, x0, x1 = box
    img = torch.zeros(h, w, 4)
    img[y0:y1, x0:x1, :3] = torch.tensor(colour)
    img[y0:y1, x0:x1, 3] = 1.0
    img[y0:y1, x0] *= 0.5  # a partial-alpha column
    return (img * 255 + 0.5).to(torch.uint8)


@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("transparent", (False, True))
def test_split_idol_in_corners(name, transparent):
    img = torch.stack([synth()] * 4)
    img[0] = torch.roll(img[0], (-70, -150), (0, 1))  # top-left, clipped
    img[1] = torch.roll(img[1], (70, 150), (0, 1))  # bottom-right, clipped
    img[2] = _solid((0.3, 0.6, 0.9), (3, 21, 5, 27))  # small, unaligned box near a corner
    img[3] = _solid((0.9, 0.1, 0.1), (H - 9, H, W - 13, W))  # tiny, in the far corner
    _crop_vs_full(name, transparent, img)


@pytest.mark.parametrize("transparent", (False, True))
def test_split_ink_wash_red(transparent):
    no_red = _solid((0.4, 0.5, 0.6), (40, 130, 90, 250))
    all_red = _solid((0.95, 0.1, 0.05), (37, 141, 83, 247))
    red_dot = no_red.clone()
    red_dot[60:63, 200:202, :3] = torch.tensor([240, 20, 20], dtype=torch.uint8)
    img = torch.stack([no_red, all_red, red_dot])
    out = _crop_vs_full("ink-wash", transparent, img).float()
    u = out[..., :3] / out[..., 3:4].clamp(min=1)
    chroma = u.amax(-1) - u.amin(-1)
    assert float(chroma[0, 45:125, 95:245].max()) < 0.12  # no red: grey only
    assert float((u[1, 45:130, 95:240, 0] - u[1, 45:130, 95:240, 1:].amax(-1)).mean()) > 0.3
    assert float(u[2, 61, 200, 0] - u[2, 61, 200, 1:].amax()) > 0.2  # the one red spot


def dark_mass(w: int = W, h: int = H) -> torch.Tensor:
    """A big black disc (hair) with a small black dot beside it (an eye): premultiplied RGBA."""
    y, x = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    big = ((x - w * 0.4) ** 2 + (y - h * 0.5) ** 2).sqrt() < h * 0.4
    dot = ((x - w * 0.85) ** 2 + (y - h * 0.5) ** 2).sqrt() < 4
    a = (big | dot).float()
    rgba = torch.stack([a * 0.06, a * 0.05, a * 0.07, a], -1)
    return (rgba * 255 + 0.5).to(torch.uint8), big, dot


def test_ink_wash_dry_brush_lays_the_painters_streaks_on_big_masses_only():
    from pipeline.reference.ink_wash import straight_streaks

    img, big, dot = dark_mass()
    out = StylizeStage(load_preset("ink-wash"), W, H, transparent=True).apply(img[None])[0]
    lum = out[..., :3].float().mean(-1)
    streaks = straight_streaks(W, H)[0, 0]
    inner = big & (F.max_pool2d((~big).float()[None, None], 21, 1, 10)[0, 0] == 0)
    # the mass is broken by bristle gaps (paper shows through: lighter), where the painter's
    # own streaks are low — so a model painting from this look can see where they lie
    assert float(lum[inner].std()) > 12
    corr = torch.corrcoef(torch.stack([lum[inner], streaks[inner]]))[0, 1]
    assert float(corr) < -0.3
    # a small dark feature (an eye) is no mass: it stays solid ink
    assert float(lum[dot].max()) < float(lum[inner].quantile(0.5))


@pytest.mark.parametrize(
    "post",
    ({"shading": 0.0, "saturation": 1.0, "vignette": 0.0}, {"grain": 0.3}),
)
def test_toon_opaque_path_equals_full_frame(post):
    """The opaque toon's CPU path (the idol's box only, fewer passes) against the generic
    full-frame path, for each branch the studio preset itself does not take."""
    preset = load_preset("studio")
    preset = preset.model_copy(update={"post": preset.post.model_copy(update=post)})
    img = torch.stack([synth(shift=s) for s in (0, W * 0.45)])
    crop, full = StylizeStage(preset, W, H), StylizeStage(preset, W, H)
    full.effect.crop = False
    idx = torch.arange(2)
    assert int((crop.apply(img, idx).int() - full.apply(img, idx).int()).abs().max()) <= 1


def test_toon_i420_frames_equal_the_rgba_frames_converted():
    """The CPU chain's I420 hand-off: the planes the toon makes itself are exactly
    rgba_to_i420 of its RGBA frames (idol inside, at the edges, and an empty frame)."""
    from pipeline.accel.i420 import rgba_to_i420

    rgba, planar = stage("studio"), stage("studio")
    assert planar.give_i420() and "i420" in planar.gives.fields
    fs = frames(1)
    fs.append(fs[0].with_(index=1, image=synth(shift=W * 0.45)))
    fs.append(fs[0].with_(index=2, image=torch.zeros(H, W, 4, dtype=torch.uint8)))
    want = rgba_to_i420(torch.stack([f.image for f in rgba.process_batch(fs)]))
    got = planar.process_batch(fs)
    assert all(f.image is None for f in got)
    assert torch.equal(torch.stack([f.i420 for f in got]), want)
    for name, transparent in (("ink-wash", False), ("studio", True)):
        assert not StylizeStage(load_preset(name), W, H, transparent=transparent).give_i420()


def test_the_models_input_is_the_look_without_its_screen_effects():
    """StylizeStage(for_model=True), what a chain with Kagura's model stylizes: cyberpunk loses
    its scanlines and RGB split (the rows no longer alternate in brightness) and every preset
    its per-frame grain (a still idol gives the same frame twice); the look shown without a
    model keeps all of them."""
    from pipeline.stylize import model_input

    img = synth()
    still = [Frame(i * 33_333_333, i, AvatarParams(), image=img) for i in range(2)]
    for name in BUILTINS:
        preset = load_preset(name)
        fed = StylizeStage(preset, W, H, for_model=True)
        fed.setup(Context(W, H, 30, 48000))
        a, b = (f.image for f in fed.process_batch(still))
        assert torch.equal(a, b), name
        assert fed.preset is preset  # the stage still reports the user's preset
        again = StylizeStage(model_input(preset), W, H).apply(img[None])[0]
        assert torch.equal(a, again), name
        full = stage(name).process_batch(still)
        if preset.post.grain > 0:
            assert not torch.equal(full[0].image, full[1].image), name

    cyber = load_preset("cyberpunk")
    assert cyber.post.scanlines > 0 and cyber.post.chromatic > 0
    fed = StylizeStage(cyber, W, H, for_model=True).apply(img[None])[0].float()
    shown = stage("cyberpunk").apply(img[None])[0].float()

    # scanlines: each row's mean brightness against its neighbours' (a row-periodic ripple)
    def ripple(x):
        r = x[..., :3].mean(dim=(1, 2))
        return (r[1:-1] - (r[:-2] + r[2:]) / 2).abs().mean()

    assert ripple(shown) > 4.0 * ripple(fed)
