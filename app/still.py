"""`kagura still`: one frame of an audio file as a PNG (README pictures, thumbnails).

It reads the same settings file as `kagura render` / `demo` (app/render_settings.py: render.toml
in the config folder, or --config FILE; the flags win over it), and takes from it the keys that
say what the picture looks like (`STILL_KEYS`); the others describe a video (its frame rate,
encoders, the GPU chain) and are left to render: a still is one frame drawn on the CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.config import RenderConfig, check_lipsync_model_option, layer, parse_size
from app.errors import UsageError
from app.render_job import build_graph, check_output_safety, check_seed
from pipeline.sinks.still import StillSink

# Render this much before the requested time so springs and smoothing have settled.
SETTLE_S = 1.0
FPS = 30
# the render settings file's keys a still takes
STILL_KEYS = ("preset", "size", "seed", "transparent", "avatar", "lipsync_model")


def still_config(
    args: argparse.Namespace, settings: Any = None, notices: list[str] | None = None
) -> RenderConfig:
    """The render `kagura still` makes: its look options over `settings` (an
    app.render_settings.RenderSettings, or None for none: a bad value in it keeps its default
    with a line in `notices`), from just before --at to the frame."""
    if args.output.suffix.lower() != ".png":
        raise UsageError(f"output {args.output}: expected a .png file name")
    if not args.at >= 0 or args.at == float("inf"):  # NaN fails the first test
        raise UsageError(f"--at {args.at}: expected a time in seconds >= 0")
    if args.seed is not None:
        check_seed(args.seed)
    start = max(0.0, args.at - SETTLE_S)
    flags = {
        "audio": args.audio,
        "output": args.output,
        "preset": args.preset,
        "size": None if args.size is None else parse_size(args.size),
        "fps": FPS,
        "start_s": start,
        "seconds": args.at - start + 1.0 / FPS,
        "transparent": args.transparent,
        "seed": args.seed,
        "overwrite": args.overwrite,
        "avatar": getattr(args, "avatar", None),
        "lipsync_model": getattr(args, "lipsync_model", None),
    }
    if settings is None:
        return layer(RenderConfig, flags=flags, notices=notices)
    file = {k: v for k, v in settings.values.items() if k in STILL_KEYS}
    return layer(
        RenderConfig,
        flags=flags,
        file=file,
        file_name=settings.name,
        parse=settings.parse,
        checks=settings.checks,
        notices=notices,
    )


def render_still(cfg: RenderConfig) -> Path:
    req = cfg.request()
    check_output_safety(req)  # never over an input, an existing file only with --overwrite
    # the mouth a render of the same song with the same model shows
    check_lipsync_model_option(req.lipsync_model)
    req.output.parent.mkdir(parents=True, exist_ok=True)
    graph, ctx, _ = build_graph(req, sink_factory=lambda req, clip: StillSink(req.output))
    graph.run(ctx)
    return req.output
