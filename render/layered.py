"""`LayeredRenderer`: a layered (PSD / PNG folder) avatar drawn frame by frame, like the idol.

The same interface as render/idol.py's `IdolRenderer` (render/avatar_source.py says what that
is): `render(params)` gives a premultiplied RGBA frame and per-pixel motion vectors,
`render_base` + `redraw_mouth` the late mouth, and `rig` / `view` / `prev` let the render pool
step the rig in its main process.

Layers are resampled once, at load, to the scale the canvas is drawn at (premultiplied,
Lanczos), so a 2048x2048 PSD costs about what a 640x360 frame of it does. Per frame each shown
layer is warped (bilinear, OpenCV) under its rig matrix (render/layered_rig.py) into a patch
that Skia blends over the frame. Which layers show follows the params:

- mouths: mouth_closed below a small opening; else the shape of the strongest of A I U E O
  (a missing shape is stood in for by the nearest one), opened in height with the loudness
  unless the manifest turns `mouth_stretch` off;
- eyes: eyes_open / eyes_half / eyes_closed by the eyes' opening (no eyes_closed: eyes_open
  squashed); blush: its opacity follows the cheek value;
- expressions (F1-F4: happy, sad, surprised, angry): an expression's own layer fades in, or,
  without one, a tint on the face (the head layer and the other layers on it, not hair or
  eyes); the live app's wink (its F4) swaps the eyes for an `expr_wink` layer when there is
  one (else the eyes half close).

Motion vectors: render/motion.py's method with a part-ID map built from the layers' own alpha
(the front-most layer whose pixel is more than half opaque wins a low-res pixel).

Late mouth: the frame is drawn up to the first mouth layer, the mouth box (every mouth layer's
bounds under the frame's head matrix) is kept, and `redraw_mouth` draws the newest mouth and
the later layers that reach the box over that copy — bit for bit what `render` draws with that
mouth (tests/test_avatar_render.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import skia

from core.avatar import VOWELS, AvatarParams
from render.avatar_doc import AvatarDoc
from render.avatar_manifest import AvatarError
from render.avatar_roles import EXPRESSION_ROLES, MOUTHS
from render.layered_rig import LayeredRig
from render.motion import MotionField
from render.mouth_canvas import MouthCanvas

CLOSED_BELOW = 0.12  # mouth_open under this shows mouth_closed
MAX_LAYERS = 250  # the part-ID map is 8-bit
# vowel -> shapes to use in turn when the avatar lacks it
_NEAREST = {
    "A": "AOEIU",
    "I": "IEAUO",
    "U": "UOAIE",
    "E": "EIAOU",
    "O": "OUAEI",
}
# expression -> RGB multipliers of the tint used when the avatar has no layer for it
_TINTS = {
    "happy": (1.0, 0.94, 0.92),
    "sad": (0.86, 0.9, 1.0),
    "surprised": (1.05, 1.05, 1.05),
    "angry": (1.0, 0.8, 0.78),
}
_NEAREST_PX = skia.SamplingOptions()  # patches are drawn at whole-pixel offsets: no resampling
# One OpenCV thread: render parallelism is by processes (render/pool.py), and the encoder and
# the other stages need the remaining cores.
cv2.setNumThreads(1)


@dataclass
class RenderedFrame:
    rgba: np.ndarray  # uint8 (H, W, 4), premultiplied, C-contiguous
    # float32 (H, W, 2), pixels since the previous frame (x, y); None when not asked for
    motion: np.ndarray | None


class _Sprite:
    """One layer resampled to the drawing scale: its premultiplied pixels, its alpha mask for
    the ID map, and the matrix from its pixels to canvas pixels."""

    def __init__(self, layer, k: float) -> None:
        from render.avatar_doc import scale_layer

        if abs(k - 1.0) > 1e-9:
            rgba, nx, ny = scale_layer(layer.rgba, layer.x, layer.y, k)
        else:
            rgba, nx, ny = layer.rgba, layer.x, layer.y
        premul = _premultiply(rgba)
        # cropped to its pixels with a clear 1-pixel border: bilinear sampling fades the edge
        # to nothing (a layer that downscaling left empty keeps one clear pixel)
        ys, xs = np.nonzero(premul[..., 3])
        if len(ys):
            y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        else:
            y0, y1, x0, x1 = 0, 1, 0, 1
        premul = np.pad(premul[y0:y1, x0:x1], ((1, 1), (1, 1), (0, 0)))
        nx, ny = nx + int(x0) - 1, ny + int(y0) - 1
        self.h, self.w = premul.shape[:2]
        self.premul = premul
        self.mask = (premul[..., 3] > 127).astype(np.uint8)
        # sprite pixel (u, v) -> canvas (nx / k + u / k, ...)
        self.local = np.array([[1 / k, 0, nx / k], [0, 1 / k, ny / k], [0, 0, 1.0]])
        self.opacity = float(layer.opacity)


def _premultiply(rgba: np.ndarray) -> np.ndarray:
    a = rgba[..., 3:4].astype(np.uint16)
    out = np.empty_like(rgba)
    out[..., :3] = ((rgba[..., :3].astype(np.uint16) * a + 127) // 255).astype(np.uint8)
    out[..., 3] = rgba[..., 3]
    return np.ascontiguousarray(out)


class LayeredRenderer:
    def __init__(self, doc: AvatarDoc, width: int, height: int) -> None:
        if len(doc.layers) > MAX_LAYERS:
            raise AvatarError(f"{doc.path}: {len(doc.layers)} layers; at most {MAX_LAYERS}")
        self.doc = doc
        self.w, self.h = int(width), int(height)
        cfg = doc.manifest.avatar
        s = min(self.w / doc.width, self.h / doc.height) * cfg.scale
        tx = (self.w - s * doc.width) / 2.0 + cfg.offset[0] * s
        ty = (self.h - s * doc.height) + cfg.offset[1] * s  # standing on the frame's bottom
        self.view = np.array([[s, 0, tx], [0, s, ty], [0, 0, 1.0]])
        self.rig = LayeredRig(doc)
        self.motion = MotionField(self.w, self.h, 4)
        self.with_motion = True  # False: no motion vectors (RenderedFrame.motion is None)
        self.prev: np.ndarray | None = None
        self.sprites = [_Sprite(layer, s) for layer in doc.layers]
        self.roles = [layer.role for layer in doc.layers]
        self.mouths = {r: doc.by_role(r) for r in MOUTHS}
        self.first_mouth = min(i for r in MOUTHS for i in self.mouths[r])
        self.eyes = {r: doc.by_role(r) for r in ("eyes_open", "eyes_half", "eyes_closed")}
        self.expr_layers = {r[5:]: doc.by_role(r) for r in EXPRESSION_ROLES}
        self.stretch = cfg.mouth_stretch
        self.centre = [_centre(layer.bounds) for layer in doc.layers]
        # the tint of an expression without its own layer: the face's skin, not hair or eyes
        self.head_layers = {
            i
            for i, part in enumerate(self.rig.part)
            if part == "head" and self.roles[i] in ("head", "blush", "other")
        }
        self._late: tuple | None = None
        self._scratch: MouthCanvas | None = None
        self._mouth_box = (0, 0, 0, 0)

    def reset(self) -> None:
        self.rig.reset()
        self.prev = None
        self._late = None

    # ------------------------------------------------------------------ the public interface

    def render(self, params: AvatarParams) -> RenderedFrame:
        return self._render(params, keep_mouth=False)

    def render_base(self, params: AvatarParams) -> RenderedFrame:
        return self._render(params, keep_mouth=True)

    def redraw_mouth(self, rgba: np.ndarray, params: AvatarParams) -> tuple[int, int, int, int]:
        """The frame `render_base` drew (in `rgba`) with the mouth of `params`; only the mouth
        box changes. Returns the box (x0, y0, x1, y1)."""
        if self._late is None:
            raise RuntimeError("redraw_mouth() without a render_base() before it")
        pix, mats, pose, snapshot, reach = self._late
        if self._scratch is None:
            self._scratch = MouthCanvas(self.w, self.h)
        with self._scratch.draw(self._mouth_box, snapshot, rgba) as c:
            for item in self._plan(pose, params.clamped()):
                if item[0] >= self.first_mouth and (item[0] in reach or self._is_mouth(item[0])):
                    self._draw(c, pix, mats, item)
        return self._mouth_box

    # ------------------------------------------------------------------ drawing

    def _render(self, params: AvatarParams, keep_mouth: bool) -> RenderedFrame:
        p = params.clamped()
        mats = self.view[None] @ self.rig.matrices(p)  # canvas -> output pixels, per layer
        rgba = np.zeros((self.h, self.w, 4), np.uint8)
        surface = skia.Surface(
            rgba, colorType=skia.kRGBA_8888_ColorType, alphaType=skia.kPremul_AlphaType
        )
        c = surface.getCanvas()
        plan = self._plan(p, p)
        pix = [mats[i] @ self.sprites[i].local for i in range(len(self.sprites))]
        self._late = None
        snapshot = None
        if keep_mouth:
            self._mouth_box = x0, y0, x1, y1 = self._box_of_mouth(pix)
        for item in plan:
            if keep_mouth and snapshot is None and item[0] >= self.first_mouth:
                snapshot = rgba[y0:y1, x0:x1].copy()
            self._draw(c, pix, mats, item)
        del surface
        if keep_mouth:
            if snapshot is None:
                snapshot = rgba[y0:y1, x0:x1].copy()
            self._late = (pix, mats, p, snapshot, self._reach(pix))
        if not self.with_motion:
            return RenderedFrame(rgba=rgba, motion=None)
        self._mark(pix, mats, plan)
        motion = self.motion.flow(self.prev, mats)
        self.prev = mats
        return RenderedFrame(rgba=rgba, motion=motion)

    def _matrix(self, pix: list[np.ndarray], mats: np.ndarray, i: int, extra) -> np.ndarray:
        """Layer i's sprite pixels -> output pixels, with its squash or stretch (a shape
        change in canvas space, about the layer's centre) when `extra` has one."""
        if extra is None:
            return pix[i]
        cy = self.centre[i][1]
        k = extra[1]
        squash = np.array([[1.0, 0, 0], [0, k, cy - k * cy], [0, 0, 1.0]])
        return mats[i] @ squash @ self.sprites[i].local

    def _draw(self, c: skia.Canvas, pix: list[np.ndarray], mats: np.ndarray, item: tuple) -> None:
        """One layer under its matrix: resampled (bilinear) by OpenCV into a frame-aligned
        patch, which Skia blends at a whole-pixel offset (its fast path: no resampling),
        with the layer's opacity and tint. OpenCV's SIMD warp is ~3x Skia's raster
        bilinear drawImage on one core (docs/BENCHMARKS.md)."""
        i, extra, alpha, tint = item
        sp = self.sprites[i]
        m = self._matrix(pix, mats, i, extra)
        bx0, by0, bx1, by1 = self._box_px(m, i)
        x0, y0 = max(0, int(np.floor(bx0)) - 1), max(0, int(np.floor(by0)) - 1)
        x1, y1 = min(self.w, int(np.ceil(bx1)) + 1), min(self.h, int(np.ceil(by1)) + 1)
        if x1 <= x0 or y1 <= y0:
            return
        to_patch = m[:2].copy()
        to_patch[:, 2] -= (x0, y0)
        patch = cv2.warpAffine(
            sp.premul,
            to_patch,
            (x1 - x0, y1 - y0),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=(0, 0, 0, 0),
        )
        image = skia.Image.fromarray(
            patch, colorType=skia.kRGBA_8888_ColorType, alphaType=skia.kPremul_AlphaType
        )
        paint = skia.Paint(AntiAlias=False)
        a = alpha * sp.opacity
        if a < 1.0:
            paint.setAlphaf(a)
        if tint is not None:
            paint.setColorFilter(tint)
        c.drawImage(image, x0, y0, _NEAREST_PX, paint)

    def _is_mouth(self, i: int) -> bool:
        return self.roles[i].startswith("mouth")

    def _plan(self, pose: AvatarParams, mouth: AvatarParams) -> list[tuple]:
        """(layer, extra matrix in output pixels or None, alpha, colour filter) of every layer
        shown, back to front: mouths from `mouth`'s lip sync, the rest from `pose`."""
        ex = pose.expressions
        tint = self._tint(ex)
        mouth_ids, mouth_extra = self._mouth_choice(mouth)
        eye_ids, eye_squash = self._eye_choice(pose)
        # a wink layer is a swap, not a fade: half-faded eyes over open ones look broken
        wink = bool(self.expr_layers["wink"]) and ex.get("wink", 0.0) >= 0.5
        cheek = min(1.0, pose.cheek + 0.5 * ex.get("happy", 0.0))
        plan = []
        for i, role in enumerate(self.roles):
            extra, alpha = None, 1.0
            if role.startswith("mouth"):
                if i not in mouth_ids:
                    continue
                extra = mouth_extra
            elif role.startswith("eyes"):
                if wink or i not in eye_ids:
                    continue
                extra = eye_squash
            elif role == "expr_wink":
                alpha = 1.0 if wink else 0.0
            elif role == "blush":
                alpha = cheek
            elif role.startswith("expr_"):
                alpha = ex.get(role[5:], 0.0)
            if alpha <= 0.0:
                continue
            plan.append((i, extra, alpha, tint if i in self.head_layers else None))
        return plan

    def _mouth_choice(self, p: AvatarParams) -> tuple[set[int], tuple | None]:
        vowels = np.asarray(p.vowels, float).copy()
        open_ = p.mouth_open
        surprised = p.expressions.get("surprised", 0.0)
        if surprised > 0:
            open_ = max(open_, 0.45 * surprised)
            vowels[VOWELS.index("O")] += 1.5 * surprised
        if open_ < CLOSED_BELOW:
            return set(self.mouths["mouth_closed"]), None
        best = VOWELS[int(np.argmax(vowels[:5]))]
        for v in _NEAREST[best]:
            ids = self.mouths[f"mouth_{v.lower()}"]
            if ids:
                break
        if not self.stretch:
            return set(ids), None
        k = 0.45 + 0.55 * min(1.0, open_ / 0.8)
        return set(ids), ("stretch", k)

    def _eye_choice(self, p: AvatarParams) -> tuple[set[int], tuple | None]:
        open_ = 0.5 * (p.eye_open_l + p.eye_open_r) * (1 + 0.15 * p.expressions.get("surprised", 0))
        e = self.eyes
        if open_ >= 0.6 or not (e["eyes_closed"] or e["eyes_half"]):
            if open_ < 0.6 and e["eyes_open"]:
                return set(e["eyes_open"]), ("stretch", max(0.08, open_ / 0.6))
            return set(e["eyes_open"]), None
        if open_ >= 0.25 and e["eyes_half"]:
            return set(e["eyes_half"]), None
        if open_ >= 0.4 or not e["eyes_closed"]:
            return set(e["eyes_half"] or e["eyes_open"]), None
        return set(e["eyes_closed"]), None

    def _tint(self, ex: dict[str, float]) -> skia.ColorFilter | None:
        gain = np.ones(3)
        for name, rgb in _TINTS.items():
            w = ex.get(name, 0.0)
            if w > 0 and not self.expr_layers[name]:
                gain *= 1.0 + w * (np.asarray(rgb) - 1.0)
        if np.allclose(gain, 1.0):
            return None
        r, g, b = (float(v) for v in gain)
        return skia.ColorFilters.Matrix(
            [r, 0, 0, 0, 0, 0, g, 0, 0, 0, 0, 0, b, 0, 0, 0, 0, 0, 1, 0]
        )

    # ------------------------------------------------------------------ boxes and the ID map

    def _box_px(self, m: np.ndarray, i: int) -> tuple[float, float, float, float]:
        sp = self.sprites[i]
        corners = np.array([[0, 0, 1.0], [sp.w, 0, 1.0], [0, sp.h, 1.0], [sp.w, sp.h, 1.0]])
        xy = corners @ m.T
        return xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max()

    def _box_of_mouth(self, pix: list[np.ndarray]) -> tuple[int, int, int, int]:
        """Every mouth layer's pixel bounds under this frame's matrices, two pixels wider (the
        stretch only shrinks a mouth about its centre), clamped to the image."""
        boxes = [self._box_px(pix[i], i) for i, r in enumerate(self.roles) if r.startswith("mouth")]
        x0 = max(0, int(np.floor(min(b[0] for b in boxes))) - 2)
        y0 = max(0, int(np.floor(min(b[1] for b in boxes))) - 2)
        x1 = min(self.w, int(np.ceil(max(b[2] for b in boxes))) + 2)
        y1 = min(self.h, int(np.ceil(max(b[3] for b in boxes))) + 2)
        return x0, y0, max(x0, x1), max(y0, y1)

    def _reach(self, pix: list[np.ndarray]) -> set[int]:
        """Layers after the first mouth whose pixels (squashed eyes included: a squash only
        shrinks) can reach the mouth box."""
        x0, y0, x1, y1 = self._mouth_box
        out = set()
        for i in range(self.first_mouth, len(self.sprites)):
            b = self._box_px(pix[i], i)
            if b[0] - 2 < x1 and b[2] + 2 > x0 and b[1] - 2 < y1 and b[3] + 2 > y0:
                out.add(i)
        return out

    def _mark(self, pix: list[np.ndarray], mats: np.ndarray, plan: list[tuple]) -> None:
        """The part-ID map: for each shown layer, back to front, the low-res pixels whose
        centre falls on a more-than-half-opaque pixel of it get its ID + 1 (OpenCV's nearest
        warp of the layer's mask, straight into the low-res grid)."""
        ids = self.motion.ids
        ids.fill(0)
        f = self.motion.f
        for i, extra, _alpha, _tint in plan:
            m = self._matrix(pix, mats, i, extra)
            bx0, by0, bx1, by1 = self._box_px(m, i)
            c0, c1 = max(0, int(bx0 // f)), min(self.motion.lw, int(bx1 // f) + 1)
            r0, r1 = max(0, int(by0 // f)), min(self.motion.lh, int(by1 // f) + 1)
            if c0 >= c1 or r0 >= r1:
                continue
            # low-res pixel (c, r) of the patch -> its centre in output pixels -> the layer's
            # texel; -0.5: OpenCV rounds to the nearest texel centre, the centre is in it
            grid = np.array([[f, 0, c0 * f + f / 2.0], [0, f, r0 * f + f / 2.0], [0, 0, 1.0]])
            to_texel = (np.linalg.inv(m) @ grid)[:2]
            to_texel[:, 2] -= 0.5
            hit = cv2.warpAffine(
                self.sprites[i].mask,
                to_texel,
                (c1 - c0, r1 - r0),
                flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=0,
            )
            ids[r0:r1, c0:c1][hit > 0] = i + 1


def _centre(b: tuple[int, int, int, int]) -> tuple[float, float]:
    return (b[0] + b[2]) / 2.0, (b[1] + b[3]) / 2.0
