"""Shared pieces of the procedural post-process: low-resolution blurs, maps, conversions.

Conventions (all kinds): a batch is torch.uint8 (B, H, W, 4) RGBA *premultiplied*, on any
device; inside, colours are float32 0..1 in (B, H, W, C) order ("channels last" — the layout the
frames arrive in, so no transposes). Anything wider than a few pixels (bloom, rim, bleed,
shading) is computed at 1/4 or 1/8 resolution and upsampled bilinearly.
"""

from __future__ import annotations

import math

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
