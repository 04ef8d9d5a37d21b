"""Time stamps of a command's way from launch to its last frame, for `kagura bench e2e`.

    KAGURA_TRACE=FILE kagura render …     appends one JSON line per event to FILE:
        {"event": "parsed", "t_ns": <time.time_ns()>, ...}

Without KAGURA_TRACE nothing is written (one environment lookup per event). The events are
wall-clock (`time.time_ns`), so the bench, another process, lines them up with its own clock.
"""

from __future__ import annotations

import json
import os
import time

ENV = "KAGURA_TRACE"


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def mark(event: str, t_ns: int | None = None, **fields) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"event": event, "t_ns": t_ns or time.time_ns(), **fields})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def step(name: str) -> None:
    """A time stamp inside a phase ("setup: NAME"), listed by `kagura bench e2e` as a set-up
    step (where the seconds before the first frame went)."""
    if os.environ.get(ENV):
        mark(f"setup: {name}")


class FrameMarks:
    """Wraps an `on_frame` callback: marks the first frame at once, the last one on `close`."""

    def __init__(self, on_frame, first_event: str = "first frame"):
        self.on_frame = on_frame
        self.first_event = first_event
        self.frames = 0
        self.last_ns: int | None = None

    def __call__(self, frame) -> None:
        if self.on_frame is not None:
            self.on_frame(frame)
        self.last_ns = time.time_ns()
        self.frames += 1
        if self.frames == 1:
            mark(self.first_event, self.last_ns)

    def close(self) -> None:
        if self.last_ns is not None:
            mark("last frame", self.last_ns, frames=self.frames)
