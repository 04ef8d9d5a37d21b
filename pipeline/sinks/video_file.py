"""`VideoFileSink`: the music-video file at the end of an offline render.

Containers (chosen by the path's extension):

    .mp4   H.264 (libx264, yuv420p, BT.709 limited range) + AAC
    .webm  VP9 (libvpx-vp9; yuva420p with `transparent=True`, else yuv420p) + Opus (48 kHz)

Audio is muxed sample-exactly: the source samples (already cut to the rendered range) go in
whole, with time stamps counted in samples (time base 1/sample_rate; for Opus 1/48000 after a
libswresample conversion whose output is counted the same way). The video gets exactly the
frames the graph sends, with pts = frame number (time base 1/fps), so a caller that sends
`frame_count(n, sample_rate, fps)` frames gets audio and video durations within one frame.

Crash safety (the rules of `pipeline.sinks.output`): the file is written to a sibling named
`<stem>.partial<ext>`, held under an exclusive lock for the whole job (a second job on the same
output stops at `setup`), and renamed onto the final path only by `finish()`, after the
encoders are flushed, the container closed and the file fsynced. `abort()` after frames were
written keeps them as `<stem>.interrupted<ext>` (`kept` names it); with no frames it deletes the
partial. A final path never holds an incomplete file and an existing file there is replaced
only on success. MP4 is written fragmented
(`frag_keyframe+empty_moov+delay_moov+default_base_moof`, a fragment at least every
`fragment_seconds`), so a render that is killed leaves a partial file that plays up to its last
complete fragment; WebM/Matroska is streamable as it is (clusters of `fragment_seconds`). `delay_moov` matters: it writes the moov
with the first fragment, once the start offsets are known, so it carries the edit lists that
hide x264's B-frame delay and AAC's 1024-sample priming. Without it (plain `empty_moov`) the
video starts 2 frames late and the audio 1024 samples late: 45 ms of A/V offset at 30 fps. Audio is encoded alongside the video (up to the time of the last frame
written), so a partial file carries its sound too.

Speed: colour conversion (libswscale), encoding and muxing run on a background thread fed by a
small bounded queue; av releases the GIL around `sws_scale`, `avcodec_send_frame`,
`avcodec_receive_packet` and the muxer write, so the caller's thread only pays for a queue put
(and waits only when the encoder falls behind, which is the offline back-pressure we want).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.audio.resampler import AudioResampler
from av.video.frame import VideoFrame
from av.video.reformatter import ColorRange, Colorspace

from core.frame import Frame
from core.stage import Context, spec
from pipeline.sinks.output import PartialFile, partial_path

__all__ = ["VideoFileSink", "partial_path", "unpremultiply"]

ACCEPTED = {
    ".mp4": "MP4: H.264 + AAC",
    ".webm": "WebM: VP9 (alpha with transparent=True) + Opus",
}
OPUS_RATE = 48_000
_AVCOL_BT709 = 1  # AVCOL_PRI_BT709 == AVCOL_TRC_BT709 == AVCOL_SPC_BT709
_AVCOL_RANGE_MPEG = 1
_STOP = object()


_UNPREMULTIPLY_LUT: np.ndarray | None = None


def _lut() -> np.ndarray:
    global _UNPREMULTIPLY_LUT
    if _UNPREMULTIPLY_LUT is None:
        alpha = np.arange(256, dtype=np.int32)[:, None]
        colour = np.arange(256, dtype=np.int32)[None, :]
        table = (colour * 255 + alpha // 2) // np.maximum(alpha, 1)
        table[0, :] = 0
        _UNPREMULTIPLY_LUT = np.minimum(table, 255).astype(np.uint8).reshape(-1)
    return _UNPREMULTIPLY_LUT


def unpremultiply(rgba: np.ndarray) -> np.ndarray:
    """Premultiplied uint8 (H, W, 4) RGBA → straight alpha, exact integer rounding.

    A 64 K-entry table indexed by (alpha << 8 | colour): ~12 ms at 1280x720 on one core,
    nothing at all when every pixel is opaque.
    """
    alpha = rgba[..., 3]
    if alpha.min() == 255:
        return rgba
    index = (rgba[..., 3:4].astype(np.uint16) << 8) | rgba[..., :3]
    out = np.empty_like(rgba)
    np.take(_lut(), index, out=out[..., :3])
    out[..., 3] = alpha
    return out


def check_output_path(path: Path, transparent: bool) -> str:
    """The container suffix for `path`, or ValueError naming the path and what is accepted."""
    suffix = path.suffix.lower()
    if suffix not in ACCEPTED:
        accepted = ", ".join(f"{ext} ({what})" for ext, what in ACCEPTED.items())
        raise ValueError(
            f"{path}: cannot write a video with extension {suffix or '(none)'!r}; "
            f"accepted: {accepted}"
        )
    if transparent and suffix == ".mp4":
        raise ValueError(
            f"{path}: transparent output needs WebM — MP4/H.264 has no alpha channel; "
            f"write to {path.with_suffix('.webm').name} instead"
        )
    return suffix


# ---------------------------------------------------------------------------- shared by the file sinks
# (`VideoFileSink` here and `pipeline.sinks.segmented.SegmentedVideoSink`)


def check_size_and_fps(path: Path, width: int, height: int, fps: int | Fraction) -> Fraction:
    """`fps` as a Fraction, or ValueError: the size must be positive and even, fps > 0."""
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise ValueError(
            f"{path}: video size {width}x{height} must be positive and even "
            "(4:2:0 chroma subsampling)"
        )
    fps = Fraction(fps)
    if fps <= 0:
        raise ValueError(f"{path}: fps must be > 0, got {fps}")
    return fps


def check_audio(path: Path, audio: np.ndarray | None, sample_rate: int) -> np.ndarray | None:
    """The source audio as contiguous float32 (channels, n) with 1 or 2 channels, or None."""
    if audio is None:
        return None
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim == 1:
        audio = audio[None, :]
    if audio.ndim != 2 or audio.shape[0] not in (1, 2):
        raise ValueError(
            f"{path}: audio must be float32 (channels, samples) with 1 or 2 "
            f"channels, got shape {audio.shape}"
        )
    if sample_rate <= 0:
        raise ValueError(f"{path}: sample_rate must be > 0, got {sample_rate}")
    return np.ascontiguousarray(audio)


def open_fragmented_mp4(path: Path, fragment_seconds: float):
    """An av output container writing fragmented MP4 to `path` (see the module notes)."""
    frag_us = max(1, round(fragment_seconds * 1e6))
    options = {
        "movflags": "frag_keyframe+empty_moov+delay_moov+default_base_moof",
        "frag_duration": str(frag_us),
        # hand each finished fragment to the OS at once, not when a 32 KiB AVIO
        # buffer fills: a killed render then keeps every fragment it completed
        "flush_packets": "1",
    }
    return av.open(str(path), "w", format="mp4", options=options)


def add_audio_stream(container, codec: str, rate: int, layout: str, sample_format: str):
    """An audio stream counting time in samples (time base 1/rate)."""
    astream = container.add_stream(codec, rate=rate, layout=layout)
    astream.codec_context.format = sample_format
    astream.time_base = Fraction(1, rate)
    astream.codec_context.time_base = Fraction(1, rate)
    return astream


def _notice(text: str) -> None:
    import sys

    print(f"kagura: {text}", file=sys.stderr)


class EncodedFileSink:
    """What the file sinks share once set up: the checks of `setup` and `write`, the source
    audio fed in step with the video, muxing, and the partial file renamed by `finish`.

    Expects `path`, `partial`, `fps`, `width`, `height`, `audio`, `sample_rate`,
    `audio_samples_in`, `_audio_layout`, `_container` and `_state`.
    """

    path: Path
    partial: Path
    keep_interrupted = True  # abort() keeps written frames as NAME.interrupted.EXT
    kept: Path | None = None  # where abort() kept them

    def _check_setup(self, ctx: Context) -> None:
        if Fraction(ctx.fps) != self.fps:
            raise ValueError(f"{self.path}: sink made for {self.fps} fps, graph runs at {ctx.fps}")
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"{self.path}: the folder {self.path.parent} does not exist")

    def _check_image(self, frame: Frame):
        """The frame's picture, after checking the sink is open and the picture fits: its I420
        planes (2-D uint8 (H * 3 // 2, W)) where the GPU made them, else its RGBA image
        (3-D (H, W, 4))."""
        if self._state != "open":
            raise RuntimeError(f"{self.path}: write() on a sink that is {self._state}")
        if frame.i420 is not None:
            if getattr(self, "transparent", False):
                raise ValueError(
                    f"{self.path}: frame {frame.index} is I420, which has no alpha; "
                    "a transparent video needs RGBA frames"
                )
            if tuple(frame.i420.shape) != (self.height * 3 // 2, self.width):
                raise ValueError(
                    f"{self.path}: frame {frame.index} I420 picture is {tuple(frame.i420.shape)}, "
                    f"expected ({self.height * 3 // 2}, {self.width}) for {self.width}x{self.height}"
                )
            return frame.i420
        image = frame.image
        if image is None:
            raise ValueError(f"{self.path}: frame {frame.index} carries no image")
        if tuple(image.shape) != (self.height, self.width, 4):
            raise ValueError(
                f"{self.path}: frame {frame.index} image is {tuple(image.shape)}, "
                f"expected ({self.height}, {self.width}, 4) RGBA"
            )
        return image

    def _audio_due(self, frames: int) -> int:
        """Source samples up to the end of video frame `frames` (at most all of them)."""
        due = -(-frames * self.sample_rate * self.fps.denominator // self.fps.numerator)
        return min(due, self.audio.shape[1])

    def _audio_frame_until(self, end: int) -> av.AudioFrame | None:
        """The source samples from `audio_samples_in` to `end` as one frame (None if none)."""
        start = self.audio_samples_in
        if end <= start:
            return None
        chunk = np.ascontiguousarray(self.audio[:, start:end])
        af = av.AudioFrame.from_ndarray(chunk, format="fltp", layout=self._audio_layout)
        af.sample_rate = self.sample_rate
        af.pts = start
        af.time_base = Fraction(1, self.sample_rate)
        self.audio_samples_in = end
        return af

    def _mux(self, packets) -> None:
        for packet in packets:
            self._container.mux(packet)

    def _claim(self) -> None:
        """Take the exclusive lock on the partial file (OutputError when another job has it)."""
        self._partial_file = PartialFile(self.path, on_notice=_notice)
        self._partial_file.acquire()

    def _publish(self) -> None:
        """Close the container, fsync the partial file and rename it onto the final path."""
        self._container.close()
        self._container = None
        self._partial_file.publish()
        self._state = "done"

    def _release_partial(self, frames: int) -> None:
        """After an abort: keep the frames written as NAME.interrupted.EXT, or delete."""
        claim = getattr(self, "_partial_file", None)
        if claim is None or not claim.held:
            return
        if frames > 0 and self.keep_interrupted:
            with contextlib.suppress(OSError):
                self.kept = claim.keep()
        with contextlib.suppress(OSError):
            claim.discard()

    def _close_container(self) -> None:
        if self._container is not None:
            with contextlib.suppress(BaseException):
                self._container.close()
            self._container = None


class VideoFileSink(EncodedFileSink):
    """Encode frames (+ the source audio) into an MP4 or WebM file; see the module notes.

    `audio`: float32 (channels, n) in [-1, 1] — 1 or 2 channels — or None for a silent video.
    `crf`: x264's constant rate factor for MP4; WebM uses `vp9_crf` (0–63, libvpx's scale).
    `threads`: encoder threads (0 = the encoder's own choice, all cores).
    `background`: encode on a worker thread behind a queue of `queue_frames` frames.
    """

    name = "video_file"

    def __init__(
        self,
        path: str | os.PathLike,
        width: int,
        height: int,
        fps: int | Fraction,
        audio: np.ndarray | None,
        sample_rate: int,
        transparent: bool = False,
        x264_preset: str = "veryfast",
        crf: int = 20,
        *,
        vp9_crf: int = 32,
        vp9_cpu_used: int = 8,
        threads: int = 0,
        background: bool = True,
        queue_frames: int = 4,
        fragment_seconds: float = 1.0,
    ):
        self.path = Path(path)
        suffix = check_output_path(self.path, transparent)
        fps = check_size_and_fps(self.path, width, height, fps)
        audio = check_audio(self.path, audio, sample_rate)
        self.kind = suffix[1:]
        self.width, self.height, self.fps = width, height, fps
        self.audio, self.sample_rate = audio, sample_rate
        self.transparent = transparent
        self.x264_preset, self.crf = x264_preset, crf
        self.vp9_crf, self.vp9_cpu_used = vp9_crf, vp9_cpu_used
        self.threads = threads
        self.background = background
        self.queue_frames = queue_frames
        self.fragment_seconds = fragment_seconds
        self.partial = partial_path(self.path)
        self.needs = spec("image", size=(width, height))

        self.frames_written = 0
        self.audio_samples_in = 0  # source samples handed to the audio encoder
        self.encode_seconds = 0.0  # worker time: conversion + encode + mux
        self._container: av.container.OutputContainer | None = None
        self._vstream = None
        self._astream = None
        self._resampler: AudioResampler | None = None
        self._audio_pts = 0  # next audio pts in the encoder's sample rate
        self._queue: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        self._state = "new"  # new → open → done | aborted

    @property
    def audio_frame_size(self) -> int:
        """Samples per coded audio frame (AAC 1024, Opus 960 at 48 kHz); 0 before setup."""
        return self._astream.codec_context.frame_size if self._astream is not None else 0

    # ------------------------------------------------------------------ life cycle

    def setup(self, ctx: Context) -> None:
        self._check_setup(ctx)
        self._claim()
        try:
            self._open()
        except BaseException:
            self._close_container()
            self._release_partial(0)
            raise
        self._state = "open"
        if self.background:
            self._queue = queue.Queue(maxsize=max(1, self.queue_frames))
            self._worker = threading.Thread(target=self._work, name="video-encoder", daemon=True)
            self._worker.start()

    def write(self, frame: Frame) -> None:
        image = self._check_image(frame)
        if not self.background:
            self._encode_image(image)
            return
        self._raise_worker_error()
        while True:  # never block forever on a dead worker
            try:
                self._queue.put(image, timeout=0.1)
                return
            except queue.Full:
                self._raise_worker_error()

    def finish(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"{self.path}: finish() on a sink that is {self._state}")
        self._stop_worker()
        self._raise_worker_error()
        if self.frames_written == 0:
            raise RuntimeError(f"{self.path}: no frames were written; not creating the file")
        self._mux(self._vstream.encode(None))
        if self._astream is not None:
            self._encode_audio_until(self.audio.shape[1])
            self._flush_audio()
        self._publish()

    def abort(self) -> None:
        if self._state in ("done", "aborted"):
            return
        self._state = "aborted"
        keep = self.keep_interrupted and self.frames_written > 0
        with contextlib.suppress(BaseException):
            self._stop_worker(drain=not keep)
        if keep and self._error is None:
            # flush the encoder: the frames it still holds (x264's look-ahead) are kept too
            with contextlib.suppress(BaseException):
                self._mux(self._vstream.encode(None))
                if self._astream is not None:
                    self._flush_audio()
        self._close_container()
        self._release_partial(self.frames_written)

    # ------------------------------------------------------------------ opening

    def _open(self) -> None:
        if self.kind == "mp4":
            container = open_fragmented_mp4(self.partial, self.fragment_seconds)
        else:
            options = {
                "cluster_time_limit": str(max(1, round(self.fragment_seconds * 1000))),
                "flush_packets": "1",
            }
            container = av.open(str(self.partial), "w", format="webm", options=options)
        self._container = container

        if self.kind == "mp4":
            vs = container.add_stream("libx264", rate=self.fps)
            vs.pix_fmt = "yuv420p"
            vs.codec_context.options = {"preset": self.x264_preset, "crf": str(self.crf)}
        else:
            vs = container.add_stream("libvpx-vp9", rate=self.fps)
            vs.pix_fmt = "yuva420p" if self.transparent else "yuv420p"
            vs.codec_context.options = {
                "deadline": "realtime",
                "cpu-used": str(self.vp9_cpu_used),
                "row-mt": "1",
                "crf": str(self.vp9_crf),
                "b": "0",
            }
        vs.width, vs.height = self.width, self.height
        vs.time_base = 1 / self.fps
        cc = vs.codec_context
        cc.time_base = 1 / self.fps
        cc.thread_count = self.threads
        cc.colorspace = cc.color_primaries = cc.color_trc = _AVCOL_BT709
        cc.color_range = _AVCOL_RANGE_MPEG
        self._vstream = vs

        if self.audio is not None:
            layout = "mono" if self.audio.shape[0] == 1 else "stereo"
            if self.kind == "mp4":
                astream = add_audio_stream(container, "aac", self.sample_rate, layout, "fltp")
            else:
                astream = add_audio_stream(container, "libopus", OPUS_RATE, layout, "flt")
                self._resampler = AudioResampler(format="flt", layout=layout, rate=OPUS_RATE)
            self._astream = astream
            self._audio_layout = layout
        container.start_encoding()

    # ------------------------------------------------------------------ encoding

    def _work(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                if self._error is None:
                    self._encode_image(item)
        except BaseException as exc:
            self._error = exc
            # keep draining so a blocked producer wakes up and sees the error
            while self._queue.get() is not _STOP:
                pass

    def _stop_worker(self, drain: bool = False) -> None:
        if self._worker is None:
            return
        if drain:
            with contextlib.suppress(queue.Empty):
                while True:
                    self._queue.get_nowait()
        self._queue.put(_STOP)
        self._worker.join()
        self._worker = None

    def _raise_worker_error(self) -> None:
        if isinstance(self._error, OSError):  # disk full, read-only, ...: the OS error path
            raise self._error
        if self._error is not None:
            raise RuntimeError(f"{self.path}: video encoding failed: {self._error}") from (
                self._error
            )

    def _encode_image(self, image) -> None:
        t0 = time.perf_counter()
        if isinstance(image, np.ndarray):  # tolerated: some test stages hand numpy images
            rgba = np.ascontiguousarray(image, dtype=np.uint8)
        else:
            rgba = np.ascontiguousarray(image.detach().cpu().numpy())
        if rgba.ndim == 2:  # I420 planes, converted on the GPU (see _check_image)
            vf = VideoFrame.from_ndarray(rgba, format="yuv420p")
        else:
            if self.transparent:
                rgba = unpremultiply(rgba)
            # premultiplied RGB of a composited (opaque) frame is the picture; swscale drops alpha
            vf = VideoFrame.from_ndarray(rgba, format="rgba").reformat(
                format=self._vstream.pix_fmt,
                dst_colorspace=Colorspace.ITU709,
                dst_color_range=ColorRange.MPEG,
                threads=1,
            )
        vf.pts = self.frames_written
        vf.time_base = self._vstream.codec_context.time_base
        self._mux(self._vstream.encode(vf))
        self.frames_written += 1
        if self._astream is not None:
            # keep audio level with the video so the muxer interleaves and a partial file
            # carries the sound of every second it shows
            self._encode_audio_until(self._audio_due(self.frames_written))
        self.encode_seconds += time.perf_counter() - t0

    def _encode_audio_until(self, end: int) -> None:
        af = self._audio_frame_until(end)
        if af is None:
            return
        if self._resampler is None:
            self._mux(self._astream.encode(af))
        else:
            for out in self._resampler.resample(af):
                self._encode_resampled(out)

    def _encode_resampled(self, af: av.AudioFrame) -> None:
        af.pts = self._audio_pts
        af.time_base = Fraction(1, OPUS_RATE)
        self._audio_pts += af.samples
        self._mux(self._astream.encode(af))

    def _flush_audio(self) -> None:
        if self._resampler is not None:
            for out in self._resampler.resample(None):
                self._encode_resampled(out)
        self._mux(self._astream.encode(None))
