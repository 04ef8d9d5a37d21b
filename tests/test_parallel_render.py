"""The multi-process idol render, `kagura render --encoders/--render-workers` end to end, and
`kagura bench offline`'s import path (no librosa, scipy or PySide6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from app.bench_offline import synthetic_track
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.graph import Graph
from pipeline.media_probe import decode_video, probe
from pipeline.sources import TRACK_GIVES, track_frames
from presets.loader import load_preset
from render.idol import IdolRenderer
from render.pool import PooledRenderStage, RenderWorkerError, auto_render_workers
from render.stage import RenderStage, drop_unread_motion
from tests.cli import kagura
from tests.sinks import Collect

REPO = Path(__file__).resolve().parents[1]
W, H, FPS = 256, 144, 30


def run_graph(stage, track) -> list[Frame]:
    sink = Collect()
    Graph(track_frames(track), TRACK_GIVES, [stage], sink).run(Context(W, H, FPS, 48000))
    return sink.frames


def test_pool_output_is_identical_to_the_single_process_render():
    preset = load_preset("studio")
    track = synthetic_track(36, FPS, seed=3)
    single = run_graph(RenderStage(W, H, preset.palette, preset.line), track)
    pool = PooledRenderStage(track, W, H, preset.palette, preset.line, workers=2, in_flight=3)
    pooled = run_graph(pool, track)
    assert [f.index for f in pooled] == list(range(len(track)))
    for a, b in zip(single, pooled, strict=True):
        assert torch.equal(a.image, b.image), f"frame {a.index}: pixels differ"
        assert torch.equal(a.motion, b.motion), f"frame {a.index}: motion differs"
    moving = [f.index for f in single if f.motion.abs().max() > 0.5]
    assert len(moving) > len(track) // 2  # the test is about real motion, not still frames
    # the hair springs carry history: frame k rendered from a fresh renderer (no history)
    # differs from frame k of the sequence, so the pool really reproduced the history
    k = 30
    fresh = IdolRenderer(W, H, preset.palette, preset.line)
    fresh.render(track[k - 1])
    alone = fresh.render(track[k])
    assert not np.array_equal(alone.rgba, single[k].image.numpy())
    assert len(pool.worker_ms) == len(track)


class CollectImages(Collect):
    needs = spec("image")


def test_one_worker_without_motion_draws_the_in_process_pictures():
    """A pool on the CPU chain (no stage reads motion): its workers draw none, same pixels."""
    preset = load_preset("studio")
    track = synthetic_track(24, FPS, seed=5)
    single_stage = RenderStage(W, H, preset.palette, preset.line)
    pool = PooledRenderStage(track, W, H, preset.palette, preset.line, workers=1)
    frames = []
    for stage in (single_stage, pool):
        drop_unread_motion(stage, [CollectImages()])
        assert "motion" not in stage.gives.fields
        sink = CollectImages()
        Graph(track_frames(track), TRACK_GIVES, [stage], sink).run(Context(W, H, FPS, 48000))
        frames.append(sink.frames)
    single, pooled = frames
    assert len(pooled) == len(track)
    for a, b in zip(single, pooled, strict=True):
        assert b.motion is None
        assert torch.equal(a.image, b.image), f"frame {a.index}: pixels differ"
    assert len({f.image.numpy().tobytes() for f in pooled}) > len(track) // 2  # it moves


class KillRenderer(BaseStage):
    name = "kill_renderer"
    needs = spec("image")

    def __init__(self, pool: PooledRenderStage, at: int):
        self.pool, self.at = pool, at

    def process(self, frame: Frame) -> Frame:
        if frame.index == self.at:
            os.kill(self.pool._procs[0].pid, signal.SIGKILL)
        return frame


def test_render_worker_crash_is_one_clear_error():
    preset = load_preset("studio")
    track = synthetic_track(400, FPS)
    pool = PooledRenderStage(track, W, H, preset.palette, preset.line, workers=2, in_flight=4)
    sink = Collect()
    graph = Graph(track_frames(track), TRACK_GIVES, [pool, KillRenderer(pool, 5)], sink)
    with pytest.raises(RenderWorkerError) as err:
        graph.run(Context(W, H, FPS, 48000))
    assert "render worker 0" in str(err.value) and "SIGKILL" in str(err.value)
    assert "\n" not in str(err.value)
    assert len(sink.frames) < len(track)
    assert pool._procs == []  # closed: the other worker is stopped too


def test_auto_render_workers():
    assert auto_render_workers(640, 360, cores=2) == 1
    assert auto_render_workers(640, 360, cores=16) == 4
    assert auto_render_workers(640, 360, cores=128) == 8


# ---------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def song(tmp_path_factory) -> Path:
    """A 2.5 s 'sung' WAV: a tone in syllables, so the mouth opens and closes."""
    path = tmp_path_factory.mktemp("song") / "song.wav"
    sr = 22050
    t = np.arange(int(2.5 * sr)) / sr
    y = 0.4 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 2.5 * t) > 0)
    pcm = (y * 32767).astype(np.int16)[None, :]
    with av.open(str(path), "w") as c:
        s = c.add_stream("pcm_s16le", rate=sr, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = sr
        for p in s.encode(frame):
            c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    return path


def test_cli_parallel_render_end_to_end(song, tmp_path):
    from app.render_job import RenderRequest, build_graph

    out = tmp_path / "par.mp4"
    done = kagura(
        "render", str(song), "-o", str(out), "--size", "192x108", "--fps", "24", "--quiet",
        "--encoders", "2", "--render-workers", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["par.mp4"]
    info = probe(out)
    assert (info.video[0].codec, info.audio[0].codec) == ("h264", "aac")
    assert info.video_frames == 60  # 2.5 s at 24 fps
    assert abs(info.video_seconds - 2.5) < 1e-3
    assert abs(info.audio_seconds - info.video_seconds) <= 1 / 24
    # the same pictures, in the same order, as the one-process chain makes before encoding
    req = RenderRequest(song, tmp_path / "unused.mp4", width=192, height=108, fps=24)
    ref = Collect()
    ref.needs = spec("image")
    graph, ctx, n = build_graph(req, sink_factory=lambda req, clip: ref)
    graph.run(ctx)
    decoded, _ = decode_video(out)
    assert len(decoded) == n == len(ref.frames)
    want = [f.image.numpy()[..., :3].astype(np.int16) for f in ref.frames]
    diffs = [np.abs(d.astype(np.int16) - w).mean() for d, w in zip(decoded, want, strict=True)]
    assert max(diffs) < 8, diffs  # H.264 at CRF 20 and 4:2:0 chroma on a small, busy picture
    # … and frame i is closest to reference frame i, not to a neighbour
    for i in range(1, n - 1):
        here = diffs[i]
        near = [np.abs(decoded[i].astype(np.int16) - want[j]).mean() for j in (i - 1, i + 1)]
        moved = [np.abs(want[i] - want[j]).mean() for j in (i - 1, i + 1)]
        for d, m in zip(near, moved, strict=True):
            if m > 1.0:  # the neighbour looks different enough to tell apart
                assert here < d, (i, here, near)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(x) for x in text]
    return out


def test_cli_encoder_crash_one_line_no_output(song, tmp_path):
    out = tmp_path / "crash.mp4"
    long_song = tmp_path / "long.wav"
    with av.open(str(song)) as c:
        pcm = np.concatenate([f.to_ndarray() for f in c.decode(audio=0)], axis=1)
    pcm = np.tile(pcm, (1, 5))  # 12.5 s
    with av.open(str(long_song), "w") as c:
        s = c.add_stream("pcm_s16le", rate=22050, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = 22050
        for p in [*s.encode(frame), *s.encode(None)]:
            c.mux(p)
    cmd = [sys.executable, "-m", "app.cli", "render", str(long_song), "-o", str(out)]
    cmd += ["--size", "320x180", "--encoders", "2", "--render-workers", "1", "--quiet"]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        partial = tmp_path / "crash.partial.mp4"
        deadline = time.monotonic() + 120
        while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert partial.exists(), "the render never started writing"
        # the partial is claimed (locked) before the encoders start: wait for both
        workers: list[int] = []
        while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
            workers = [
                c
                for c in _children(proc.pid)
                if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()
            ]
            time.sleep(0.05)
        assert len(workers) == 2, workers  # the two encoders
        os.kill(workers[1], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("kagura: error:"), stderr
    assert "encoder" in lines[0] and "SIGKILL" in lines[0]
    # no final file; the chunks joined before the crash (if any) are kept, said in that line
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names in (["long.wav"], ["crash.interrupted.mp4", "long.wav"]), names
    assert ("crash.interrupted.mp4" in names) == ("kept in" in lines[0]), lines[0]


# ---------------------------------------------------------------------------- bench offline

BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = ("librosa", "scipy", "PySide6", "soxr", "sounddevice")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked: the GPU machine does not have it")
    sys.meta_path.insert(0, Block())
    """
)


def test_bench_offline_runs_without_librosa_scipy_or_qt(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)  # every process, spawned workers too
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
    check = subprocess.run(
        [sys.executable, "-c", "import scipy"], env=env, capture_output=True, text=True
    )
    assert check.returncode != 0 and "blocked" in check.stderr  # the blocker works
    # the whole benchmark (parent and its two runs), on the CPU, small
    keep = tmp_path / "runs"
    doc = tmp_path / "BENCH.md"
    cmd = [sys.executable, "-m", "app.cli", "bench", "offline", "--device", "cpu"]
    cmd += ["--size", "192x108", "--seconds", "1.5", "--encoders", "2", "--render-workers", "2"]
    cmd += ["--x264-preset", "ultrafast", "--no-encode-only", "--keep", str(keep)]
    done = subprocess.run(
        [*cmd, "--out", str(doc)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = doc.read_text()
    assert "<!-- bench:offline-cpu-ultrafast -->" in text
    assert "| 1 | 2 |" in done.stdout and "| 2 | 2 |" in done.stdout
    assert done.stdout.count("| ok (45 frames") == 2, done.stdout
    assert "FAILED" not in done.stdout
    from app.bench_offline import check_file

    for name in ("render-1enc.mp4", "render-2enc.mp4"):
        assert check_file(keep / name, 45, 30)["ok"]


def test_synthetic_track_moves_and_sings():
    track = synthetic_track(300, 30, seed=1)
    track.validate()
    s = track.scalars
    assert s["mouth_open"].min() < 0.05 and s["mouth_open"].max() > 0.8
    assert s["eye_open_l"].min() < 0.05  # it blinks
    assert np.ptp(s["head_yaw"]) > 10 and np.ptp(s["head_roll"]) > 10
    assert np.allclose(track.vowels.sum(1), 1, atol=1e-5)
    assert len({int(np.argmax(v)) for v in track.vowels}) == 6  # every vowel and "N"
