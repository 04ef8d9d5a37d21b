"""Where a late mouth is redrawn, for every avatar source (render/idol.py, render/layered.py).

    MouthCanvas(width, height)
        draw(box, snapshot, rgba) -> context manager yielding a skia.Canvas

A frame-sized scratch image of which only the mouth box is ever valid: the box is filled with
the pixels from before the mouth was drawn (`snapshot`), the caller draws the mouth and what
lies in front of it the way the whole render does (not clipped: Skia rasterises a clipped path
a level or two differently), and the box is copied back into the frame `rgba`. Outside the box
the scratch holds leftovers of earlier frames, never read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import skia


class MouthCanvas:
    def __init__(self, width: int, height: int) -> None:
        self.pixels = np.zeros((height, width, 4), np.uint8)

    @contextlib.contextmanager
    def draw(
        self, box: tuple[int, int, int, int], snapshot: np.ndarray, rgba: np.ndarray
    ) -> Iterator[skia.Canvas]:
        x0, y0, x1, y1 = box
        self.pixels[y0:y1, x0:x1] = snapshot
        surface = skia.Surface(
            self.pixels, colorType=skia.kRGBA_8888_ColorType, alphaType=skia.kPremul_AlphaType
        )
        yield surface.getCanvas()
        del surface  # drawing done before the box is read back
        rgba[y0:y1, x0:x1] = self.pixels[y0:y1, x0:x1]
