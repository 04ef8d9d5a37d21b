"""The live chain as one value: what a live frame runs through, in order, and its build check.

    live_stages(look)        (render, stylize)                               the CPU chain
    live_stages(look, gpu)   (render, upload, stylize, diffusion, temporal, upscale, readback)
    check_live(look, gpu, out_size)      GraphError when they do not fit, before any setup
    LiveOutput(size, display, recording) the graph's sink: the tee of the live outputs

The order is the one the frame thread runs (pipeline/live_frames.py `FrameLoop`): the look's
render stage draws the idol from the newest params (in two steps, `prepare` / `finish`), then
either the look's stylize, or `GpuChain.submit`, which issues `GpuChain.parts(stylize)` (upload,
the look's stylize, the ladder stages) on its stream and then `GpuChain.readback`. The check is
the offline graph's (core.stage.check_chain, with the same messages), ending at what the
session's output queue takes: pictures of the session's output size on the CPU (the window's
jitter buffer, the virtual camera, the recorder).

Who calls `check_live`: every look of a CPU session and every later look of a GPU session
(pipeline/look.py `build_look(fits=...)`, after the stages are made and before their setup),
and `GpuChain.setup` for a GPU session's first look, after the ladder stages are made and before
anything is set up or warmed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from core.stage import Spec, check_chain, spec
from pipeline.queues import Closed

# what the frame thread hands the look's render stage: the newest avatar params
LIVE_GIVES = spec("params")


class LiveOutput:
    """The end of the live chain: a tee of the session's outputs, written on the thread that
    publishes the frame (an inline edge of the graph, pipeline/graph.py) — the display's queue
    (`display`, latest wins: the window's pump, the virtual camera behind it) and the recording
    (`recording`, a pipeline.live_recorder.RecordingSlot, whose recorder has a queue and thread
    of its own). It takes finished pictures of the output size on the CPU; without outputs it
    is what the check ends at."""

    name = "output"

    def __init__(self, size: tuple[int, int], display: Any = None, recording: Any = None) -> None:
        self.needs = spec("image", size=(int(size[0]), int(size[1])), device="cpu")
        self.display, self.recording = display, recording

    def write(self, item: tuple) -> None:
        """`(frame, look)`: the frame to every output, the recording told its look's alpha."""
        frame, look = item
        if self.display is not None:
            with contextlib.suppress(Closed):
                self.display.put(frame)
        if self.recording is not None:
            self.recording.push(frame, look.transparent)


def live_stages(look: Any, gpu: Any = None) -> tuple:
    """What a frame drawn with `look` runs through, in order (`gpu`: the session's GpuChain,
    None for the CPU chain)."""
    if gpu is None:
        return (look.render, look.stylize)
    return (look.render, *gpu.parts(look.stylize), gpu.readback)


def check_live(look: Any, gpu: Any, out_size: tuple[int, int]) -> Spec:
    """Check `live_stages(look, gpu)` up to the output queue; returns what reaches it."""
    return check_chain(LIVE_GIVES, [*live_stages(look, gpu), LiveOutput(out_size)])
