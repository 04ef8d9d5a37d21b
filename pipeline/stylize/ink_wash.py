"""`ink-wash` (sumi-e): luminance becomes ink density on paper; everything is monochrome
except where the source is reddish (the vermilion accent). Wet edges: pigment pools along the
silhouette and along tonal boundaries; ink bleeds a soft halo into the paper; the paper texture
is multiplied into the idol so ink and paper share one surface."""

from __future__ import annotations

import torch

from pipeline.stylize import common as C
from pipeline.stylize.base import Effect
from render.backgrounds import paper_grain


class InkWash(Effect):
    reach = 64  # wide bleed: 1/8-res cells, 2 blur passes of 5

    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        p = self.post
        bgc = preset.background.colors
        self.ink = C.color(p.ink or "#161514").tolist()
        self.accent = C.color(p.accent or preset.palette.accent).tolist()
        paper_hex = bgc[0] if preset.background.kind == "paper" else "#f3ecdc"
        self.paper_col = C.color(paper_hex).tolist()
        tex = 1.0 + p.paper * (paper_grain(width, height, 0) - 1.0)
        v255 = self.vignette * 255.0
        self.register_buffer("tv255", tex * v255, persistent=False)  # texture x vignette
        ink = torch.tensor(self.ink).view(3, 1, 1)
        self.register_buffer("inkv255", ink * tex * v255, persistent=False)  # bleed colour
        self.register_buffer("bgv255", self.bg * v255, persistent=False)
        self.register_buffer("grain255", self.grain * (0.02 * self.grain_amount * 255.0), False)

    def compute(self, pl, win, g):
        p = self.post
        y0, y1, x0, x1 = win
        h, w = pl.shape[1:]
        c, a = pl[:3], pl[3]
        u = c.mul_(a.clamp(min=1.0 / 255.0).reciprocal_())  # straight colour (in place)
        lum = C.luma_p(u)
        # accent mask: clearly red, saturated source colours keep (a vermilion version of) colour
        m = torch.maximum(u[1], u[2]).mul_(-4.0).add_(u[0], alpha=4.0).sub_(0.9).clamp_(0, 1)
        # ink density from luminance, with a gentle toe so light skin stays paper
        d = torch.mul(lum, -1.25).add_(0.94 * 1.25).clamp_(0, 1)
        d.mul_(torch.mul(d, -0.25).add_(1.25))
        # low-res fields: blurred alpha (silhouette), blurred ink (bleed, tonal pooling)
        low = C.pool(torch.stack([a, lum * a, d * a]), 4)
        ab, lb = C.upsample(C.blur_p(low[:2], 1, 3), 4, h, w)
        wide = C.upsample(C.blur_p(C.pool(low[2:3], 2), 2, 5), 8, h, w)[0]
        if p.wet_edges > 0:
            rim = torch.mul(ab, -3.0).add_(3.0).clamp_(0, 1).mul_(a)  # just inside the silhouette
            pool = lb.div_(ab.clamp_(min=0.05)).sub_(lum).mul_(3.0).clamp_(0, 1)
            e = rim.mul_(0.45).add_(pool, alpha=0.35).mul_(p.wet_edges)
            d.add_(e.mul_(1.0 - d)).clamp_(0, 1)
        light = lum.mul_(0.45).add_(0.55)
        col = torch.empty_like(u)
        for k in range(3):
            mono = torch.mul(d, self.ink[k] - self.paper_col[k]).add_(self.paper_col[k])
            verm = torch.mul(u[k], 0.35).add_(self.accent[k] * 0.65).mul_(light)
            torch.addcmul(mono, verm.sub_(mono), m, out=col[k])
        na = 1.0 - a
        bl = None
        if p.ink_bleed > 0:
            bl = wide.mul_(0.45 * p.ink_bleed).clamp_(0, 0.8).mul_(na)
        q = a * self.tv255[y0:y1, x0:x1]
        if self.transparent:
            alpha = a if bl is None else a + bl
        else:
            alpha = a if bl is None else a + bl
            nb = na if bl is None else na.mul_(1.0 - bl)
            if bl is not None:
                q.mul_(1.0 - bl)
        out = col.mul_(q)
        if not self.transparent:
            out.addcmul_(self.bgv255[:, y0:y1, x0:x1], nb)
        if bl is not None:
            out.addcmul_(self.inkv255[:, y0:y1, x0:x1], bl)
        const = torch.full_like(a, 0.5)
        if self.grain_amount > 0:
            const.addcmul_(self.grain255[g, y0:y1, x0:x1], alpha)
        out.add_(const)
        return out, (alpha.clamp(0, 1).mul_(255.0).add_(0.5) if self.transparent else None)
