"""The one small interface both display paths implement."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


class PresenterError(RuntimeError):
    """A display path could not be set up (the message says why, for the UI)."""


@runtime_checkable
class Presenter(Protocol):
    name: str  # "vulkan (llvmpipe, FIFO)" / "qt (QWidget raster)": what runs, for the UI
    refresh_ns: int  # nominal refresh interval of the screen it presents to
    timing: str  # how present timestamps are obtained (or why they are not)

    def present(self, rgba: np.ndarray) -> None:
        """Show an H x W x 4 uint8 RGBA frame (premultiplied alpha) at the next VSYNC."""

    def last_present_ns(self) -> int | None:
        """time.monotonic_ns() of the last present (measured or approximate; see `timing`)."""

    def close(self) -> None: ...


def refresh_ns_from_hz(hz: float) -> int:
    return round(1e9 / hz) if hz and hz > 1.0 else 16_666_667
