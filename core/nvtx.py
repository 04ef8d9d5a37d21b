"""NVTX ranges named after the stages, so a profiler's timeline shows them.

    with stage_range("diffusion"):
        frame = stage.process(frame)

    nsys profile -t cuda,nvtx kagura bench live --headless --device cuda ...

A range covers the calling thread's time issuing the stage's work; the profiler ties the GPU
work launched inside it (kernels, copies) to that name. The names are the stages' `name`s:
upload, stylize, diffusion, temporal, upscale, readback (and render, mouth, … for the stages
the offline graph runs on the CPU) — docs/ARCHITECTURE.md, "Metrics".

Cost: where CUDA is not in use in this process (a CPU-only torch, a CPU run, a process that
has not touched the GPU yet) a range is one flag test. Importing this module imports nothing
(not torch: pipeline/graph.py is on the CLI's error path, which must stay light). With CUDA it is one push and one pop
into the NVTX library, which without a profiler attached returns at once. Nothing here waits
for the GPU.
"""

from __future__ import annotations

import sys

__all__ = ["stage_range"]


class stage_range:  # lower case: used like a function, `with stage_range(name):`
    """An NVTX range named `name` for the `with` block; nothing unless CUDA is in use."""

    __slots__ = ("_pushed", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._pushed = False

    def __enter__(self) -> stage_range:
        # torch not imported (the CLI's error path imports pipeline/graph.py): no GPU work.
        # is_initialized: CUDA is in use here (and this is not a forked child that cannot use
        # it); a CPU-only torch has no NVTX at all, and never initialises CUDA
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.nvtx.range_push(self.name)
            self._pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            sys.modules["torch"].cuda.nvtx.range_pop()
            self._pushed = False
