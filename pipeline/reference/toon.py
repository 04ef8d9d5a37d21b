"""`toon` (studio) reference: the flat cel render relit as a soft studio photograph.

1. Shape: an inflated height field (a Poisson "pillow" of the silhouette, cut along the drawn
   lines so every part bulges on its own; ~280 Jacobi iterations coarse to fine) gives
   normals.
2. Light: a warm key from the upper left and a cool fill from the right in half-Lambert
   (soft, no hard terminator), blended gently into the flat colours so the cel look stays.
3. Ambient occlusion: 64 samples per pixel on a golden-angle spiral over the height field
   (horizon-based: a neighbour higher than the sample's slope occludes): soft creases along
   the lines, under the bangs and the chin, and a faint contact shade on the backdrop.
4. Skin: subsurface scattering as light that spreads farther in red than in green and blue
   (per-channel blurs of the lighting, inside the skin only), and a warm glow at the skin's
   edges.
5. Hair: an "angel ring" sheen band (Kajiya-Kay specular along the strands, the strand
   direction bent by the surface slope) and a glossy highlight, broken up by the render's own
   strand lines.
6. A rim light from the spotlight above and behind, and light wrap of the bright backdrop.
7. A soft drop shadow of the idol on the backdrop, cast to the lower right by the key light:
   her silhouette seen from 48 points of the light's disc (an area light's penumbra), plus a
   tighter contact shadow, cool-tinted; with a faint contact occlusion from step 3.
8. Depth of field: the backdrop (and its bokeh) is defocused with a 64-tap disc kernel that
   favours highlights (painted once, it does not move); the idol stays sharp.
9. A subtle warm bloom of the highlights (5 pyramid levels), a gentle tone curve, vignette.

The frame without the idol is painted once at construction; each frame is painted whole and
blended into it by an envelope that is 1 around her and fades to exactly 0 `reach` pixels
away, so the backdrop far from her is bit-for-bit the same in every frame.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pipeline.reference import ops
from pipeline.reference.base import ReferencePainter

AO_SAMPLES = 64
SHADOW_TAPS = 48  # samples of the key light's disc for the soft shadow
BOKEH_TAPS = 64
BLOOM = (0.15, 0.2, 0.25, 0.22, 0.18)


def _unit(*v: float) -> tuple[float, ...]:
    n = math.sqrt(sum(x * x for x in v))
    return tuple(x / n for x in v)


KEY = _unit(-0.45, -0.55, 0.7)  # upper left, in front (x right, y down, z toward the viewer)
FILL = _unit(0.7, -0.05, 0.7)
HALF = _unit(KEY[0], KEY[1], KEY[2] + 1.0)  # key half-vector with the view direction (0, 0, 1)


class ToonReference(ReferencePainter):
    kind = "toon"

    def __init__(self, preset, width, height, seed=0):
        super().__init__(preset, width, height, seed)
        H, W = self.height, self.width
        pal = preset.palette
        cols = preset.background.colors
        spot = ops.color(cols[2] if len(cols) > 2 else "#ffffff")
        self.register_buffer("spot", spot.view(1, 3, 1, 1), persistent=False)
        skin = torch.stack([ops.color(c) for c in (pal.skin, pal.skin_shadow, pal.blush)])
        hair = torch.stack([ops.color(c) for c in (pal.hair, pal.hair_shadow, pal.hair_highlight)])
        self.register_buffer("skin_cols", skin, persistent=False)
        self.register_buffer("hair_cols", hair, persistent=False)
        self.register_buffer("hair_hi", ops.color(pal.hair_highlight).view(1, 3, 1, 1), False)
        self.register_buffer("key_col", torch.tensor([1.0, 0.96, 0.9]).view(1, 3, 1, 1), False)
        self.register_buffer("fill_col", torch.tensor([0.88, 0.93, 1.0]).view(1, 3, 1, 1), False)
        self.register_buffer("amb_col", torch.tensor([0.8, 0.83, 0.92]).view(1, 3, 1, 1), False)
        self.register_buffer("warm", torch.tensor([1.0, 0.45, 0.32]).view(1, 3, 1, 1), False)
        self.register_buffer("shadow_tint", torch.tensor([0.7, 0.74, 0.9]).view(1, 3, 1, 1), False)
        self.shadow_off = (round(self.px(9.0)), round(self.px(13.0)))  # (dy, dx)
        self.reach_px = 0.22 * H
        yy = (torch.arange(H, dtype=torch.float32).view(H, 1) + 0.5) / H
        xx = (torch.arange(W, dtype=torch.float32).view(1, W) + 0.5) / W
        vig = 1.0 - 0.16 * ((xx - 0.5) ** 2 * 1.8 + (yy - 0.45) ** 2 * 1.8).clamp(max=1.0)
        self.register_buffer("vignette", vig[None, None], persistent=False)
        self.ao_taps = ops.spiral(AO_SAMPLES, self.px(16.0))
        self.shadow_taps = ops.spiral(SHADOW_TAPS, self.px(11.0), 0.5)
        self.register_buffer("backdrop", self._defocus(self.bg), persistent=False)
        self.register_buffer("static", self._render(torch.zeros(1, 4, H, W)), persistent=False)
        self.reach = ops.envelope_bound(self.reach_px)

    # ---- static ---------------------------------------------------------------------------

    def _defocus(self, bg: torch.Tensor) -> torch.Tensor:
        """Disc bokeh of the backdrop: BOKEH_TAPS samples on a spiral, highlights weighted up
        (they dominate out-of-focus light)."""
        r = self.px(5.0)
        w_hi = 1.0 + 6.0 * ops.smoothstep(0.8, 1.0, ops.luma(bg))
        acc = torch.zeros_like(bg)
        wsum = torch.zeros_like(w_hi)
        for dy, dx, _ in ops.spiral(BOKEH_TAPS, r):
            w = ops.shift(w_hi, dy, dx)
            acc += ops.shift(bg, dy, dx) * w
            wsum += w
        return acc / wsum

    # ---- passes ---------------------------------------------------------------------------

    def _ao(self, z: torch.Tensor) -> torch.Tensor:
        """Horizon-based ambient occlusion of a height field in pixels: (B, 1, H, W) in 0..1
        (the occluded fraction)."""
        R = max(t[2] for t in self.ao_taps)
        pad = math.ceil(R)
        zp = F.pad(z, (pad, pad, pad, pad), mode="replicate")
        h, w = z.shape[-2:]
        acc = torch.zeros_like(z)
        wsum = 0.0
        for dy, dx, dist in self.ao_taps:
            nb = zp[..., pad + dy : pad + dy + h, pad + dx : pad + dx + w]
            fall = 1.0 - (dist / (R + 1.0)) ** 2
            acc += ((nb - z) * (1.0 / max(dist, 1.0)) - 0.15).clamp_(0.0, 1.0) * fall
            wsum += fall
        return acc * (1.0 / wsum)

    def _shadow(self, a: torch.Tensor) -> torch.Tensor:
        """Soft shadow of the idol on the backdrop from the key light (upper left): her alpha
        seen from SHADOW_TAPS points of the light's disc (an area light's penumbra, not a
        Gaussian), plus a tighter contact shadow; 0..1."""
        dy, dx = self.shadow_off
        r = max(abs(t[0]) for t in self.shadow_taps) + max(abs(dy), abs(dx))
        ap = F.pad(a, (r, r, r, r))
        h, w = a.shape[-2:]
        wide = torch.zeros_like(a)
        for ty, tx, _ in self.shadow_taps:
            oy, ox = r - dy + ty, r - dx + tx
            wide += ap[..., oy : oy + h, ox : ox + w]
        wide *= 1.0 / len(self.shadow_taps)
        c = ap[..., r - dy // 3 : r - dy // 3 + h, r - dx // 3 : r - dx // 3 + w]
        return wide * 0.7 + ops.blur(c, self.px(2.0)) * 0.3

    @staticmethod
    def _bright(x: torch.Tensor) -> torch.Tensor:
        return x * ops.smoothstep(0.9, 1.05, ops.luma(x))

    def paint(self, p: torch.Tensor) -> torch.Tensor:
        env = ops.envelope(p[:, 3:4], self.reach_px)
        return self.static + env * (self._render(p) - self.static)

    def _render(self, p: torch.Tensor) -> torch.Tensor:
        """The whole look of one batch, before the reach envelope."""
        post = self.post
        u, a = ops.straight(p)
        lum = ops.luma(u)
        na = 1.0 - a
        skin = ops.palette_mask(u, a, self.skin_cols, 0.14)
        hair = ops.palette_mask(u, a, self.hair_cols, 0.14)
        # --- shape
        dark = ((0.75 - lum) * 2.0).clamp(0.0, 1.0) * a
        line = ((dark - ops.blur(dark, self.px(2.0))) * 2.5).clamp(0.0, 1.0)
        face = ops.smoothstep(0.3, 0.6, ops.blur(skin, self.px(2.0)))  # features do not cut
        zr = ops.pillow(a * (1.0 - 0.6 * line * (1.0 - face)))
        zc = self.px(45.0)
        z = torch.tanh(zr * (1.0 / zc)) * zc
        n = ops.normals(z, self.px(1.5))
        nx, ny, nz = n[:, 0:1], n[:, 1:2], n[:, 2:3]
        # --- soft studio light (half-Lambert), normalised so a front-facing surface keeps
        # its colour
        hk = (nx * KEY[0] + ny * KEY[1] + nz * KEY[2]) * 0.5 + 0.5
        hf = (nx * FILL[0] + ny * FILL[1] + nz * FILL[2]) * 0.5 + 0.5
        light = self.amb_col * 0.55 + self.key_col * (0.55 * hk * hk) + self.fill_col * (0.2 * hf)
        front = 0.55 * 0.8 + 0.55 * ((KEY[2] * 0.5 + 0.5) ** 2) + 0.2 * (FILL[2] * 0.5 + 0.5)
        light = 1.0 + (light * (1.0 / front) - 1.0) * (0.25 + 0.4 * post.shading)
        # --- ambient occlusion (64 samples)
        occ = self._ao(z)
        light = light * (1.0 - 0.45 * occ)
        # --- skin: red light travels farther under the skin
        sm = skin + 1e-4
        sss = torch.cat(
            [
                ops.blur(light[:, c : c + 1] * sm, self.px(r)) / ops.blur(sm, self.px(r))
                for c, r in ((0, 5.0), (1, 2.5), (2, 1.2))
            ],
            1,
        )
        light = light + (sss - light) * skin
        col = u * light
        edge = (1.0 - nz).clamp(0.0, 1.0)
        col = col + self.warm * (skin * (0.1 * edge + 0.06 * (1.0 - light[:, 1:2]).clamp(min=0.0)))
        # --- hair sheen: Kajiya-Kay band along the strands + a glossy highlight
        _, zy = ops.grad(ops.blur(z, self.px(2.0)))
        strands = (ops.blur(lum, self.px(1.5)) - lum).clamp(min=0.0) * 6.0  # drawn strand lines
        tdh = (HALF[1] + zy * HALF[2]) * (1.0 + zy * zy).rsqrt() + 0.12 * strands
        band = (1.0 - tdh * tdh).clamp(min=0.0).pow(24.0)
        gloss = (nx * HALF[0] + ny * HALF[1] + nz * HALF[2]).clamp(min=0.0).pow(30.0)
        sheen = hair * (0.35 * band + 0.08 * gloss) * (1.0 - strands.clamp(max=1.0))
        col = col + (self.hair_hi * 0.6 + 0.4) * sheen
        # --- rim from the spotlight above/behind, light wrap of the bright backdrop
        sil = ops.smoothstep(0.0, 0.4, 1.0 - ops.blur(a, self.px(4.0)))
        rim = edge.pow(2.0) * ops.smoothstep(-0.2, 0.6, -ny) * sil * 0.45
        col = col + self.spot * rim
        sig = self.px(6.0)
        around = ops.blur(self.backdrop * na, sig) / ops.blur(na, sig).clamp(min=1e-3)
        col = col + (around - col).clamp(min=0.0) * (sil * 0.3)
        # --- the backdrop: drop shadow + contact occlusion from the idol
        sh = self._shadow(a)
        shade = sh * 0.45 + occ * 0.25
        back = self.backdrop * (1.0 - shade * (1.0 - self.shadow_tint))
        scene = col * a + back * na
        # --- bloom of the highlights
        scene = scene + ops.pyramid_glow(self._bright(scene), BLOOM) * self.spot * 0.18
        # gentle tone curve (a little contrast, soft shoulder) and vignette
        scene = scene.clamp(min=0.0)
        scene = scene + 0.06 * scene * (1.0 - scene) * (2.0 * scene - 1.0).clamp(-1.0, 1.0)
        return scene * self.vignette
