"""`cyberpunk`: neon colour grade (teal shadows, magenta highlights, more contrast and
saturation), two rim lights from the alpha edge (one colour from each side), bloom from a
downsampled blur, CRT scanlines, a slight chromatic aberration, vignette and grain.
The background's own bloom is baked once (it does not move)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.stylize import common as C
from pipeline.stylize.base import Effect

SHADOW_TINT = (0.62, 0.78, 1.18)
HIGHLIGHT_TINT = (1.04, 0.90, 1.08)


class Cyberpunk(Effect):
    reach = 64  # bloom: 1/8-res cells, 2 blur passes of 5; rims; chromatic shift

    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        p = self.post
        # host floats, not buffers: reading a GPU buffer per frame would sync with the GPU
        self.rim_rgb = (
            C.color(p.rim_color or "#00e5ff").tolist(),
            C.color(p.rim_color2 or "#ff2bd6").tolist(),
        )
        self.register_buffer("shadow_tint", torch.tensor(SHADOW_TINT), persistent=False)
        self.register_buffer("hi_tint", torch.tensor(HIGHLIGHT_TINT), persistent=False)
        self.register_buffer("scan", C.scanline_map(height, p.scanlines, "cpu"), persistent=False)
        self.shift = round(p.chromatic * height / 720.0)
        self._consts()

    def prepare_background(self, bg: torch.Tensor) -> torch.Tensor:
        p = self.post
        if p.bloom <= 0:
            return bg
        H, W, _ = bg.shape
        x = bg.unsqueeze(0)
        bright = x * ((C.luma(x) - 0.35) * 2.0).clamp(0, 1)
        glow = C.up(C.blur(C.down(bright, 8), 3, 5), H, W)
        return (bg + glow[0] * (0.9 * p.bloom)).clamp(0, 1)

    def _consts(self) -> None:
        """Static maps in 0..255: scanlines x vignette, and the background already shifted
        by the chromatic aberration (replicate at the frame edges) and under both maps."""
        p = self.post
        sv = torch.ones_like(self.vignette)
        if p.scanlines > 0:
            sv = sv * self.scan.view(-1, 1)
        if p.vignette > 0:
            sv = sv * self.vignette
        self.register_buffer("sv255", sv * 255.0, persistent=False)
        bs = self.bg.clone()
        s = self.shift
        if s > 0:
            bs[0] = F.pad(self.bg[0:1, :, s:], (0, s), mode="replicate")[0]
            bs[2] = F.pad(self.bg[2:3, :, :-s], (s, 0), mode="replicate")[0]
        self.register_buffer("bgs255", bs * self.sv255, persistent=False)
        self.register_buffer("grain255", self.grain * (0.05 * self.grain_amount * 255.0), False)

    def compute(self, pl, win, g):
        p = self.post
        y0, y1, x0, x1 = win
        H, W = self.height, self.width
        h, w = pl.shape[1:]
        c, a = pl[:3], pl[3]
        u = c.mul_(a.clamp(min=1.0 / 255.0).reciprocal_())
        lum = C.luma_p(u)
        # grade: contrast around mid grey, saturation, split tone
        u.mul_(1.12).add_(0.5 - 0.56).clamp_(0, 1)
        if p.saturation != 1.0:
            u.mul_(p.saturation).add_(lum * (1.0 - p.saturation)).clamp_(0, 1)
        sh, hi = SHADOW_TINT, HIGHLIGHT_TINT
        for k in range(3):
            u[k].mul_(torch.mul(lum, hi[k] - sh[k]).add_(sh[k]))
        light = u.mul_(a)  # premultiplied graded colour
        if p.rim_light > 0:
            k = max(1, round(3 * H / 720))
            a4b = C.blur_p(C.pool(pl[3:4], 4), 1, 3)
            from_left = (a4b - C.shift_x(a4b, k)).clamp_(0, 1)
            from_right = (a4b - C.shift_x(a4b, -k)).clamp_(0, 1)
            rims = C.upsample(torch.cat([from_left, from_right]), 4, h, w)
            rims.mul_(a * (1.3 * p.rim_light))
            r1, r2 = self.rim_rgb
            for j in range(3):
                light[j].add_(rims[0], alpha=r1[j]).add_(rims[1], alpha=r2[j])
        alpha = a
        q = light
        if p.bloom > 0:
            l4 = C.pool(light, 4)
            lum4 = C.luma_p(l4).sub_(0.55).mul_(2.0).clamp_(0, 1)
            bright = C.pool(l4.mul_(lum4), 2)
            glow = C.upsample(C.blur_p(bright, 2, 5).mul_(0.7 * p.bloom), 8, h, w)
            if self.transparent:
                gm = torch.maximum(torch.maximum(glow[0], glow[1]), glow[2])
                alpha = gm.mul_(1.0 - a).add_(a)
            q = light.add_(glow)
        if not self.transparent:
            q.addcmul_(self.bg[:, y0:y1, x0:x1], a, value=-1.0)
        # q is zero away from the idol; shift its R left and B right (chromatic aberration)
        sv = self.sv255[y0:y1, x0:x1]
        out = torch.empty_like(q)
        s = self.shift
        torch.mul(q[1], sv, out=out[1])
        if s > 0:
            out[0, :, w - s :].zero_()
            torch.mul(q[0, :, s:], sv[:, : w - s], out=out[0, :, : w - s])
            if x1 == W:  # replicate the frame's last column
                out[0, :, w - s :].addcmul_(q[0, :, w - 1 :], sv[:, w - s :])
            out[2, :, :s].zero_()
            torch.mul(q[2, :, : w - s], sv[:, s:], out=out[2, :, s:])
            if x0 == 0:
                out[2, :, :s].addcmul_(q[2, :, :1], sv[:, :s])
        else:
            torch.mul(q[0], sv, out=out[0])
            torch.mul(q[2], sv, out=out[2])
        out.add_(self.bgs255[:, y0:y1, x0:x1])
        const = torch.full_like(a, 0.5)
        if self.grain_amount > 0:
            gr = self.grain255[g, y0:y1, x0:x1]
            const.add_(gr) if not self.transparent else const.addcmul_(gr, alpha)
        out.add_(const)
        return out, (alpha.clamp(0, 1).mul_(255.0).add_(0.5) if self.transparent else None)
