"""`kagura still`: one frame of an audio file as a PNG (README pictures, thumbnails)."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.config import RenderConfig, layer, parse_size
from app.errors import UsageError
from app.render_job import build_graph, check_output_safety, check_seed
from pipeline.sinks.still import StillSink

# Render this much before the requested time so springs and smoothing have settled.
SETTLE_S = 1.0
FPS = 30


def still_config(args: argparse.Namespace) -> RenderConfig:
    """The render `kagura still` makes: its look options, from just before --at to the frame."""
    if args.output.suffix.lower() != ".png":
        raise UsageError(f"output {args.output}: expected a .png file name")
    if not args.at >= 0 or args.at == float("inf"):  # NaN fails the first test
        raise UsageError(f"--at {args.at}: expected a time in seconds >= 0")
    check_seed(args.seed)
    start = max(0.0, args.at - SETTLE_S)
    flags = {
        "audio": args.audio,
        "output": args.output,
        "preset": args.preset,
        "size": parse_size(args.size),
        "fps": FPS,
        "start_s": start,
        "seconds": args.at - start + 1.0 / FPS,
        "transparent": args.transparent,
        "seed": args.seed,
        "overwrite": args.overwrite,
        "avatar": getattr(args, "avatar", None),
    }
    return layer(RenderConfig, flags=flags)


def render_still(args: argparse.Namespace) -> Path:
    req = still_config(args).request()
    check_output_safety(req)  # never over an input, an existing file only with --overwrite
    req.output.parent.mkdir(parents=True, exist_ok=True)
    graph, ctx, _ = build_graph(req, sink_factory=lambda req, clip: StillSink(req.output))
    graph.run(ctx)
    return req.output
