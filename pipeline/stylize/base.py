"""The base of the three post-process kinds: constants as buffers, cropped per-frame passes.

Only pixels within reach of the idol change from frame to frame. `forward` starts every output
from a precomputed *empty frame* (the effect applied to a fully transparent input, one per
grain variant), finds the idol's bounding box (alpha > 0), grows it by the kind's `reach`
(the widest blur/bloom/rim/shift it does), aligns it to `ALIGN` pixels so the low-resolution
pooling grids coincide with the full frame's, runs the kind's `compute` on that window only
and pastes the result. The window's result equals the full-frame result (tests check it).
Frames are processed one at a time (they stay in cache), so a batch equals single frames.

The empty frames are one full-frame `compute` per grain variant: on the CPU, at 720p, seconds
of every render's set-up for cyberpunk and ink wash (docs/BENCHMARKS.md). There they are kept
in the user's cache folder (render/disk_cache.py), keyed by the preset, the size, the seed and
the source of the modules that make them, so a second run reads them back instead.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch

from pipeline.stylize import common as C
from presets.schema import Preset
from render import backgrounds
from render.backgrounds import make_background
from render.disk_cache import cached_array

ALIGN = 16  # window origin/size granularity: a multiple of every pooling factor (4, 8)
TIGHT_ALIGN = 8  # the tight box's granularity: keeps the pooling cells of the window whole
N_GRAIN = 8
# the code every look's stored arrays depend on besides its own module (the disk cache's key)
LOOK_SOURCES = (__file__, C.__file__, backgrounds.__file__)


class Effect(torch.nn.Module):
    """forward(x: uint8 (B, H, W, 4) premultiplied, idx: int64 (B,) frame numbers) -> same.

    Constants (background, maps, textures) are planar float buffers, so `.to(device)` moves
    them all once. Opaque mode composites over the preset's background (alpha 255 everywhere);
    transparent mode leaves the background out and keeps the output premultiplied (rgb <=
    alpha). Subclasses implement `compute` and set `reach` (pixels of influence beyond alpha).
    """

    reach = 64

    def __init__(self, preset: Preset, width: int, height: int, transparent: bool, seed: int = 0):
        super().__init__()
        self.post = preset.post
        # everything the empty frames depend on besides the code (the disk cache's key)
        self._identity = f"{preset.model_dump_json()}|{width}x{height}|{transparent}|{seed}"
        self.width, self.height, self.transparent = width, height, transparent
        self.crop = True  # False: always process the whole frame (tests compare both)
        if transparent:
            bg = torch.zeros(height, width, 3)
        else:
            bg = make_background(preset.background, width, height, seed).float().div_(255.0)
            bg = self.prepare_background(bg)
        self.register_buffer("bg", bg.permute(2, 0, 1).contiguous(), persistent=False)
        vig = C.vignette_map(height, width, self.post.vignette, "cpu")[..., 0]
        self.register_buffer("vignette", vig.contiguous(), persistent=False)
        self.grain_amount = self.post.grain
        grain = (
            C.grain_bank(height, width, N_GRAIN, seed + 17, "cpu")[..., 0]
            if self.post.grain > 0
            else torch.zeros(1, height, width)
        )
        self.register_buffer("grain", grain.contiguous(), persistent=False)
        self.register_buffer("empty", torch.zeros(0, dtype=torch.uint8), persistent=False)
        # the idol's own box (alpha > 0) inside the current window, window coordinates, aligned
        # to TIGHT_ALIGN: `compute` runs its full colour math there and only the glow terms in
        # the rest of the window (the reach border). The whole window where it is not known.
        self.tight: tuple[int, int, int, int] | None = None

    def prepare_background(self, bg: torch.Tensor) -> torch.Tensor:
        """Hook: bake static effects into the (H, W, 3) float background once."""
        return bg

    def compute(self, p: torch.Tensor, win: tuple[int, int, int, int], g: int):
        """planar float (4, h, w) premultiplied RGBA 0..1 of window (y0, y1, x0, x1), grain
        variant g -> (rgb float (3, h, w) already scaled to 0..255 and offset by +0.5 for
        rounding, alpha float (h, w) the same way, or None: opaque -> 255, transparent -> the
        input alpha)."""
        raise NotImplementedError

    # ---- driver ---------------------------------------------------------------------------

    def _window(self, x: torch.Tensor) -> tuple[int, int, int, int] | None:
        """Bounding box of alpha > 0 of uint8 (H, W, 4) x grown by `reach`, aligned to ALIGN,
        clipped to the frame. Also sets `self.tight` (the box itself, aligned to TIGHT_ALIGN,
        window coordinates)."""
        H, W = self.height, self.width
        self.tight = None
        if not self.crop or x.device.type != "cpu":
            # On a GPU the whole frame costs ~1-2 ms and finding the box would need a host
            # sync (nonzero) in the hot path: crop only on the CPU.
            return 0, H, 0, W
        extent = C.alpha_extent(x)
        if extent is None:
            return None
        win, (ty0, ty1, tx0, tx1) = self._boxes(extent)
        wy0, _, wx0, _ = win
        self.tight = ty0 - wy0, ty1 - wy0, tx0 - wx0, tx1 - wx0
        return win

    def _boxes(self, extent: tuple[int, int, int, int]):
        """(window, tight box), both in frame coordinates, of the alpha extent (y0, y1, x0, x1):
        the extent grown by `reach` and aligned to ALIGN, and the extent aligned to
        TIGHT_ALIGN inside that window."""
        y0, y1, x0, x1 = extent
        r, t = self.reach, TIGHT_ALIGN
        wy0, wx0 = max(0, (y0 - r) // ALIGN * ALIGN), max(0, (x0 - r) // ALIGN * ALIGN)
        wy1 = min(self.height, -(-(y1 + r) // ALIGN) * ALIGN)
        wx1 = min(self.width, -(-(x1 + r) // ALIGN) * ALIGN)
        ty0, tx0 = y0 // t * t, x0 // t * t
        ty1, tx1 = min(wy1, -(-y1 // t) * t), min(wx1, -(-x1 // t) * t)
        return (wy0, wy1, wx0, wx1), (ty0, ty1, tx0, tx1)

    def tight_box(self, h: int, w: int) -> tuple[int, int, int, int]:
        """The idol's box in the current (h, w) window: (ty0, ty1, tx0, tx1)."""
        return self.tight if self.tight is not None else (0, h, 0, w)

    def _frame(self, x: torch.Tensor, out: torch.Tensor, g: int) -> None:
        """One frame: x uint8 (H, W, 4) -> writes the changed window of `out` (H, W, 4)."""
        win = self._window(x)
        if win is None:
            return
        y0, y1, x0, x1 = win
        xc = x[y0:y1, x0:x1]
        rgb, alpha = self.compute(C.planes(xc), win, g)
        dst = out[y0:y1, x0:x1]
        dst.view(torch.int32).squeeze(-1).copy_(self._pack(rgb, alpha, xc))

    def _pack(self, rgb: torch.Tensor, alpha: torch.Tensor | None, xc: torch.Tensor):
        """float rgb (3, h, w) and alpha (h, w) in 0..255 (+0.5) -> int32 (h, w) RGBA pixels.

        The channels are floored and combined as r + 256 g + 65536 b, exact in float32,
        which is much cheaper than an interleaving copy of three planes."""
        rgb = rgb.clamp_(0.0, 255.0)
        if self.transparent:
            if alpha is None:
                lim = ((xc.view(torch.int32).squeeze(-1) >> 24) & 255).float().add_(0.5)
            else:
                lim = alpha.clamp_(0.0, 255.0)
            rgb = torch.minimum(rgb, lim, out=rgb)
            top = lim.floor_().to(torch.int32) << 24
        rgb = rgb.floor_()
        v = torch.add(rgb[0], rgb[1], alpha=256.0).add_(rgb[2], alpha=65536.0).to(torch.int32)
        return v.bitwise_or_(top) if self.transparent else v.bitwise_or_(-(1 << 24))

    def _empty(self, device: torch.device) -> torch.Tensor:
        if self.empty.numel() == 0 or self.empty.device != device:
            if device.type != "cpu":  # on a GPU they take milliseconds
                self.empty = self._make_empty(device)
            else:
                arr = cached_array(
                    "looks",
                    f"{backgrounds.LIBRARIES}|empty frames|{self._identity}",
                    lambda: self._make_empty(device).numpy(),
                    (self.grain.shape[0], self.height, self.width, 4),
                    np.uint8,
                    keep=6,
                    sources=(*LOOK_SOURCES, inspect.getfile(type(self))),
                )
                self.empty = torch.from_numpy(arr)
        return self.empty

    def _make_empty(self, device: torch.device) -> torch.Tensor:
        """The effect applied to a fully transparent frame, once per grain variant."""
        H, W = self.height, self.width
        n = self.grain.shape[0]
        e = torch.zeros(n, H, W, 4, dtype=torch.uint8, device=device)
        z = torch.zeros(4, H, W, device=device)
        self.tight = None
        for g in range(n):
            rgb, alpha = self.compute(z, (0, H, 0, W), g)
            e[g].view(torch.int32).squeeze(-1).copy_(self._pack(rgb, alpha, e[g]))
        return e

    @property
    def variants(self) -> int:
        """How many grain variants the frames cycle through (frame g uses variant g % this)."""
        return self.grain.shape[0]

    def variant(self, x: torch.Tensor, g: int) -> torch.Tensor:
        """One frame (1, H, W, 4) with grain variant `g` -> (1, H, W, 4): what `forward` does
        per frame, as a pure function of `x` (on a GPU: no host sync), so StylizeStage can
        capture it as one CUDA graph per variant."""
        out = torch.empty_like(x)
        self._one(x[0], out[0], g)
        return out

    def _one(self, x: torch.Tensor, out: torch.Tensor, g: int) -> None:
        """Frame x (H, W, 4) with grain variant g into `out`: the empty frame, then the idol's
        window over it."""
        out.copy_(self._empty(x.device)[g])
        self._frame(x, out, g)

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        # idx stays on the host (StylizeStage passes it so): no device sync to read it
        for b, g in enumerate((idx.cpu() % self.variants).tolist()):
            self._one(x[b], out[b], g)
        return out
