"""The video file sink (MP4/WebM), its crash safety, the media probe and the progress reporter."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from core.avatar import AvatarParams
from core.clock import frame_count, frame_pts_ns
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.graph import Graph
from pipeline.media_probe import decode_audio, decode_video, decoded_pix_fmt, probe
from pipeline.progress import RenderProgress
from pipeline.sinks.video_file import VideoFileSink, partial_path, unpremultiply

W, H, FPS = 160, 96, 30
PARAMS = AvatarParams()
REPO = Path(__file__).resolve().parents[1]


def tone(seconds: float, sr: int, extra: int = 0) -> np.ndarray:
    n = round(seconds * sr) + extra
    t = np.arange(n) / sr
    return np.stack(
        [0.25 * np.sin(2 * np.pi * 440 * t), 0.25 * np.sin(2 * np.pi * 660 * t)]
    ).astype(np.float32)


def opaque_frame(i: int) -> torch.Tensor:
    img = torch.zeros(H, W, 4, dtype=torch.uint8)
    img[..., 0] = 40
    img[..., 1] = torch.linspace(0, 200, W).to(torch.uint8)
    img[..., 2] = 90
    img[..., 3] = 255
    x = (3 * i) % (W - 20)
    img[30:60, x : x + 20, :3] = torch.tensor([230, 200, 40], dtype=torch.uint8)
    return img


def alpha_frame(i: int) -> tuple[torch.Tensor, np.ndarray]:
    """Premultiplied RGBA: transparent corners, opaque centre disc, soft edge; + straight alpha."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    r = np.hypot(xx - W / 2, yy - H / 2)
    alpha = np.clip((40 - r) / 12, 0, 1)  # opaque centre r < 28, ramp to 0 at r = 40
    straight = np.array([220, 120, 60], np.float32)
    rgb = straight * alpha[..., None]
    rgba = np.concatenate([rgb, 255 * alpha[..., None]], -1)
    img = (rgba + 0.5).astype(np.uint8)
    return torch.from_numpy(img), img[..., 3]


def render(sink: VideoFileSink, frames, sr: int) -> None:
    sink.setup(Context(W, H, FPS, sr))
    for i, img in enumerate(frames):
        sink.write(Frame(pts_ns=frame_pts_ns(i, FPS), index=i, params=PARAMS, image=img))
    sink.finish()


def write_clip(path: Path, seconds: float, sr: int, transparent=False, extra=0, **kw):
    audio = tone(seconds, sr, extra)
    n_frames = frame_count(audio.shape[1], sr, FPS)
    make = (lambda i: alpha_frame(i)[0]) if transparent else opaque_frame
    sink = VideoFileSink(path, W, H, FPS, audio, sr, transparent=transparent, **kw)
    render(sink, (make(i) for i in range(n_frames)), sr)
    return audio, n_frames, sink


# ---------------------------------------------------------------------- streams and durations


@pytest.mark.parametrize(
    "ext,sr,transparent",
    [("mp4", 48000, False), ("mp4", 44100, False), ("webm", 48000, True), ("webm", 44100, False)],
)
def test_streams_frames_and_durations(tmp_path, ext, sr, transparent):
    path = tmp_path / f"clip.{ext}"
    audio, n_frames, sink = write_clip(path, 2.0, sr, transparent=transparent, extra=123)
    assert path.exists() and not partial_path(path).exists()
    info = probe(path)
    assert len(info.video) == 1 and len(info.audio) == 1
    v, a = info.video[0], info.audio[0]
    if ext == "mp4":
        assert (v.codec, a.codec) == ("h264", "aac")
        assert v.pix_fmt == "yuv420p"
        assert a.sample_rate == sr
    else:
        assert (v.codec, a.codec) == ("vp9", "opus")
        assert a.sample_rate == 48000
        assert decoded_pix_fmt(path, alpha=True) == ("yuva420p" if transparent else "yuv420p")
    assert (v.width, v.height) == (W, H)
    assert info.video_frames == n_frames
    assert info.video_first_pts == 0.0
    assert abs(info.video_seconds - n_frames / FPS) < 1e-3
    assert abs(info.audio_seconds - info.video_seconds) < 1 / FPS
    n = audio.shape[1]
    if ext == "mp4":
        # Measured: the 1024-sample AAC priming is hidden by the MP4 edit list (delay_moov);
        # the end stays padded up to a whole AAC frame (frame_size as av reports it).
        fs = sink.audio_frame_size
        assert fs == 1024
        assert info.audio_samples == -(-n // fs) * fs
    else:
        # Opus: pre-skip is trimmed by the decoder; the resampled count is exact.
        assert info.audio_samples == round(n * 48000 / sr)


def test_audio_content_survives(tmp_path):
    path = tmp_path / "tone.webm"
    audio, _, _ = write_clip(path, 1.0, 48000)
    decoded, rate, first = decode_audio(path)
    assert rate == 48000 and first == 0.0
    assert decoded.shape == audio.shape
    # lossy, but the same tone in the same place (no shift): correlation near 1
    mid = slice(2000, 40000)
    c = np.corrcoef(decoded[0, mid], audio[0, mid])[0, 1]
    assert c > 0.99


# ---------------------------------------------------------------------- A/V sync


@pytest.mark.parametrize("ext", ["mp4", "webm"])
def test_flash_and_click_line_up(tmp_path, ext):
    sr, k = 44100, 37
    audio = np.zeros((2, 3 * sr), np.float32)
    click = k * sr // FPS
    audio[:, click : click + 48] = 0.9
    n_frames = frame_count(audio.shape[1], sr, FPS)
    frames = []
    for i in range(n_frames):
        img = torch.zeros(H, W, 4, dtype=torch.uint8)
        img[..., 3] = 255
        if i == k:
            img[...] = 255
        frames.append(img)
    path = tmp_path / f"sync.{ext}"
    render(VideoFileSink(path, W, H, FPS, audio, sr), frames, sr)
    decoded, times = decode_video(path, fmt="gray")
    flash = int(np.argmax([f.mean() for f in decoded]))
    t_flash = times[flash]
    samples, rate, first = decode_audio(path)
    t_click = first + int(np.argmax(np.abs(samples[0]) > 0.3)) / rate
    assert abs(t_flash - k / FPS) < 0.5 / FPS
    assert abs(t_flash - t_click) < 1 / FPS, (t_flash, t_click)


# ---------------------------------------------------------------------- alpha


def test_webm_alpha_round_trip(tmp_path):
    path = tmp_path / "alpha.webm"
    audio = tone(1.0, 48000)
    n_frames = frame_count(audio.shape[1], 48000, FPS)
    img, alpha_in = alpha_frame(0)
    render(
        VideoFileSink(path, W, H, FPS, audio, 48000, transparent=True),
        [img] * n_frames,
        48000,
    )
    frames, _ = decode_video(path, fmt="rgba", alpha=True, limit=5)
    out = frames[-1]
    a = out[..., 3].astype(np.int32)
    assert a[:8, :8].max() < 10 and a[-8:, -8:].max() < 10  # transparent corners
    assert a[H // 2 - 8 : H // 2 + 8, W // 2 - 8 : W // 2 + 8].min() > 245  # opaque centre
    err = np.abs(a - alpha_in.astype(np.int32))
    assert err.mean() < 3 and err.max() < 48
    # straight colour in the opaque centre is the source colour (un-premultiplied)
    centre = out[H // 2 - 4 : H // 2 + 4, W // 2 - 4 : W // 2 + 4, :3].reshape(-1, 3).mean(0)
    assert np.abs(centre - np.array([220, 120, 60])).max() < 8
    # the native decoder drops alpha (why media_probe decodes with libvpx)
    assert decoded_pix_fmt(path) == "yuv420p"


def test_unpremultiply_is_exact():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (64, 64, 1)).astype(np.uint8)
    c = (rng.integers(0, 256, (64, 64, 3)) * a // 255).astype(np.uint8)
    rgba = np.concatenate([c, a], -1)
    out = unpremultiply(rgba)
    af = a.astype(np.float64)
    want = np.where(
        af > 0, np.minimum(255, np.floor(c.astype(np.float64) * 255 / np.maximum(af, 1) + 0.5)), 0
    )
    assert np.array_equal(out[..., :3], want.astype(np.uint8))
    assert np.array_equal(out[..., 3], rgba[..., 3])
    opaque = rgba.copy()
    opaque[..., 3] = 255
    assert unpremultiply(opaque) is opaque


# ---------------------------------------------------------------------- failure paths


def test_abort_keeps_written_frames_and_old_file(tmp_path):
    path = tmp_path / "song.mp4"
    path.write_bytes(b"previous render")
    sink = VideoFileSink(path, W, H, FPS, tone(1.0, 48000), 48000, fragment_seconds=0.1)
    sink.setup(Context(W, H, FPS, 48000))
    for i in range(10):
        sink.write(Frame(pts_ns=0, index=i, params=PARAMS, image=opaque_frame(i)))
    assert partial_path(path).exists()
    sink.abort()
    sink.abort()  # idempotent
    assert not partial_path(path).exists()
    assert path.read_bytes() == b"previous render"
    # the frames written are not thrown away: NAME.interrupted.mp4 plays them
    assert sink.kept == tmp_path / "song.interrupted.mp4"
    assert probe(sink.kept).video_frames > 0


def test_abort_before_any_frame_leaves_nothing(tmp_path):
    path = tmp_path / "song.mp4"
    sink = VideoFileSink(path, W, H, FPS, tone(1.0, 48000), 48000)
    sink.setup(Context(W, H, FPS, 48000))
    sink.abort()
    assert sink.kept is None
    assert list(tmp_path.iterdir()) == []


def test_success_replaces_old_file(tmp_path):
    path = tmp_path / "song.mp4"
    path.write_bytes(b"previous render")
    write_clip(path, 0.5, 48000)
    assert probe(path, decode=False).video[0].codec == "h264"


class Source:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield Frame(pts_ns=frame_pts_ns(i, FPS), index=i, params=PARAMS, image=opaque_frame(i))


class Explodes(BaseStage):
    name = "explodes"
    needs = spec("image")

    def process(self, frame):
        if frame.index == 20:
            raise RuntimeError("stage broke on frame 20")
        return frame


def test_failing_graph_keeps_frames_as_interrupted(tmp_path):
    path = tmp_path / "broken.webm"
    sink = VideoFileSink(path, W, H, FPS, tone(2.0, 48000), 48000)
    graph = Graph(Source(60), spec("params", "image", size=(W, H)), [Explodes()], sink)
    with pytest.raises(RuntimeError, match="frame 20"):
        graph.run(Context(W, H, FPS, 48000))
    assert not path.exists()
    assert not partial_path(path).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["broken.interrupted.webm"]
    assert 0 < probe(sink.kept).video_frames <= sink.frames_written


def test_graph_run_with_progress(tmp_path):
    path = tmp_path / "ok.mp4"
    audio = tone(1.0, 48000)
    n = frame_count(audio.shape[1], 48000, FPS)
    sink = VideoFileSink(path, W, H, FPS, audio, 48000)
    graph = Graph(Source(n), spec("params", "image", size=(W, H)), [], sink)
    out = io.StringIO()
    with RenderProgress(n, label="ok.mp4", file=out) as progress:
        stats = graph.run(Context(W, H, FPS, 48000), on_frame=progress.on_frame)
    assert stats.frames == n == progress.frames
    assert probe(path).video_frames == n
    text = out.getvalue()
    assert f"ok.mp4: done, {n} frames in" in text and "fps)" in text
    assert list(tmp_path.iterdir()) == [path]


def test_graph_checks_sink_size(tmp_path):
    sink = VideoFileSink(tmp_path / "x.mp4", 320, 240, FPS, None, 48000)
    graph = Graph(Source(1), spec("params", "image", size=(W, H)), [], sink)
    with pytest.raises(ValueError, match="320x240"):
        graph.build()


def test_silent_video(tmp_path):
    path = tmp_path / "silent.mp4"
    sink = VideoFileSink(path, W, H, FPS, None, 48000)
    render(sink, [opaque_frame(i) for i in range(15)], 48000)
    info = probe(path)
    assert len(info.audio) == 0 and info.video_frames == 15


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"song\.avi.*\.mp4.*\.webm"):
        VideoFileSink(tmp_path / "song.avi", W, H, FPS, None, 48000)
    with pytest.raises(ValueError, match=r"song\.mp4.*no alpha.*\.webm"):
        VideoFileSink(tmp_path / "song.mp4", W, H, FPS, None, 48000, transparent=True)
    with pytest.raises(ValueError, match="even"):
        VideoFileSink(tmp_path / "song.mp4", 161, H, FPS, None, 48000)
    with pytest.raises(ValueError, match="channels"):
        VideoFileSink(tmp_path / "song.mp4", W, H, FPS, np.zeros((5, 10), np.float32), 48000)
    sink = VideoFileSink(tmp_path / "song.mp4", W, H, FPS, None, 48000)
    sink.setup(Context(W, H, FPS, 48000))
    with pytest.raises(ValueError, match="expected"):
        sink.write(Frame(pts_ns=0, index=0, params=PARAMS, image=torch.zeros(10, 10, 4)))
    with pytest.raises(RuntimeError, match="no frames"):
        sink.finish()
    sink.abort()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- progress


def test_progress_quiet_and_counts():
    out = io.StringIO()
    p = RenderProgress(10, quiet=True, file=out)
    with p:
        for _ in range(10):
            p.on_frame(None)
    assert out.getvalue() == ""
    assert p.frames == 10 and p.seconds > 0 and p.fps > 0


def test_progress_reports_stop():
    out = io.StringIO()
    with pytest.raises(KeyError), RenderProgress(10, label="x", file=out) as p:
        p.on_frame(None)
        raise KeyError("boom")
    assert "x: stopped, 1/10 frames" in out.getvalue()


# ---------------------------------------------------------------------- killed render


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time, numpy as np, torch
    from core.avatar import AvatarParams
    from core.frame import Frame
    from pipeline.sinks.video_file import VideoFileSink
    from core.stage import Context
    W, H, FPS, SR = 160, 96, 30, 48000
    t = np.arange(60 * SR) / SR
    audio = np.stack([0.2 * np.sin(2 * np.pi * 440 * t)] * 2).astype(np.float32)
    sink = VideoFileSink(sys.argv[1], W, H, FPS, audio, SR, background=False)
    sink.setup(Context(W, H, FPS, SR))
    for i in range(60 * FPS):
        img = torch.full((H, W, 4), 255, dtype=torch.uint8)
        img[..., 0] = i % 256
        sink.write(Frame(pts_ns=0, index=i, params=AvatarParams(), image=img))
        if i == 100:
            print("ready", flush=True)
        time.sleep(0.002)
    sink.finish()
    """
)


@pytest.mark.parametrize("ext", ["mp4", "webm"])
def test_killed_render_leaves_playable_partial(tmp_path, ext):
    path = tmp_path / f"killed.{ext}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not path.exists()
    part = partial_path(path)
    assert part.exists()
    info = probe(part)
    assert info.video_frames >= 60  # at least two 1 s fragments made it to disk
    assert len(info.audio) == 1 and info.audio_samples > 0
    assert abs(info.audio_seconds - info.video_seconds) < 1.1  # audio kept pace


def test_mp4_is_bt709_limited_range_and_tagged(tmp_path):
    import av

    path = tmp_path / "red.mp4"
    img = torch.zeros(H, W, 4, dtype=torch.uint8)
    img[..., 0] = 255
    img[..., 3] = 255
    render(VideoFileSink(path, W, H, FPS, None, 48000), [img] * 5, 48000)
    with av.open(str(path)) as c:
        cc = c.streams.video[0].codec_context
        assert (cc.colorspace, cc.color_primaries, cc.color_trc, cc.color_range) == (1, 1, 1, 1)
        yuv = next(c.decode(video=0)).to_ndarray(format="yuv420p")
    # BT.709 limited: red → Y 16 + 219·0.2126 ≈ 63, Cb ≈ 102, Cr 240 (BT.601 would give Y 81)
    assert abs(yuv[:H].mean() - 63) < 2
    assert abs(yuv[H : H + H // 4].mean() - 102) < 2
    assert abs(yuv[H + H // 4 :].mean() - 240) < 2
