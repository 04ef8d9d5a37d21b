"""`toon`: the clean look. Soft inner-edge shading, optional posterize, saturation, vignette.

Per pixel (premultiplied c, alpha a, vignette v, 1/8-res blurred alpha ab):
    shade = 1 - 0.35 * shading * clamp((1 - ab) * 2.5, 0, 1) * a
    c' = saturate(c) * shade                 (saturation is linear, so it commutes with shade)
    out = c' * v + (bg * v) * (1 - a) + grain
"""

from __future__ import annotations

import torch

from pipeline.stylize import common as C
from pipeline.stylize.base import Effect


class Toon(Effect):
    reach = 32  # shading only acts inside the silhouette; 2 blur passes of 1/8-res cells

    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        self.register_buffer("v255", self.vignette * 255.0, persistent=False)
        if not transparent:  # background already under the vignette, in 0..255
            self.register_buffer("bgv255", self.bg * self.v255, persistent=False)
        self.register_buffer("grain255", self.grain * (0.04 * self.grain_amount * 255.0), False)

    def compute(self, p, win, g):
        post = self.post
        y0, y1, x0, x1 = win
        h, w = p.shape[1:]
        c, a = p[:3], p[3]
        sv = self.v255[y0:y1, x0:x1] if post.vignette > 0 else None
        if post.shading > 0:
            ab = C.upsample(C.blur_p(C.pool(p[3:4], 8), 2, 3), 8, h, w)[0]
            shade = ab.mul_(-2.5).add_(2.5).clamp_(0, 1).mul_(a)
            shade.mul_(-0.35 * post.shading).add_(1.0)
            sv = shade.mul_(sv) if sv is not None else shade.mul_(255.0)
        if sv is None:
            sv = torch.full_like(a, 255.0)
        if post.saturation != 1.0:
            lum = C.luma_p(c).mul_(1.0 - post.saturation)
            c = torch.add(lum, c, alpha=post.saturation)
        if post.posterize > 1:
            n = float(post.posterize - 1)
            u = c / a.clamp(min=1.0 / 255.0)
            c = torch.floor(u * n + 0.5).mul_(1.0 / n).mul_(a)
        out = c.mul_(sv)
        if not self.transparent:
            out.addcmul_(self.bgv255[:, y0:y1, x0:x1], 1.0 - a)
        if self.grain_amount > 0:
            gr = self.grain255[g, y0:y1, x0:x1]
            out.add_(gr if not self.transparent else gr * a)
        return out.add_(0.5), None
