"""`kagura still`: one frame of an audio file as a PNG (README pictures, thumbnails)."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.errors import UsageError
from app.render_job import RenderRequest, build_graph, check_output_safety, check_seed, parse_size
from pipeline.sinks.still import StillSink

# Render this much before the requested time so springs and smoothing have settled.
SETTLE_S = 1.0


def _avatar(args: argparse.Namespace):
    from render.avatar_source import avatar_spec

    return avatar_spec(getattr(args, "avatar", None))


def render_still(args: argparse.Namespace) -> Path:
    if args.output.suffix.lower() != ".png":
        raise UsageError(f"output {args.output}: expected a .png file name")
    if not args.at >= 0 or args.at == float("inf"):  # NaN fails the first test
        raise UsageError(f"--at {args.at}: expected a time in seconds >= 0")
    check_seed(args.seed)
    width, height = parse_size(args.size)
    fps = 30
    start = max(0.0, args.at - SETTLE_S)
    req = RenderRequest(
        audio=args.audio,
        output=args.output,
        preset=args.preset,
        width=width,
        height=height,
        fps=fps,
        start_s=start,
        seconds=args.at - start + 1.0 / fps,
        transparent=args.transparent,
        seed=args.seed,
        overwrite=args.overwrite,
        avatar=_avatar(args),
    )
    check_output_safety(req)  # never over an input, an existing file only with --overwrite
    args.output.parent.mkdir(parents=True, exist_ok=True)
    graph, ctx, _ = build_graph(req, sink_factory=lambda req, clip: StillSink(req.output))
    graph.run(ctx)
    return args.output
