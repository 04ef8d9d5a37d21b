"""A long video cut by time into segments, rendered apart (other processes, GPUs or hosts) and
joined losslessly into one MP4, the audio muxed once.

Same frames as one render. The motion and blinks of every frame come from the `AvatarTrack`,
analysed once from the whole clip with the job's seed (`analyse`: one Ray task) and handed to
every segment; a segment draws only its own frames of it, with their place in the whole video
as frame index (the stylize grain follows it). The idol's picture also depends on history
through the rig (hair springs, and motion vectors against the previous frame): a segment that
starts at frame `a` first steps the rig through frames 0..a-1 without drawing (what
`render.pool` does for its workers: ≈0.3 ms a frame), so frame `a` is drawn from the same rig
state as in one render (tests/test_farm_segments.py compares decoded frames bit for bit). With the
temporal filter on (GPU chains with diffusion), whose state is the frames before, a segment also
renders `LEAD_SECONDS` before its start through the whole chain and drops them; that settles
the filter but is not proven identical here (no GPU on the test machine).

The join. Segments start on whole seconds; each is one libx264 stream with the settings of
`pipeline.sinks.segmented` (a keyframe per second, closed GOPs, in-band SPS/PPS), so each
segment starts with an IDR frame that refers to nothing before it, and the segments' packets
are copied into the file in order with their time stamps on the whole video's frame count —
no re-encoding. The joiner is `SegmentedVideoSink`'s own (its checks included: each segment
starts with a keyframe, identical parameter sets, decode times that only grow), writing through
the partial file of `pipeline.sinks.output` and muxing the AAC audio once, in step.

What is not identical: with a lossy CRF the encoder's rate control starts afresh in each
segment, so the decoded pictures of a split render differ from an unsplit render's at the
encoder's noise level (the pictures handed to the encoders are identical). With a lossless
encode (`crf=0`), the decoded frames are identical; the test uses that.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

LEAD_SECONDS = 1.0
DEFAULT_CRF = 20  # the crf of `kagura render`'s MP4 encoders (pipeline/sinks)


def plan(frames: int, fps: int, segments: int) -> list[tuple[int, int]]:
    """`segments` frame ranges [start, stop) covering `frames`, cut on whole seconds (fewer
    when the video has fewer seconds than segments)."""
    if frames <= 0:
        return []
    second = max(1, int(fps))
    seconds = math.ceil(frames / second)
    n = max(1, min(segments, seconds))
    cuts = [round(k * seconds / n) * second for k in range(n)] + [frames]
    return [(a, min(b, frames)) for a, b in itertools.pairwise(cuts) if a < b]


def decode(req):
    """The job's audio as `kagura render` decodes it (what the join muxes)."""
    from app.render_job import decode_for_render

    return decode_for_render(req)


def analyse(req, clip=None):
    """The AvatarTrack of the whole video, as `kagura render` makes it (same seed)."""
    from audio.analysis import analyze_clip

    return analyze_clip(
        decode(req) if clip is None else clip,
        req.fps,
        seed=req.seed,
        lipsync_model=req.lipsync_model,
    )


def prepare(req):
    """(clip, track) of a job: the audio decoded and analysed once, for the whole video."""
    clip = decode(req)
    return clip, analyse(req, clip)


def slice_track(track, start: int, stop: int):
    from core.avatar import AvatarTrack

    return AvatarTrack(
        fps=track.fps,
        pts_ns=track.pts_ns[start:stop].copy(),
        scalars={k: v[start:stop].copy() for k, v in track.scalars.items()},
        vowels=track.vowels[start:stop].copy(),
        expressions={k: v[start:stop].copy() for k, v in track.expressions.items()},
    )


def _warm_render_stage(width, height, palette, line, avatar, track, start: int):
    from render.stage import RenderStage

    class WarmRenderStage(RenderStage):
        """`RenderStage` whose rig has been stepped through frames 0..start-1 at setup."""

        def setup(self, ctx) -> None:
            super().setup(ctx)
            r = self.renderer
            mats = None
            for j in range(start):  # the same calls, in order, as IdolRenderer.render makes
                mats = r.rig.matrices(track[j].clamped())
            if mats is not None:
                r.prev = r.view[None] @ mats

    return WarmRenderStage(width, height, palette, line, avatar=avatar)


class PacketSink:
    """A graph sink encoding frames with the segment encoder's settings into packets
    (pts, dts, keyframe, bytes), time stamps on the whole video's frame count; frames before
    `start` (the temporal lead) are dropped."""

    name = "video_file"

    def __init__(self, width, height, fps, start, x264_preset, crf, threads):
        from core.stage import spec

        self.width, self.height, self.fps = width, height, Fraction(fps)
        self.start, self.x264_preset, self.crf, self.threads = start, x264_preset, crf, threads
        self.needs = spec("image", size=(width, height))
        self.packets: list[tuple[int, int, bool, bytes]] = []
        self.frames = 0
        self._cc = None

    def setup(self, ctx) -> None:
        # the very encoder settings of pipeline.sinks.segmented: its joiner checks them
        from pipeline.sinks.segmented import open_chunk_encoder

        self._cc = open_chunk_encoder(
            self.width, self.height, self.fps, self.x264_preset, self.crf,
            self.threads, max(1, round(self.fps)),
        )  # fmt: skip

    def write(self, frame) -> None:
        from av.video.frame import VideoFrame
        from av.video.reformatter import ColorRange, Colorspace

        if frame.index < self.start:
            return
        if frame.i420 is not None:
            vf = VideoFrame.from_ndarray(np.asarray(frame.i420), format="yuv420p")
        else:
            image = frame.image
            if not isinstance(image, np.ndarray):
                image = image.detach().numpy()
            vf = to_yuv(np.ascontiguousarray(image), VideoFrame, Colorspace, ColorRange)
        vf.pts = self.frames
        vf.time_base = self._cc.time_base
        self.frames += 1
        self._route(self._cc.encode(vf))

    def finish(self) -> None:
        self._route(self._cc.encode(None))
        self._cc = None

    def abort(self) -> None:
        self._cc = None

    def close(self) -> None:
        self._cc = None

    def _route(self, packets) -> None:
        for p in packets:
            self.packets.append(
                (p.pts + self.start, p.dts + self.start, bool(p.is_keyframe), bytes(p))
            )


def to_yuv(rgba: np.ndarray, VideoFrame=None, Colorspace=None, ColorRange=None):
    """RGBA → yuv420p (BT.709, limited range), as the MP4 encoders of pipeline/sinks do."""
    if VideoFrame is None:
        from av.video.frame import VideoFrame
        from av.video.reformatter import ColorRange, Colorspace
    src = VideoFrame.from_numpy_buffer(rgba, format="rgba")
    return src.reformat(
        format="yuv420p",
        dst_colorspace=Colorspace.ITU709,
        dst_color_range=ColorRange.MPEG,
        threads=1,
    )


def render_segment(
    req,
    track,
    start: int,
    stop: int,
    *,
    crf: int = DEFAULT_CRF,
    threads: int = 1,
    on_frame: Callable | None = None,
) -> list[tuple[int, int, bool, bytes]]:
    """Frames [start, stop) of `req`'s video, drawn from the whole `track`, as H.264 packets."""
    from app.render_job import assemble_graph, diffusion_models
    from pipeline.sources import track_frames
    from presets.loader import load_preset

    preset = load_preset(req.preset)
    models = diffusion_models(req) if req.diffusion_on else None
    lead = min(start, round(LEAD_SECONDS * req.fps)) if req.temporal_on else 0
    first = start - lead
    part = slice_track(track, first, stop)
    one = dataclasses.replace(req, encoders=1, render_workers=1)  # one process per segment
    sink = PacketSink(req.width, req.height, req.fps, start, req.x264_preset, crf, threads)
    graph, ctx, _ = assemble_graph(one, preset, models, part, None, 48_000, sink)
    render, _ = req.sizes() if req.gpu_stages else ((req.width, req.height), None)
    graph.source = track_frames(part, first_index=first)
    graph.stages[0] = _warm_render_stage(
        *render, preset.palette, preset.line, req.avatar, track, first
    )
    graph.run(ctx, on_frame=on_frame)
    if sink.frames != stop - start:
        raise RuntimeError(f"segment {start}..{stop}: {sink.frames} frames were encoded")
    return sink.packets


def join(req, clip, segments: list[list], on_notice: Callable | None = None) -> dict:
    """Write `req.output` from the segments' packets (in order) and the clip's audio, through
    the partial file; returns timings. A failure keeps nothing half-joined under the output
    name (the partial file is kept as NAME.interrupted.mp4, as a render's is)."""
    from pipeline.sinks.segmented import SegmentedVideoSink

    t0 = time.perf_counter()
    sink = SegmentedVideoSink(
        req.output, req.width, req.height, req.fps, clip.samples, clip.sample_rate, encoders=1
    )
    sink.join_encoded(segments)  # SegmentedVideoSink's joiner, fed by the segments
    return {"join_s": time.perf_counter() - t0, "frames": sink.frames_joined}
