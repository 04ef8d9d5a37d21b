"""A test sink shared by several test modules (imported from here, not from one another)."""

from __future__ import annotations

from core.frame import Frame
from core.stage import spec


class Collect:
    """A sink that keeps every frame (image and motion) it is given."""

    name = "collect"
    needs = spec("image", "motion")

    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def setup(self, ctx) -> None:
        pass

    def write(self, frame: Frame) -> None:
        self.frames.append(frame)

    def finish(self) -> None:
        pass

    def abort(self) -> None:
        pass
