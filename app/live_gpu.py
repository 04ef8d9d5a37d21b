"""The live session's GPU options: command-line flags → a `pipeline.live_gpu.LiveGpu`.

    --device cpu|cuda  --diffusion PATH | --diffusion-random sd-turbo|tiny  --diffusion-size WxH
    --upscale 1|2|3|4  --[no-]temporal  --[no-]cuda-graphs  --budget-ms MS  --no-ladder

Options are checked the way `kagura render` checks them (app/render_job.py: `check_gpu_choice`
validates, `resolve_sizes` picks the render and output sizes: render × upscale = output,
exactly; 640x360 diffusion on cuda by default; `temporal_on` and `graphs_on` are the defaults
of --[no-]temporal and --[no-]cuda-graphs); the models come from the one
factory both modes use (pipeline/model_factory.py): `load_diffusion_models` loads the checkpoint
or the RANDOM-weight architecture (with its notice), `upscale_stage` makes the x4 upscaler
(realesr-animevideov3 weights, or random ones with --diffusion-random) whose weights every
other upscaler of the ladder shares (pipeline.live_gpu.shared_upscalers).

Importing this module imports neither torch nor Qt (the CLI builds every parser at start).
"""

from __future__ import annotations

import argparse
from typing import Any

from app.errors import UsageError


def add_gpu_options(p: argparse.ArgumentParser, *, device: bool = True) -> None:
    """The GPU options with the quality-ladder ones (app/gpu_options.py)."""
    from app.gpu_options import add_gpu_options as add

    add(p, device=device, live=True)


def gpu_requested(args: argparse.Namespace, device: str) -> bool:
    return (
        device != "cpu"
        or args.diffusion is not None
        or args.diffusion_random is not None
        or args.upscale != 1
        or bool(args.temporal)
    )


def build_live_gpu(
    args: argparse.Namespace,
    device: str,
    size: tuple[int, int] | None,
    *,
    preset: str = "studio",
    controller: dict[str, Any] | None = None,
) -> Any:
    """The LiveGpu for these options (None: no GPU option given: the CPU chain, unchanged).
    `size`: the output size asked for (None: from the render size). Raises UsageError for
    options that cannot work — before anything is loaded."""
    from app.render_job import check_gpu_choice, graphs_on, resolve_sizes, temporal_on

    if not gpu_requested(args, device):
        if args.diffusion_size is not None or args.budget_ms is not None or args.no_ladder:
            raise UsageError(
                "--diffusion-size / --budget-ms / --no-ladder need a GPU option "
                "(--device cuda, --diffusion, --diffusion-random, --upscale or --temporal)"
            )
        return None
    if args.budget_ms is not None and args.budget_ms <= 0:
        raise UsageError(f"--budget-ms {args.budget_ms}: expected a positive number of ms")
    from app.render_job import default_diffusion

    args.diffusion = default_diffusion(args, device)
    diffusion_on = args.diffusion is not None or args.diffusion_random is not None
    size_text = None if size is None else f"{size[0]}x{size[1]}"
    out, render = resolve_sizes(size_text, args.diffusion_size, args.upscale, device, diffusion_on)
    check_gpu_choice(device, args.diffusion, args.diffusion_random, args.upscale)
    # resolve_sizes keeps render x upscale = output; no render size: the output is the render
    render_size = render or out
    graphs = graphs_on(device, args.cuda_graphs)
    from pipeline.live_gpu import LiveGpu, shared_upscalers
    from pipeline.model_factory import load_diffusion_models, upscale_stage

    notices: list[str] = []  # the session reports them; the window shows them in its banner
    # loaded by the first session (LiveGpu.load_models), off the UI thread
    models = (
        (
            lambda: load_diffusion_models(
                args.diffusion, args.diffusion_random, device, notices.append
            )
        )
        if diffusion_on
        else None
    )
    make_upscaler = None
    if args.upscale > 1:
        random_ok = args.diffusion_random is not None
        make_upscaler = shared_upscalers(
            lambda in_size: upscale_stage(
                4, device, in_size, cuda_graph=graphs, random_ok=random_ok
            )
        )
    from pipeline.model_factory import KAGURA

    if args.diffusion == KAGURA:
        label = "Kagura's own model"
    elif args.diffusion is not None:
        label = f"checkpoint {args.diffusion}"
    elif args.diffusion_random is not None:
        label = f"{args.diffusion_random} architecture, RANDOM weights"
    else:
        label = "no diffusion"
    return LiveGpu(
        device=device,
        models=models,
        make_upscaler=make_upscaler,
        upscale=args.upscale,
        temporal=temporal_on(args.temporal, diffusion_on),
        render_size=render_size,
        budget_ms=args.budget_ms,
        adaptive=not args.no_ladder,
        controller=dict(controller or {}),
        cuda_graphs=graphs,
        render_process=getattr(args, "render_process", True),
        label=label,
        notices=notices,
    )
