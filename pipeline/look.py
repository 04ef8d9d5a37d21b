"""A look: one preset's render + stylize stages, checked against the chain they join, set up
and warmed (`build_look`), swapped into a live session with one attribute store."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context


@dataclasses.dataclass
class Look:
    """One preset's stages, set up and warmed: swapped in with a single attribute store."""

    name: str
    preset: Any
    transparent: bool
    render: Any
    stylize: Any
    build_ms: float = 0.0

    def close(self) -> None:
        for stage in (self.render, self.stylize):
            with contextlib.suppress(Exception):
                stage.close()


def launch_render_process(preset: Any, size: tuple[int, int], realtime: bool = False) -> Any:
    """The render process of `preset`'s look at `size`, started now and not waited for
    (RenderProcessStage.launch); `build_look(..., render=it)` makes the look with it.
    `realtime`: the process asks for real-time scheduling (core.priority)."""
    from presets.loader import load_preset
    from render.process import RenderProcessStage

    p = load_preset(preset) if isinstance(preset, str) else preset
    stage = RenderProcessStage(size[0], size[1], p.palette, p.line, realtime=realtime)
    stage.launch()
    return stage


def build_look(
    preset: Any,
    size: tuple[int, int],
    fps: int,
    transparent: bool,
    device: str = "cpu",
    render_process: bool = False,
    for_model: bool = False,
    render: Any = None,
    fits: Callable[[Look], Any] | None = None,
    realtime: bool = False,
) -> Look:
    """Load (by name) and set up the render + stylize stages of `preset` (a name or Preset).
    `device`: where stylize runs ("cuda": the idol is rendered into pinned memory and the
    warm-up frame goes through stylize on the GPU). `render_process`: the idol is drawn by a
    worker process of its own (render/process.py: same pixels, no GIL shared with the
    session's other threads) instead of on the frame thread. `for_model`: Kagura's model
    paints the look (pipeline.stylize.model_input: its screen effects off). `render`: the
    render stage, made (and perhaps launched) by the caller for this preset and size.
    `fits(look)`: the contract check of the chain the look will run in
    (pipeline/live_chain.py `check_live`), called once its stages are made and before they
    are set up: a look that does not fit raises GraphError before anything slow runs.
    `realtime`: a render process made here asks for real-time scheduling (core.priority)."""
    from pipeline.stylize import StylizeStage
    from presets.loader import load_preset
    from render.process import RenderProcessStage
    from render.stage import RenderStage

    t0 = time.perf_counter()
    name = preset if isinstance(preset, str) else getattr(preset, "name", "preset")
    p = load_preset(preset) if isinstance(preset, str) else preset
    w, h = size
    ctx = Context(w, h, fps, 48000, mode="live", extras={"device": device})
    if render is None and render_process:
        render = RenderProcessStage(w, h, p.palette, p.line, realtime=realtime)
    elif render is None:
        render = RenderStage(w, h, p.palette, p.line)
    stylize = StylizeStage(p, w, h, transparent=transparent, for_model=for_model)
    look = Look(name, p, transparent, render, stylize)
    try:
        if fits is not None:
            fits(look)
        render.setup(ctx)
        stylize.setup(ctx)
    except BaseException:
        render.close()  # a render process must not outlive a look that was never made
        raise
    # one real frame through both, drawn as live frames are (the idol ahead, the mouth late),
    # so the first live frame pays nothing
    render.prepare(Frame(0, 0, AvatarParams()))
    warm = render.finish(Frame(0, 0, AvatarParams()))
    if device != "cpu":
        warm = warm.with_(image=warm.image.to(device), motion=warm.motion.to(device))
    stylize.process(warm)
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    render.setup(ctx)  # reset the motion-vector history after the warm-up frame
    look.build_ms = (time.perf_counter() - t0) * 1000.0
    return look
