"""The live session's GPU options: an `app.config.LiveGpuConfig` → a `pipeline.live_gpu.LiveGpu`.

    --device cpu|cuda  --diffusion PATH | --diffusion-random sd-turbo|tiny  --diffusion-size WxH
    --upscale 1|2|3|4  --[no-]temporal  --[no-]cuda-graphs  --budget-ms MS  --no-ladder

Options are checked the way `kagura render` checks them (app/config.py builds the frozen
config from the flags, with --diffusion's default resolved; app/render_job.py's
`check_gpu_choice` validates; `resolve_sizes` picks the render and output sizes: render ×
upscale = output, exactly; 640x360 diffusion on cuda by default; `temporal_on` and `graphs_on`
are the defaults of --[no-]temporal and --[no-]cuda-graphs); the models come from the one
factory both modes use (pipeline/model_factory.py): `load_diffusion_models` loads the checkpoint
or the RANDOM-weight architecture (with its notice), `upscale_stage` makes the x4 upscaler
(realesr-animevideov3 weights, or random ones with --diffusion-random) whose weights every
other upscaler of the ladder shares (pipeline.live_gpu.shared_upscalers).

Importing this module imports neither torch nor Qt (the CLI builds every parser at start).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from app.errors import UsageError

if TYPE_CHECKING:
    from app.config import LiveGpuConfig


def add_gpu_options(p: argparse.ArgumentParser, *, device: bool = True) -> None:
    """The GPU options with the quality-ladder ones (app/gpu_options.py)."""
    from app.gpu_options import add_gpu_options as add

    add(p, device=device, live=True)


def launch_first_render(gpu: LiveGpuConfig, size: tuple[int, int] | None, preset: str) -> Any:
    """The first live session's render process (render/process.py), started before
    `build_live_gpu` imports torch, so the worker gets ready beside that import instead of
    after it; hand it to the session (`LiveSession(first_render=...)`), which adopts it or
    closes it. None where the session draws on its own thread (the CPU chain) or when it
    cannot be started here: the session then starts its own, and its checks report what is
    wrong."""
    if not gpu.requested or not gpu.render_process:
        return None
    try:
        out, render = gpu.sizes(size)
        from pipeline.look import launch_render_process

        return launch_render_process(preset, render or out, realtime=gpu.realtime_priority)
    except Exception:
        return None


def build_live_gpu(
    gpu: LiveGpuConfig,
    size: tuple[int, int] | None,
    *,
    controller: dict[str, Any] | None = None,
) -> Any:
    """The LiveGpu for `gpu` (app.config.live_gpu_config; None: no GPU option given: the CPU
    chain, unchanged). `size`: the output size asked for (None: from the render size). Raises
    UsageError for options that cannot work — before anything is loaded."""
    from app.render_job import check_gpu_choice

    if not gpu.requested:
        if gpu.diffusion_size is not None or gpu.budget_ms is not None or not gpu.adaptive:
            raise UsageError(
                "--diffusion-size / --budget-ms / --no-ladder need a GPU option "
                "(--device cuda, --diffusion, --diffusion-random, --upscale or --temporal)"
            )
        return None
    out, render = gpu.sizes(size)
    check_gpu_choice(gpu.device, gpu.diffusion, gpu.diffusion_random, gpu.upscale)
    # resolve_sizes keeps render x upscale = output; no render size: the output is the render
    render_size = render or out
    graphs = gpu.graphs_on
    device = gpu.device
    from pipeline.live_gpu import LiveGpu, shared_upscalers
    from pipeline.model_factory import load_diffusion_models, upscale_stage

    notices: list[str] = []  # the session reports them; the window shows them in its banner
    # loaded by the first session (LiveGpu.load_models), off the UI thread
    models = (
        (lambda: load_diffusion_models(gpu.diffusion, gpu.diffusion_random, device, notices.append))
        if gpu.diffusion_on
        else None
    )
    make_upscaler = None
    if gpu.upscale > 1:
        random_ok = gpu.diffusion_random is not None
        make_upscaler = shared_upscalers(
            lambda in_size: upscale_stage(
                4, device, in_size, cuda_graph=graphs, random_ok=random_ok
            )
        )
    from pipeline.model_factory import KAGURA

    if gpu.diffusion == KAGURA:
        label = "Kagura's own model"
    elif gpu.diffusion is not None:
        label = f"checkpoint {gpu.diffusion}"
    elif gpu.diffusion_random is not None:
        label = f"{gpu.diffusion_random} architecture, RANDOM weights"
    else:
        label = "no diffusion"
    return LiveGpu(
        device=device,
        models=models,
        make_upscaler=make_upscaler,
        upscale=gpu.upscale,
        temporal=gpu.temporal_on,
        render_size=render_size,
        budget_ms=gpu.budget_ms,
        adaptive=gpu.adaptive,
        controller=dict(controller or {}),
        cuda_graphs=graphs,
        render_process=gpu.render_process,
        stream_batch=gpu.stream_batch,
        realtime_priority=gpu.realtime_priority,
        label=label,
        notices=notices,
    )
