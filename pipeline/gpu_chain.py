"""The GPU chain as one node, issued and waited for the same way live and offline.

    chain = DeviceChain("cuda")                    # its own high-priority CUDA stream
    out = chain.issue(frames, parts)               # issuing thread: never waits for the GPU
    out = wait_ready(out)                          # another thread: sleeps until they are done

`parts` is what a frame runs through on the device, in order: upload → stylize → [diffusion →
temporal → upscale] → readback (pipeline/device_io.py: the last puts the pictures into
page-locked host memory, without waiting). `issue` runs every part on the chain's one stream,
each inside an NVTX range of its name (core/nvtx.py), then records one blocking-sync "done"
event; the frames it returns carry it (`Frame.ready`, a `Pending`), and their host pictures
may be read once `wait_ready` has returned them (the event's wait puts that thread to sleep).
One thread issuing and another waiting keeps the GPU busy with the next frames while the
finished ones are handed on.

Who runs it:
- live (`kagura live`; pipeline/live_gpu.py `GpuChain.submit`): the session's frame thread
  issues one frame per display tick through the quality ladder's stages, the publisher thread
  waits (pipeline/live_frames.py);
- offline (`kagura render --device cuda`; app/render_job.py): `ChainStage` then `ChainWait`, two
  nodes of the pipeline.graph.Graph, each on its own thread — batches of up to `max_batch`
  frames issued, then waited for (each part takes them in batches of its own `max_batch`).

Timing: `mark=True` (offline) measures every part's GPU time with a pair of CUDA events per
batch, read once the batch is done (`frame.timings[part]`, ms per frame). Live passes the
quality ladder's timer instead (pipeline/ladder/stage.py `StageTimer`: its events are read with
`query()` on the frame thread, never waited for). On the CPU (device "cpu": tests, CPU
benchmarks) the parts run synchronously in the issuing thread, nothing is pending, and each
part stamps its own wall time.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from core.frame import Frame
from core.nvtx import stage_range
from core.stage import BaseStage, Context, Spec
from core.trace import step

__all__ = ["ChainStage", "ChainWait", "DeviceChain", "Pending", "wait_ready"]


@dataclass(frozen=True, eq=False)
class Pending:
    """What a batch issued to the GPU waits on: `done`, recorded after its readback, and each
    part's (start, end) CUDA events when the chain marks them."""

    done: Any  # torch.cuda.Event(blocking=True)
    marks: tuple[tuple[str, Any, Any], ...] = ()
    frames: int = 1

    def wait(self) -> dict[str, float]:
        """Sleep until the batch is done; its parts' GPU ms per frame (empty when unmarked)."""
        self.done.synchronize()
        return {name: a.elapsed_time(b) / self.frames for name, a, b in self.marks}


def wait_ready(frames: Sequence[Frame]) -> list[Frame]:
    """`frames` once their pictures are on the host: each batch's done event waited for (once),
    `ready` cleared, the parts' GPU times stamped into their timings."""
    times: dict[int, dict[str, float]] = {}
    out = []
    for f in frames:
        p = f.ready
        if p is None:
            out.append(f)
            continue
        ms = times.get(id(p))
        if ms is None:
            ms = times[id(p)] = p.wait()
        out.append(f.with_(ready=None, timings={**f.timings, **ms} if ms else f.timings))
    return out


def _in_batches(part: Any, frames: list[Frame]) -> list[Frame]:
    n = max(1, int(getattr(part, "max_batch", 1)))
    if len(frames) <= n:
        return part.process_batch(frames)
    return [g for i in range(0, len(frames), n) for g in part.process_batch(frames[i : i + n])]


class DeviceChain:
    """Issues frames through a chain's parts on one CUDA stream (see the module doc)."""

    def __init__(self, device: str | torch.device, stream: Any = None) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        if self.cuda and stream is None:
            from pipeline.accel import high_priority_stream

            stream = high_priority_stream(self.device)
        self.stream = stream

    def issue(
        self,
        frames: list[Frame],
        parts: Sequence[Any],
        *,
        timer: Any = None,
        timed: Collection[str] = (),
        mark: bool = False,
    ) -> list[Frame]:
        """`frames` through `parts`, queued on the chain's stream. `timer` (StageTimer's
        begin/end) times the parts named in `timed`; `mark` times every part (Pending.marks).
        On CUDA the frames come back pending (`Frame.ready`); see `wait_ready`."""
        if not self.cuda:
            return self._run(frames, parts, timer, timed, None)
        with torch.cuda.stream(self.stream):
            marks: list | None = [] if mark else None
            out = self._run(frames, parts, timer, timed, marks)
            done = torch.cuda.Event(blocking=True)
            done.record(self.stream)
        pending = Pending(done, tuple(marks or ()), max(1, len(frames)))
        return [f.with_(ready=pending) for f in out]

    @staticmethod
    def _run(frames, parts, timer, timed, marks) -> list[Frame]:
        for part in parts:
            name = part.name
            tok = timer.begin() if timer is not None and name in timed else None
            start = None
            if marks is not None:
                start = torch.cuda.Event(enable_timing=True)
                start.record()
            with stage_range(name):  # each part by name in a profiler's timeline
                frames = _in_batches(part, frames)
            if marks is not None:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                marks.append((name, start, end))
            if tok is not None:
                timer.end(name, tok, [f.index for f in frames])
        return frames


class ChainStage(BaseStage):
    """The GPU chain as a node of the offline graph: sets up its parts (the graph has checked
    them part by part), issues each batch through them and hands the frames on pending;
    `ChainWait`, the next node, waits for them. Its name in the graph's timings is "gpu" (the
    issuing's wall time); each part's GPU time is stamped by `ChainWait`."""

    name = "gpu"

    def __init__(self, parts: Sequence[Any], device: str, max_batch: int = 4) -> None:
        if not parts:
            raise ValueError("GPU chain: no parts")
        self.parts = list(parts)
        self.chain = DeviceChain(device)
        self.max_batch = max(1, int(max_batch))
        # as one stage: what any part needs that no part before it gives, and what they all
        # add (the graph checks the parts themselves, one by one: Graph.build)
        needed: set[str] = set()
        gives = Spec()
        for part in self.parts:
            needed |= part.needs.fields - gives.fields
            gives = gives.merged(part.gives)
        first = self.parts[0].needs
        self.needs = Spec(frozenset(needed), first.size, first.device)
        self.gives = gives
        self._set_up: list[Any] = []

    def setup(self, ctx: Context) -> None:
        for part in self.parts:
            part.setup(ctx)
            self._set_up.append(part)
            step(f"{part.name} set up")
        if self.chain.cuda:
            # the parts were set up (weights copied, graphs captured) on the default stream
            self.chain.stream.wait_stream(torch.cuda.current_stream(self.chain.device))

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        return self.chain.issue(frames, self.parts, mark=True)

    def close(self) -> None:
        while self._set_up:
            self._set_up.pop().close()


class ChainWait(BaseStage):
    """The offline graph's node after `ChainStage`: waits for each batch to finish on the GPU
    (this thread sleeps on its done event), then hands its frames on."""

    name = "gpu wait"
    max_batch = 8

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        return wait_ready(frames)


def chain_nodes(parts: Sequence[Any], device: str) -> list[Any]:
    """The offline graph's nodes for a GPU chain of `parts`: [ChainStage, ChainWait]."""
    return [ChainStage(parts, device), ChainWait()]
