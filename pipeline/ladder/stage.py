"""What every ladder stage shares: the control messages, the CUDA-event timer, the
LadderStage base (an inbox drained between batches on the stage's own thread) and Timed.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from core.frame import Frame
from core.stage import BaseStage, Context
from pipeline.quality import QosEvent, Rung

if TYPE_CHECKING:
    from pipeline.ladder.control import QualityControl

log = logging.getLogger("kagura.quality")


# frame.timings key: ms from the audio the picture's mouth was analysed from to the frame's
# pts (set by the live session; carried through the diffusion stream-batch lag here)
AUDIO_AGE = "audio_age"
RUNG_SUFFIX = ".rung"


# ---------------------------------------------------------------------------------------------
# messages


@dataclass(frozen=True)
class Control:
    """Apply rung `level` (`rung`) from the next batch on. `event`: the QosEvent that caused
    it (None: the initial rung, or a ladder refit)."""

    level: int
    rung: Rung
    event: QosEvent | None = None


@dataclass(frozen=True)
class PresetChange:
    """A new diffusion section (prompt, strength, steps, seed, guidance) for the next frame."""

    diffusion: Any


# ---------------------------------------------------------------------------------------------
# timing


class StageTimer:
    """Times a stage's batches: CUDA events on the current stream (device "cuda"; read back
    later, never waited for) or nothing (CPU: the wall time stamped by the stage is used)."""

    def __init__(self, owner: QualityControl, cuda: bool):
        self.owner, self.cuda = owner, cuda

    def begin(self) -> Any:
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def end(self, name: str, token: Any, indices: Sequence[int]) -> None:
        if token is None:
            return
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.owner.record(name, indices, token, ev)


class LadderStage(BaseStage):
    """A stage the quality ladder controls: an inbox of control messages, drained at the start
    of each batch on the stage's own thread; times its work (see StageTimer); stamps each
    frame with its wall ms (`timings[name]`), the rung it ran at (`timings[name + ".rung"]`)
    and what it applied (`stamps()`: "diffusion.steps", "temporal.on", "upscale.scale")."""

    def __init__(self) -> None:
        self._inbox: collections.deque = collections.deque()  # append/popleft: thread-safe
        self.level = 0
        self.rung: Rung | None = None
        self.timer: StageTimer | None = None
        self.applied: list[tuple[int, int]] = []  # (first frame index, level) per change

    # -- messages -----------------------------------------------------------------------------

    def post(self, message: Any) -> None:
        """Queue a message (any thread); it takes effect before the stage's next batch."""
        self._inbox.append(message)

    def drain(self, next_index: int | None = None) -> None:
        while True:
            try:
                msg = self._inbox.popleft()
            except IndexError:
                return
            if isinstance(msg, Control):
                self.apply(msg.level, msg.rung)
                self.applied.append((-1 if next_index is None else next_index, msg.level))
            else:
                self.handle(msg)

    def apply(self, level: int, rung: Rung) -> None:
        """Switch to `rung` (called on the stage's thread, between batches)."""
        self.level, self.rung = level, rung

    def handle(self, message: Any) -> None:
        """Messages other than Control (subclasses)."""

    def stamps(self) -> dict[str, float]:
        """What the stage applied, stamped into each frame's timings ("<name>.<what>")."""
        return {}

    # -- work -----------------------------------------------------------------------------------

    def run(self, frames: list[Frame]) -> list[Frame]:
        raise NotImplementedError

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        self.drain(frames[0].index if frames else None)
        timer = self.timer
        token = timer.begin() if timer is not None else None
        t0 = time.perf_counter()
        out = self.run(frames)
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(frames))
        if timer is not None:
            timer.end(self.name, token, [f.index for f in out])
        extra = {self.name: ms, self.name + RUNG_SUFFIX: float(self.level), **self.stamps()}
        return [f.with_(timings={**f.timings, **extra}) for f in out]


class Timed(BaseStage):
    """Any stage, timed with CUDA events (on CUDA) so QualityControl can count it."""

    def __init__(self, stage: Any):
        self.stage = stage
        self.name = stage.name
        self.needs, self.gives = stage.needs, stage.gives
        self.max_batch = getattr(stage, "max_batch", 1)
        self.timer: StageTimer | None = None

    def setup(self, ctx: Context) -> None:
        self.stage.setup(ctx)

    def close(self) -> None:
        self.stage.close()

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        token = self.timer.begin() if self.timer is not None else None
        out = self.stage.process_batch(frames)
        if self.timer is not None:
            self.timer.end(self.name, token, [f.index for f in out])
        return out
