"""Procedural backgrounds, drawn once per (background, size, seed) and cached.

    make_background(bg, width, height, seed=0) -> torch.uint8 (H, W, 3), opaque RGB, CPU

The returned tensor is shared by the cache: treat it as read-only (`.clone()` before editing).
Stages move it to their device once and keep it there.

Kinds (`bg.colors` by position, missing entries are derived):

    gradient   [top, bottom, spotlight]  soft vertical gradient, spotlight from above, a floor
               glow and soft bokeh circles (`detail` = how many).
    paper      [paper, ink, seal]        washi paper: mottled pulp, fine grain, fibres, a faint
               two-layer ink-wash mountain range in mist and a small vermilion seal.
    city-glow  [sky, horizon, buildings, windows, neon1, neon2]  night sky, three layers of
               skyline silhouettes (far ones hazier), lit windows, glowing neon signs, haze.

Everything is deterministic in `seed`, and drawn once per machine: the arrays are kept in the
user's cache folder between runs (render/disk_cache.py). Drawing uses numpy/torch for fields (gradients, noise)
and skia for shapes (soft circles, fibres, buildings, glows).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import skia
import torch
import torch.nn.functional as F

from presets.schema import Background, rgb
from render.disk_cache import cached_array

__all__ = ["LIBRARIES", "make_background", "paper_grain"]

# what a stored drawing depends on besides its arguments and this module's source (the disk
# cache's key): numpy's generators, skia's rasteriser, torch's interpolation
LIBRARIES = f"numpy {np.__version__}|skia {skia.__version__}|torch {torch.__version__}"


def make_background(bg: Background, width: int, height: int, seed: int = 0) -> torch.Tensor:
    """The background for `bg` at `width` x `height`: torch.uint8 (H, W, 3) RGB on the CPU.

    Cached (the same object is returned for equal arguments): do not modify it in place.
    """
    return _cached(bg.model_dump_json(), int(width), int(height), int(seed))


@functools.lru_cache(maxsize=16)
def _cached(bg_json: str, width: int, height: int, seed: int) -> torch.Tensor:
    def draw_it() -> np.ndarray:
        bg = Background.model_validate_json(bg_json)
        draw = {"gradient": _gradient, "paper": _paper, "city-glow": _city_glow}[bg.kind]
        arr = draw(bg, width, height, np.random.default_rng(seed))
        assert arr.shape == (height, width, 3) and arr.dtype == np.uint8
        return arr

    key = f"{LIBRARIES}|background|{bg_json}|{width}x{height}|{seed}"
    arr = cached_array(
        "backgrounds", key, draw_it, (height, width, 3), np.uint8, sources=(__file__,)
    )
    return torch.from_numpy(np.ascontiguousarray(arr))


@functools.lru_cache(maxsize=8)
def paper_grain(width: int, height: int, seed: int = 0) -> torch.Tensor:
    """Paper texture as a multiplier: torch.float32 (H, W), mean ~1, roughly 0.85..1.08.

    Shared by the `paper` background and the ink-wash post-process (which multiplies it into
    the idol so ink and paper share one surface). Cached: treat as read-only.
    """
    key = f"{LIBRARIES}|paper_grain|{width}x{height}|{seed}"
    tex = cached_array(
        "backgrounds",
        key,
        lambda: _paper_grain(width, height, seed),
        (height, width),
        np.float32,
        sources=(__file__,),
    )
    return torch.from_numpy(tex)


def _paper_grain(width: int, height: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 7919)
    mottle = _fractal(rng, width, height, base=6, octaves=4)  # 0..1, soft pulp clouds
    fine = _fractal(rng, width, height, base=max(8, width // 6), octaves=2)
    grain = rng.standard_normal((height, width)).astype(np.float32)
    tex = 1.0 + 0.05 * (mottle - 0.5) + 0.04 * (fine - 0.5) + 0.012 * grain
    fibres = _fibre_layer(rng, width, height, count=int(900 * width * height / (1280 * 720)))
    tex = tex * (1.0 - 0.09 * fibres[..., 0]) + 0.05 * fibres[..., 1]
    return np.clip(tex, 0.75, 1.1).astype(np.float32)


# --- helpers ---------------------------------------------------------------------------------


def _rgbf(color: str) -> np.ndarray:
    return np.array(rgb(color), np.float32) / 255.0


def _color(colors: tuple[str, ...], i: int, default: np.ndarray) -> np.ndarray:
    return _rgbf(colors[i]) if i < len(colors) else default


def _fractal(rng: np.random.Generator, w: int, h: int, base: int, octaves: int) -> np.ndarray:
    """Smooth value noise in 0..1, float32 (h, w): bicubic-upsampled random grids."""
    acc = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        gx = max(2, base * 2**o)
        gy = max(2, round(gx * h / w))
        grid = torch.from_numpy(rng.random((1, 1, gy, gx), dtype=np.float32))
        up = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)[0, 0]
        acc += amp * up.numpy()
        total += amp
        amp *= 0.5
    acc /= total
    lo, hi = acc.min(), acc.max()
    return (acc - lo) / max(hi - lo, 1e-6)


def _skia_paint(color: np.ndarray, alpha: float, blur: float = 0.0, **kw) -> skia.Paint:
    r, g, b = (int(np.clip(c * 255, 0, 255)) for c in color)
    paint = skia.Paint(
        AntiAlias=True, Color=skia.Color(r, g, b, int(np.clip(alpha, 0, 1) * 255)), **kw
    )
    if blur > 0:
        paint.setMaskFilter(skia.MaskFilter.MakeBlur(skia.kNormal_BlurStyle, blur))
    return paint


def _surface_from(base: np.ndarray) -> skia.Surface:
    """A skia surface holding `base` (float RGB 0..1, (h, w, 3))."""
    h, w, _ = base.shape
    rgba = np.empty((h, w, 4), np.uint8)
    rgba[..., :3] = np.clip(base * 255 + 0.5, 0, 255).astype(np.uint8)
    rgba[..., 3] = 255
    surface = skia.Surface(w, h)
    surface.getCanvas().drawImage(
        skia.Image.fromarray(rgba, colorType=skia.kRGBA_8888_ColorType), 0, 0
    )
    return surface


def _pixels(surface: skia.Surface) -> np.ndarray:
    arr = surface.makeImageSnapshot().toarray(colorType=skia.kRGBA_8888_ColorType)
    return arr[..., :3].astype(np.float32) / 255.0


def _finish(img: np.ndarray, rng: np.random.Generator, dither: float = 1.0) -> np.ndarray:
    """float RGB -> uint8 with a little dither so smooth gradients do not band."""
    noise = rng.random(img.shape[:2], dtype=np.float32)[..., None] - 0.5
    return np.clip(img * 255.0 + dither * noise + 0.5, 0, 255).astype(np.uint8)


def _fibre_layer(rng: np.random.Generator, w: int, h: int, count: int) -> np.ndarray:
    """Paper fibres: (h, w, 2) float, channel 0 dark fibres, channel 1 light fibres, 0..1."""
    surface = skia.Surface(w, h)
    canvas = surface.getCanvas()
    canvas.clear(skia.Color(0, 0, 0, 255))
    s = h / 720.0
    for i in range(count):
        x, y = rng.random() * w, rng.random() * h
        length = (8 + rng.random() ** 2 * 70) * s
        ang = rng.random() * math.tau
        bend = (rng.random() - 0.5) * length * 0.8
        dx, dy = math.cos(ang) * length, math.sin(ang) * length
        path = skia.Path()
        path.moveTo(x, y)
        path.quadTo(
            x + dx / 2 - dy / length * bend, y + dy / 2 + dx / length * bend, x + dx, y + dy
        )
        channel = i % 2
        color = np.array([1.0, 0.0, 0.0]) if channel == 0 else np.array([0.0, 1.0, 0.0])
        paint = _skia_paint(color, 0.25 + 0.6 * rng.random(), blur=0.35 * s)
        paint.setStyle(skia.Paint.kStroke_Style)
        paint.setStrokeWidth((0.4 + rng.random() * 0.9) * s)
        canvas.drawPath(path, paint)
    return _pixels(surface)[..., :2]


# --- gradient (studio) -------------------------------------------------------------------------


def _gradient(bg: Background, w: int, h: int, rng: np.random.Generator) -> np.ndarray:
    top = _rgbf(bg.colors[0])
    bottom = _color(bg.colors, 1, top * 0.85)
    spot = _color(bg.colors, 2, np.ones(3, np.float32))
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
    t = y * y * (3 - 2 * y)
    img = top * (1 - t) + bottom * t
    # spotlight cone from above the frame, a soft pool of light on the floor
    aspect = w / h
    d_spot = ((x - 0.5) * aspect / 0.55) ** 2 + ((y + 0.15) / 0.95) ** 2
    cone = np.exp(-d_spot * 1.6) * 0.55
    d_floor = ((x - 0.5) * aspect / 0.75) ** 2 + ((y - 0.93) / 0.12) ** 2
    pool = np.exp(-d_floor * 1.2) * 0.35
    light = np.clip(cone + pool, 0, 1)
    img = 1 - (1 - img) * (1 - light * spot)  # screen blend
    img = img * (1 - 0.05 * ((x - 0.5) ** 2 * 2 + (y - 0.45) ** 2 * 2))
    # soft bokeh
    surface = _surface_from(img)
    canvas = surface.getCanvas()
    s = h / 720.0
    n = int(40 * bg.detail)
    tints = [spot, np.array([1.0, 0.8, 0.92], np.float32), np.array([0.8, 0.9, 1.0], np.float32)]
    for _ in range(n):
        r = (12 + rng.random() ** 1.5 * 60) * s
        cx = rng.random() * w
        cy = (0.05 + 0.75 * rng.random() ** 1.3) * h
        col = tints[rng.integers(len(tints))] * 0.3 + 0.7
        alpha = 0.18 + 0.25 * rng.random()
        canvas.drawCircle(cx, cy, r, _skia_paint(col, alpha, blur=r * (0.04 + 0.15 * rng.random())))
        ring = _skia_paint(np.ones(3, np.float32), alpha * 0.6, blur=1.2 * s)
        ring.setStyle(skia.Paint.kStroke_Style)
        ring.setStrokeWidth(1.5 * s)
        canvas.drawCircle(cx, cy, r * 0.97, ring)
    return _finish(_pixels(surface), rng)


# --- paper (ink-wash) --------------------------------------------------------------------------


def _ridge(rng: np.random.Generator, w: int, base_y: float, amp: float, rough: int) -> np.ndarray:
    xs = np.arange(w + 1, dtype=np.float32)
    y = np.zeros_like(xs)
    a = amp
    for octave in range(5):
        freq = rough * 2**octave
        phase = rng.random() * math.tau
        y += a * np.sin(xs / w * freq * math.tau * (0.9 + 0.2 * rng.random()) + phase)
        a *= 0.45
    # a few peaks
    for _ in range(3):
        px, pw = rng.random() * w, (0.08 + rng.random() * 0.15) * w
        y -= amp * 1.6 * np.exp(-(((xs - px) / pw) ** 2))
    return base_y + y


def _paper(bg: Background, w: int, h: int, rng: np.random.Generator) -> np.ndarray:
    paper = _rgbf(bg.colors[0])
    ink = _color(bg.colors, 1, np.full(3, 0.1, np.float32))
    seal = _color(bg.colors, 2, np.array([0.78, 0.2, 0.12], np.float32))
    tex = paper_grain(w, h, 0).numpy()[..., None]
    img = paper * tex
    # warm edge darkening of old paper
    y = np.linspace(-1, 1, h, dtype=np.float32)[:, None, None]
    x = np.linspace(-1, 1, w, dtype=np.float32)[None, :, None]
    img = img * (1 - 0.06 * np.clip(x**2 + y**2 - 0.5, 0, 2) ** 1.5)
    if bg.detail > 0:
        # faint mountains in mist: wash layers drawn as soft-edged fills, fading downward
        wash = np.zeros((h, w), np.float32)
        for layer, (base_y, amp, alpha) in enumerate(((0.55, 0.06, 0.10), (0.68, 0.08, 0.16))):
            ridge = _ridge(rng, w, base_y * h, amp * h, rough=1 + layer)[:w]
            rows = np.arange(h, dtype=np.float32)[:, None]
            below = rows - ridge[None, :]
            fade = np.exp(-np.clip(below, 0, None) / (0.10 * h))
            edge = np.clip(below / (0.004 * h) + 0.5, 0, 1)  # crisp-ish ridge line
            stroke = np.exp(-((below / (0.006 * h)) ** 2)) * 0.6  # pooled ink along the ridge
            layer_a = (edge * fade + stroke) * alpha * bg.detail * 1.4
            wash = 1 - (1 - wash) * (1 - layer_a)
        noise = _fractal(rng, w, h, base=12, octaves=3)
        wash *= 0.7 + 0.6 * noise  # uneven pigment
        img = img * (1 - wash[..., None]) + ink * wash[..., None] * tex
    surface = _surface_from(img)
    canvas = surface.getCanvas()
    s = h / 720.0
    # the seal (hanko): a small vermilion square with worn, uneven ink and carved strokes
    size = 46 * s
    sx, sy = w - 70 * s - size, h - 60 * s - size
    canvas.drawRoundRect(
        skia.Rect.MakeXYWH(sx, sy, size, size), 3 * s, 3 * s, _skia_paint(seal, 0.88, blur=0.6 * s)
    )
    carve = _skia_paint(paper, 0.9, blur=0.3 * s)
    carve.setStyle(skia.Paint.kStroke_Style)
    carve.setStrokeWidth(3.2 * s)
    m = size * 0.2
    for i in range(3):
        yy = sy + m + i * (size - 2 * m) / 2
        canvas.drawLine(sx + m, yy, sx + size - m, yy, carve)
    canvas.drawLine(sx + size / 2, sy + m, sx + size / 2, sy + size - m, carve)
    for _ in range(25):  # worn spots
        canvas.drawCircle(
            sx + rng.random() * size,
            sy + rng.random() * size,
            (0.6 + rng.random() * 1.6) * s,
            carve,
        )
    return _finish(_pixels(surface), rng)


# --- city-glow (cyberpunk) -----------------------------------------------------------------------


def _city_glow(bg: Background, w: int, h: int, rng: np.random.Generator) -> np.ndarray:
    c = bg.colors
    sky = _rgbf(c[0])
    horizon = _color(c, 1, np.array([0.48, 0.12, 0.55], np.float32))
    building = _color(c, 2, sky * 0.8)
    window = _color(c, 3, np.array([1.0, 0.81, 0.48], np.float32))
    neon1 = _color(c, 4, np.array([1.0, 0.17, 0.84], np.float32))
    neon2 = _color(c, 5, np.array([0.0, 0.9, 1.0], np.float32))
    s = h / 720.0
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
    hy = 0.72  # horizon
    t = np.clip(y / hy, 0, 1) ** 2.2
    img = sky * (1 - t) + horizon * t
    img = np.where(
        y > hy,
        horizon * np.exp(-(y - hy) * 6)[..., :] + sky * 0.6 * (1 - np.exp(-(y - hy) * 6)),
        img,
    )
    # haze clouds lit from below
    clouds = _fractal(rng, w, h, base=5, octaves=4)[..., None]
    img = img + horizon * 0.25 * clouds * np.clip(y / hy, 0, 1) ** 1.5
    surface = _surface_from(np.clip(img, 0, 1))
    canvas = surface.getCanvas()
    detail = bg.detail
    layers = ((0.36, 0.62, 0.55, 0.35), (0.46, 0.30, 0.35, 0.70), (0.60, 0.0, 0.22, 1.0))
    for li, (top_frac, haze, min_w, win_amt) in enumerate(layers):
        col = building * (1 - haze) + horizon * haze
        xpos = -rng.random() * 40 * s
        while xpos < w:
            bw = (min_w * 100 + rng.random() * 110) * s * (0.7 + 0.3 * li)
            top = (top_frac + rng.random() ** 1.5 * 0.25) * h
            if li == 2 and abs((xpos + bw / 2) / w - 0.5) < 0.18:
                top += 0.12 * h  # keep the centre lower behind the idol
            rect = skia.Rect.MakeLTRB(xpos, top, xpos + bw, h)
            canvas.drawRect(rect, _skia_paint(col, 1.0))
            if rng.random() < 0.35:  # antenna / roof box
                ax = xpos + bw * (0.2 + 0.6 * rng.random())
                canvas.drawRect(
                    skia.Rect.MakeLTRB(ax, top - 30 * s * rng.random() - 6 * s, ax + 2.5 * s, top),
                    _skia_paint(col, 1.0),
                )
                if rng.random() < 0.6:
                    canvas.drawCircle(
                        ax + 1.2 * s,
                        top - 8 * s,
                        2.2 * s,
                        _skia_paint(np.array([1, 0.2, 0.25]), 0.9, blur=2.5 * s),
                    )
            # windows
            if win_amt > 0 and detail > 0:
                ww, wh = 4 * s * (0.7 + 0.4 * li), 6 * s * (0.7 + 0.4 * li)
                gx, gy = ww * 2.2, wh * 2.0
                lit_p = 0.10 + 0.35 * detail
                win_col = window if rng.random() < 0.7 else neon2 * 0.6 + 0.4
                for yy in np.arange(top + gy, h - gy, gy):
                    for xx in np.arange(xpos + gx * 0.6, xpos + bw - gx * 0.6, gx):
                        if rng.random() < lit_p:
                            a = win_amt * (0.35 + 0.65 * rng.random())
                            canvas.drawRect(
                                skia.Rect.MakeXYWH(xx, yy, ww, wh),
                                _skia_paint(win_col, a * (0.55 + 0.25 * li)),
                            )
            # neon signs on the nearer layers
            if li >= 1 and rng.random() < 0.5 * detail + 0.1:
                neon = neon1 if rng.random() < 0.5 else neon2
                nx = xpos + bw * (0.15 + 0.5 * rng.random())
                ny = top + (0.05 + 0.25 * rng.random()) * (h - top)
                vertical = rng.random() < 0.6
                nw, nh = (
                    (9 * s, (40 + 70 * rng.random()) * s)
                    if vertical
                    else ((40 + 60 * rng.random()) * s, 10 * s)
                )
                r = skia.Rect.MakeXYWH(nx, ny, nw, nh)
                canvas.drawRoundRect(
                    r.makeOutset(14 * s, 14 * s),
                    10 * s,
                    10 * s,
                    _skia_paint(neon, 0.30, blur=18 * s),
                )
                canvas.drawRoundRect(r, 3 * s, 3 * s, _skia_paint(neon, 0.95, blur=1.2 * s))
                canvas.drawRoundRect(
                    r.makeInset(2.2 * s, 2.2 * s),
                    2 * s,
                    2 * s,
                    _skia_paint(neon * 0.35 + 0.65, 0.9, blur=0.6 * s),
                )
            xpos += bw + rng.random() * 6 * s
        # haze between layers
        haze_paint = _skia_paint(horizon, 0.10 + 0.05 * (2 - li), blur=60 * s)
        canvas.drawRect(
            skia.Rect.MakeLTRB(-100, (top_frac + 0.15) * h, w + 100, h + 100), haze_paint
        )
    # neon glow haze over the street
    canvas.drawOval(
        skia.Rect.MakeLTRB(-0.2 * w, 0.80 * h, 0.55 * w, 1.15 * h),
        _skia_paint(neon1, 0.30, blur=90 * s),
    )
    canvas.drawOval(
        skia.Rect.MakeLTRB(0.45 * w, 0.82 * h, 1.2 * w, 1.15 * h),
        _skia_paint(neon2, 0.25, blur=90 * s),
    )
    out = _pixels(surface)
    # light vignette on top so the frame corners recede
    out = out * (1 - 0.35 * np.clip(((x - 0.5) * 1.6) ** 2 + ((y - 0.55) * 1.4) ** 2, 0, 1))
    return _finish(out, rng)
