"""A sink that keeps the last frame it receives and writes it as a PNG (RGBA, straight alpha)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from core.frame import Frame
from core.stage import Context, spec
from pipeline.sinks.output import PartialFile
from pipeline.sinks.video_file import unpremultiply


def write_png(path: Path, rgba_premultiplied: np.ndarray) -> None:
    """Write atomically: a reader never sees a half-written PNG at `path`. The partial file is
    held under the exclusive lock of `pipeline.sinks.output.PartialFile` while it is written."""
    path = Path(path)
    claim = PartialFile(path)
    partial = claim.acquire()
    straight = np.ascontiguousarray(unpremultiply(rgba_premultiplied))
    height, width = straight.shape[:2]
    try:
        with av.open(str(partial), "w", format="image2") as container:
            stream = container.add_stream("png", rate=1)
            stream.width, stream.height, stream.pix_fmt = width, height, "rgba"
            frame = av.VideoFrame.from_ndarray(straight, format="rgba")
            for packet in stream.encode(frame):
                container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        claim.publish()
    finally:
        claim.discard()  # nothing left when publishing failed (no-op after publish)


class StillSink:
    name = "still"
    needs = spec("image")

    def __init__(self, path: Path):
        self.path = Path(path)
        self.last: Frame | None = None

    def setup(self, ctx: Context) -> None:
        pass

    def write(self, frame: Frame) -> None:
        self.last = frame

    def finish(self) -> None:
        if self.last is None:
            raise ValueError(f"{self.path}: no frame was rendered")
        write_png(self.path, self.last.image.cpu().numpy())

    def abort(self) -> None:
        self.last = None
