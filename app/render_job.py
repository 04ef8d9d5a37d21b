"""Wiring for an offline render: audio file → AvatarTrack → idol → stylize → file.

Only assembly lives here; every step is a stage or function of audio/, render/ or pipeline/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.errors import UsageError
from pipeline.graph import Graph
from pipeline.sources import TRACK_GIVES, track_frames
from pipeline.stage import Context

MAX_SIDE = 7680


@dataclass(frozen=True)
class RenderRequest:
    audio: Path
    output: Path
    preset: str = "studio"
    width: int = 1280
    height: int = 720
    fps: int = 30
    start_s: float = 0.0
    seconds: float | None = None
    transparent: bool = False
    seed: int = 0


def parse_size(text: str) -> tuple[int, int]:
    """'1280x720' → (1280, 720); even sides (4:2:0 video needs them), 64..7680."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--size {text!r}: expected WIDTHxHEIGHT, e.g. 1280x720")
    width, height = int(parts[0]), int(parts[1])
    for side in (width, height):
        if not 64 <= side <= MAX_SIDE or side % 2:
            raise UsageError(
                f"--size {text!r}: each side must be an even number of pixels from 64 to {MAX_SIDE}"
            )
    return width, height


def check_request(req: RenderRequest) -> None:
    """Fail fast, before any decoding or rendering, on arguments that cannot work."""
    from pipeline.sinks.video_file import check_output_path

    try:
        check_output_path(req.output, req.transparent)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not 1 <= req.fps <= 240:
        raise UsageError(
            f"--fps {req.fps}: expected a whole number of frames per second from 1 to 240"
        )
    if req.start_s < 0:
        raise UsageError(f"--start {req.start_s}: expected a time in seconds >= 0")
    if req.seconds is not None and req.seconds <= 0:
        raise UsageError(f"--seconds {req.seconds}: expected a duration in seconds > 0")
    if not req.output.parent.exists():
        req.output.parent.mkdir(parents=True, exist_ok=True)


def use_cpu_threads_for_offline_render() -> None:
    """Give torch half the cores: the renderer and the H.264 encoder run beside it.

    Measured on the 2-core machine (docs/BENCHMARKS.md): ink-wash 32.1 fps with 1 torch
    thread vs 28.8 with 2, cyberpunk 30.9 vs 26.9 — intra-op threads only fought the
    encoder and the renderer for the same cores.
    """
    import os

    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


def build_graph(
    req: RenderRequest, sink_factory: Callable | None = None
) -> tuple[Graph, Context, int]:
    """Decode, analyse and assemble; returns the graph, its context and the frame count."""
    from audio.analysis import analyze_clip
    from audio.decode import decode_audio
    from pipeline.sinks.video_file import VideoFileSink
    from pipeline.stylize import StylizeStage
    from presets.loader import load_preset
    from render.stage import RenderStage

    use_cpu_threads_for_offline_render()
    preset = load_preset(req.preset)
    clip = decode_audio(req.audio, start_s=req.start_s, seconds=req.seconds)
    track = analyze_clip(clip, req.fps, seed=req.seed)
    w, h = req.width, req.height
    stages = [
        RenderStage(w, h, preset.palette, preset.line),
        StylizeStage(preset, w, h, transparent=req.transparent),
    ]
    if sink_factory is None:
        sink = VideoFileSink(
            req.output,
            w,
            h,
            req.fps,
            audio=clip.samples,
            sample_rate=clip.sample_rate,
            transparent=req.transparent,
        )
    else:
        sink = sink_factory(req, clip)
    ctx = Context(width=w, height=h, fps=req.fps, sample_rate=clip.sample_rate)
    return Graph(track_frames(track), TRACK_GIVES, stages, sink), ctx, len(track)
