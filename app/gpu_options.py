"""The GPU-stage options shared by `kagura render`/`demo` and `kagura live`.

    add_gpu_options(parser, *, device=True, live=False)

`device=False`: the caller defines --device itself (kagura live, where it also picks the
microphone). `live=True` adds the quality-ladder options (--budget-ms, --no-ladder).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def diffusion_arg(text: str) -> Path | str:
    """--diffusion's type: "kagura" (the shipped model) or a checkpoint folder. Here, not in
    app/render_job.py: building the parser must not import the render's modules (numpy, the
    stages) — a served render's client only parses and hands over."""
    from pipeline.model_factory import KAGURA

    return KAGURA if text == KAGURA else Path(text)


def add_gpu_options(p: argparse.ArgumentParser, *, device: bool = True, live: bool = False) -> None:
    g = p.add_argument_group(
        "GPU stages (default: none on the CPU; with --device cuda, Kagura's own diffusion model)"
    )
    if device:
        g.add_argument(
            "--device", choices=["cpu", "cuda"], default="cpu", help="where the stages run (cpu)"
        )
    d = g.add_mutually_exclusive_group()
    d.add_argument(
        "--diffusion",
        type=diffusion_arg,
        default=None,
        metavar="PATH|kagura",
        help="diffusers checkpoint folder, or 'kagura': Kagura's own model (pipeline/diffusion/"
        "kagura; the default on cuda)",
    )
    d.add_argument(
        "--no-diffusion",
        action="store_true",
        help="no diffusion stage: the procedural look only (the default on the CPU)",
    )
    d.add_argument(
        "--diffusion-random",
        choices=["sd-turbo", "tiny"],
        default=None,
        help="RANDOM weights of that architecture: timing/demo only, the look is noise",
    )
    g.add_argument(
        "--diffusion-size",
        default=None,
        metavar="WxH",
        help="size the idol is rendered and painted at (default --size / --upscale; 640x360 "
        "on cuda without --size); multiples of 8",
    )
    g.add_argument(
        "--upscale",
        type=int,
        choices=[1, 2, 3, 4],
        default=1,
        help="realesr-animevideov3 factor"
        + (" at the top rung" if live else "")
        + "; the output is the render size × this (default 1)",
    )
    g.add_argument(
        "--temporal",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="motion-warped temporal smoothing (default: on with diffusion)",
    )
    g.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="CUDA graphs for diffusion and upscale (default: on for cuda)",
    )
    if not live:
        return
    g.add_argument(
        "--budget-ms",
        type=float,
        default=None,
        metavar="MS",
        help="quality-ladder budget: P99 GPU ms per frame of diffusion + temporal + upscale "
        "(default 0.8 × the frame period)",
    )
    g.add_argument(
        "--no-ladder",
        action="store_true",
        help="stay on the top rung (measure only; never change quality)",
    )
    g.add_argument(
        "--stream-batch",
        action="store_true",
        help="diffusion steps of a 2-step preset in one batched UNet call (StreamDiffusion): "
        "less GPU time, but the picture shows the frame before (default: one after another)",
    )
    g.add_argument(
        "--render-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="GPU sessions draw the idol in a process of their own, beside the analysis and "
        "GPU threads instead of between them (render/process.py; default on)",
    )
