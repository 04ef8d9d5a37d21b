"""`cyberpunk` reference: a cinematic neon night, lit by the city behind the idol.

1. Shape: an inflated height field of the idol (a Poisson "pillow" of her silhouette cut along
   the drawn lines, ~280 Jacobi iterations coarse to fine) plus a fine bump from the render's
   luminance give every pixel a surface normal.
2. Grade and light: deeper blacks, richer neon colour, a cool night ambient that falls off
   toward her edges, and the two neon colours lighting her softly from either side.
3. Holographic film: a thin-film interference colour whose phase comes from a fixed smooth
   field plus the surface orientation (tilt, facing) and brightness, strongest at grazing
   angles (Fresnel) and on the dark outfit (a holographic foil jacket); it slides across her as
   she turns because the normals do.
4. Two coloured rim lights (the preset's rim colours, one from each side) from the normals,
   and light wrap: the blurred city around her bleeds onto her silhouette's edges.
5. A backlight (a neon halo hidden behind her head) and volumetric light shafts: 48 radial
   samples from every pixel toward the light through the scene's light with the idol
   occluding it: rays fan out around her hair and her shadow cuts dark rays into the haze.
6. A glossy stage edge across the bottom tenth (the bust framing shows no floor under her, so
   the floor is a ledge in front of her): a mirrored, faded reflection of the scene above it
   (her and the city), rippled by a fixed wave field and blurring with distance, under a
   glowing neon strip.
7. Bloom from 7 pyramid levels (1/2 .. 1/128) of the bright parts, a soft highlight
   shoulder, radial lens chromatic aberration (red out, blue in) and a vignette.
No scanlines and no film grain (the procedural look has both; the grain changes per frame).

The frame without the idol is painted once at construction; each frame is painted whole and
blended into it by an envelope that is 1 around her and fades to exactly 0 `reach` pixels
away, so the city far from her is bit-for-bit the same in every frame.
"""

from __future__ import annotations

import torch

from pipeline.reference import ops
from pipeline.reference.base import ReferencePainter

SHAFT_TAPS = 48
BLOOM = (0.1, 0.12, 0.14, 0.16, 0.17, 0.16, 0.15)  # 7 levels, 1/2 .. 1/128


class CyberpunkReference(ReferencePainter):
    kind = "cyberpunk"

    def __init__(self, preset, width, height, seed=0):
        super().__init__(preset, width, height, seed)
        post = self.post
        H, W = self.height, self.width
        cols = preset.background.colors
        neon1 = ops.color(cols[4] if len(cols) > 4 else "#ff2bd6")
        neon2 = ops.color(cols[5] if len(cols) > 5 else "#00e5ff")
        self.register_buffer("rim1", ops.color(post.rim_color or "#00e5ff").view(1, 3, 1, 1), False)
        self.register_buffer(
            "rim2", ops.color(post.rim_color2 or "#ff2bd6").view(1, 3, 1, 1), False
        )
        self.register_buffer("ambient", torch.tensor([0.97, 0.9, 1.06]).view(1, 3, 1, 1), False)
        pal = preset.palette
        skin = torch.stack([ops.color(c) for c in (pal.skin, pal.skin_shadow, pal.blush)])
        self.register_buffer("skin_cols", skin, persistent=False)
        # the backlight: a neon halo behind her head, mostly hidden by it
        self.light = (0.5 * W, 0.3 * H)
        yy = torch.arange(H, dtype=torch.float32).view(H, 1) + 0.5
        xx = torch.arange(W, dtype=torch.float32).view(1, W) + 0.5
        d = ((xx - self.light[0]) ** 2 + (yy - self.light[1]) ** 2).sqrt() / H
        hue = (0.7 * neon1 + 0.3 * neon2 + 0.15).clamp(max=1.0).view(3, 1, 1)
        halo = (torch.exp(-((d / 0.12) ** 2)) * 1.2 + torch.exp(-d / 0.16) * 0.4) * hue
        ring = torch.exp(-(((d - 0.3) / 0.01) ** 2)) * 0.45 * neon2.view(3, 1, 1)
        lit = self.bg + (halo + ring)[None] * (1.0 - 0.6 * self.bg)
        self.register_buffer("lit", lit, persistent=False)
        # what the shafts carry: the halo and the brightest city lights
        src = (halo + ring)[None] + lit * ops.smoothstep(0.45, 0.95, ops.luma(lit)) * 0.5
        self.register_buffer("src", src, persistent=False)
        # fixed fields: film phase, floor ripples, lens
        film = ops.value_noise(H, W, 2.5, self.seed + 11, octaves=3) * 0.35
        self.register_buffer("film", film[None, None], persistent=False)
        self.floor_y = round(0.9 * H)
        fh = H - self.floor_y
        self.register_buffer("floor_grid", self._floor_grid(fh), persistent=False)
        fy = (torch.arange(fh, dtype=torch.float32) + 0.5).view(1, 1, fh, 1) / max(1.0, self.px(36))
        self.register_buffer("floor_fade", 0.62 * torch.exp(-1.6 * fy), persistent=False)
        self.register_buffer("floor_mix", fy.clamp(0.0, 1.0), persistent=False)
        strip = neon2.view(1, 3, 1, 1) * (1.0 - xx / W).view(1, 1, 1, W) + neon1.view(
            1, 3, 1, 1
        ) * (xx / W).view(1, 1, 1, W)
        self.register_buffer("strip", strip, persistent=False)
        self.register_buffer("lens_r", self._lens(1.0), persistent=False)
        self.register_buffer("lens_b", self._lens(-1.0), persistent=False)
        vig = 1.0 - 0.28 * ((xx / W - 0.5) ** 2 * 1.6 + (yy / H - 0.5) ** 2 * 1.4).clamp(max=1.0)
        self.register_buffer("vignette", vig[None, None], persistent=False)
        # the frame without the idol, and how far her influence reaches
        self.reach_px = 0.3 * H
        self.register_buffer("static", self._render(torch.zeros(1, 4, H, W)), persistent=False)
        self.reach = ops.envelope_bound(self.reach_px)

    # ---- fixed geometry -------------------------------------------------------------------

    def _floor_grid(self, fh: int) -> torch.Tensor:
        """Sampling grid of the reflection: row y below the edge mirrors row 2*edge - y above
        it, displaced by fixed ripples growing with the distance."""
        H, W = self.height, self.width
        y0 = self.floor_y
        ys = torch.arange(fh, dtype=torch.float32).view(fh, 1) + 0.5
        xs = torch.arange(W, dtype=torch.float32).view(1, W) + 0.5
        depth = ys / max(1.0, fh)
        wave = ops.value_noise(fh, W, 6.0, self.seed + 5, octaves=2)
        dx = (torch.sin(ys / self.px(2.2) + 0.8 * wave) * self.px(2.5) + wave * self.px(1.5)) * (
            0.3 + depth
        )
        dy = torch.cos(xs / self.px(9.0) + 1.7 * wave) * self.px(0.8) * depth
        sx = xs + dx
        sy = (y0 - ys + dy).clamp(min=0.5)
        g = torch.stack([sx / W * 2.0 - 1.0, sy / H * 2.0 - 1.0], -1)
        return g[None].contiguous()

    def _lens(self, sign: float) -> torch.Tensor:
        """Lateral chromatic aberration: sample the channel at a radially scaled position
        (up to ~2.5 px at 360 lines in the corners)."""
        H, W = self.height, self.width
        g = ops.grid(H, W)
        r2 = (g[..., 0:1] * (W / H)) ** 2 + g[..., 1:2] ** 2
        k = sign * self.px(2.5) / (0.5 * H) / (1.0 + (W / H) ** 2)
        return (g * (1.0 - k * r2)).contiguous()

    # ---- passes ---------------------------------------------------------------------------

    def _shafts(self, light: torch.Tensor) -> torch.Tensor:
        """Volumetric light scattering: march SHAFT_TAPS samples from every pixel toward the
        light, with decay (a screen-space radial integral of the unoccluded light)."""
        H, W = self.height, self.width
        g = ops.grid(H, W).to(light.device)
        lx, ly = self.light[0] / W * 2.0 - 1.0, self.light[1] / H * 2.0 - 1.0
        lpos = torch.tensor([lx, ly], device=light.device).view(1, 1, 1, 2)
        toward = lpos - g
        acc = torch.zeros_like(light)
        decay, wsum = 1.0, 0.0
        for k in range(SHAFT_TAPS):
            t = 0.85 * k / SHAFT_TAPS
            acc = acc + ops.sample(light, g + toward * t) * decay
            wsum += decay
            decay *= 0.965
        return acc * (2.6 / wsum)

    def _floor(self, scene: torch.Tensor) -> torch.Tensor:
        """The glossy stage edge below floor_y: rippled mirror image, sharp near the edge and
        blurrier with distance, faded, plus the neon strip and its glow."""
        y0 = self.floor_y
        ref = ops.sample(scene, self.floor_grid)
        soft = ops.blur(ref, self.px(3.0))
        ref = ref + (soft - ref) * self.floor_mix
        base = scene[..., y0:, :] * 0.18
        out = scene.clone()
        out[..., y0:, :] = base + ref * self.floor_fade
        rows = torch.arange(scene.shape[-2], dtype=torch.float32, device=scene.device)
        glow = (
            torch.exp(-(((rows - y0) / self.px(1.2)) ** 2)) * 0.9
            + torch.exp(-((rows - y0).abs() / self.px(7.0))) * 0.22
        )
        return out + self.strip * glow.view(1, 1, -1, 1)

    def _render(self, p: torch.Tensor) -> torch.Tensor:
        """The whole look of one batch, before the reach envelope."""
        post = self.post
        u, a = ops.straight(p)
        lum = ops.luma(u)
        na = 1.0 - a
        lit = self.lit
        # --- surface
        dark = ((0.9 - lum) * 1.3).clamp(0.0, 1.0) * a
        line = ((dark - ops.blur(dark, self.px(2.0))) * 2.5).clamp(0.0, 1.0)
        skin = ops.palette_mask(u, a, self.skin_cols, 0.12)
        face = ops.smoothstep(0.3, 0.6, ops.blur(skin, self.px(2.0)))  # features do not cut
        z = ops.pillow(a * (1.0 - line * (1.0 - face)))
        z = z * 0.7 + ops.blur(lum * a * (1.0 - face), 1.0) * self.px(6.0)
        n = ops.normals(z, 0.8 * max(1.0, self.s))
        nx, ny, nz = n[:, 0:1], n[:, 1:2], n[:, 2:3]
        # --- grade: deeper blacks, more colour, a cool night ambient that falls off toward
        # the edges (the rims take over there)
        g = ((u - 0.5) * 1.15 + 0.5).clamp(0.0, 1.0)
        g = (lum + (g - lum) * (post.saturation * 1.1)).clamp(0.0, 1.0).pow(1.1)
        g = g * self.ambient * (0.66 + 0.3 * nz)
        # the neon lights both sides of her softly (the rims below are their grazing part)
        side = post.rim_light * 0.22
        g = g * (1.0 + self.rim1 * (side * (-nx).clamp(min=0.0)))
        g = g * (1.0 + self.rim2 * (side * nx.clamp(min=0.0)))
        # --- holographic film
        fres = (1.0 - nz).clamp(0.0, 1.0)
        phase = self.film + 0.9 * fres + 0.35 * nx - 0.25 * ny + 0.5 * lum
        film = ops.hue_cos(phase)
        foil = ops.smoothstep(0.55, 0.9, dark) * (1.0 - line)  # the dark outfit and hair shade
        amt = (0.22 + 0.8 * fres * fres) * (0.35 + 0.65 * foil) * (1.0 - 0.8 * skin)
        c = g * (1.0 - 0.45 * amt) + film * (amt * (0.35 + 0.45 * foil))
        # --- rims and light wrap
        sil = ops.smoothstep(0.0, 0.4, 1.0 - ops.blur(a, self.px(5.0)))  # near the silhouette
        rim = fres.pow(1.5) * sil * (post.rim_light * 0.8)
        c = c + self.rim1 * (rim * ops.smoothstep(0.1, 0.7, -nx))
        c = c + self.rim2 * (rim * ops.smoothstep(0.1, 0.7, nx))
        sig = self.px(7.0)
        around = ops.blur(lit * na, sig) / ops.blur(na, sig).clamp(min=1e-3)
        wrap = (1.0 - ops.blur(a, self.px(3.0))).clamp(0.0, 1.0) * 2.2
        c = c + around * (wrap.clamp(max=1.0) * 0.9)
        scene = c * a + lit * na
        # --- shafts (her silhouette blocks the light), the stage edge, bloom
        scene = self._floor(scene + self._shafts(self.src * na))
        x = scene + ops.pyramid_glow(self._bright(scene), BLOOM) * (0.9 * post.bloom)
        # soft shoulder for the highlights
        x = torch.where(x > 0.8, 0.8 + 0.2 * torch.tanh((x - 0.8) * 5.0), x)
        # radial chromatic aberration: red pushed outward, blue inward
        out = torch.cat(
            [ops.sample(x[:, 0:1], self.lens_r), x[:, 1:2], ops.sample(x[:, 2:3], self.lens_b)], 1
        )
        return out * self.vignette

    @staticmethod
    def _bright(x: torch.Tensor) -> torch.Tensor:
        return x * ops.smoothstep(0.7, 1.2, ops.luma(x))

    def paint(self, p: torch.Tensor) -> torch.Tensor:
        env = ops.envelope(p[:, 3:4], self.reach_px)
        return self.static + env * (self._render(p) - self.static)
