"""Kagura's built-in idol: a parametric 2D anime character drawn with Skia on the CPU.

`IdolRenderer(width, height, palette, line).render(params)` returns a `RenderedFrame` with a
premultiplied RGBA image (transparent around the character) and per-pixel motion vectors.

How it is put together:
- render/rig.py turns AvatarParams into one affine matrix per part (parallax for head yaw and
  pitch, roll about the neck, body sway and breath, spring-lagged hair);
- render/idol_parts.py holds the shapes in design units (static paths built once; eyes, mouth
  and brows rebuilt from a few blended points each frame);
- this module frames the bust shot to the output size, draws the parts back to front under
  their matrices, and asks render/motion.py for the motion vectors (see its docstring for the
  method and what it approximates).

Outline width: `LineStyle.width` is pixels at 720 lines for the 16:9 framing; it scales with the
character's on-screen size (the same as scaling with height for landscape frames, thinner in
portrait frames where the character is drawn smaller). "none" draws no outlines (features such
as lashes, brows and the mouth line stay), "brush" adds a heavier offset line on the lower-right
of each shape so the line width varies like a brush stroke.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import skia

from core.avatar import VOWELS, AvatarParams
from presets.schema import LineStyle, Palette, rgb
from render import idol_parts as ip
from render.motion import MotionField
from render.mouth_canvas import MouthCanvas
from render.rig import INDEX, PARTS, Rig

MOUTH_PART = INDEX["mouth"]  # parts from here on are drawn again by a late mouth


def _mouth_bounds() -> tuple[float, float, float, float]:
    """Design-unit bounds (l, t, r, b) of every mouth shape: each vowel alone, shut and wide
    open, with full frown and full smile (the shapes are blends of these, so they lie inside),
    plus one unit for the splines between the sampled shapes."""
    bounds = skia.Rect.MakeEmpty()
    for v in range(len(VOWELS)):
        w = np.eye(len(VOWELS))[v]
        for open_ in (0.0, 1.0):
            for form in (-1.0, 1.0):
                pts = ip.mouth_points(w, open_, form)
                bounds.join(ip.mouth_path(pts).computeTightBounds())
                bounds.join(ip.mouth_line(pts).computeTightBounds())
    return bounds.left() - 1, bounds.top() - 1, bounds.right() + 1, bounds.bottom() + 1


MOUTH_BOUNDS = _mouth_bounds()

# bust-shot framing box in design units (x: -BOX_W/2..BOX_W/2, y: BOX_TOP..BOX_TOP+BOX_H)
BOX_W, BOX_TOP, BOX_H = 540.0, -238.0, 580.0
REF_SCALE = 720.0 / BOX_H  # px per unit of a 720-line landscape frame


@dataclass
class RenderedFrame:
    rgba: np.ndarray  # uint8 (H, W, 4), premultiplied, C-contiguous
    # float32 (H, W, 2), pixels since the previous frame (x, y); None when not asked for
    motion: np.ndarray | None


def _mix(a: str, b: str, t: float) -> tuple[float, float, float]:
    ca, cb = rgb(a), rgb(b)
    return tuple((ca[i] * (1 - t) + cb[i] * t) / 255.0 for i in range(3))


def _c4(color, alpha: float = 1.0) -> skia.Color4f:
    c = tuple(v / 255.0 for v in rgb(color)) if isinstance(color, str) else color
    return skia.Color4f(c[0], c[1], c[2], alpha)


def _argb(color, alpha: float = 1.0) -> int:
    return _c4(color, alpha).toColor()


def _paint(color, alpha: float = 1.0, stroke: float = 0.0, shader=None) -> skia.Paint:
    p = skia.Paint(AntiAlias=True)
    p.setColor4f(_c4(color, alpha))
    if stroke > 0:
        p.setStyle(skia.Paint.kStroke_Style)
        p.setStrokeWidth(stroke)
        p.setStrokeCap(skia.Paint.kRound_Cap)
        p.setStrokeJoin(skia.Paint.kRound_Join)
    if shader is not None:
        p.setShader(shader)
    return p


def _vgrad(y0: float, y1: float, colors: list, stops: list | None = None) -> skia.Shader:
    return skia.GradientShader.MakeLinear(
        [skia.Point(0, y0), skia.Point(0, y1)], [_argb(c) for c in colors], stops
    )


class IdolRenderer:
    def __init__(self, width: int, height: int, palette: Palette, line: LineStyle) -> None:
        self.w, self.h = int(width), int(height)
        self.pal, self.line = palette, line
        s = min(self.w / BOX_W, self.h / BOX_H)
        free = self.h - s * BOX_H
        self.view = np.array(
            [[s, 0, self.w / 2.0], [0, s, free * 0.3 - s * BOX_TOP], [0, 0, 1.0]], np.float64
        )
        self.px = s  # pixels per design unit
        self.lw = line.width / REF_SCALE  # outline width in design units
        self.rig = Rig()
        self.motion = MotionField(self.w, self.h, 4)
        self.with_motion = True  # False: no motion vectors (RenderedFrame.motion is None)
        self.prev: np.ndarray | None = None
        self._late: tuple | None = None  # what redraw_mouth needs, kept by render_base
        self._scratch: MouthCanvas | None = None  # redraw_mouth's canvas
        self._mouth_box = (0, 0, 0, 0)
        self._build()

    def reset(self) -> None:
        self.rig.reset()
        self.prev = None
        self._late = None

    # ------------------------------------------------------------------ static resources

    def _build(self) -> None:
        pal, lw = self.pal, self.lw
        sp = ip.spline
        self.outline = self.line.style != "none" and lw > 0
        self.brush = self.line.style == "brush"
        self.p_line = _paint(pal.line, stroke=lw)
        self.p_thin = _paint(pal.line, stroke=lw * 0.55)
        self.p_brush = _paint(pal.line)

        self.face = sp(ip.FACE)
        self.face_shadow = sp(ip.FACE_SHADOW)
        self.p_skin = _paint(pal.skin)
        self.p_skin_shadow = _paint(pal.skin_shadow)
        self.p_skin_shadow_soft = _paint(pal.skin_shadow, 0.85)

        # two-tone cel shading: solid fills plus shadow shapes (gradients over large areas
        # cost ~8x a solid fill in Skia's raster backend)
        self.p_hair = _paint(pal.hair)
        self.p_hair_shade = _paint(pal.hair_shadow, 0.8)
        self.p_hair_back = _paint(pal.hair_shadow)
        self.p_hair_hi = _paint(pal.hair_highlight, 0.9)
        self.p_strand = _paint(pal.hair_shadow, 0.9, stroke=max(lw * 0.5, 0.9))
        self.bangs = sp(ip.BANGS)
        self.highlight = sp(ip.HIGHLIGHT)
        self.strands = [sp(s, closed=False) for s in ip.BANG_STRANDS]
        self.side = {1: sp(ip.SIDE_LOCK_R), -1: sp(ip.mirror(ip.SIDE_LOCK_R))}
        self.side_strand = {
            1: sp([(104, -40), (110, 60), (106, 150)], closed=False),
            -1: sp([(-104, -40), (-110, 60), (-106, 150)], closed=False),
        }
        self.back_hair = sp(ip.BACK_HAIR)
        self.tail = {1: sp(ip.TAIL_R), -1: sp(ip.mirror(ip.TAIL_R))}
        self.tail_shade = {1: sp(ip.TAIL_SHADE_R), -1: sp(ip.mirror(ip.TAIL_SHADE_R))}
        self.tail_strands = {
            1: [sp(s, closed=False) for s in ip.TAIL_STRANDS_R],
            -1: [sp(ip.mirror(s), closed=False) for s in ip.TAIL_STRANDS_R],
        }
        self.ahoge = sp(ip.AHOGE)
        self.ties = ip.union(sp(ip.TIE_R), sp(ip.mirror(ip.TIE_R)))
        self.tie_knots = ip.union(ip.ellipse(124, -92, 8, 8), ip.ellipse(-124, -92, 8, 8))

        # body and outfit
        self.skin_body = sp(ip.SKIN_BODY)
        self.skirt_band = sp(ip.SKIRT_BAND)
        self.neck_shadow = sp(ip.NECK_SHADOW)
        self.outfit = sp(ip.OUTFIT)
        self.folds = [sp(f, closed=False) for f in ip.OUTFIT_FOLDS]
        self.sleeves = ip.union(sp(ip.SLEEVE_R), sp(ip.mirror(ip.SLEEVE_R)))
        self.trims = ip.union(sp(ip.SLEEVE_TRIM_R), sp(ip.mirror(ip.SLEEVE_TRIM_R)))
        self.choker = sp(ip.CHOKER)
        self.charm = sp([(0, 150), (7, 156), (0, 166, 1), (-7, 156)])
        self.collar = sp(ip.COLLAR)
        self.collar_stripe = sp(ip.COLLAR_STRIPE, closed=False)
        self.dicky = sp(ip.DICKY)
        self.bow_loops = ip.union(sp(ip.BOW_LOOP_R), sp(ip.mirror(ip.BOW_LOOP_R)))
        self.bow_tails = ip.union(sp(ip.BOW_TAIL_R), sp(ip.mirror(ip.BOW_TAIL_R)))
        self.bow_knot = sp(ip.BOW_KNOT)
        self.body_sil = ip.union(self.skin_body, self.sleeves)
        self.p_outfit = _paint(pal.outfit)
        self.p_outfit_shadow = _paint(pal.outfit_shadow)
        self.p_fold = _paint(pal.outfit_shadow, stroke=lw * 0.8)
        self.p_accent = _paint(pal.accent)
        self.p_accent_dark = _paint(_mix(pal.accent, pal.line, 0.35))
        self.p_stripe = _paint(pal.outfit, stroke=5.0)
        self.p_choker = _paint(_mix(pal.line, pal.accent, 0.2))

        # face features
        self.p_white = _paint(pal.eye_white)
        self.iris = ip.ellipse(0, 0, 19.5, 25.5)
        self.p_iris = _paint(
            pal.iris,
            shader=_vgrad(
                -25,
                25,
                [pal.iris_dark, pal.iris, _mix(pal.iris, pal.eye_white, 0.35)],
                [0, 0.55, 1],
            ),
        )
        self.p_iris_ring = _paint(pal.iris_dark, stroke=1.6)
        self.pupil = ip.ellipse(0, -2, 8.5, 12.0)
        self.p_pupil = _paint(pal.iris_dark)
        self.iris_glow = ip.ellipse(0, 13, 12.5, 7.5)
        self.p_glow = _paint(_mix(pal.iris, pal.eye_white, 0.55), 0.75)
        self.hl_big = ip.ellipse(-7.5, -10, 7.0, 8.6)
        self.hl_small = ip.ellipse(8.5, 9, 3.4, 3.4)
        self.p_hl = _paint(pal.eye_white)
        self.p_lid_shadow = _paint(_mix(pal.skin_shadow, pal.iris_dark, 0.25), 0.55, stroke=7.0)
        self.p_lash = _paint(_mix(pal.line, pal.iris_dark, 0.25))
        self.p_low_lash = _paint(_mix(pal.line, pal.iris_dark, 0.25), stroke=1.4)
        self.p_brow = _paint(_mix(pal.line, pal.hair_shadow, 0.35))
        self.nose = ip.spline([(1.5, -3), (-1.0, 2.5)], closed=False)
        self.p_nose = _paint(_mix(pal.skin_shadow, pal.line, 0.35), stroke=1.6)
        self.p_mouth = _paint(pal.mouth)
        self.p_mouth_line = _paint(_mix(pal.line, pal.mouth, 0.35), stroke=max(lw * 0.6, 1.2))
        self.p_mouth_closed = _paint(_mix(pal.line, pal.mouth, 0.3), stroke=1.9)
        self.p_tongue = _paint(_mix(pal.mouth, pal.blush, 0.55))
        self.p_teeth = _paint(pal.eye_white)
        blush = rgb(pal.blush)
        self.blush_shader = skia.GradientShader.MakeRadial(
            skia.Point(0, 0),
            1.0,
            [skia.ColorSetARGB(255, *blush), skia.ColorSetARGB(0, *blush)],
        )
        self.p_blush = skia.Paint(AntiAlias=True)
        self.p_blush.setShader(self.blush_shader)
        self.p_hatch = _paint(_mix(pal.blush, pal.mouth, 0.4), stroke=1.3)
        self.hatch = ip.union(
            *[ip.spline([(x + 4, -5), (x - 2, 4)], closed=False) for x in (-9, -1, 7)]
        )

    # ------------------------------------------------------------------ drawing helpers

    def _shape(self, c: skia.Canvas, path: skia.Path, fill: skia.Paint, line: bool = True) -> None:
        if line and self.outline and self.brush:
            c.save()
            c.translate(self.lw * 0.45, self.lw * 0.7)
            c.drawPath(path, self.p_brush)
            c.restore()
        c.drawPath(path, fill)
        if line and self.outline:
            c.drawPath(path, self.p_thin if self.brush else self.p_line)

    def _outline(self, c: skia.Canvas, path: skia.Path) -> None:
        if self.outline:
            c.drawPath(path, self.p_thin if self.brush else self.p_line)

    def _detail(self, c: skia.Canvas, path: skia.Path, paint: skia.Paint) -> None:
        if self.outline:
            c.drawPath(path, paint)

    # ------------------------------------------------------------------ frame

    def render(self, params: AvatarParams) -> RenderedFrame:
        """The whole frame of `params`."""
        return self._render(params, keep_mouth=False)

    def render_into(self, params: AvatarParams, rgba: np.ndarray) -> RenderedFrame:
        """`render(params)` drawn into `rgba` (uint8 (H, W, 4), C-contiguous, cleared here): a
        render process draws straight into its shared-memory slot instead of copying there."""
        return self._render(params, keep_mouth=False, into=rgba)

    def render_base(self, params: AvatarParams) -> RenderedFrame:
        """The same frame as `render(params)`, and what `redraw_mouth` needs to give it a later
        mouth: the pixels of the mouth box as they were before the mouth was drawn."""
        return self._render(params, keep_mouth=True)

    def redraw_mouth(self, rgba: np.ndarray, params: AvatarParams) -> tuple[int, int, int, int]:
        """Gives the frame that `render_base` drew (in `rgba`, which may be a copy) the mouth of
        `params` — lip sync as of now, not as of the base render. Only the mouth box changes:
        on a scratch image whose box holds the pixels from before the mouth, the mouth and the
        parts in front of it that reach into the box are drawn as the whole render draws them
        (not clipped: Skia rasterises a clipped path differently, by a level or two), and the
        box is copied back. Everything else (pose, eyes, the motion vectors) stays the base's.
        The result equals `render` of the base's pose with this mouth, bit for bit (tested).
        Returns the box (x0, y0, x1, y1)."""
        if self._late is None:
            raise RuntimeError("redraw_mouth() without a render_base() before it")
        skm, p, look, snapshot, parts = self._late
        late, vowels, mouth_open = self._face_look(params.clamped())
        look = dict(look, form=late["form"])  # only the mouth takes the new values
        if self._scratch is None:
            self._scratch = MouthCanvas(self.w, self.h)
        with self._scratch.draw(self._mouth_box, snapshot, rgba) as c:
            for i in parts:
                self._draw_at(c, skm, i, p, look, vowels, mouth_open)
        return self._mouth_box

    def _parts_over_mouth(self, skm: list, sil: list[tuple[int, skia.Path]]) -> list[int]:
        """The mouth and the parts drawn after it whose pixels can reach the mouth box: their
        silhouettes' bounds in pixels, widened by the outline, the brush offset and the strands
        drawn along them (three outline widths) and two pixels of anti-aliasing."""
        x0, y0, x1, y1 = self._mouth_box
        pad = 3.0 * self.lw * self.px + 2.0
        reach: dict[int, skia.Rect] = {}
        for i, path in sil:
            if i > MOUTH_PART:
                r = skm[i].mapRect(path.computeTightBounds())
                reach.setdefault(i, skia.Rect.MakeEmpty()).join(r)
        parts = [MOUTH_PART]
        for i in range(MOUTH_PART + 1, len(PARTS)):
            r = reach.get(i)
            if r is None:  # a part with no silhouette: assume it may reach the box
                parts.append(i)
                continue
            across = r.left() - pad < x1 and r.right() + pad > x0
            if across and r.top() - pad < y1 and r.bottom() + pad > y0:
                parts.append(i)
        return parts

    def _face_look(self, p: AvatarParams) -> tuple[dict[str, float], np.ndarray, float]:
        """The face's expression-dependent values, the vowel weights and the mouth opening."""
        ex = p.expressions
        happy, sad = ex.get("happy", 0.0), ex.get("sad", 0.0)
        surprised, angry = ex.get("surprised", 0.0), ex.get("angry", 0.0)
        look = {
            "smile": min(1.0, p.eye_smile + 1.0 * happy),
            "form": float(np.clip(p.mouth_form + 0.8 * happy - 0.8 * sad - 0.5 * angry, -1, 1)),
            "raise": 0.3 * happy + 0.9 * surprised - 0.25 * angry + 0.1 * sad,
            "tilt": 0.9 * angry - 1.0 * sad,
            "wide": 1.0 + 0.15 * surprised,
            "narrow": 0.6 * angry + 0.3 * sad,
            "iris": 1.0 - 0.18 * surprised,
            "cheek": min(1.0, p.cheek + 0.5 * happy + 0.2 * angry),
        }
        vowels = np.asarray(p.vowels, float).copy()
        mouth_open = p.mouth_open
        if surprised > 0:
            mouth_open = max(mouth_open, 0.45 * surprised)
            vowels[VOWELS.index("O")] += 1.5 * surprised
            vowels[VOWELS.index("N")] *= 1.0 - surprised
        return look, vowels, mouth_open

    def _box_of_mouth(self, mat: np.ndarray) -> tuple[int, int, int, int]:
        """The pixel box that holds every mouth the part can draw under pixel matrix `mat`:
        the design-unit bounds of all mouth shapes (MOUTH_BOUNDS) widened by the mouth's
        outline and two pixels of anti-aliasing, clamped to the image."""
        left, top, right, bottom = MOUTH_BOUNDS
        pad = max(self.lw * 0.6, 1.9)
        xs, ys = (left - pad, right + pad), (top - pad, bottom + pad)
        corners = np.array([[x, y, 1.0] for x in xs for y in ys])
        xy = corners @ mat.T
        x0 = max(0, int(np.floor(xy[:, 0].min())) - 2)
        y0 = max(0, int(np.floor(xy[:, 1].min())) - 2)
        x1 = min(self.w, int(np.ceil(xy[:, 0].max())) + 2)
        y1 = min(self.h, int(np.ceil(xy[:, 1].max())) + 2)
        return x0, y0, max(x0, x1), max(y0, y1)

    def _render(
        self, params: AvatarParams, keep_mouth: bool, into: np.ndarray | None = None
    ) -> RenderedFrame:
        p = params.clamped()
        look, vowels, mouth_open = self._face_look(p)

        mats = self.view[None] @ self.rig.matrices(p)  # design units -> pixels, per part
        skm = [
            skia.Matrix.MakeAll(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], 0, 0, 1)
            for m in mats
        ]

        if into is None:
            rgba = np.zeros((self.h, self.w, 4), np.uint8)
        else:
            rgba = into
            rgba.fill(0)
        surface = skia.Surface(
            rgba, colorType=skia.kRGBA_8888_ColorType, alphaType=skia.kPremul_AlphaType
        )
        c = surface.getCanvas()
        sil: list[tuple[int, skia.Path]] = []
        self._late = None
        snapshot = None
        for i in range(len(PARTS)):
            if keep_mouth and i == MOUTH_PART:
                self._mouth_box = x0, y0, x1, y1 = self._box_of_mouth(mats[i])
                snapshot = rgba[y0:y1, x0:x1].copy()
            sil.extend((i, s) for s in self._draw_at(c, skm, i, p, look, vowels, mouth_open))
        del surface
        if snapshot is not None:
            self._late = (skm, p, look, snapshot, self._parts_over_mouth(skm, sil))

        if not self.with_motion:
            return RenderedFrame(rgba=rgba, motion=None)
        # part-ID map for the motion vectors
        ids = self.motion.begin(self.lw * self.px)
        for i, path in sil:
            ids.save()
            ids.concat(skm[i])
            self.motion.mark(i, path)
            ids.restore()
        motion = self.motion.flow(self.prev, mats)
        self.prev = mats
        return RenderedFrame(rgba=rgba, motion=motion)

    def _draw_at(self, c, skm, i, p, look, vowels, mouth_open) -> list[skia.Path]:
        """Part `i` drawn under its matrix skm[i]; returns its silhouettes (_draw_part)."""
        c.save()
        c.concat(skm[i])
        sil = self._draw_part(c, PARTS[i].name, p, look, vowels, mouth_open)
        c.restore()
        return sil

    def _draw_part(self, c, name, p, look, vowels, mouth_open) -> list[skia.Path]:
        """Draws one part in its local design units; returns its silhouettes for the ID map."""
        side = 1 if name.endswith("_r") else -1
        base = name[:-2] if name[-2:] in ("_l", "_r") else name
        if base == "tail":
            self._shape(c, self.tail[side], self.p_hair, line=False)
            c.drawPath(self.tail_shade[side], self.p_hair_shade)
            self._outline(c, self.tail[side])
            for s in self.tail_strands[side]:
                self._detail(c, s, self.p_strand)
            return [self.tail[side]]
        if base == "back_hair":
            self._shape(c, self.back_hair, self.p_hair_back)
            return [self.back_hair]
        if base == "body":
            return self._draw_body(c)
        if base == "collar":
            self._shape(c, self.collar, self.p_accent)
            c.drawPath(self.collar_stripe, self.p_stripe)
            self._shape(c, self.dicky, self.p_outfit)
            return [self.collar]
        if base == "bow":
            self._shape(c, self.bow_tails, self.p_accent_dark)
            self._shape(c, self.bow_loops, self.p_accent)
            self._shape(c, self.bow_knot, self.p_accent)
            return [self.bow_tails, self.bow_loops]
        if base == "face":
            # the chin's shadow on the neck rides with the head so it stays under the chin
            c.drawPath(self.neck_shadow, self.p_skin_shadow)
            self._shape(c, self.face, self.p_skin, line=False)
            c.save()
            c.clipPath(self.face, skia.ClipOp.kIntersect, True)
            c.drawPath(self.face_shadow, self.p_skin_shadow_soft)
            c.restore()
            if self.outline:
                c.drawPath(self.face, self.p_line)
            return [self.face]
        if base == "cheek":
            self._draw_blush(c, look["cheek"])
            return []
        if base == "eye":
            return self._draw_eye(c, p, look, side)
        if base == "nose":
            c.drawPath(self.nose, self.p_nose)
            return []
        if base == "mouth":
            return self._draw_mouth(c, vowels, mouth_open, look["form"])
        if base == "side":
            self._shape(c, self.side[side], self.p_hair)
            self._detail(c, self.side_strand[side], self.p_strand)
            return [self.side[side]]
        if base == "bangs":
            self._shape(c, self.bangs, self.p_hair)
            c.drawPath(self.highlight, self.p_hair_hi)
            for s in self.strands:
                self._detail(c, s, self.p_strand)
            self._shape(c, self.ties, self.p_accent)
            self._shape(c, self.tie_knots, self.p_accent_dark)
            return [self.bangs, self.ties]
        if base == "ahoge":
            self._shape(c, self.ahoge, self.p_hair)
            return [self.ahoge]
        if base == "brow":
            raise_ = (p.brow_r if side > 0 else p.brow_l) + look["raise"]
            brow = ip.brow_shape(raise_, look["tilt"], side)
            c.drawPath(brow, self.p_brow)
            return [brow]
        return []

    def _draw_body(self, c) -> list[skia.Path]:
        self._shape(c, self.skin_body, self.p_skin)
        self._shape(c, self.choker, self.p_choker, line=False)
        self._shape(c, self.charm, self.p_accent)
        self._shape(c, self.outfit, self.p_outfit)
        for f in self.folds:
            c.drawPath(f, self.p_fold)
        self._shape(c, self.skirt_band, self.p_accent)
        self._shape(c, self.sleeves, self.p_outfit)
        self._shape(c, self.trims, self.p_accent)
        return [self.body_sil]

    def _draw_blush(self, c, amount: float) -> None:
        a = 0.3 + 0.5 * amount
        self.p_blush.setAlphaf(a)
        c.save()
        c.scale(22.0, 11.0)
        c.drawCircle(0, 0, 1.0, self.p_blush)
        c.restore()
        if amount > 0.35:
            self.p_hatch.setAlphaf(min(1.0, (amount - 0.35) * 3.0))
            c.drawPath(self.hatch, self.p_hatch)

    def _draw_eye(self, c, p, look, side) -> list[skia.Path]:
        open_ = (p.eye_open_r if side > 0 else p.eye_open_l) * look["wide"]
        e = ip.eye_shapes(open_, look["smile"], look["narrow"], side)
        if e["open"] > 0.04:
            c.drawPath(e["white"], self.p_white)
            c.save()
            c.clipPath(e["white"], skia.ClipOp.kIntersect, True)
            c.save()
            c.translate(p.gaze_x * 8.0, 2.0 - p.gaze_y * 6.0)
            k = look["iris"]
            c.scale(k, k)
            c.drawPath(self.iris, self.p_iris)
            c.drawPath(self.iris, self.p_iris_ring)
            c.scale(1.0 / k, 1.0 / k)
            c.drawPath(self.pupil, self.p_pupil)
            c.drawPath(self.iris_glow, self.p_glow)
            c.drawPath(self.hl_big, self.p_hl)
            c.drawPath(self.hl_small, self.p_hl)
            c.restore()
            c.drawPath(ip._open_path(e["upper"]), self.p_lid_shadow)
            c.restore()
            if e["open"] > 0.2:
                c.drawPath(e["lower"], self.p_low_lash)
        c.drawPath(e["lash"], self.p_lash)
        return [e["white"], e["lash"]]

    def _draw_mouth(self, c, vowels, mouth_open, form) -> list[skia.Path]:
        pts = ip.mouth_points(vowels, mouth_open, form)
        height = pts[6, 1] - pts[2, 1]
        if height < 2.0:
            line = ip.mouth_line(pts)
            c.drawPath(line, self.p_mouth_closed)
            return []
        path = ip.mouth_path(pts)
        c.drawPath(path, self.p_mouth)
        c.save()
        c.clipPath(path, skia.ClipOp.kIntersect, True)
        w = vowels / max(vowels.sum(), 1e-6)
        teeth = 1.5 + 4.5 * (w[1] + w[3] + 0.4 * w[0])
        top = min(pts[1, 1], pts[2, 1], pts[3, 1])
        c.drawRect(skia.Rect(-30, top - 3, 30, top + teeth), self.p_teeth)
        bottom = pts[6, 1]
        c.drawOval(skia.Rect(-10, bottom - 0.45 * height, 10, bottom + 4), self.p_tongue)
        c.restore()
        c.drawPath(path, self.p_mouth_line)
        return [path]
