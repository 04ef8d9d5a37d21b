"""The procedural post-process stage: background + per-preset look, in torch.

    StylizeStage(preset, width, height, transparent=False, compile=False)
        name "stylize", needs spec("image"), gives spec("image")
        process_batch(frames): stacks the images, runs the preset's effect once, unstacks.

    make_effect(preset, width, height, transparent=False) -> torch.nn.Module
        effect(x_u8 (B, H, W, 4) premultiplied, idx int64 (B,)) -> uint8 (B, H, W, 4)

Kinds (`preset.post.kind`): "toon" (pipeline/stylize/toon.py), "ink-wash" (ink_wash.py),
"cyberpunk" (cyberpunk.py). Frames stay on their device: the effect's constants (background,
maps, textures) are moved to the input's device on first use and kept there.

Opaque mode composites over render/backgrounds.make_background(preset.background, w, h) and
returns alpha 255 everywhere. Transparent mode draws no background; the output is still
premultiplied (rgb <= alpha); glows (bloom, ink bleed) may add soft alpha near the idol.

Only torch/numpy/stdlib and presets/ + render/ are imported here.
"""

from __future__ import annotations

import time

import torch

from pipeline.cpu_memory import keep_freed_memory
from pipeline.frame import Frame
from pipeline.stage import BaseStage, Context, spec
from pipeline.stylize.base import Effect
from pipeline.stylize.cyberpunk import Cyberpunk
from pipeline.stylize.ink_wash import InkWash
from pipeline.stylize.toon import Toon
from presets.schema import Preset

KINDS: dict[str, type[Effect]] = {"toon": Toon, "ink-wash": InkWash, "cyberpunk": Cyberpunk}

__all__ = ["KINDS", "StylizeStage", "make_effect"]


def make_effect(preset: Preset, width: int, height: int, transparent: bool = False) -> Effect:
    return KINDS[preset.post.kind](preset, width, height, transparent)


class StylizeStage(BaseStage):
    name = "stylize"
    needs = spec("image")
    gives = spec("image")
    max_batch = 4

    def __init__(
        self,
        preset: Preset,
        width: int,
        height: int,
        transparent: bool = False,
        compile: bool = False,
    ):
        """`compile=True` runs the effect through torch.compile at `setup()` (fuses the
        per-pixel math; ~5x faster on CPU, needs a C++ compiler / Triton). A compile that fails
        raises: it is never silently replaced by the eager path."""
        self.preset, self.width, self.height = preset, width, height
        self.transparent = transparent
        self.needs = spec("image", size=(width, height))
        self.gives = spec("image", size=(width, height))
        self.effect = make_effect(preset, width, height, transparent).eval()
        self._device = torch.device("cpu")
        self._compile = compile
        self._fn = self.effect

    def setup(self, ctx: Context) -> None:
        keep_freed_memory()  # reuse freed large buffers instead of page-faulting fresh ones
        if self._compile:
            self._fn = torch.compile(self.effect, dynamic=False)
        # warm up (and compile) with a full batch so the first real frame pays nothing
        x = torch.zeros(self.max_batch, self.height, self.width, 4, dtype=torch.uint8)
        self._run(x.to(self._device), torch.arange(self.max_batch))

    def _run(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        if x.device != self._device:
            self.effect.to(x.device)
            self._device = x.device
        n = x.shape[0]
        if self._compile and n < self.max_batch:  # keep one static shape for the compiled graph
            pad = x.new_zeros((self.max_batch - n, *x.shape[1:]))
            x = torch.cat([x, pad])
            idx = torch.cat([idx, idx.new_zeros(self.max_batch - n)])
        with torch.inference_mode():
            return self._fn(x, idx.cpu())[:n]

    def apply(self, images: torch.Tensor, indices: torch.Tensor | None = None) -> torch.Tensor:
        """uint8 (B, H, W, 4) premultiplied -> uint8 (B, H, W, 4); `indices` = frame numbers."""
        if indices is None:
            indices = torch.arange(images.shape[0])
        out = []
        for i in range(0, images.shape[0], self.max_batch):
            out.append(self._run(images[i : i + self.max_batch], indices[i : i + self.max_batch]))
        return torch.cat(out) if len(out) > 1 else out[0]

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        t0 = time.perf_counter()
        for f in frames:
            if f.image is None or tuple(f.image.shape) != (self.height, self.width, 4):
                raise ValueError(
                    f"stylize: frame {f.index} image is "
                    f"{None if f.image is None else tuple(f.image.shape)}, "
                    f"expected ({self.height}, {self.width}, 4) uint8"
                )
        x = torch.stack([f.image for f in frames])
        idx = torch.tensor([f.index for f in frames], dtype=torch.int64)
        y = self.apply(x, idx)
        ms = (time.perf_counter() - t0) * 1000.0 / len(frames)
        return [f.with_(image=y[i]).timed(self.name, ms) for i, f in enumerate(frames)]
