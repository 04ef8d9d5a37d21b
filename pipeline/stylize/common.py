"""Shared pieces of the procedural post-process: low-resolution blurs, maps, conversions.

Conventions (all kinds): a batch is torch.uint8 (B, H, W, 4) RGBA *premultiplied*, on any
device; inside, colours are float32 0..1 in (B, H, W, C) order ("channels last" — the layout the
frames arrive in, so no transposes). Anything wider than a few pixels (bloom, rim, bleed,
shading) is computed at 1/4 or 1/8 resolution and upsampled bilinearly.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from presets.schema import rgb

LUMA = (0.299, 0.587, 0.114)


def color(hex_color: str, device: torch.device | str = "cpu") -> torch.Tensor:
    """'#rrggbb' -> float32 (3,) 0..1."""
    return torch.tensor([c / 255.0 for c in rgb(hex_color)], dtype=torch.float32, device=device)


def luma(c: torch.Tensor) -> torch.Tensor:
    """(…, 3) -> (…, 1)."""
    return c[..., 0:1] * LUMA[0] + c[..., 1:2] * LUMA[1] + c[..., 2:3] * LUMA[2]


def to_nchw(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 3, 1, 2)


def to_nhwc(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 1)


def down(x_nhwc: torch.Tensor, factor: int) -> torch.Tensor:
    """Box-downsample (B, H, W, C) by `factor` -> (B, C, h, w) (NCHW, for pooling/blurs)."""
    return F.avg_pool2d(to_nchw(x_nhwc), factor, ceil_mode=True)


def blur(x: torch.Tensor, passes: int = 2, k: int = 5) -> torch.Tensor:
    """Repeated box blur of an NCHW tensor (approximates a Gaussian)."""
    for _ in range(passes):
        x = F.avg_pool2d(x, k, 1, k // 2, count_include_pad=False)
    return x


def up(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, C, h, w) -> bilinear (B, H, W, C)."""
    return to_nhwc(F.interpolate(x, size=(height, width), mode="bilinear", align_corners=False))


def shift_x(x: torch.Tensor, d: int) -> torch.Tensor:
    """Shift an NCHW tensor right by d pixels (left if d < 0), filling with zeros."""
    if d == 0:
        return x
    if d > 0:
        return F.pad(x[..., :-d], (d, 0))
    return F.pad(x[..., -d:], (0, -d))


def vignette_map(height: int, width: int, amount: float, device) -> torch.Tensor:
    """float32 (H, W, 1): 1 in the centre, 1 - amount in the far corners, smooth."""
    y = torch.linspace(-1, 1, height, device=device).view(height, 1)
    x = torch.linspace(-1, 1, width, device=device).view(1, width)
    d = (x * x * 0.85 + y * y) / 1.85
    return (1 - amount * d.clamp(0, 1) ** 1.4).unsqueeze(-1).contiguous()


def grain_bank(height: int, width: int, n: int, seed: int, device) -> torch.Tensor:
    """n planes of film grain, float32 (n, H, W, 1), zero mean, ~unit std, slightly soft."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn((n, 1, height, width), generator=g)
    noise = F.avg_pool2d(noise, 3, 1, 1, count_include_pad=False) * 2.2
    return noise.permute(0, 2, 3, 1).contiguous().to(device)


def scanline_map(height: int, amount: float, device) -> torch.Tensor:
    """float32 (H, 1, 1): darker every third row-pair, like a CRT, scaled to 720p."""
    period = 3.0 * height / 720.0
    y = torch.arange(height, dtype=torch.float32, device=device)
    wave = 0.5 + 0.5 * torch.cos(y / period * 2 * math.pi)
    return (1 - amount * wave**2).view(height, 1, 1).contiguous()


def materialize() -> None:
    """Under torch.compile: end the graph here, so low-res fields computed above are stored
    once instead of being recomputed inside every full-resolution pixel that samples them.
    (A no-op in eager mode.)"""
    if torch.compiler.is_compiling():
        torch._dynamo.graph_break()


def to_u8(x: torch.Tensor) -> torch.Tensor:
    """float 0..1 -> uint8 with rounding."""
    return (x * 255.0 + 0.5).clamp_(0, 255).to(torch.uint8)


# ---- planar helpers for the cropped, per-frame hot path ------------------------------------
# Inside the hot path one frame is planar float32 (C, h, w): channel ops are contiguous and
# (h, w) maps broadcast over the channels without strided access.


def planes(x: torch.Tensor) -> torch.Tensor:
    """uint8 (h, w, 4) RGBA (rows may be strided) -> float32 (4, h, w) 0..1.

    One converting copy from the permuted view, then one scale. On the CPU numpy makes that
    copy: its transposing cast is several times faster than torch's permuted copy (torch
    2.13, docs/BENCHMARKS.md), and both are exact (every uint8 is a float32)."""
    if x.device.type == "cpu":
        return planes_255(x).mul_(1.0 / 255.0)
    out = torch.empty((4, x.shape[0], x.shape[1]), dtype=torch.float32, device=x.device)
    out.copy_(x.permute(2, 0, 1))
    return out.mul_(1.0 / 255.0)


def planes_255(x: torch.Tensor) -> torch.Tensor:
    """uint8 (h, w, 4) RGBA on the CPU (rows may be strided) -> float32 (4, h, w) 0..255: one
    transposing cast (numpy's; see `planes`)."""
    return torch.from_numpy(x.numpy().transpose(2, 0, 1).astype(np.float32, order="C"))


def alpha_extent(x: torch.Tensor) -> tuple[int, int, int, int] | None:
    """The box (y0, y1, x0, x1) of the pixels with alpha > 0 of uint8 (H, W, 4) RGBA, None
    when there are none. Each pixel read as one little-endian int32 has alpha in its top byte,
    so alpha > 0 exactly when that int32 is negative or at least 2**24: four contiguous
    min/max reductions, several times cheaper than extracting the alpha plane."""
    v = x.view(torch.int32).squeeze(-1)
    rows = torch.nonzero((v.amax(1) >= 1 << 24) | (v.amin(1) < 0)).flatten()
    if rows.numel() == 0:
        return None
    v = v[int(rows[0]) : int(rows[-1]) + 1]
    cols = torch.nonzero((v.amax(0) >= 1 << 24) | (v.amin(0) < 0)).flatten()
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def copy_outside(dst: torch.Tensor, src: torch.Tensor, box: tuple[int, int, int, int]) -> None:
    """dst = src everywhere but inside box (y0, y1, x0, x1) of the (H, W, …) images."""
    y0, y1, x0, x1 = box
    dst[:y0].copy_(src[:y0])
    dst[y1:].copy_(src[y1:])
    dst[y0:y1, :x0].copy_(src[y0:y1, :x0])
    dst[y0:y1, x1:].copy_(src[y0:y1, x1:])


def pool(x: torch.Tensor, factor: int) -> torch.Tensor:
    """Box-downsample planar (C, h, w) by `factor` (partial cells at the far edges).

    When h and w are multiples of `factor` (every aligned window) the cells are summed with
    `factor - 1` adds along rows and then along columns: ~2.5x faster than avg_pool2d on CPU,
    equal up to float rounding."""
    c, h, w = x.shape
    if h % factor or w % factor or not x.is_contiguous():
        return F.avg_pool2d(x.unsqueeze(0), factor, ceil_mode=True)[0]
    s = x.view(c, h // factor, factor, w)
    r = torch.add(s[:, :, 0], s[:, :, 1])
    for k in range(2, factor):
        r.add_(s[:, :, k])
    r = r.view(c, h // factor, w // factor, factor)
    out = torch.add(r[..., 0], r[..., 1])
    for k in range(2, factor):
        out.add_(r[..., k])
    return out.mul_(1.0 / (factor * factor))


def _inv_counts(n: int, k: int, device) -> torch.Tensor:
    """1 / (number of in-range taps) of a centred k-box at each of n positions."""
    i = torch.arange(n, device=device)
    r = k // 2
    cnt = torch.minimum(i + r, torch.full_like(i, n - 1)) - torch.clamp(i - r, min=0) + 1
    return cnt.float().reciprocal_()


def blur_p(x: torch.Tensor, passes: int, k: int) -> torch.Tensor:
    """Repeated box blur of planar (C, h, w); the window shrinks at the edges (the same as
    avg_pool2d(k, 1, k // 2, count_include_pad=False), done as separable shifted sums: ~4x
    faster on CPU for the small low-resolution fields)."""
    _, h, w = x.shape
    r = k // 2
    cw = _inv_counts(w, k, x.device)
    ch = _inv_counts(h, k, x.device).view(h, 1)
    for _ in range(passes):
        p = F.pad(x, (r, r))
        s = torch.add(p[..., 0:w], p[..., 1 : w + 1])
        for j in range(2, k):
            s.add_(p[..., j : j + w])
        p = F.pad(s.mul_(cw), (0, 0, r, r))
        x = torch.add(p[:, 0:h], p[:, 1 : h + 1])
        for j in range(2, k):
            x.add_(p[:, j : j + h])
        x.mul_(ch)
    return x


def upsample(lo: torch.Tensor, factor: int, height: int, width: int) -> torch.Tensor:
    """Bilinear (align_corners=False) upsample of planar (C, h, w) by exactly `factor`, cropped
    to (C, height, width). Separable: linear along x at low height, then along y as two
    broadcast multiply-adds per output phase (much faster than 2-D interpolate on CPU).
    The exact scale keeps the low-res grid tied to the frame, so a window aligned to `factor`
    upsamples to the same values as the full frame."""
    c, h, _ = lo.shape
    if factor == 1:
        return lo[:, :height, :width]
    lw = F.interpolate(lo, scale_factor=float(factor), mode="linear", align_corners=False)
    lw = lw[..., :width]
    if factor % 2:  # pragma: no cover - not used by the presets
        return F.interpolate(lw.unsqueeze(0), size=(h * factor, width), mode="bilinear")[0][
            :, :height
        ]
    p = torch.cat([lw[:, :1], lw, lw[:, -1:]], 1)  # replicate edges (= interpolate's clamp)
    half = factor // 2
    wn = _phase_weights(factor, lo.device)
    wp = 1.0 - wn
    out = torch.empty((c, h, factor, width), dtype=lo.dtype, device=lo.device)
    a, b = out[:, :, :half], out[:, :, half:]
    torch.mul(p[:, 0:h, None], wp[:, :, :half], out=a)
    a.addcmul_(p[:, 1 : h + 1, None], wn[:, :, :half])
    torch.mul(p[:, 1 : h + 1, None], wp[:, :, half:], out=b)
    b.addcmul_(p[:, 2 : h + 2, None], wn[:, :, half:])
    return out.view(c, h * factor, width)[:, :height]


@functools.cache
def _phase_weights(factor: int, device: torch.device) -> torch.Tensor:
    """Weight of the later row for each of the `factor` output phases, (1, 1, factor, 1) on
    `device`: made once per (factor, device) — building it per call from a Python list would
    make every frame wait for the GPU (a host-to-device copy from pageable memory)."""
    src = (torch.arange(factor, dtype=torch.float32) + 0.5) / factor - 0.5
    # phase k < half samples rows (i-1, i), phase k >= half rows (i, i+1)
    t = [s if s >= 0 else 1.0 + s for s in src.tolist()]
    return torch.tensor(t, device=device).view(1, 1, factor, 1)


def upsample_part(
    lo: torch.Tensor, factor: int, height: int, width: int, box: tuple[int, int, int, int]
) -> torch.Tensor:
    """Rows y0:y1, columns x0:x1 of `upsample(lo, factor, height, width)` (y0, x0 multiples of
    `factor`), upsampling only the low-res cells that reach them (one cell of margin: bilinear
    samples at most one neighbour cell, so the margin's own wrong edge values are cut off)."""
    y0, y1, x0, x1 = box
    _, lh, lw = lo.shape
    ly0, lx0 = max(0, y0 // factor - 1), max(0, x0 // factor - 1)
    ly1, lx1 = min(lh, -(-y1 // factor) + 1), min(lw, -(-x1 // factor) + 1)
    if (ly0, ly1, lx0, lx1) == (0, lh, 0, lw):
        return upsample(lo, factor, height, width)[:, y0:y1, x0:x1]
    sub = lo[:, ly0:ly1, lx0:lx1]
    hh = min(height, ly1 * factor) - ly0 * factor
    ww = min(width, lx1 * factor) - lx0 * factor
    oy, ox = ly0 * factor, lx0 * factor
    return upsample(sub, factor, hh, ww)[:, y0 - oy : y1 - oy, x0 - ox : x1 - ox]


def upsample_rows(lo: torch.Tensor, factor: int, height: int, width: int, box):
    """What `upsample_part(lo, factor, height, width, box)` interpolates along y, for a caller
    that does that step itself (the compiled toon pass): (p, oy, ox) with p (rows, cols) the
    x-interpolated low rows of the one plane of `lo`, edge rows repeated, so that box pixel
    (j, i) at phase k = (j + oy) % factor, base row b = (j + oy) // factor + (k >= factor / 2)
    is p[b, i + ox] · (1 - wn[k]) + p[b + 1, i + ox] · wn[k] (wn: `phase_weights`)."""
    y0, y1, x0, x1 = box
    _, lh, lw = lo.shape
    ly0, lx0 = max(0, y0 // factor - 1), max(0, x0 // factor - 1)
    ly1, lx1 = min(lh, -(-y1 // factor) + 1), min(lw, -(-x1 // factor) + 1)
    if (ly0, ly1, lx0, lx1) == (0, lh, 0, lw):
        sub, ww, oy, ox = lo, width, 0, 0
    else:
        sub, oy, ox = lo[:, ly0:ly1, lx0:lx1], ly0 * factor, lx0 * factor
        ww = min(width, lx1 * factor) - ox
    x = F.interpolate(sub, scale_factor=float(factor), mode="linear", align_corners=False)
    x = x[..., :ww]
    return torch.cat([x[:, :1], x, x[:, -1:]], 1)[0], y0 - oy, x0 - ox


def phase_weights(factor: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(factor,) weight of the later low row per output phase of `upsample`."""
    return _phase_weights(factor, torch.device(device)).flatten()


def pool_into(x: torch.Tensor, factor: int, lh: int, lw: int, box) -> torch.Tensor:
    """Pool planar (C, bh, bw) that sits at `box` (y0, y1, x0, x1; y0, x0 multiples of
    `factor`) of a window whose pooled grid is (lh, lw) and is zero elsewhere -> (C, lh, lw)."""
    y0, y1, x0, x1 = box
    out = torch.zeros((x.shape[0], lh, lw), dtype=x.dtype, device=x.device)
    if y1 > y0 and x1 > x0:
        out[:, y0 // factor : -(-y1 // factor), x0 // factor : -(-x1 // factor)] = pool(x, factor)
    return out


def luma_p(c: torch.Tensor) -> torch.Tensor:
    """planar (3, h, w) -> (h, w)."""
    out = torch.mul(c[0], LUMA[0])
    out.add_(c[1], alpha=LUMA[1])
    return out.add_(c[2], alpha=LUMA[2])
