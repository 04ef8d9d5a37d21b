"""`toon`: the clean look. Soft inner-edge shading, optional posterize, saturation, vignette.

Per pixel (premultiplied c, alpha a, vignette v, 1/8-res blurred alpha ab):
    shade = 1 - 0.35 * shading * clamp((1 - ab) * 2.5, 0, 1) * a
    c' = saturate(c) * shade                 (saturation is linear, so it commutes with shade)
    out = c' * v + (bg * v) * (1 - a) + grain

Opaque frames on the CPU take a shorter path (`_one`, `i420`): every pixel where a = 0 is the
empty frame's (c = 0 there, so out = bg * v + grain), so the colour math runs on the idol's own
box (alpha > 0) instead of the whole window, the rest is copied from the empty frame, and the
box is found with int32 reductions. The low-resolution shading field is still pooled and
blurred on the window's grid in torch; the full-resolution math is one compiled pass
(toon_cpu.py) instead of some thirty torch kernels. The pixels equal the generic path's within
a level (tests/test_stylize.py). On cuda the generic path runs, unchanged.
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline.stylize import common as C
from pipeline.stylize.base import TIGHT_ALIGN as TIGHT
from pipeline.stylize.base import Effect


class Toon(Effect):
    reach = 32  # shading only acts inside the silhouette; 2 blur passes of 1/8-res cells

    def __init__(self, preset, width, height, transparent, seed=0):
        super().__init__(preset, width, height, transparent, seed)
        self.register_buffer("v255", self.vignette * 255.0, persistent=False)
        if not transparent:  # background already under the vignette, in 0..255
            self.register_buffer("bgv255", self.bg * self.v255, persistent=False)
        self.register_buffer("grain255", self.grain * (0.04 * self.grain_amount * 255.0), False)
        if not transparent:  # the opaque CPU path's background terms: bg·v + 0.5 and bg·v / 255
            self.register_buffer("bgv_half", self.bgv255 + 0.5, persistent=False)
            self.register_buffer("bgv_unit", self.bgv255 / 255.0, persistent=False)

    def compute(self, p, win, g):
        h, w = p.shape[1:]
        ab = None
        if self.post.shading > 0:
            ab = C.upsample(C.blur_p(C.pool(p[3:4], 8), 2, 3), 8, h, w)[0]
        return self._colour(p, ab, win, g), None

    def _colour(self, p, ab, box, g):
        """The colour math on planar p (4, h, w) at frame box (y0, y1, x0, x1), with `ab` the
        upsampled blurred alpha there (None: no shading) -> rgb (3, h, w) in 0..255 (+0.5)."""
        post = self.post
        y0, y1, x0, x1 = box
        c, a = p[:3], p[3]
        sv = self.v255[y0:y1, x0:x1] if post.vignette > 0 else None
        if ab is not None:
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
        return out.add_(0.5)

    # ---- the opaque CPU path ------------------------------------------------------------

    def _one(self, x, out, g):
        if not self.gives_i420 or x.device.type != "cpu":
            super()._one(x, out, g)
            return
        from pipeline.stylize import toon_cpu

        empty = self._empty(x.device)[g]
        extent = C.alpha_extent(x)
        if extent is None:
            out.copy_(empty)
            return
        win, box = self._boxes(extent)
        C.copy_outside(out, empty, box)
        toon_cpu.rgba_box(_u32(x), box, self._consts(x, win, box, g), _u32(out))

    # ---- I420 straight from the colour math (the CPU chain's MP4) -------------------------

    @property
    def gives_i420(self) -> bool:
        """Whether `i420` can make this effect's frames (opaque, the CPU path's look)."""
        return not self.transparent and self.post.posterize <= 1 and self.crop

    def i420(self, x: torch.Tensor, g: int) -> torch.Tensor:
        """Frame x uint8 (H, W, 4) on the CPU with grain variant g -> its stylized picture as
        I420 planes, uint8 (H * 3 // 2, W): `rgba_to_i420` of what `_one` makes (the same
        arithmetic per pixel), without making the RGBA frame. The empty frame's planes are
        made once; the idol's box (8-pixel aligned, so its 2x2 chroma blocks are whole) is
        converted in the same compiled pass that computes its colours."""
        from pipeline.stylize import toon_cpu

        H, W = self.height, self.width
        planes = self._empty_i420()[g].clone()
        extent = C.alpha_extent(x)
        if extent is None:
            return planes
        win, box = self._boxes(extent)
        chroma = planes[H:].view(2, H // 2, W // 2).numpy()
        k = self._consts(x, win, box, g)
        toon_cpu.i420_box(_u32(x), box, k, planes[:H].numpy(), chroma[0], chroma[1])
        return planes

    def warm_cpu(self, i420: bool | None = None) -> None:
        """Load (or compile, on a machine's first run) the compiled pass of the frames the
        stage will make (I420 planes, RGBA frames; None: both) before the first frame."""
        if not self.gives_i420:
            return
        x = torch.zeros(self.height, self.width, 4, dtype=torch.uint8)
        x[:TIGHT, :TIGHT] = 255
        if i420 is not True:
            self._one(x, torch.empty_like(x), 0)
        if i420 is not False:
            self.i420(x, 0)

    def _empty_i420(self) -> torch.Tensor:
        if getattr(self, "_i420_empty", None) is None:
            from pipeline.accel.i420 import rgba_to_i420

            self._i420_empty = rgba_to_i420(self._empty(torch.device("cpu")))
        return self._i420_empty

    def _consts(self, x, win, box, g):
        """The compiled pass's inputs for frame x at window `win`, idol box `box` (see
        toon_cpu.py; the same terms `_colour` computes, rearranged):

            sv  = v255 - (0.35 shading / 255) · v255 · clamp(2.5 - 2.5 ab, 0, 1) · a255
            c'  = lum(q) · (1 - s) / 255 + q · s / 255
            out = (bg·v + 0.5) - (bg·v / 255) · a255 + grain + c' · sv

        the affine step on ab done on the 1/8-res field before upsampling (bilinear commutes
        with it), the 1/255 scalings folded into the constants. The shading's low-res field
        is pooled from the box's alpha on the window's grid (zero elsewhere in the window),
        so it equals the generic path's."""
        from pipeline.stylize.toon_cpu import Consts

        post = self.post
        y0, y1, x0, x1 = box
        none = np.zeros((0, 0), np.float32)
        shade, oy, ox = none, 0, 0
        if post.shading > 0:
            wy0, wy1, wx0, wx1 = win
            wh, ww = wy1 - wy0, wx1 - wx0
            inner = y0 - wy0, y1 - wy0, x0 - wx0, x1 - wx0
            a = x[y0:y1, x0:x1, 3].unsqueeze(0).float()
            low = C.pool_into(a.contiguous(), 8, -(-wh // 8), -(-ww // 8), inner)
            low = C.blur_p(low, 2, 3).mul_(-2.5 / 255.0).add_(2.5)
            p, oy, ox = C.upsample_rows(low, 8, wh, ww, inner)
            shade = p.numpy()
        s = post.saturation
        if s != 1.0:
            k = (1.0 - s) / 255.0
            lum = np.array([w * k for w in C.LUMA], np.float32)
            s_arg = s / 255.0
        else:
            lum, s_arg = np.zeros(3, np.float32), 1.0 / 255.0
        wn = C.phase_weights(8)
        return Consts(
            v255=self.v255.numpy(),
            bg_half=self.bgv_half.numpy(),
            bg_unit=self.bgv_unit.numpy(),
            grain=self.grain255[g].numpy() if self.grain_amount > 0 else none,
            shade=shade,
            shade_oy=oy,
            shade_ox=ox,
            wp=(1.0 - wn).numpy(),
            wn=wn.numpy(),
            ks=-0.35 * post.shading / 255.0,
            lum=lum,
            s=s_arg,
            saturate=s != 1.0,
        )


def _u32(x: torch.Tensor) -> np.ndarray:
    """uint8 (H, W, 4) RGBA -> its pixels as uint32 (H, W) (little-endian: byte k = channel k)."""
    return x.numpy().view(np.uint32)[..., 0]
