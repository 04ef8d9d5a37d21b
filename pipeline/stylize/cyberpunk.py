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
    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        p = self.post
        self.register_buffer("rim1", C.color(p.rim_color or "#00e5ff"), persistent=False)
        self.register_buffer("rim2", C.color(p.rim_color2 or "#ff2bd6"), persistent=False)
        self.register_buffer("shadow_tint", torch.tensor(SHADOW_TINT), persistent=False)
        self.register_buffer("hi_tint", torch.tensor(HIGHLIGHT_TINT), persistent=False)
        self.register_buffer("scan", C.scanline_map(height, p.scanlines, "cpu"), persistent=False)
        self.shift = round(p.chromatic * height / 720.0)

    def prepare_background(self, bg: torch.Tensor) -> torch.Tensor:
        p = self.post
        if p.bloom <= 0:
            return bg
        H, W, _ = bg.shape
        x = bg.unsqueeze(0)
        bright = x * ((C.luma(x) - 0.35) * 2.0).clamp(0, 1)
        glow = C.up(C.blur(C.down(bright, 8), 3, 5), H, W)
        return (bg + glow[0] * (0.9 * p.bloom)).clamp(0, 1)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        p = self.post
        _, H, W, _ = x.shape
        f = x.float() * (1.0 / 255.0)
        c, a = f[..., :3], f[..., 3:4]
        u = c / a.clamp(min=1.0 / 255.0)
        lum = C.luma(u)
        # grade: contrast around mid grey, saturation, split tone
        u = ((u - 0.5) * 1.12 + 0.5).clamp(0, 1)
        if p.saturation != 1.0:
            u = (lum + (u - lum) * p.saturation).clamp(0, 1)
        u = u * (self.shadow_tint + (self.hi_tint - self.shadow_tint) * lum)
        c = u * a
        # low-res alpha for the rim lights (1/4 res)
        k = max(1, round(3 * H / 720))
        a4 = C.down(a, 4)
        light = c
        if p.rim_light > 0:
            a4b = C.blur(a4, 1, 3)
            from_left = (a4b - C.shift_x(a4b, k)).clamp(0, 1)  # edge lit from the left
            from_right = (a4b - C.shift_x(a4b, -k)).clamp(0, 1)
            rims = C.up(torch.cat([from_left, from_right], 1), H, W)
            rim = rims[..., 0:1] * self.rim1 + rims[..., 1:2] * self.rim2
            light = c + rim * (a * 1.3 * p.rim_light)
        out = light + self.bg * (1.0 - a) if not self.transparent else light
        alpha = a
        if p.bloom > 0:
            # bright idol parts (and the rims) glow: threshold at 1/4 res, blur at 1/8
            l4 = F.avg_pool2d(C.to_nchw(light), 4, ceil_mode=True)
            bright = l4 * ((C.luma(C.to_nhwc(l4)) - 0.55) * 2.0).clamp(0, 1).permute(0, 3, 1, 2)
            glow = C.up(C.blur(F.avg_pool2d(bright, 2, ceil_mode=True), 2, 5), H, W)
            glow = glow * (0.7 * p.bloom)
            out = out + glow
            if self.transparent:
                alpha = alpha + glow.amax(-1, keepdim=True) * (1.0 - alpha)
        if self.shift > 0:
            s = self.shift
            r = F.pad(out[..., s:, 0:1], (0, 0, 0, s), mode="replicate")
            b = F.pad(out[..., :-s, 2:3], (0, 0, s, 0), mode="replicate")
            out = torch.cat([r, out[..., 1:2], b], dim=-1)
        if p.scanlines > 0:
            out = out * self.scan
        if p.vignette > 0:
            out = out * self.vignette
        if self.grain_amount > 0:
            g = self.grain_for(idx) * (0.05 * self.grain_amount)
            out = out + (g if not self.transparent else g * alpha)
        return self.finish(out, alpha)
