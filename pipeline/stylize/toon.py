"""`toon`: the clean look. Soft inner-edge shading, optional posterize, saturation, vignette."""

from __future__ import annotations

import torch

from pipeline.stylize import common as C
from pipeline.stylize.base import Effect


class Toon(Effect):
    def prepare_background(self, bg: torch.Tensor) -> torch.Tensor:
        return bg

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        p = self.post
        _, H, W, _ = x.shape
        f = x.float() * (1.0 / 255.0)
        c, a = f[..., :3], f[..., 3:4]
        if p.shading > 0:
            # the silhouette's inner rim darkens a little: reads as rounded, cel-shaded volume
            ab = C.up(C.blur(C.down(a, 8), 2, 3), H, W)
            inner = ((1.0 - ab) * 2.5).clamp(0, 1) * a
            c = c * (1.0 - 0.35 * p.shading * inner)
        if p.saturation != 1.0:
            lum = C.luma(c)
            c = lum + (c - lum) * p.saturation
        if p.posterize > 1:
            n = float(p.posterize - 1)
            u = c / a.clamp(min=1.0 / 255.0)
            c = torch.floor(u * n + 0.5) * (1.0 / n) * a
        out = c + self.bg * (1.0 - a) if not self.transparent else c
        if p.vignette > 0:
            out = out * self.vignette
        if self.grain_amount > 0:
            g = self.grain_for(idx) * (0.04 * self.grain_amount)
            out = out + (g if not self.transparent else g * a)
        return self.finish(out, a)
