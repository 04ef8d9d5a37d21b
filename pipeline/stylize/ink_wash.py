"""`ink-wash` (sumi-e): luminance becomes ink density on paper; everything is monochrome
except where the source is reddish (the vermilion accent). Wet edges: pigment pools along the
silhouette and along tonal boundaries; ink bleeds a soft halo into the paper; the paper texture
is multiplied into the idol so ink and paper share one surface."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.stylize import common as C
from pipeline.stylize.base import Effect
from render.backgrounds import paper_grain


class InkWash(Effect):
    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        p = self.post
        bgc = preset.background.colors
        self.register_buffer("ink", C.color(p.ink or "#161514"), persistent=False)
        self.register_buffer("accent", C.color(p.accent or preset.palette.accent), persistent=False)
        paper_hex = bgc[0] if preset.background.kind == "paper" else "#f3ecdc"
        self.register_buffer("paper_col", C.color(paper_hex), persistent=False)
        tex = paper_grain(width, height, 0).unsqueeze(-1)
        self.register_buffer("tex", 1.0 + p.paper * (tex - 1.0), persistent=False)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        p = self.post
        _, H, W, _ = x.shape
        f = x.float() * (1.0 / 255.0)
        c, a = f[..., :3], f[..., 3:4]
        u = c / a.clamp(min=1.0 / 255.0)  # straight colour
        lum = C.luma(u)
        # accent mask: clearly red, saturated source colours keep (a vermilion version of) colour
        red = u[..., 0:1] - torch.maximum(u[..., 1:2], u[..., 2:3])
        m = (red * 4.0 - 0.9).clamp(0, 1)
        # ink density from luminance, with a gentle toe so light skin stays paper
        d = ((0.94 - lum) * (1.0 / 0.8)).clamp(0, 1)
        d = d * (1.25 - 0.25 * d)  # gentle lift of the mid washes (cheap gamma)
        # low-res fields: blurred alpha (silhouette), blurred ink (bleed, tonal pooling)
        low = C.down(torch.cat([a, lum * a, d * a], dim=-1), 4)
        near_low, wide_low = C.blur(low, 1, 3), C.blur(F.avg_pool2d(low, 2), 2, 5)
        C.materialize()
        near, wide = C.up(near_low, H, W), C.up(wide_low, H, W)
        ab, lb = near[..., 0:1], near[..., 1:2]
        if p.wet_edges > 0:
            rim = ((1.0 - ab) * 3.0).clamp(0, 1) * a  # just inside the silhouette
            pool = ((lb / ab.clamp(min=0.05) - lum) * 3.0).clamp(0, 1)  # dark side of a boundary
            d = d + (1.0 - d) * (0.45 * rim + 0.35 * pool) * p.wet_edges
            d = d.clamp(0, 1)
        mono = self.paper_col + (self.ink - self.paper_col) * d
        vermilion = (self.accent * 0.65 + u * 0.35) * (0.55 + 0.45 * lum)
        col = mono + (vermilion - mono) * m
        col = col * self.tex
        idol = col * a
        if self.transparent:
            out, alpha = idol, a
        else:
            out, alpha = idol + self.bg * (1.0 - a), a
        if p.ink_bleed > 0:
            bleed = (wide[..., 2:3] * (0.45 * p.ink_bleed)).clamp(0, 0.8) * (1.0 - a)
            out = out + (self.ink * self.tex - (0.0 if self.transparent else out)) * bleed
            alpha = alpha + bleed
        if p.vignette > 0:
            out = out * self.vignette
        if self.grain_amount > 0:
            out = out + self.grain_for(idx) * (0.02 * self.grain_amount) * alpha
        return self.finish(out, alpha)
