"""Measure the video sink: encode speed and quality per preset, and the caller's cost per frame.

    python -m pipeline.sinks.encode_bench [--size 1280x720] [--frames 120] [--quick]

The test picture is a natural-looking moving scene (gradient sky, soft blurred texture, a
figure of anti-aliased ellipses that sways over a panning background), not noise, which would
make every preset look equally bad and equally slow.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from pipeline.media_probe import decode_video
from pipeline.sinks.video_file import VideoFileSink


def _blur(a: np.ndarray, r: int) -> np.ndarray:
    k = np.ones(2 * r + 1, np.float32) / (2 * r + 1)
    for axis in (0, 1):
        a = np.apply_along_axis(lambda v: np.convolve(v, k, mode="same"), axis, a)
    return a


def test_scene(width: int, height: int, frames: int, seed: int = 0) -> list[torch.Tensor]:
    """Premultiplied RGBA frames (opaque) of a moving, smooth, detailed scene."""
    rng = np.random.default_rng(seed)
    bw, bh = width + 4 * frames + 8, height + frames + 8
    y = np.linspace(0, 1, bh, dtype=np.float32)[:, None]
    x = np.linspace(0, 1, bw, dtype=np.float32)[None, :]
    sky = np.stack([0.25 + 0.5 * y + 0.1 * x, 0.35 + 0.35 * y + 0 * x, 0.75 - 0.3 * y + 0 * x], -1)
    small = rng.standard_normal((bh // 8 + 1, bw // 8 + 1)).astype(np.float32)
    tex = _blur(small, 2).repeat(8, 0).repeat(8, 1)[:bh, :bw]
    tex = _blur(tex, 3)
    bg = np.clip(sky + 0.08 * tex[..., None], 0, 1)
    # hills with soft edges
    ridge = 0.7 + 0.06 * np.sin(x * 9.0) + 0.03 * np.sin(x * 31.0 + 1)
    hill = np.clip((y - ridge) * bh / 3, 0, 1)[..., None]
    bg = bg * (1 - hill) + hill * np.array([0.2, 0.45, 0.2]) * (0.8 + 0.2 * tex[..., None])
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    out = []
    for i in range(frames):
        img = bg[i : i + height, 4 * i : 4 * i + width].copy()
        cx = width * (0.5 + 0.08 * np.sin(i / 9)) + 0 * xx
        cy = height * 0.55
        for dx, dy, rx, ry, col in [
            (0, 0.12, 0.12, 0.28, (0.9, 0.3, 0.5)),  # body
            (0, -0.22, 0.09, 0.12, (1.0, 0.85, 0.75)),  # face
            (-0.03, -0.24, 0.012, 0.02, (0.1, 0.1, 0.2)),  # eyes
            (0.03, -0.24, 0.012, 0.02, (0.1, 0.1, 0.2)),
            (0, -0.16, 0.02, 0.008 + 0.01 * abs(np.sin(i / 3)), (0.6, 0.1, 0.2)),  # mouth
        ]:
            d = ((xx - cx - dx * width) / (rx * width)) ** 2 + (
                (yy - cy - dy * height) / (ry * height)
            ) ** 2
            cover = np.clip((1 - d) * min(rx * width, ry * height) / 2, 0, 1)[..., None]
            img = img * (1 - cover) + cover * np.array(col, np.float32)
        rgba = np.concatenate([img, np.ones_like(img[..., :1])], -1)
        out.append(torch.from_numpy((rgba * 255 + 0.5).astype(np.uint8)))
    return out


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2)
    return float(10 * np.log10(255**2 / max(mse, 1e-9)))


def run_sink(path: Path, frames, fps: int, audio, sr: int, paced_fps: float | None = None, **kw):
    """Encode `frames`; returns (wall s, mean write() ms on the caller, max write() ms, sink)."""
    h, w = frames[0].shape[:2]
    sink = VideoFileSink(path, w, h, fps, audio, sr, **kw)
    sink.setup(Context(w, h, fps, sr))
    params = AvatarParams()
    write_ms = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    for i, img in enumerate(frames):
        if paced_fps:  # a producer that needs 1/paced_fps per frame (sleeping, GIL free)
            target = t0 + i / paced_fps
            while time.perf_counter() < target:
                time.sleep(0.0005)
        t = time.perf_counter()
        sink.write(Frame(pts_ns=0, index=i, params=params, image=img))
        write_ms.append((time.perf_counter() - t) * 1e3)
    sink.finish()
    wall = time.perf_counter() - t0
    sink.cpu_seconds = time.process_time() - c0  # all threads of this process
    return wall, float(np.mean(write_ms)), float(np.max(write_ms)), sink


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    w, h = (int(v) for v in args.size.split("x"))
    fps, sr = 30, 48000
    print(f"building {args.frames} frames of {w}x{h} …", flush=True)
    frames = test_scene(w, h, args.frames)
    ref = [f[..., :3].numpy() for f in frames]
    n = args.frames * sr // fps
    t = np.arange(n) / sr
    audio = np.stack([0.2 * np.sin(2 * np.pi * 440 * t)] * 2).astype(np.float32)
    tmp = Path(tempfile.mkdtemp())
    seconds = args.frames / fps
    print(f"torch threads {torch.get_num_threads()}; clip {seconds:.1f} s at {fps} fps\n")
    print("| file | preset | threads | encode fps (inline) | CPU ms/frame | PSNR RGB dB | kbit/s |")
    print("|---|---|---|---|---|---|---|")
    presets = ["ultrafast", "superfast", "veryfast"]
    thread_opts = [1, 2, 0] if not args.quick else [0]
    for preset in presets:
        for threads in thread_opts:
            path = tmp / f"{preset}_{threads}.mp4"
            wall, _, _, sink = run_sink(
                path, frames, fps, audio, sr, x264_preset=preset, threads=threads, background=False
            )
            cpu = sink.cpu_seconds / args.frames * 1e3
            dec, _ = decode_video(path)
            psnr = np.mean([_psnr(a, b) for a, b in zip(dec, ref, strict=True)])
            kbps = path.stat().st_size * 8 / seconds / 1e3
            print(
                f"| mp4 | {preset} | {threads or 'auto'} | {args.frames / wall:.1f} | {cpu:.1f} "
                f"| {psnr:.2f} | {kbps:.0f} |"
            )
    for transparent in (False, True):
        path = tmp / f"vp9_{transparent}.webm"
        wall, _, _, sink = run_sink(
            path, frames, fps, audio, sr, transparent=transparent, background=False
        )
        cpu = sink.cpu_seconds / args.frames * 1e3
        dec, _ = decode_video(path)
        psnr = np.mean([_psnr(a, b) for a, b in zip(dec, ref, strict=True)])
        kbps = path.stat().st_size * 8 / seconds / 1e3
        label = "webm+alpha" if transparent else "webm"
        print(
            f"| {label} | realtime, cpu-used 8 | auto | {args.frames / wall:.1f} | {cpu:.1f} "
            f"| {psnr:.2f} | {kbps:.0f} |"
        )

    print("\ncaller's cost per write() with the background encoder (veryfast, auto threads):")
    for paced in (None, 30.0, 24.0):
        wall, mean_ms, max_ms, sink = run_sink(
            tmp / "bg.mp4", frames, fps, audio, sr, paced_fps=paced
        )
        what = f"producer paced at {paced:.0f} fps" if paced else "producer as fast as possible"
        print(
            f"  {what}: {args.frames / wall:.1f} fps overall, write() mean {mean_ms:.2f} ms, "
            f"max {max_ms:.1f} ms; worker {sink.encode_seconds / args.frames * 1e3:.1f} ms/frame"
        )


if __name__ == "__main__":
    main()
