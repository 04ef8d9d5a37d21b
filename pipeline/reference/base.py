"""The reference painter interface shared by the three looks.

    ReferencePainter(preset, width, height, seed=0)      a torch.nn.Module
        forward(x: uint8 (B, H, W, 4) premultiplied RGBA of the raw idol render,
                idx: int64 (B,) frame numbers, ignored) -> uint8 (B, H, W, 4), alpha 255

Subclasses implement `paint(p) -> rgb`: premultiplied float (B, 4, H, W) 0..1 in,
opaque float RGB (B, 3, H, W) 0..1 out, over `self.bg` (the preset's background from
render.backgrounds.make_background, the same one the procedural stylize uses). Everything
constant (background, textures, precomputed static lighting) is a non-persistent buffer, so
`.to(device)` moves it; `paint` creates its temporaries on the input's device.
"""

from __future__ import annotations

import torch

from pipeline.reference import ops
from presets.schema import Preset
from render.backgrounds import make_background


class ReferencePainter(torch.nn.Module):
    """Offline reference look of one preset kind (see the subclasses' docstrings).

    `reach`: no pixel farther than this many pixels from the idol's alpha > 0 depends on the
    frame (it is a fixed function of the background), so static background stays bit-exact.
    """

    kind = ""

    def __init__(self, preset: Preset, width: int, height: int, seed: int = 0):
        super().__init__()
        if preset.post.kind != self.kind:
            raise ValueError(
                f"{type(self).__name__} paints {self.kind!r}, not {preset.post.kind!r}"
            )
        self.preset, self.post = preset, preset.post
        self.width, self.height, self.seed = int(width), int(height), int(seed)
        self.s = self.height / 360.0  # lengths below are given in pixels at 360 lines
        bg = make_background(preset.background, self.width, self.height, self.seed)
        self.register_buffer("bg", ops.planar(bg[None]), persistent=False)  # (1, 3, H, W)
        self.reach = 0

    def px(self, v: float) -> float:
        """A length given at 360 lines, at this frame height."""
        return v * self.s

    def paint(self, p: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        want = (self.height, self.width, 4)
        if x.dtype != torch.uint8 or x.dim() != 4 or tuple(x.shape[1:]) != want:
            raise ValueError(
                f"{type(self).__name__}: expected uint8 (B, {self.height}, {self.width}, 4), "
                f"got {x.dtype} {tuple(x.shape)}"
            )
        with torch.no_grad():
            rgb = self.paint(ops.planar(x))
        return ops.opaque_u8(rgb)

    def extra_repr(self) -> str:
        return f"preset={self.preset.name!r}, size={self.width}x{self.height}, seed={self.seed}"
