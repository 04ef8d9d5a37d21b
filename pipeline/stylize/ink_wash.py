"""`ink-wash` (sumi-e): luminance becomes ink density on paper; everything is monochrome
except where the source is reddish (the vermilion accent). Wet edges: pigment pools along the
silhouette and along tonal boundaries; ink bleeds a soft halo into the paper; the paper texture
is multiplied into the idol so ink and paper share one surface. Dry brush on the big dark
masses (the hair): the reference painter's own bristle streaks (its fixed grain, traced
straight down) break the ink, more the further the brush has run down the mass — so the
hair has strands, and a model painting from this look sees where the painter's streaks lie."""

from __future__ import annotations

import numpy as np
import torch

from pipeline.reference import ink_wash as reference_ink_wash
from pipeline.reference import ops as reference_ops
from pipeline.reference.ink_wash import dry_brush_cut_noise, straight_streaks
from pipeline.reference.ops import smoothstep
from pipeline.stylize import common as C
from pipeline.stylize.base import Effect
from render import backgrounds
from render.backgrounds import LIBRARIES, paper_grain
from render.disk_cache import cached_array

DRY_LIGHTEN = 0.45  # how much ink a bristle gap takes from the mass (the wash under it stays)


def _stored_streaks(width: int, height: int, seed: int) -> torch.Tensor:
    """straight_streaks (H, W), read back from the cache folder where an earlier run stored it:
    drawing it is the look's largest set-up cost after its empty frames (docs/BENCHMARKS.md)."""
    arr = cached_array(
        "streaks",
        f"{LIBRARIES}|straight streaks|{width}x{height}|{seed}",
        lambda: straight_streaks(width, height, seed)[0, 0].numpy(),
        (height, width),
        np.float32,
        keep=8,
        sources=(reference_ink_wash.__file__, reference_ops.__file__, backgrounds.__file__),
    )
    return torch.from_numpy(arr)


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
        self.register_buffer("bgv255", self.bg * v255, persistent=False)
        self.register_buffer("grain255", self.grain * (0.02 * self.grain_amount * 255.0), False)
        self.register_buffer("streaks", _stored_streaks(width, height, seed), False)
        self.register_buffer("cut_noise", dry_brush_cut_noise(width, height, seed)[0, 0], False)
        self.run_scale = 4.0 / (160.0 * height / 360.0)  # low-res rows -> a 160-line stroke

    def _colour(self, pt: torch.Tensor, low: torch.Tensor, win, box) -> torch.Tensor:
        """Full colour math on the idol's box (window coordinates) of window `win` (frame
        coordinates): planar (4, bh, bw) input -> ink/accent colour (3, bh, bw) straight (not
        yet under alpha, paper texture or bleed)."""
        h, w = win[1] - win[0], win[3] - win[2]
        p = self.post
        c, a = pt[:3], pt[3]
        u = c.mul_(a.clamp(min=1.0 / 255.0).reciprocal_())  # straight colour (in place)
        lum = C.luma_p(u)
        # accent mask: clearly red, saturated source colours keep (a vermilion version of) colour
        m = torch.maximum(u[1], u[2]).mul_(-4.0).add_(u[0], alpha=4.0).sub_(0.9).clamp_(0, 1)
        # ink density from luminance, with a gentle toe so light skin stays paper
        d = torch.mul(lum, -1.25).add_(0.94 * 1.25).clamp_(0, 1)
        d.mul_(torch.mul(d, -0.25).add_(1.25))
        if low is not None:  # the low-res fields over the whole window: pool this box into it
            lh, lw = low.shape[1:]
            low.copy_(C.pool_into(torch.stack([a, lum * a, d * a]), 4, lh, lw, box))
        if p.wet_edges > 0:
            ab, lb = C.upsample_part(C.blur_p(low[:2], 1, 3), 4, h, w, box)
            rim = torch.mul(ab, -3.0).add_(3.0).clamp_(0, 1).mul_(a)  # just inside the silhouette
            pool = lb.div_(ab.clamp_(min=0.05)).sub_(lum).mul_(3.0).clamp_(0, 1)
            e = rim.mul_(0.45).add_(pool, alpha=0.35).mul_(p.wet_edges)
            d.add_(e.mul_(1.0 - d)).clamp_(0, 1)
        self._dry_brush(d, low, win, box)
        col = torch.empty_like(u)
        for k in range(3):  # monochrome ink on paper
            torch.mul(d, self.ink[k] - self.paper_col[k], out=col[k]).add_(self.paper_col[k])
        # the vermilion accent only where red pixels are (their box; on the CPU only: finding
        # it reads the mask back to the host)
        ry0, ry1, rx0, rx1 = 0, m.shape[0], 0, m.shape[1]
        if m.device.type == "cpu" and self.tight is not None:
            rows = torch.nonzero(m.amax(1)).flatten()
            if rows.numel() == 0:
                return col
            cols = torch.nonzero(m.amax(0)).flatten()
            ry0, ry1 = int(rows[0]), int(rows[-1]) + 1
            rx0, rx1 = int(cols[0]), int(cols[-1]) + 1
        mr, ur = m[ry0:ry1, rx0:rx1], u[:, ry0:ry1, rx0:rx1]
        light = lum[ry0:ry1, rx0:rx1].mul(0.45).add_(0.55)
        for k in range(3):
            mono = col[k, ry0:ry1, rx0:rx1]
            verm = torch.mul(ur[k], 0.35).add_(self.accent[k] * 0.65).mul_(light)
            mono.addcmul_(verm.sub_(mono), mr)
        return col

    def _dry_brush(self, d: torch.Tensor, low: torch.Tensor, win, box) -> None:
        """Lighten the ink density d (bh, bw, in place) in the bristle gaps of the big dark
        masses. The masses come from the low-res fields (an opening: the eyes and lines are
        too small to count); the running-dry sum goes down the window's columns."""
        # low[2]: the pooled ink density x coverage
        core = smoothstep(0.7, 0.85, C.blur_p(smoothstep(0.55, 0.85, low[2])[None], 2, 3))
        mass = smoothstep(0.05, 0.3, C.blur_p(core, 2, 3))
        run = mass.cumsum(1).mul_(self.run_scale)
        cut = smoothstep(0.15, 1.0, run).mul_(1.3).sub_(1.0)
        y0, y1, x0, x1 = box
        if d.device.type == "cpu":
            # only the part of the box the masses reach (one low-res cell of bilinear margin);
            # on the CPU only: finding it reads the masses back to the host
            rows, cols = torch.nonzero(mass[0].amax(1)).flatten(), torch.nonzero(mass[0].amax(0))
            if rows.numel() == 0:
                return
            y0, x0 = max(y0, 4 * int(rows[0]) - 4), max(x0, 4 * int(cols[0]) - 4)
            y1, x1 = min(y1, 4 * int(rows[-1]) + 8), min(x1, 4 * int(cols[-1]) + 8)
            if y1 <= y0 or x1 <= x0:
                return
        h, w = win[1] - win[0], win[3] - win[2]
        mass, cut = C.upsample_part(torch.cat([mass, cut]), 4, h, w, (y0, y1, x0, x1))
        ys, xs = slice(win[0] + y0, win[0] + y1), slice(win[2] + x0, win[2] + x1)
        # gap = smoothstep(-0.25, 0.25, cut - streak): 1 where the bristles left paper
        t = cut.add_(self.cut_noise[ys, xs], alpha=0.3).sub_(self.streaks[ys, xs])
        t.mul_(2.0).add_(0.5).clamp_(0.0, 1.0)
        gap = torch.mul(t, -2.0).add_(3.0).mul_(t).mul_(t)
        dm = d[y0 - box[0] : y1 - box[0], x0 - box[2] : x1 - box[2]]
        gap.mul_(mass).mul_(smoothstep(0.55, 0.85, dm))  # on the mass's solid ink only
        dm.mul_(gap.mul_(-DRY_LIGHTEN).add_(1.0))

    def compute(self, pl, win, g):
        p = self.post
        y0, y1, x0, x1 = win
        h, w = pl.shape[1:]
        ty0, ty1, tx0, tx1 = box = self.tight_box(h, w)
        a = pl[3].clone()
        low = pl.new_zeros((3, -(-h // 4), -(-w // 4)))
        col = self._colour(pl[:, ty0:ty1, tx0:tx1], low, win, box)
        # ink bleed: a soft halo of ink into the paper around the idol (the whole window)
        na = 1.0 - a
        bl = None
        if p.ink_bleed > 0:
            wide = C.upsample(C.blur_p(C.pool(low[2:3], 2), 2, 5), 8, h, w)[0]
            bl = wide.mul_(0.45 * p.ink_bleed).clamp_(0, 0.8).mul_(na)
        tv = self.tv255[y0:y1, x0:x1]
        alpha = a if bl is None else a + bl
        out = torch.empty((3, h, w), dtype=pl.dtype, device=pl.device)
        if self.transparent:
            out.zero_()
        else:
            nb = na if bl is None else na.mul_(1.0 - bl)
            torch.mul(self.bgv255[:, y0:y1, x0:x1], nb, out=out)
        if bl is not None:
            qb = torch.mul(bl, tv)
            for k in range(3):  # bleed colour: ink under the paper texture
                out[k].add_(qb, alpha=self.ink[k])
        # the idol itself: colour x paper texture (x the bleed's cover), its box only
        at = a[ty0:ty1, tx0:tx1]
        q = torch.mul(at, tv[ty0:ty1, tx0:tx1])
        if bl is not None and not self.transparent:
            q.mul_(1.0 - bl[ty0:ty1, tx0:tx1])
        out[:, ty0:ty1, tx0:tx1].addcmul_(col, q)
        const = torch.full_like(a, 0.5)
        if self.grain_amount > 0:
            const.addcmul_(self.grain255[g, y0:y1, x0:x1], alpha)
        out.add_(const)
        return out, (alpha.clamp(0, 1).mul_(255.0).add_(0.5) if self.transparent else None)
