"""Motion vectors for a renderer whose parts are rigid drawings placed by affine matrices.

Approach:
1. A *part-ID map* is rasterised at 1/`factor` resolution, without anti-aliasing, into an A8
   surface: every part's silhouette is filled (and stroked by the outline width) with its
   ID + 1 as the alpha value and blend mode `Src`, back to front, so each low-res pixel holds
   the front-most part (0 = background).
2. For part k with pixel matrices C (this frame) and P (previous frame) the surface point under
   pixel p was at P·C⁻¹·p, so its motion is the affine map (I − P·C⁻¹)·p — six numbers per
   part. They are gathered per low-res pixel through the ID map and evaluated at the block
   centre, then repeated (nearest) up to full resolution.

Approximations: vectors are piecewise constant over `factor`×`factor` blocks (an affine flow
changes by well under a hundredth of a pixel across a block at normal speeds, but part
boundaries are blocky); shape changes *within* a part (blinks, mouth shapes, brow and eye
deformation, blush) are not motion — only the rigid movement of the part is; anti-aliased
edges and semi-transparent overlays take the vector of the part whose silhouette wins the
pixel; the background has zero motion.
"""

from __future__ import annotations

import numpy as np
import skia


class MotionField:
    def __init__(self, width: int, height: int, factor: int = 4) -> None:
        self.w, self.h, self.f = width, height, factor
        self.lw, self.lh = -(-width // factor), -(-height // factor)
        self.ids = np.zeros((self.lh, self.lw), np.uint8)
        self.surface = skia.Surface(self.ids, colorType=skia.kAlpha_8_ColorType)
        self.canvas = self.surface.getCanvas()
        # full-resolution coordinates of the low-res pixel centres
        self.x = (np.arange(self.lw, dtype=np.float32) * factor + factor / 2.0)[None, :]
        self.y = (np.arange(self.lh, dtype=np.float32) * factor + factor / 2.0)[:, None]
        self.paint = skia.Paint(AntiAlias=False, BlendMode=skia.BlendMode.kSrc)
        self.paint.setStyle(skia.Paint.kStrokeAndFill_Style)

    def begin(self, stroke: float) -> skia.Canvas:
        """Clear the ID map; returns its canvas, already scaled so full-res matrices apply."""
        self.ids.fill(0)
        self.canvas.restoreToCount(1)
        self.canvas.save()
        self.canvas.scale(1.0 / self.f, 1.0 / self.f)
        self.paint.setStrokeWidth(stroke)
        return self.canvas

    def mark(self, part: int, path: skia.Path) -> None:
        """Fill `path` (under the canvas's current matrix) with ID part+1."""
        self.paint.setColor(skia.ColorSetARGB(part + 1, 0, 0, 0))
        self.canvas.drawPath(path, self.paint)

    def flow(self, prev: np.ndarray | None, cur: np.ndarray) -> np.ndarray:
        """(H, W, 2) float32 motion given (n, 3, 3) pixel matrices of the previous/this frame;
        no previous frame (the first, or after a reset): no motion."""
        if prev is None:
            return np.zeros((self.h, self.w, 2), np.float32)
        n = len(cur)
        d = np.eye(3)[None] - prev @ np.linalg.inv(cur)  # (n, 3, 3)
        table = np.zeros((n + 1, 6), np.float32)
        table[1:] = d[:, :2, :].reshape(n, 6)
        table[np.abs(table) < 1e-7] = 0.0  # identical matrices -> exactly zero
        out = np.empty((self.lh * self.f, self.lw * self.f, 2), np.float32)
        if not table.any():
            out.fill(0.0)
        else:
            t = table.T.copy()  # gather one coefficient at a time: fewer temporaries
            ids = self.ids
            low = np.empty((self.lh, self.lw, 2), np.float32)
            for k in range(2):
                o = low[..., k]
                o[:] = t[3 * k][ids] * self.x
                o += t[3 * k + 1][ids] * self.y
                o += t[3 * k + 2][ids]
            # nearest upsampling: repeat (x, y) pairs as one 64-bit word along the row, then
            # copy each row f times (contiguous copies; ~15x faster than a 5-D broadcast)
            row = np.repeat(low.view(np.uint64).reshape(self.lh, self.lw), self.f, axis=1)
            out.view(np.uint64).reshape(self.lh, self.f, self.lw * self.f)[:] = row[:, None, :]
        if out.shape[0] != self.h or out.shape[1] != self.w:
            out = np.ascontiguousarray(out[: self.h, : self.w])
        return out
