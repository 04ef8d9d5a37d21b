"""The base of the three post-process kinds: constants as buffers, one `forward` per batch."""

from __future__ import annotations

import torch

from pipeline.stylize import common as C
from presets.schema import Preset
from render.backgrounds import make_background


class Effect(torch.nn.Module):
    """forward(x: uint8 (B, H, W, 4) premultiplied, idx: int64 (B,) frame numbers) -> same.

    Constants (background, maps, textures) are buffers, so `.to(device)` moves them all once.
    Opaque mode composites over the preset's background (alpha 255 everywhere); transparent
    mode leaves the background out and keeps the output premultiplied (rgb <= alpha).
    """

    def __init__(self, preset: Preset, width: int, height: int, transparent: bool, seed: int = 0):
        super().__init__()
        self.post = preset.post
        self.width, self.height, self.transparent = width, height, transparent
        if transparent:
            self.register_buffer("bg", torch.zeros(height, width, 3), persistent=False)
        else:
            bg = make_background(preset.background, width, height, seed).float().div_(255.0)
            self.register_buffer("bg", self.prepare_background(bg), persistent=False)
        self.register_buffer(
            "vignette", C.vignette_map(height, width, self.post.vignette, "cpu"), persistent=False
        )
        self.grain_amount = self.post.grain
        self.register_buffer(
            "grain",
            C.grain_bank(height, width, 8, seed + 17, "cpu")
            if self.post.grain > 0
            else torch.zeros(1, 1, 1, 1),
            persistent=False,
        )

    def prepare_background(self, bg: torch.Tensor) -> torch.Tensor:
        """Hook: bake static effects into the (H, W, 3) float background once."""
        return bg

    def grain_for(self, idx: torch.Tensor) -> torch.Tensor:
        """Per-frame grain (B, H, W, 1) chosen by frame number, so batching does not change it."""
        return self.grain[idx % self.grain.shape[0]]

    def finish(self, out_rgb: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """float rgb (B,H,W,3) + alpha (B,H,W,1) -> uint8 RGBA premultiplied."""
        if self.transparent:
            alpha = alpha.clamp(0, 1)
            out_rgb = torch.minimum(out_rgb.clamp(min=0), alpha)
        else:
            alpha = torch.ones_like(alpha)
        return C.to_u8(torch.cat([out_rgb, alpha], dim=-1))
