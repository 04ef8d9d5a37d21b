"""`kagura bench pipeline`: its arguments (cheap to import: the CLI builds every parser at
start) and a `run` that loads the benchmark itself, app/pipeline_benchmark.py, with torch."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "pipeline",
        help="the live GPU chain `kagura live` runs (render → upload → stylize → diffusion → "
        "temporal → upscale → readback), eager vs CUDA graphs (vs CUDA graphs + compiled UNet)",
    )
    b.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    src = b.add_mutually_exclusive_group()
    src.add_argument(
        "--random-weights",
        choices=("sd-turbo", "sd15", "tiny"),
        default=None,
        help="real architecture, RANDOM weights (timing only); default sd-turbo",
    )
    src.add_argument("--model", type=Path, default=None, help="a diffusers-format folder")
    b.add_argument("--size", default=None, help="diffusion size (default 640x360; tiny 128x72)")
    b.add_argument(
        "--out-size", default=None, help="after upscaling (default 1920x1080; tiny 384x216)"
    )
    b.add_argument("--frames", type=int, default=200, help="timed frames per chain")
    b.add_argument("--steps", type=int, default=1, help="diffusion steps (stream batch)")
    b.add_argument("--preset", default="studio")
    b.add_argument("--sr-weights", type=Path, default=None, help="realesr-animevideov3 .bin")
    b.add_argument(
        "--offline", action="store_true", help="also the offline chain (kagura render's stages)"
    )
    b.add_argument(
        "--batch", type=int, default=8, help="offline: frames handed to the chain at a time"
    )
    b.add_argument(
        "--compile-unet",
        action="store_true",
        help="also a third chain: CUDA graphs with the UNet compiled by torch.compile first "
        "(CUDA only; the first run compiles for about a minute, later runs load the cache)",
    )
    b.add_argument(
        "--compile-cache",
        type=Path,
        default=None,
        help="inductor's cache folder for --compile-unet (default: the user cache dir, "
        "kagura/inductor)",
    )
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    return b


def run(args: argparse.Namespace) -> int:
    from app.pipeline_benchmark import run as run_benchmark

    return run_benchmark(args)
