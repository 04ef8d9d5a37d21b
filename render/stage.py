"""`RenderStage`: the avatar as a pipeline stage (params in, image + motion out).

The avatar is the built-in idol unless `avatar` names another source (render/avatar_source.py:
a layered PSD or PNG folder); every source draws through the same interface.

Live sessions draw each frame in two steps, so the mouth shows the newest audio: `prepare`
draws the whole idol from one set of params (off the frame's critical path, while the frame
before is still on the GPU), `finish` redraws only the mouth, from the params the frame thread
holds when the frame must start (render/idol.py `redraw_mouth`: 0.25 ms median, 0.8 ms P99 at
640x360 on a 2-core CPU, against 5-10 ms for the whole idol). `process` draws a frame in one
go, as offline rendering does.
"""

from __future__ import annotations

import time

import torch

from core.frame import MOUTH_TIMING, Frame
from core.stage import BaseStage, Context, spec
from presets.schema import LineStyle, Palette
from render.avatar_source import as_spec


class RenderStage(BaseStage):
    name = "render"
    needs = spec("params")

    def __init__(
        self, width: int, height: int, palette: Palette, line: LineStyle, avatar=None
    ) -> None:
        self.width, self.height = int(width), int(height)
        self.gives = spec("image", "motion", size=(self.width, self.height), device="cpu")
        self.avatar = as_spec(avatar)
        self.renderer = self.avatar.make_renderer(self.width, self.height, palette, line)
        self.pin = False
        self._base: tuple[int, torch.Tensor, torch.Tensor, float] | None = None

    def drop_motion(self) -> None:
        """Draw no motion vectors: no stage after this one reads them (the CPU's render →
        stylize → encode). Their part-ID map and per-pixel flow are a third of a 720p idol's
        drawing time on a small CPU (docs/BENCHMARKS.md)."""
        self.gives = spec("image", size=(self.width, self.height), device="cpu")
        if hasattr(self.renderer, "with_motion"):
            self.renderer.with_motion = False

    def setup(self, ctx: Context) -> None:
        # Pinned host memory makes the later host->GPU copy asynchronous; only worth it (and
        # only possible) when a CUDA device will consume the frames.
        self.pin = ctx.extras.get("device") == "cuda" and torch.cuda.is_available()
        self.renderer.reset()
        self._base = None

    draws_beside = False  # prepare() draws on the caller's thread

    @property
    def prepared_index(self) -> int | None:
        """The frame whose idol `prepare` drew (None: none)."""
        return None if self._base is None else self._base[0]

    def process(self, frame: Frame) -> Frame:
        t0 = time.perf_counter()
        out = self.renderer.render(frame.params)
        image, motion = self._tensors(out)
        ms = (time.perf_counter() - t0) * 1000.0
        return frame.with_(image=image, motion=motion).timed(self.name, ms)

    def prepare(self, frame: Frame) -> None:
        """Draws frame `frame.index` from `frame.params`; `finish` gives it its mouth."""
        t0 = time.perf_counter()
        image, motion = self._tensors(self.renderer.render_base(frame.params))
        self._base = (frame.index, image, motion, (time.perf_counter() - t0) * 1000.0)

    def finish(self, frame: Frame) -> Frame:
        """The prepared frame with the mouth of `frame.params` (prepared now if it was not)."""
        t0 = time.perf_counter()
        if self._base is None or self._base[0] != frame.index:
            self.prepare(frame)
        _, image, motion, base_ms = self._base
        self._base = None
        self.renderer.redraw_mouth(image.numpy(), frame.params)
        ms = (time.perf_counter() - t0) * 1000.0
        out = frame.with_(image=image, motion=motion)
        return out.timed(self.name, base_ms).timed(MOUTH_TIMING, ms)

    def _tensors(self, out) -> tuple[torch.Tensor, torch.Tensor | None]:
        # the renderer allocates fresh arrays every frame, so wrapping them without a copy is
        # safe even while earlier frames still wait in downstream queues
        image = torch.from_numpy(out.rgba)
        motion = None if out.motion is None or "motion" not in self.gives.fields else out.motion
        motion = None if motion is None else torch.from_numpy(motion)
        if self.pin:
            image = image.pin_memory()
            motion = None if motion is None else motion.pin_memory()
        return image, motion

    def close(self) -> None:
        self.renderer.reset()
        self._base = None


def drop_unread_motion(first, later) -> None:
    """`first.drop_motion()` when it has one and none of the `later` stages (and sink) needs
    "motion"."""
    needs = [getattr(s, "needs", None) for s in later]
    if hasattr(first, "drop_motion") and not any(n and "motion" in n.fields for n in needs):
        first.drop_motion()
