"""`RenderStage`: the built-in idol as a pipeline stage (params in, image + motion out)."""

from __future__ import annotations

import time

import torch

from pipeline.frame import Frame
from pipeline.stage import BaseStage, Context, spec
from presets.schema import LineStyle, Palette
from render.idol import IdolRenderer


class RenderStage(BaseStage):
    name = "render"
    needs = spec("params")

    def __init__(self, width: int, height: int, palette: Palette, line: LineStyle) -> None:
        self.width, self.height = int(width), int(height)
        self.gives = spec("image", "motion", size=(self.width, self.height), device="cpu")
        self.renderer = IdolRenderer(self.width, self.height, palette, line)
        self.pin = False

    def setup(self, ctx: Context) -> None:
        # Pinned host memory makes the later host->GPU copy asynchronous; only worth it (and
        # only possible) when a CUDA device will consume the frames.
        self.pin = ctx.extras.get("device") == "cuda" and torch.cuda.is_available()
        self.renderer.reset()

    def process(self, frame: Frame) -> Frame:
        t0 = time.perf_counter()
        out = self.renderer.render(frame.params)
        # the renderer allocates fresh arrays every frame, so wrapping them without a copy is
        # safe even while earlier frames still wait in downstream queues
        image = torch.from_numpy(out.rgba)
        motion = torch.from_numpy(out.motion)
        if self.pin:
            image, motion = image.pin_memory(), motion.pin_memory()
        ms = (time.perf_counter() - t0) * 1000.0
        return frame.with_(image=image, motion=motion).timed(self.name, ms)

    def close(self) -> None:
        self.renderer.reset()
