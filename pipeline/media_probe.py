"""Open a rendered file with av and say what is in it (for tests and diagnostics).

    probe(path)          → MediaInfo: streams, codecs, pixel format, frame count, durations,
                           decoded audio sample count
    decode_video(path)   → (frames as uint8 arrays, pts in seconds)
    decode_audio(path)   → (float32 (channels, n), sample rate, first pts in seconds)

WebM alpha: FFmpeg's native `vp9` decoder ignores the alpha layer that libvpx stores beside
each frame (Matroska BlockAdditional), and decodes yuv420p. `decode_video(..., alpha=True)`
decodes with the `libvpx-vp9` decoder instead, which returns yuva420p.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import av
import numpy as np


@dataclass
class StreamInfo:
    index: int
    type: str  # "video" | "audio" | …
    codec: str  # codec name as av reports it ("h264", "aac", "vp9", "opus", …)
    pix_fmt: str | None = None
    width: int | None = None
    height: int | None = None
    sample_rate: int | None = None
    channels: int | None = None


@dataclass
class MediaInfo:
    path: str
    format: str
    streams: list[StreamInfo] = field(default_factory=list)
    video_frames: int = 0  # decoded frames
    video_seconds: float = 0.0  # last frame's pts + one frame duration, from the first pts
    video_first_pts: float | None = None
    fps: float | None = None
    audio_samples: int = 0  # decoded samples per channel (after the decoder's trimming)
    audio_rate: int | None = None
    audio_first_pts: float | None = None

    @property
    def video(self) -> list[StreamInfo]:
        return [s for s in self.streams if s.type == "video"]

    @property
    def audio(self) -> list[StreamInfo]:
        return [s for s in self.streams if s.type == "audio"]

    @property
    def audio_seconds(self) -> float:
        return self.audio_samples / self.audio_rate if self.audio_rate else 0.0


def probe(path: str | os.PathLike, decode: bool = True) -> MediaInfo:
    """Streams and codecs; with `decode`, also count decoded video frames and audio samples."""
    with av.open(str(path)) as c:
        info = MediaInfo(path=str(path), format=c.format.name)
        for s in c.streams:
            cc = s.codec_context
            si = StreamInfo(index=s.index, type=s.type, codec=cc.name)
            if s.type == "video":
                si.pix_fmt = cc.pix_fmt
                si.width, si.height = cc.width, cc.height
                if s.average_rate:
                    info.fps = float(s.average_rate)
            elif s.type == "audio":
                si.sample_rate, si.channels = cc.sample_rate, cc.channels
            info.streams.append(si)
    if not decode:
        return info
    if info.video:
        pts = video_pts(path)
        info.video_frames = len(pts)
        if pts:
            step = 1.0 / info.fps if info.fps else 0.0
            info.video_first_pts = pts[0]
            info.video_seconds = pts[-1] + step - pts[0]
    if info.audio:
        with av.open(str(path)) as c:
            s = c.streams.audio[0]
            info.audio_rate = s.codec_context.sample_rate
            for f in c.decode(s):
                if info.audio_first_pts is None and f.pts is not None:
                    info.audio_first_pts = float(f.pts * f.time_base)
                info.audio_samples += f.samples
    return info


def video_pts(path: str | os.PathLike) -> list[float]:
    """Presentation times (seconds) of every decoded video frame, in decode order."""
    with av.open(str(path)) as c:
        return [float(f.pts * f.time_base) for f in c.decode(video=0)]


def _libvpx_frames(container, stream):
    """Decode a VP9 stream with libvpx (keeps the alpha layer)."""
    ctx = av.CodecContext.create("libvpx-vp9", "r")
    for packet in container.demux(stream):
        yield from ctx.decode(packet)


def decode_video(
    path: str | os.PathLike, fmt: str = "rgb24", alpha: bool = False, limit: int | None = None
) -> tuple[list[np.ndarray], list[float]]:
    """Decode frames to uint8 arrays in `fmt` ("rgb24", "rgba", "gray", …) and their pts.

    `alpha=True` decodes VP9 with libvpx so the alpha plane survives (use fmt="rgba"); the
    RGB then has straight (not premultiplied) alpha, as stored.
    """
    frames: list[np.ndarray] = []
    times: list[float] = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        if alpha and s.codec_context.name == "vp9":
            source = _libvpx_frames(c, s)
            time_base = s.time_base
        else:
            source = c.decode(s)
            time_base = None
        for f in source:
            frames.append(f.to_ndarray(format=fmt))
            tb = f.time_base or time_base
            times.append(float(f.pts * tb))
            if limit is not None and len(frames) >= limit:
                break
    return frames, times


def decoded_pix_fmt(path: str | os.PathLike, alpha: bool = False) -> str:
    """Pixel format of the first decoded frame (libvpx decoder when `alpha`)."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        source = _libvpx_frames(c, s) if alpha and s.codec_context.name == "vp9" else c.decode(s)
        for f in source:
            return f.format.name
    raise ValueError(f"{path}: no video frames")


def decode_audio(path: str | os.PathLike) -> tuple[np.ndarray, int, float]:
    """All decoded audio as float32 (channels, n), its sample rate, and the first pts (s)."""
    chunks: list[np.ndarray] = []
    first = 0.0
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        rate = s.codec_context.sample_rate
        for i, f in enumerate(c.decode(s)):
            if i == 0 and f.pts is not None:
                first = float(f.pts * f.time_base)
            a = f.to_ndarray()
            if not f.format.is_planar:  # packed: (1, n*channels)
                a = a.reshape(-1, f.layout.nb_channels).T
            chunks.append(a.astype(np.float32))
    if not chunks:
        return np.zeros((0, 0), np.float32), rate, 0.0
    return np.concatenate(chunks, axis=1), rate, first
