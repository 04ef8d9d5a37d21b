"""`ink-wash` reference: sumi-e painted with a wet-media simulation on the background's washi.

1. Reading the render: ink darkness from luminance (skin and white cloth stay paper), clearly
   red colours become vermilion pigment, thin dark features (outlines, eyes, mouth) become dry
   strokes (darkness above its local mean).
2. Graded washes: every dark area gets a diluted wash, denser toward its edges (the loaded
   brush) and uneven with the paper's mottle; only areas bigger than a stroke are wet.
3. Dry brush (hihaku, "flying white") on the big dark masses (the hair; an opening of the ink
   leaves the eyes out): a line-integral convolution traces streamlines of the stroke
   direction (the structure tensor of the ink, vertical where it has none), 2 x 20 bilinear
   steps per pixel, through fixed fine grain mixed with the paper's own structure: bristle
   streaks along the strands. The brush runs dry down each stroke (more white showing the
   more ink it has laid down, a running sum down each column) and the outlines break where
   the streaks and the paper grain are high.
4. Wet media, 150 full-resolution iterations at 360 lines (x (height/360)^2, at least 12):
   water flows between neighbours through conductances taken from the paper (fibres wick,
   a step in the texture does not conduct, fixed pore noise makes the front ragged) beyond
   a sizing threshold (dry paper resists a thin front), and carries the pigment with it
   (upwind advection); the exposed wet front evaporates fastest, so water keeps flowing out
   to it and deposits its pigment there (the dark pooled edge of a drying wash); pigment
   settles faster in the paper's valleys (granulation); the wash feathers a little into the
   paper around her.
5. Colour: ink and vermilion absorb (Beer-Lambert, each with its own absorbance per channel,
   so density 1 gives exactly the preset's ink / accent colour on paper) from clean paper
   under the idol and from the background's own paper (mountains, seal) around her: the paper
   and its texture show through every wash, and far from her the background is untouched.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pipeline.reference import ops
from pipeline.reference.base import ReferencePainter
from render.backgrounds import paper_grain

LIC_STEPS = 20  # per direction


def _paper_highpass(t: torch.Tensor, s: float) -> torch.Tensor:
    return t - ops.blur(t, 1.5 * s)


def _paper_valleys(t: torch.Tensor) -> torch.Tensor:
    return ops.smoothstep(0.0, 0.05, ops.blur(t, 0.6) * -1.0 + 1.0)


def brush_grain(width: int, height: int, seed: int = 0) -> torch.Tensor:
    """The grain the dry brush drags through, (1, 1, H, W), unit std: fixed fine noise mixed
    with the paper's own structure (the paper background's texture)."""
    s = height / 360.0
    hp = _paper_highpass(paper_grain(width, height, 0)[None, None], s)
    g = torch.Generator().manual_seed(seed + 4242)
    nz = torch.randn((1, 1, height, width), generator=g)
    nz = ops.box(nz, max(1, round(s))) * 1.5 + 0.5 * hp / hp.std().clamp(min=1e-6)
    return nz / nz.std().clamp(min=1e-6)


def dry_brush_cut_noise(width: int, height: int, seed: int = 0) -> torch.Tensor:
    """Broad fixed noise (1, 1, H, W) that moves where the running-dry brush starts to break."""
    return ops.value_noise(height, width, 3.0, seed + 99, octaves=2)[None, None]


def straight_streaks(width: int, height: int, seed: int = 0) -> torch.Tensor:
    """The dry brush's bristle streaks where the strands run straight down, (1, 1, H, W): what
    the painter's line-integral convolution gives on a featureless (vertical) stroke field,
    as one vertical filter of the same grain, plus the same paper-valley term. The procedural
    look uses it to lay the painter's own streaks on the hair."""
    s = height / 360.0
    step = max(0.75, 1.2 * s)
    taps: dict[int, float] = {0: 1.0}
    for k in range(1, LIC_STEPS + 1):
        wk = 0.5 + 0.5 * math.cos(math.pi * k / (LIC_STEPS + 1))  # the painter's Hann taper
        for off in (k * step, -k * step):  # a bilinear lookup = two integer taps
            i = math.floor(off)
            taps[i] = taps.get(i, 0.0) + wk * (1.0 - (off - i))
            taps[i + 1] = taps.get(i + 1, 0.0) + wk * (off - i)
    r = max(abs(i) for i in taps)
    kernel = torch.zeros(2 * r + 1)
    for i, wt in taps.items():
        kernel[i + r] = wt
    grain = brush_grain(width, height, seed)
    lic = F.conv2d(F.pad(grain, (0, 0, r, r), mode="reflect"), kernel.view(1, 1, -1, 1))
    valleys = _paper_valleys(paper_grain(width, height, 0)[None, None])
    return lic / lic.std().clamp(min=1e-6) + (valleys - 0.5) * 0.6


class InkWashReference(ReferencePainter):
    kind = "ink-wash"

    def __init__(self, preset, width, height, seed=0):
        super().__init__(preset, width, height, seed)
        post = self.post
        H, W = self.height, self.width
        bgp = preset.background
        paper_hex = bgp.colors[0] if bgp.kind == "paper" else "#f3ecdc"
        paper = ops.color(paper_hex)
        ink = ops.color(post.ink or "#161514")
        verm = ops.color(post.accent or preset.palette.accent)
        # Beer-Lambert absorbance per unit density: density 1 turns paper into the pigment
        k_ink = -torch.log((ink / paper).clamp(0.02, 1.0))
        k_verm = -torch.log((verm / paper).clamp(0.02, 1.0))
        self.register_buffer("k_ink", k_ink.view(1, 3, 1, 1), persistent=False)
        self.register_buffer("k_verm", k_verm.view(1, 3, 1, 1), persistent=False)
        t = paper_grain(W, H, 0)[None, None]  # the same texture the paper background uses
        tex = 1.0 + post.paper * (t - 1.0)
        self.register_buffer("paper", paper.view(1, 3, 1, 1) * tex, persistent=False)
        # paper structure: fibres (local deviation of the texture), valleys, mottle
        hp = _paper_highpass(t, self.s)
        fib = ops.smoothstep(0.012, 0.05, hp.abs())
        self.register_buffer("valley", _paper_valleys(t), persistent=False)
        mottle = ops.blur(t, self.px(6.0)) - ops.blur(t, self.px(24.0))
        self.register_buffer("mottle", mottle / mottle.std().clamp(min=1e-6), persistent=False)
        self.register_buffer("grain", brush_grain(W, H, self.seed), persistent=False)
        self.register_buffer("broad", dry_brush_cut_noise(W, H, self.seed), persistent=False)
        # conductance between neighbours: fibres are channels that wick water (a step in the
        # texture, across a fibre's side, does not conduct); elsewhere the paper's fixed
        # pore noise makes the wet front ragged
        g = torch.Generator().manual_seed(self.seed + 777)
        pore = torch.rand((1, 1, H, W), generator=g)
        cond = 0.12 + 0.45 * pore + 0.9 * fib
        c0 = 0.2
        dx, dy = (t[..., :, 1:] - t[..., :, :-1]).abs(), (t[..., 1:, :] - t[..., :-1, :]).abs()
        cx = torch.minimum(cond[..., :, 1:], cond[..., :, :-1]) * torch.exp(-dx * 25.0)
        cy = torch.minimum(cond[..., 1:, :], cond[..., :-1, :]) * torch.exp(-dy * 25.0)
        self.register_buffer("cx", (c0 * cx).clamp(max=0.24), persistent=False)
        self.register_buffer("cy", (c0 * cy).clamp(max=0.24), persistent=False)
        # sizing: the minimum water step that advances the front; fibres and pores lower it
        self.register_buffer("theta", 0.05 * (1.3 - 0.5 * pore - 0.6 * fib), persistent=False)
        self.register_buffer("base_grid", ops.grid(H, W), persistent=False)
        # the LIC's std on a plain field, to normalise it
        vert = torch.tensor([-1.0, 0.0]).view(1, 2, 1, 1).expand(1, 2, H, W)
        self.lic_gain = 1.0
        self.lic_gain = 1.0 / float(self._lic(vert).std())
        self.iters = max(12, round(150 * self.s * self.s))
        # the water front moves at most one pixel per iteration, the dry brush a few pixels
        # the sized paper stops the wash BLEED pixels from her (the envelope): it never gets
        # that far in practice, but it bounds her reach; the water front also moves at most
        # one pixel per iteration
        self.bleed = self.px(24.0)
        self.reach = min(self.iters + 1, ops.envelope_bound(self.bleed))

    # ---- steps ----------------------------------------------------------------------------

    def _orientation(self, dark: torch.Tensor) -> torch.Tensor:
        """Stroke direction as a doubled-angle unit field (B, 2, H, W) (cos 2t, sin 2t) of the
        tangent: the structure tensor of the ink, vertical where the ink is featureless."""
        gx, gy = ops.grad(ops.blur(dark, self.px(1.2)))
        sig = self.px(6.0)
        jxx, jxy, jyy = ops.blur(torch.cat([gx * gx, gx * gy, gy * gy], 1), sig).split(1, 1)
        # tangent = gradient direction + 90 degrees: its doubled angle is the opposite vector
        ox, oy = jyy - jxx, -2.0 * jxy
        eps = 1e-4
        ox = ox - eps  # default: vertical strands (doubled angle 180 degrees)
        inv = (ox * ox + oy * oy).rsqrt()
        return torch.cat([ox * inv, oy * inv], 1)

    @staticmethod
    def _half(o: torch.Tensor) -> torch.Tensor:
        """doubled-angle (B, 2, ...) -> a unit tangent (B, 2, ...) (either sign)."""
        c, s = o[:, 0:1], o[:, 1:2]
        n = (c * c + s * s).clamp(min=1e-12).sqrt()
        c, s = c / n, s / n
        tx = ((1.0 + c) * 0.5).clamp(min=0.0).sqrt()
        ty = ((1.0 - c) * 0.5).clamp(min=0.0).sqrt() * torch.where(s < 0, -1.0, 1.0)
        return torch.cat([tx, ty], 1)

    def _lic(self, o2: torch.Tensor) -> torch.Tensor:
        """Line-integral convolution of the paper grain along the stroke field: (B, 1, H, W),
        roughly unit std. Streamlines are traced with bilinear lookups of the field, the
        tangent's sign kept continuous along the way."""
        B = o2.shape[0]
        H, W = self.height, self.width
        step = max(0.75, self.px(1.2))
        scale = torch.tensor([2.0 * step / W, 2.0 * step / H], device=o2.device)
        grain = self.grain.expand(B, -1, -1, -1)
        t0 = self._half(o2)
        acc = grain.clone()
        for sign in (1.0, -1.0):
            pos = self.base_grid.expand(B, -1, -1, -1)
            tp = t0 * sign
            for k in range(1, LIC_STEPS + 1):
                pos = pos + tp.permute(0, 2, 3, 1) * scale
                t = self._half(ops.sample(o2, pos))
                flip = (t * tp).sum(1, keepdim=True) < 0
                tp = torch.where(flip, -t, t)
                wk = 0.5 + 0.5 * math.cos(math.pi * k / (LIC_STEPS + 1))  # Hann taper
                acc = acc + wk * ops.sample(grain, pos, "reflection")
        wsum = 1.0 + 2.0 * sum(
            0.5 + 0.5 * math.cos(math.pi * k / (LIC_STEPS + 1)) for k in range(1, LIC_STEPS + 1)
        )
        return acc * (self.lic_gain / wsum)

    def _simulate(self, w, s, d):
        """The wet-media loop. w water (B, 1, H, W), s suspended and d deposited pigment
        (B, 2, H, W) (ink, vermilion). Returns the final deposit (B, 2, H, W)."""
        n = self.iters
        cx, cy, theta = self.cx, self.cy, self.theta
        gran = self.valley
        e0 = 0.55 / n  # interior evaporation: a full wash dries within the run
        e1 = 5.0 * self.post.wet_edges / n  # extra evaporation of the exposed wet front
        r0 = 1.5 / n  # pigment settling rate (x granulation)
        wdry = 0.03
        thx = 0.5 * (theta[..., :, 1:] + theta[..., :, :-1])
        thy = 0.5 * (theta[..., 1:, :] + theta[..., :-1, :])
        settle = r0 * (1.0 + 1.5 * gran)
        for _ in range(n):
            conc = s / w.clamp(min=1e-4)
            # water flux i -> i+1 along x and y (pressure difference beyond the sizing)
            ddx = w[..., :, :-1] - w[..., :, 1:]
            fwx = (ddx - ddx.clamp(-thx, thx)).mul_(cx)
            ddy = w[..., :-1, :] - w[..., 1:, :]
            fwy = (ddy - ddy.clamp(-thy, thy)).mul_(cy)
            # pigment rides the water (upwind concentration)
            fsx = fwx * torch.where(fwx > 0, conc[..., :, :-1], conc[..., :, 1:])
            fsy = fwy * torch.where(fwy > 0, conc[..., :-1, :], conc[..., 1:, :])
            w = w.clone()
            w[..., :, :-1] -= fwx
            w[..., :, 1:] += fwx
            w[..., :-1, :] -= fwy
            w[..., 1:, :] += fwy
            s = s.clone()
            s[..., :, :-1] -= fsx
            s[..., :, 1:] += fsx
            s[..., :-1, :] -= fsy
            s[..., 1:, :] += fsy
            # evaporation: fastest where few neighbours are wet (the front)
            wp = F.pad((w > 1e-3).to(w.dtype), (1, 1, 1, 1), mode="replicate")
            nb = wp[..., :-2, 1:-1] + wp[..., 2:, 1:-1]
            nb += wp[..., 1:-1, :-2]
            nb += wp[..., 1:-1, 2:]
            w = (w - nb.mul_(-0.25 * e1).add_(e0 + e1)).clamp_(min=0.0)
            # settling: slow while wet, everything once dry
            rate = ((w * (-1.0 / wdry)) + 1.0).clamp_(0.0, 1.0).add_(settle).clamp_(max=1.0)
            dep = s * rate
            s = s - dep
            d = d + dep
        return d + s

    # ---- the look -------------------------------------------------------------------------

    def paint(self, p: torch.Tensor) -> torch.Tensor:
        post = self.post
        u, a = ops.straight(p)
        lum = ops.luma(u)
        # vermilion: clearly red, saturated source colours
        red = ((u[:, 0:1] - torch.maximum(u[:, 1:2], u[:, 2:3])) * 4.0 - 0.9).clamp(0, 1) * a
        dark = ((0.93 - lum) * (1.0 / 0.82)).clamp(0.0, 1.0) * a * (1.0 - red)
        # strokes: thin dark features (darkness above its neighbourhood)
        loc = ops.blur(dark, self.px(2.5))
        line = ((dark - loc) * 2.5).clamp(0.0, 1.0) * ops.smoothstep(0.5, 0.8, dark)
        # graded washes: denser toward the edges of each area, uneven with the paper mottle
        wide = ops.blur(dark, self.px(8.0))
        edge = (dark - wide).clamp(min=0.0)
        grade = (0.6 + 1.1 * edge).clamp(max=1.15) * (1.0 + 0.1 * self.mottle)
        # dry brush: streaks along the strokes through the paper grain, on the big dark masses
        # (an opening of the ink: small dark features such as the eyes are left out)
        o2 = self._orientation(dark)
        streak = self._lic(o2) + (self.valley - 0.5) * 0.6
        core = ops.smoothstep(0.7, 0.85, ops.blur(ops.smoothstep(0.55, 0.85, dark), self.px(5)))
        mass = ops.smoothstep(0.05, 0.3, ops.blur(core, self.px(5))) * ops.smoothstep(
            0.55, 0.85, dark
        )
        # the brush runs dry along a stroke: the ink mass met so far down each column
        run = mass.cumsum(-2) * (1.0 / self.px(160.0))
        cut = -1.0 + 1.3 * ops.smoothstep(0.15, 1.0, run) + 0.3 * self.broad
        bristle = ops.smoothstep(cut - 0.25, cut + 0.25, streak)
        strokes = mass * bristle
        gaps = ops.smoothstep(1.0, 1.7, -streak)  # flying white on the outlines
        line = line * (1.0 - 0.6 * gaps)
        # washes: lighter under the dry-brush strokes, vermilion for the reds
        body = (dark - line).clamp(min=0.0)  # the outlines themselves stay dry strokes
        wash = (0.5 - 0.2 * mass) * body.pow(1.1) * grade
        verm = 0.9 * red * (1.0 + 0.08 * self.mottle)
        # water: only areas bigger than a stroke are painted wet
        big = ops.smoothstep(0.25, 0.6, ops.blur((body + red).clamp(max=1.0), self.px(3.0)))
        wetness = ops.smoothstep(0.03, 0.2, wash + verm) * big
        water = wetness * (0.75 + 0.25 * post.ink_bleed) * (1.0 + 0.3 * post.wet_edges * edge)
        s = torch.cat([wash * wetness, verm * wetness], 1)
        d = torch.cat([wash * (1.0 - wetness), verm * (1.0 - wetness)], 1)
        dep = self._simulate(water, s, d) * ops.envelope(a, self.bleed)
        ink_d = dep[:, 0:1] * (0.9 + 0.25 * self.valley) + torch.maximum(line, strokes)
        verm_d = dep[:, 1:2] * (0.9 + 0.25 * self.valley)
        sub = self.bg * (1.0 - a) + self.paper * a
        return sub * torch.exp(-(ink_d * self.k_ink + verm_d * self.k_verm))
