"""`Frame`: what flows between stages.

    pts_ns   presentation time on the master (audio-sample) clock, see core/clock.py
    index    frame number in the stream (0, 1, 2, …)
    params   the AvatarParams the frame is rendered from
    image    torch.uint8 (H, W, 4) RGBA, **premultiplied alpha** (what Skia rasterises and what
             filtering, warping and upscaling need: no dark fringes). Sinks un-premultiply.
    motion   torch.float32 (H, W, 2) screen motion in pixels since the previous frame:
             the surface point under pixel p was at p - motion[p] one frame ago.
    i420     torch.uint8 (H * 3 // 2, W): the picture as yuv420p planes (BT.709, limited
             range; pipeline/accel/i420.py), made on the GPU by the offline readback so the
             encoder needs no colour conversion. A frame carrying it has no `image`.
    timings  per-stage wall times in milliseconds (diagnostics only)
    ready    None, or what the frame's host pictures still wait for: the GPU chain issued the
             frame without waiting (pipeline/gpu_chain.py `Pending`); the chain's `wait`, on
             another thread, waits for it and clears it before the frame goes further

Immutable in spirit: a stage returns `frame.with_(image=...)` instead of mutating.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.avatar import AvatarParams

if TYPE_CHECKING:
    import torch

# the timing of a live frame's late mouth (render/stage.py `finish`): on its critical path,
# unlike the idol's "render", which is drawn ahead
MOUTH_TIMING = "mouth"
# how long that step waited for the idol drawn ahead (render/process.py): its share of the tail
RENDER_WAIT = "render_wait"


@dataclass(frozen=True, slots=True)
class Frame:
    pts_ns: int
    index: int
    params: AvatarParams
    image: torch.Tensor | None = None
    motion: torch.Tensor | None = None
    i420: torch.Tensor | None = None
    timings: dict[str, float] = field(default_factory=dict)
    ready: Any = None

    def with_(self, **changes: Any) -> Frame:
        return dataclasses.replace(self, **changes)

    def timed(self, stage: str, ms: float) -> Frame:
        return dataclasses.replace(self, timings={**self.timings, stage: ms})
