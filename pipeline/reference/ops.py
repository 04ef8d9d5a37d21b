"""Shared building blocks of the reference painters: planar float32 NCHW tensors, 0..1.

Everything here is batched (B, C, H, W), deterministic and batch-independent: only
element-wise arithmetic, slicing, pooling, bilinear interpolation and grid_sample (their
forward passes are deterministic on CPU and CUDA), no convolutions (whose algorithm choice can
depend on the batch size) and no reductions across pixels or frames.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from presets.schema import rgb

LUMA = (0.299, 0.587, 0.114)
GOLDEN = math.pi * (3.0 - math.sqrt(5.0))  # golden angle: even spiral sample patterns


def color(hex_color: str) -> torch.Tensor:
    """'#rrggbb' -> float32 (3,) 0..1."""
    return torch.tensor([c / 255.0 for c in rgb(hex_color)], dtype=torch.float32)


def planar(x: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 4) -> float32 (B, 4, H, W) 0..1, contiguous."""
    return x.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format) / 255.0


def opaque_u8(c: torch.Tensor) -> torch.Tensor:
    """float (B, 3, H, W) 0..1 -> uint8 (B, H, W, 4), rounded, alpha 255."""
    b, _, h, w = c.shape
    out = torch.empty((b, h, w, 4), dtype=torch.uint8, device=c.device)
    out[..., 3] = 255
    q = c.mul(255.0).add_(0.5).clamp_(0.0, 255.0).floor_()
    out[..., :3] = q.permute(0, 2, 3, 1).to(torch.uint8)
    return out


def luma(c: torch.Tensor) -> torch.Tensor:
    """(B, 3, H, W) -> (B, 1, H, W)."""
    return c[:, 0:1] * LUMA[0] + c[:, 1:2] * LUMA[1] + c[:, 2:3] * LUMA[2]


def straight(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """premultiplied (B, 4, H, W) -> straight colour (B, 3, H, W) (0 where alpha is 0) and
    alpha (B, 1, H, W)."""
    a = p[:, 3:4]
    return p[:, :3] / a.clamp(min=1.0 / 255.0), a


def smoothstep(e0: float, e1: float, x: torch.Tensor) -> torch.Tensor:
    t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def _box1d(x: torch.Tensor, r: int, dim: int) -> torch.Tensor:
    """Mean over a (2r+1) window along dim (-1 or -2), the window shrinking at the edges.
    Shifted adds for small windows, a running sum (cumsum) for wide ones; a run of zeros
    stays exactly zero either way."""
    n = x.shape[dim]
    i = torch.arange(n, device=x.device, dtype=torch.float32)
    cnt = (torch.clamp(i + r, max=n - 1) - torch.clamp(i - r, min=0) + 1).reciprocal_()
    cnt = cnt if dim == -1 else cnt.view(n, 1)
    pad = (r, r, 0, 0) if dim == -1 else (0, 0, r, r)
    if r <= 3:
        xp = F.pad(x, pad)
        s = xp.narrow(dim, 0, n).clone()
        for j in range(1, 2 * r + 1):
            s += xp.narrow(dim, j, n)
        return s.mul_(cnt)
    pad = (r + 1, r, 0, 0) if dim == -1 else (0, 0, r + 1, r)
    c = F.pad(x, pad).cumsum(dim)
    return (c.narrow(dim, 2 * r + 1, n) - c.narrow(dim, 0, n)).mul_(cnt)


def box(x: torch.Tensor, r: int) -> torch.Tensor:
    """Box blur of radius r (window 2r+1), the window shrinking at the frame edges."""
    if r <= 0:
        return x
    return _box1d(_box1d(x, r, -1), r, -2)


def min_pool(x: torch.Tensor, r: int) -> torch.Tensor:
    """Erosion (separable (2r+1)^2 minimum)."""
    return -max_pool(-x, r)


def max_pool(x: torch.Tensor, r: int) -> torch.Tensor:
    """Dilation (separable (2r+1)^2 maximum)."""
    if r <= 0:
        return x
    x = F.max_pool2d(x, (1, 2 * r + 1), 1, (0, r))
    return F.max_pool2d(x, (2 * r + 1, 1), 1, (r, 0))


def resize(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    if x.shape[-2:] == (h, w):
        return x
    return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)


def down(x: torch.Tensor, f: int) -> torch.Tensor:
    """Box-downsample by f (partial cells at the far edges)."""
    return x if f == 1 else F.avg_pool2d(x, f, ceil_mode=True)


def blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Approximate Gaussian blur (three box passes); wide ones on a downsampled grid."""
    if sigma < 0.4:
        return x
    h, w = x.shape[-2:]
    f = 1
    while sigma / f > 4.0 and min(h, w) // (2 * f) >= 4:
        f *= 2
    y = down(x, f)
    s = sigma / f
    r = max(1, round((math.sqrt(4.0 * s * s + 1.0) - 1.0) / 2.0))
    for _ in range(3):
        y = box(y, r)
    return resize(y, h, w)


def shift(x: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """out[y, x] = x[y + dy, x + dx] with the border replicated."""
    if dy == 0 and dx == 0:
        return x
    h, w = x.shape[-2:]
    py, px = abs(dy), abs(dx)
    xp = F.pad(x, (px, px, py, py), mode="replicate")
    return xp[..., py + dy : py + dy + h, px + dx : px + dx + w]


def grad(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Central differences (replicated border) of (B, 1, H, W)."""
    zp = F.pad(z, (1, 1, 1, 1), mode="replicate")
    gx = (zp[..., 1:-1, 2:] - zp[..., 1:-1, :-2]) * 0.5
    gy = (zp[..., 2:, 1:-1] - zp[..., :-2, 1:-1]) * 0.5
    return gx, gy


def grid(h: int, w: int) -> torch.Tensor:
    """grid_sample coordinates (align_corners=False) of every pixel centre: (1, H, W, 2)."""
    ys = (torch.arange(h, dtype=torch.float32) + 0.5) / h * 2.0 - 1.0
    xs = (torch.arange(w, dtype=torch.float32) + 0.5) / w * 2.0 - 1.0
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], -1)[None].contiguous()


def sample(x: torch.Tensor, g: torch.Tensor, padding: str = "border") -> torch.Tensor:
    """Bilinear lookup of (B, C, H, W) at normalized coordinates g (B or 1, h, w, 2)."""
    if g.shape[0] != x.shape[0]:
        g = g.expand(x.shape[0], -1, -1, -1)
    if x.shape[0] != g.shape[0]:
        x = x.expand(g.shape[0], -1, -1, -1)
    return F.grid_sample(x, g, mode="bilinear", padding_mode=padding, align_corners=False)


def value_noise(h: int, w: int, cells: float, seed: int, octaves: int = 3) -> torch.Tensor:
    """Smooth fixed noise (H, W) with zero mean and ~unit std: bicubic random grids."""
    g = torch.Generator().manual_seed(seed)
    acc = torch.zeros(h, w)
    amp = 1.0
    for o in range(octaves):
        gx = max(2, round(cells * 2**o))
        gy = max(2, round(gx * h / w))
        lo = torch.randn((1, 1, gy, gx), generator=g)
        acc += amp * F.interpolate(lo, size=(h, w), mode="bicubic", align_corners=True)[0, 0]
        amp *= 0.5
    return (acc - acc.mean()) / acc.std().clamp(min=1e-6)


ENV_CELL = 8  # the envelope's grid: 8-pixel cells


def _envelope_cells(reach: float) -> tuple[int, int]:
    rc = max(1, round(reach / (2 * ENV_CELL)))  # core dilation in cells
    rb = max(1, round(reach / (6 * ENV_CELL)))  # each of three box passes
    return rc, rb


def envelope_bound(reach: float) -> int:
    """How far (pixels, in x or y: a square neighbourhood) `envelope(a, reach)` can be
    nonzero around a pixel with alpha > 0."""
    rc, rb = _envelope_cells(reach)
    return ENV_CELL * (rc + 3 * rb + 2)  # + the cell itself and the bilinear neighbour


def envelope(a: torch.Tensor, reach: float) -> torch.Tensor:
    """A smooth 0..1 mask (B, 1, H, W) that is 1 on and near the idol (alpha > 0) and exactly
    0 beyond `envelope_bound(reach)` pixels from her: the reach of everything she throws onto
    the scene (shadows, glows, shafts, reflections), so far-away background is bit-for-bit
    static. Dilation (~reach/2) and three box passes that ramp it down over the remaining
    ~reach/2 run on a grid of 8-pixel cells."""
    h, w = a.shape[-2:]
    rc, rb = _envelope_cells(reach)
    m = F.max_pool2d((a > 0).to(a.dtype), ENV_CELL, ceil_mode=True)
    m = max_pool(m, rc)
    for _ in range(3):
        m = box(m, rb)
    return resize(smoothstep(0.0, 0.6, m), h, w)


def pillow(mask: torch.Tensor, iters: tuple[int, ...] = (120, 60, 40, 30, 30)) -> torch.Tensor:
    """Inflated height field ("pillow") of a soft region mask (B, 1, H, W) in pixels.

    Solves the Poisson problem lap(q) = -1 inside the mask with q = 0 outside (Jacobi
    iterations, coarse to fine over grids 1/16 .. 1/1, each started from the coarser
    solution); sqrt(4 q) is then exactly a hemisphere over a disc: a round cross-section over
    any shape, lowest along the region's boundaries (the silhouette and drawn lines).
    The frame border is replicated, so parts cut by the frame stay high there."""
    factors = (16, 8, 4, 2, 1)[-len(iters) :]
    q = None
    for f, n in zip(factors, iters, strict=True):
        m = down(mask, f)
        q = torch.zeros_like(m) if q is None else resize(q, *m.shape[-2:])
        src = 0.25 * f * f
        for _ in range(n):
            qp = F.pad(q, (1, 1, 1, 1), mode="replicate")
            s = qp[..., :-2, 1:-1] + qp[..., 2:, 1:-1]
            s += qp[..., 1:-1, :-2]
            s += qp[..., 1:-1, 2:]
            q = s.mul_(0.25).add_(src).mul_(m)
    return q.mul(4.0).sqrt_()


def normals(z: torch.Tensor, sigma: float = 0.0) -> torch.Tensor:
    """Unit surface normals (B, 3, H, W) of a height field in pixels (x right, y down, z out
    of the screen)."""
    gx, gy = grad(blur(z, sigma) if sigma > 0 else z)
    inv = (gx * gx + gy * gy + 1.0).rsqrt()
    return torch.cat([-gx * inv, -gy * inv, inv], 1)


def spiral(n: int, radius: float, seed_angle: float = 0.0) -> list[tuple[int, int, float]]:
    """n integer offsets (dy, dx, distance) on a golden-angle spiral filling a disc, distinct,
    nearest first: fixed sample patterns (no per-frame randomness)."""
    out: list[tuple[int, int, float]] = []
    seen = {(0, 0)}
    k = 0
    while len(out) < n and k < 50 * n:
        r = radius * math.sqrt((k + 0.5) / n)
        t = seed_angle + k * GOLDEN
        dy, dx = round(r * math.sin(t)), round(r * math.cos(t))
        k += 1
        if (dy, dx) in seen:
            continue
        seen.add((dy, dx))
        out.append((dy, dx, math.hypot(dy, dx)))
    return out


def pyramid_glow(x: torch.Tensor, weights: tuple[float, ...]) -> torch.Tensor:
    """Multi-scale glow: len(weights) levels of 2x box downsampling (each with a 3x3 blur),
    summed back coarse-to-fine with bilinear upsampling and a small blur at every step (the
    'dual filter' bloom of game engines). weights[0] is the finest (1/2) level."""
    levels = []
    cur = x
    for _ in weights:
        if min(cur.shape[-2:]) < 2:
            break
        cur = box(down(cur, 2), 1)
        levels.append(cur)
    acc = levels[-1] * weights[len(levels) - 1]
    for lev, wt in zip(reversed(levels[:-1]), reversed(weights[: len(levels) - 1]), strict=True):
        acc = box(resize(acc, *lev.shape[-2:]), 1) + lev * wt
    return resize(acc, *x.shape[-2:])


def hue_cos(phase: torch.Tensor) -> torch.Tensor:
    """Thin-film / iridescent colour wheel: (B, 1, H, W) phase in turns -> (B, 3, H, W)."""
    off = torch.tensor([0.0, 1.0 / 3.0, 2.0 / 3.0], device=phase.device).view(1, 3, 1, 1)
    return torch.cos((phase + off) * (2.0 * math.pi)).mul_(0.5).add_(0.5)


def palette_mask(u: torch.Tensor, a: torch.Tensor, cols: torch.Tensor, tol: float) -> torch.Tensor:
    """How close the straight colour u is to any of cols (K, 3): (B, 1, H, W) 0..1, x alpha."""
    best = None
    for k in range(cols.shape[0]):
        d = (u - cols[k].view(1, 3, 1, 1)).square().sum(1, keepdim=True)
        best = d if best is None else torch.minimum(best, d)
    return torch.exp(-best / (tol * tol)) * a
