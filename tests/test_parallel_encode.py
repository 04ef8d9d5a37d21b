"""The segmented MP4 sink: N libx264 processes on chunks of the video, joined losslessly.

Everything is really encoded and decoded with av. Each frame carries its own number as a row of
big black/white blocks, so the decoded file shows whether every frame arrived, once, in order,
across the chunk boundaries of all encoders.
"""

from __future__ import annotations

import os
import signal
from fractions import Fraction
from pathlib import Path

import av
import av.logging
import numpy as np
import pytest
import torch

from core.avatar import AvatarParams
from core.clock import frame_count, frame_pts_ns
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from core.workers import WorkerProcessError
from pipeline.graph import Graph
from pipeline.media_probe import decode_video, probe
from pipeline.sinks.segmented import (
    EncoderWorkerError,
    SegmentedVideoSink,
    auto_encoders,
    encoder_threads,
)
from pipeline.sinks.video_file import partial_path

W, H, FPS, SR = 160, 96, 30, 48000
BITS = 10
PARAMS = AvatarParams()


def numbered(i: int) -> np.ndarray:
    """Opaque RGBA: frame number i in BITS blocks on top, a bar that moves below."""
    img = np.zeros((H, W, 4), np.uint8)
    img[..., 3] = 255
    bw = W // BITS
    for b in range(BITS):
        if i >> b & 1:
            img[: H // 2, b * bw : (b + 1) * bw, :3] = 255
    img[H // 2 :, :, 0] = 60
    img[H // 2 :, :, 2] = 120
    x = (5 * i) % (W - 24)
    img[H // 2 + 8 : H - 8, x : x + 24, :3] = (240, 200, 40)
    return img


def read_number(rgb: np.ndarray) -> int:
    bw = W // BITS
    value = 0
    for b in range(BITS):
        block = rgb[8 : H // 2 - 8, b * bw + 4 : (b + 1) * bw - 4]
        if block.mean() > 128:
            value |= 1 << b
    return value


def tone(n_samples: int) -> np.ndarray:
    t = np.arange(n_samples) / SR
    return np.stack([0.2 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 660 * t)]).astype(
        np.float32
    )


def encode(
    path: Path, n_frames: int, audio, torch_images: bool = False, **kw
) -> SegmentedVideoSink:
    sink = SegmentedVideoSink(path, W, H, FPS, audio, SR, **kw)
    sink.setup(Context(W, H, FPS, SR))
    try:
        for i in range(n_frames):
            img = numbered(i)
            image = torch.from_numpy(img) if torch_images else img
            sink.write(Frame(pts_ns=frame_pts_ns(i, FPS), index=i, params=PARAMS, image=image))
        sink.finish()
    except BaseException:
        sink.abort()
        raise
    return sink


@pytest.mark.parametrize("preset", ["veryfast", "ultrafast"])  # with and without B-frames
def test_segments_join_losslessly_in_order(tmp_path, preset):
    gop, encoders = 8, 3
    audio = tone(round(2.0 * SR) + 123)  # not a whole number of frames
    n = frame_count(audio.shape[1], SR, FPS)
    assert n % gop != 0  # the last chunk is a short one
    path = tmp_path / "clip.mp4"
    sink = encode(
        path, n, audio, torch_images=True, encoders=encoders, gop_frames=gop, x264_preset=preset
    )
    assert path.exists() and not partial_path(path).exists()
    assert sorted(os.listdir(tmp_path)) == ["clip.mp4"]
    assert sink.chunks_joined == -(-n // gop)
    assert sorted(sink.worker_stats) == list(range(encoders))  # every encoder worked

    info = probe(path)
    assert len(info.video) == 1 and len(info.audio) == 1
    assert (info.video[0].codec, info.audio[0].codec) == ("h264", "aac")
    assert info.video[0].pix_fmt == "yuv420p" and (info.video[0].width, info.video[0].height) == (
        W,
        H,
    )
    assert info.video_frames == n
    assert info.video_first_pts == 0.0
    assert abs(info.video_seconds - n / FPS) < 1e-3
    assert abs(info.audio_seconds - info.video_seconds) < 1 / FPS

    # every frame once, in order, across all chunk boundaries; the decoder reports no error
    av.logging.set_level(av.logging.ERROR)
    try:
        with av.logging.Capture() as logs:
            frames, times = decode_video(path)
    finally:
        av.logging.set_level(None)
    assert [entry for entry in logs if entry[0] <= av.logging.ERROR] == []
    assert [read_number(f) for f in frames] == list(range(n))
    assert np.allclose(times, np.arange(n) / FPS, atol=1e-4)
    # the picture survives (lossy but close): the moving bar is where it should be
    for i in (0, gop - 1, gop, 3 * gop + 2, n - 1):
        ref = numbered(i)[..., :3].astype(np.int16)
        assert np.abs(frames[i].astype(np.int16) - ref).mean() < 6

    # each chunk starts on a keyframe and decodes on its own (closed GOP, parameter sets in band)
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        extradata = s.codec_context.extradata
        packets = [(p, round(float(p.pts * p.time_base) * FPS)) for p in c.demux(s) if p.size]
        by_chunk: dict[int, list] = {}
        keys = set()
        for p, frame in packets:
            by_chunk.setdefault(frame // gop, []).append(p)
            if p.is_keyframe:
                keys.add(frame)
        assert set(range(0, n, gop)) <= keys
        for chunk, group in by_chunk.items():
            assert group[0].is_keyframe, f"chunk {chunk} does not open with a keyframe"
            dec = av.CodecContext.create("h264", "r")
            dec.extradata = extradata
            got = []
            for p in group:
                got += [f.to_ndarray(format="rgb24") for f in dec.decode(p)]
            got += [f.to_ndarray(format="rgb24") for f in dec.decode(None)]
            want = list(range(chunk * gop, min(n, (chunk + 1) * gop)))
            assert [read_number(f) for f in got] == want


def test_bt709_tags_and_silent_video(tmp_path):
    path = tmp_path / "silent.mp4"
    encode(path, 20, None, encoders=2, gop_frames=5)
    info = probe(path)
    assert len(info.audio) == 0 and info.video_frames == 20
    with av.open(str(path)) as c:
        cc = c.streams.video[0].codec_context
        assert (cc.colorspace, cc.color_primaries, cc.color_trc, cc.color_range) == (1, 1, 1, 1)
        assert c.streams.video[0].average_rate == Fraction(FPS)


class KillEncoder(BaseStage):
    """Kills one encoder process with SIGKILL when frame `at` passes (a real crash)."""

    name = "kill_encoder"
    needs = spec("image")

    def __init__(self, sink: SegmentedVideoSink, worker: int, at: int):
        self.sink, self.worker, self.at = sink, worker, at

    def process(self, frame: Frame) -> Frame:
        if frame.index == self.at:
            os.kill(self.sink.worker_pids[self.worker], signal.SIGKILL)
        return frame


class Numbered:
    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            img = torch.from_numpy(numbered(i))
            yield Frame(pts_ns=frame_pts_ns(i, FPS), index=i, params=PARAMS, image=img)


def test_encoder_crash_is_one_clear_error_and_leaves_nothing(tmp_path):
    path = tmp_path / "crash.mp4"
    path_old = tmp_path / "old.mp4"
    path_old.write_bytes(b"an earlier render")
    n = 240
    sink = SegmentedVideoSink(path, W, H, FPS, tone(n * SR // FPS), SR, encoders=2, gop_frames=6)
    graph = Graph(
        Numbered(n), spec("params", "image", size=(W, H)), [KillEncoder(sink, 1, 20)], sink
    )
    with pytest.raises(EncoderWorkerError) as err:
        graph.run(Context(W, H, FPS, SR))
    message = str(err.value)
    print(message)
    assert isinstance(err.value, WorkerProcessError)
    assert "\n" not in message
    assert "encoder 1" in message and "SIGKILL" in message and "crash.mp4" in message
    assert sorted(os.listdir(tmp_path)) == ["old.mp4"]  # no final file, no partial
    assert path_old.read_bytes() == b"an earlier render"
    assert all(p.exitcode is not None for p in sink._procs)  # every worker is gone


class SeesEncoders(BaseStage):
    """Records, in its own setup, which encoder processes are already running; optionally
    fails there (a stage set-up error, e.g. a model that does not load)."""

    name = "sees_encoders"
    needs = spec("image")

    def __init__(self, sink: SegmentedVideoSink, fail: bool = False):
        self.sink, self.fail, self.seen = sink, fail, None

    def setup(self, ctx: Context) -> None:
        self.seen = [p.is_alive() for p in self.sink._procs]
        if self.fail:
            raise RuntimeError("this stage could not set up")

    def process(self, frame: Frame) -> Frame:
        return frame


def test_encoders_start_up_while_the_stages_set_up(tmp_path):
    """Graph.run launches the sink's encoder processes before the stages' setup (they import
    and open libx264 meanwhile) and waits for them only in the sink's own setup."""
    path = tmp_path / "early.mp4"
    n = 30
    sink = SegmentedVideoSink(path, W, H, FPS, tone(n * SR // FPS), SR, encoders=2, gop_frames=6)
    sees = SeesEncoders(sink)
    Graph(Numbered(n), spec("params", "image", size=(W, H)), [sees], sink).run(
        Context(W, H, FPS, SR)
    )
    assert sees.seen == [True, True]
    assert probe(path).video_frames == n


def test_a_stage_that_fails_to_set_up_after_the_launch_leaves_nothing(tmp_path):
    path = tmp_path / "never.mp4"
    n = 30
    sink = SegmentedVideoSink(path, W, H, FPS, tone(n * SR // FPS), SR, encoders=2, gop_frames=6)
    sees = SeesEncoders(sink, fail=True)
    graph = Graph(Numbered(n), spec("params", "image", size=(W, H)), [sees], sink)
    with pytest.raises(RuntimeError, match="could not set up"):
        graph.run(Context(W, H, FPS, SR))
    assert sees.seen == [True, True]  # launched, then stopped
    assert os.listdir(tmp_path) == []  # no file, no partial, no claim left behind
    assert all(p.exitcode is not None for p in sink._procs)


def test_bad_paths_and_settings(tmp_path):
    with pytest.raises(ValueError, match=r"MP4.*only"):
        SegmentedVideoSink(tmp_path / "a.webm", W, H, FPS, None, SR)
    with pytest.raises(ValueError, match=r"a\.avi"):
        SegmentedVideoSink(tmp_path / "a.avi", W, H, FPS, None, SR)
    with pytest.raises(ValueError, match="even"):
        SegmentedVideoSink(tmp_path / "a.mp4", W + 1, H, FPS, None, SR)
    with pytest.raises(ValueError, match="encoders"):
        SegmentedVideoSink(tmp_path / "a.mp4", W, H, FPS, None, SR, encoders=0)
    sink = SegmentedVideoSink(tmp_path / "missing" / "a.mp4", W, H, FPS, None, SR)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sink.setup(Context(W, H, FPS, SR))
    # an x264 setting that libx264 refuses fails at setup, in one line, and leaves nothing
    sink = SegmentedVideoSink(tmp_path / "b.mp4", W, H, FPS, None, SR, x264_preset="warp9")
    with pytest.raises(EncoderWorkerError) as err:
        sink.setup(Context(W, H, FPS, SR))
    assert "encoder" in str(err.value) and "\n" not in str(err.value)
    sink.abort()
    assert list(tmp_path.iterdir()) == []


def test_auto_counts():
    assert auto_encoders(1920, 1080, cores=2) == 1  # small machines: the plain sink
    assert auto_encoders(1920, 1080, cores=16) == 4
    assert auto_encoders(1280, 720, cores=16) == 2
    assert auto_encoders(640, 360, cores=16) == 1
    assert auto_encoders(3840, 2160, cores=64) == 8
    assert encoder_threads(4, cores=16) == 4 and encoder_threads(8, cores=4) == 1
