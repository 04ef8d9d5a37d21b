"""`kagura bench offline`: finished MP4 frames/s of an offline render, N encoders against 1.

    kagura bench offline [--device cpu|cuda] [--size 1920x1080] [--seconds S] [--encoders N]
                         [--render-workers M] [--x264-preset P] [GPU options of kagura render]
                         [--out docs/BENCHMARKS.md] [--no-write]

What runs is the graph `kagura render` builds (`app.render_job.assemble_graph`: the idol, the
preset's look or the GPU stages, the MP4 sink), fed by a **synthetic AvatarTrack** — smooth
procedural mouth, vowels, head and body motion, blinks; no audio analysis, so librosa is not
needed — and muxing the demo song's audio (decoded by av, repeated when `--seconds` is longer
than the song). Nothing on this module's import path imports librosa, scipy or PySide6, so it
runs on a machine with only torch, numpy, skia-python, av, pydantic, platformdirs and
diffusers.

Each configuration runs in a fresh process (its own memory, GPU context and cold start): first
one encoder (`VideoFileSink`, what `kagura render` used before), then N encoders
(`SegmentedVideoSink`), with the same render workers. Frames/s counts from the first frame into
the graph to the finished, renamed file (encoder flushed, segments joined, audio muxed); setup
(model loading, CUDA graph capture, starting worker processes) is reported apart. Every file is
then opened with av and checked: H.264 + AAC, the expected frame count, video duration, audio
within one frame of the video.

"encode only" repeats the comparison with the sink alone, fed frames rendered beforehand (a
one-second loop of the same idol in the preset's look): the most the encoders can take at this
size and x264 preset, whatever the stages before them cost.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from core.stats import median_p99

GOAL_FPS = 170.0
SONG = Path(__file__).resolve().parents[1] / "audio" / "assets" / "demo_song.ogg"


# ---------------------------------------------------------------------------- inputs


def synthetic_track(frames: int, fps: int, seed: int = 0):
    """A smooth, singing-like AvatarTrack: phrases of syllables, cycling vowels, blinks every
    ~3 s, slow incommensurate head/body sway and breath. Deterministic in `seed`."""
    from core.avatar import VOWELS, AvatarTrack
    from core.clock import frame_pts_ns

    rng = np.random.default_rng(seed)
    ph = rng.uniform(0, 2 * np.pi, 16)
    pts = np.array([frame_pts_ns(i, fps) for i in range(frames)], np.int64)
    track = AvatarTrack.neutral(pts, fps)
    t = np.arange(frames, dtype=np.float64) / fps
    s = track.scalars

    def put(name: str, values) -> None:
        s[name] = np.asarray(values, np.float32)

    phrase = np.clip(1.6 * np.sin(2 * np.pi * t / 4.3 + ph[0]) + 0.6, 0.0, 1.0)
    syllable = 0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t + ph[1])
    mouth = phrase * (0.25 + 0.75 * syllable)
    put("mouth_open", mouth)
    put("mouth_form", 0.3 * np.sin(2 * np.pi * t / 5.7 + ph[2]))
    put("head_yaw", 12 * np.sin(2 * np.pi * 0.23 * t + ph[3]) + 4 * np.sin(2 * np.pi * 0.61 * t))
    put("head_pitch", 6 * np.sin(2 * np.pi * 0.17 * t + ph[4]))
    put("head_roll", 8 * np.sin(2 * np.pi * 0.29 * t + ph[5]) + 3 * np.sin(2 * np.pi * 1.07 * t))
    put("body_yaw", 4 * np.sin(2 * np.pi * 0.13 * t + ph[6]))
    put("body_roll", 3 * np.sin(2 * np.pi * 0.47 * t + ph[7]))
    put("breath", 0.5 + 0.5 * np.sin(2 * np.pi * 0.25 * t + ph[8]))
    put("gaze_x", 0.4 * np.sin(2 * np.pi * 0.11 * t + ph[9]))
    put("gaze_y", 0.2 * np.sin(2 * np.pi * 0.07 * t + ph[10]))
    put("brow_l", 0.3 * np.sin(2 * np.pi * 0.19 * t + ph[11]))
    put("brow_r", 0.3 * np.sin(2 * np.pi * 0.19 * t + ph[11] + 0.3))
    put("eye_smile", np.clip(0.4 * np.sin(2 * np.pi * t / 7.9 + ph[12]), 0, 1))
    put("cheek", 0.3 + 0.2 * np.sin(2 * np.pi * t / 6.1 + ph[13]))
    # blinks: close 0.10 s, hold 0.05 s, open 0.15 s, every 3.1 s
    u = (t + ph[14]) % 3.1
    blink = np.interp(u, [0.0, 0.10, 0.15, 0.30, 3.1], [1.0, 0.0, 0.0, 1.0, 1.0])
    put("eye_open_l", blink)
    put("eye_open_r", blink)
    # vowels: one at a time with smooth cross-fades, "N" (closed) while the mouth is shut
    k = len(VOWELS) - 1  # A I U E O
    pos = 1.7 * t + ph[15]
    idx = np.floor(pos).astype(int) % k
    frac = pos - np.floor(pos)
    vowels = np.zeros((frames, len(VOWELS)), np.float32)
    fade = np.clip((frac - 0.7) / 0.3, 0, 1)
    rows = np.arange(frames)
    vowels[rows, idx] += 1 - fade
    vowels[rows, (idx + 1) % k] += fade
    closed = np.clip(1 - mouth / 0.15, 0, 1)
    vowels *= (1 - closed)[:, None]
    vowels[:, VOWELS.index("N")] += closed
    track.vowels = vowels / vowels.sum(1, keepdims=True)
    track.expressions = {"happy": np.clip(0.3 + 0.3 * np.sin(2 * np.pi * t / 9.3), 0, 1)}
    track.expressions["happy"] = track.expressions["happy"].astype(np.float32)
    track.validate()
    return track


def demo_audio(seconds: float) -> tuple[np.ndarray, int]:
    """The demo song's first `seconds` (looped if longer), float32 (channels, n), decoded by av."""
    from audio.decode import decode_audio

    clip = decode_audio(SONG)
    n = round(seconds * clip.sample_rate)
    samples = clip.samples
    if samples.shape[1] < n:
        samples = np.tile(samples, (1, -(-n // samples.shape[1])))
    return np.ascontiguousarray(samples[:, :n]), clip.sample_rate


# ---------------------------------------------------------------------------- one run (child)


def _stats(values) -> list[float]:
    if len(values) == 0:
        return [0.0, 0.0, 0.0]
    a = np.asarray(values, np.float64)
    return [*median_p99(a), float(a.mean())]


# the run's settings that go into its RenderRequest as they are
_REQUEST_KEYS = (
    "preset", "width", "height", "fps", "seconds", "seed", "device", "diffusion_random",
    "upscale", "temporal", "cuda_graphs", "encoders", "render_workers", "x264_preset",
)  # fmt: skip


def _request(cfg: dict, out: Path):
    from app.gpu_options import diffusion_arg
    from app.render_job import RenderRequest

    return RenderRequest(
        audio=SONG,
        output=out,
        diffusion=diffusion_arg(cfg["diffusion"]) if cfg["diffusion"] else None,
        render_size=tuple(cfg["render_size"]) if cfg["render_size"] else None,
        **{key: cfg[key] for key in _REQUEST_KEYS},
    )


def run_render(cfg: dict, out: Path) -> dict:
    """One full render through the `kagura render` graph; returns its figures."""
    from app import render_job
    from core.clock import frame_count
    from pipeline.cpu_memory import keep_freed_memory
    from pipeline.cpu_threads import share_cores_with_other_stages
    from presets.loader import load_preset

    keep_freed_memory()
    req = _request(cfg, out)
    render_job.check_request(req)
    t0 = time.perf_counter()
    share_cores_with_other_stages()
    preset = load_preset(req.preset)
    models = render_job.diffusion_models(req) if req.diffusion_on else None
    audio, sr = demo_audio(req.seconds)
    frames = frame_count(audio.shape[1], sr, req.fps)
    track = synthetic_track(frames, req.fps, req.seed)
    graph, ctx, total = render_job.assemble_graph(req, preset, models, track, audio, sr)
    per_frame: dict[str, list[float]] = {}

    def on_frame(frame) -> None:
        for name, ms in frame.timings.items():
            per_frame.setdefault(name, []).append(ms)

    stats = graph.run(ctx, on_frame=on_frame)
    wall = time.perf_counter() - t0
    result = {
        "frames": stats.frames,
        "expected_frames": total,
        "seconds": stats.seconds,
        "fps": stats.fps,
        "setup_s": wall - stats.seconds,  # models, audio, track, stage setup, workers
        "stage_mean_ms": {k: v / max(1, stats.frames) for k, v in stats.stage_ms.items()},
        "frame_ms": {k: _stats(v) for k, v in per_frame.items()},
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    result.update(_sink_figures(graph.sink, stats.frames))
    first = graph.stages[0]
    if hasattr(first, "worker_ms"):
        result["render_worker_ms"] = _stats(first.worker_ms)
    return result


def _sink_figures(sink, frames: int) -> dict:
    n = max(1, frames)
    if hasattr(sink, "worker_stats"):
        ws = sink.worker_stats.values()
        enc_frames = max(1, sum(w["frames"] for w in ws))
        return {
            "sink": "segmented",
            "encoders": sink.encoders,
            "gop": sink.gop,
            "x264_threads": sink.threads,
            "write_copy_ms": sink.copy_seconds / n * 1e3,
            "write_wait_ms": sink.wait_seconds / n * 1e3,
            "join_ms": sink.join_seconds / n * 1e3,
            "finish_s": sink.finish_seconds,
            "convert_ms": sum(w["convert_s"] for w in ws) / enc_frames * 1e3,
            "encode_ms": sum(w["encode_s"] for w in ws) / enc_frames * 1e3,
            "encoder_idle": sum(w["idle_s"] for w in ws),
            "encoder_cpu_ms": sum(w["cpu_s"] for w in ws) / enc_frames * 1e3,
        }
    return {
        "sink": "single",
        "encoders": 1,
        "encode_ms": getattr(sink, "encode_seconds", 0) / n * 1e3,
    }


def run_encode_only(cfg: dict, out: Path) -> dict:
    """The sink alone: a one-second loop of rendered, styled frames written as fast as it takes."""
    from core.clock import frame_count, frame_pts_ns
    from core.frame import Frame
    from core.stage import Context
    from pipeline.cpu_memory import keep_freed_memory
    from pipeline.sources import track_frames
    from pipeline.stylize import StylizeStage
    from presets.loader import load_preset
    from render.stage import RenderStage

    keep_freed_memory()
    w, h, fps = cfg["width"], cfg["height"], cfg["fps"]
    preset = load_preset(cfg["preset"])
    audio, sr = demo_audio(cfg["seconds"])
    frames = frame_count(audio.shape[1], sr, fps)
    ctx = Context(w, h, fps, sr)
    render = RenderStage(w, h, preset.palette, preset.line)
    look = StylizeStage(preset, w, h)
    render.setup(ctx)
    look.setup(ctx)
    loop = []
    for f in track_frames(synthetic_track(min(frames, fps), fps, cfg["seed"])):
        loop.append(look.process(render.process(f)).image.contiguous())
    look.close()
    if cfg["encoders"] > 1:
        from pipeline.sinks.segmented import SegmentedVideoSink

        sink = SegmentedVideoSink(
            out, w, h, fps, audio, sr, encoders=cfg["encoders"], x264_preset=cfg["x264_preset"]
        )
    else:
        from pipeline.sinks.video_file import VideoFileSink

        sink = VideoFileSink(out, w, h, fps, audio, sr, x264_preset=cfg["x264_preset"])
    params = synthetic_track(1, fps)[0]
    t0 = time.perf_counter()
    sink.setup(ctx)
    t1 = time.perf_counter()
    try:
        for i in range(frames):
            sink.write(Frame(frame_pts_ns(i, fps), i, params, image=loop[i % len(loop)]))
        sink.finish()
    except BaseException:
        sink.abort()
        raise
    t2 = time.perf_counter()
    result = {"frames": frames, "expected_frames": frames, "seconds": t2 - t1}
    result["fps"] = frames / result["seconds"]
    result["setup_s"] = t1 - t0
    result.update(_sink_figures(sink, frames))
    return result


def child(argv: list[str]) -> int:
    mode, cfg_json, out = argv
    cfg = json.loads(cfg_json)
    result = run_render(cfg, Path(out)) if mode == "render" else run_encode_only(cfg, Path(out))
    print("RESULT " + json.dumps(result))
    return 0


# ---------------------------------------------------------------------------- parent


def add_parser(
    bench_subparsers, add_render_options, add_settings_option
) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "offline",
        help="finished MP4 frames/s of an offline render (synthetic track, demo song audio), "
        "N encoders against 1",
    )
    add_render_options(b)
    # the render settings file, as `kagura render` reads it (render.toml, --config FILE); the
    # size and length stay the bench's own unless given as flags
    add_settings_option(b)
    b.set_defaults(size="1920x1080", seconds=20.0, quiet=True)
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    b.add_argument(
        "--keep", type=Path, default=None, metavar="DIR", help="keep the rendered MP4s in DIR"
    )
    b.add_argument("--no-encode-only", action="store_true", help="skip the sink-alone comparison")
    return b


def _config(args: argparse.Namespace) -> tuple[dict, int, int]:
    from app.config import render_config
    from app.errors import UsageError
    from app.render_job import PARALLEL_MIN_SECONDS, check_request, resolve_workers
    from app.render_settings import layered

    if args.seconds is None or args.seconds <= 0:
        raise UsageError(f"--seconds {args.seconds}: expected a duration in seconds > 0")
    # `kagura render`'s config and defaults over the same settings file: on cuda Kagura's own
    # model paints unless --no-diffusion (or another model) is given, as it does in the command
    # this bench stands for
    config, settings = layered(
        args, lambda a, **kw: render_config(a, audio=SONG, output=Path("x.mp4"), **kw)
    )
    req = config.request()
    cfg = {
        "settings": str(settings.path) if settings.values else None,
        "preset": req.preset,
        "width": req.width,
        "height": req.height,
        "fps": req.fps,
        "seconds": req.seconds,
        "seed": req.seed,
        "device": req.device,
        "diffusion": str(req.diffusion) if req.diffusion else None,
        "diffusion_random": req.diffusion_random,
        "render_size": list(req.render_size) if req.render_size else None,
        "upscale": req.upscale,
        "temporal": req.temporal,
        "cuda_graphs": req.cuda_graphs,
        "x264_preset": req.x264_preset,
    }
    encoders, workers = req.encoders, req.render_workers
    probe = _request({**cfg, "encoders": encoders, "render_workers": workers}, Path("x.mp4"))
    check_request(probe)
    # "auto" as a long render would resolve it on this machine; at least 2 encoders to compare
    auto_enc, auto_workers = resolve_workers(probe, int(PARALLEL_MIN_SECONDS * probe.fps))
    n = encoders if encoders is not None else max(2, auto_enc)
    m = workers if workers is not None else auto_workers
    return cfg, n, m


def _run_child(mode: str, cfg: dict, out: Path) -> dict:
    cmd = [sys.executable, "-m", "app.bench_offline", mode, json.dumps(cfg), str(out)]
    label = f"{mode}, {cfg['encoders']} encoder(s), {cfg['render_workers']} render worker(s)"
    print(f"bench offline: {label} …", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        print(done.stderr[-4000:], file=sys.stderr)
        raise RuntimeError(f"bench offline: the {label} run failed (exit {done.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


def check_file(path: Path, frames: int, fps: int) -> dict:
    """Open the MP4 with av: codecs, decoded frame count, durations."""
    from pipeline.media_probe import probe

    info = probe(path)
    v = info.video[0] if info.video else None
    a = info.audio[0] if info.audio else None
    problems = []
    if v is None or v.codec != "h264":
        problems.append("no H.264 video")
    if a is None or a.codec != "aac":
        problems.append("no AAC audio")
    if info.video_frames != frames:
        problems.append(f"{info.video_frames} frames, expected {frames}")
    if abs(info.video_seconds - frames / fps) > 1e-3:
        problems.append(f"video {info.video_seconds:.3f} s, expected {frames / fps:.3f} s")
    if abs(info.audio_seconds - info.video_seconds) > 1.0 / fps:
        problems.append(f"audio {info.audio_seconds:.3f} s vs video {info.video_seconds:.3f} s")
    return {
        "ok": not problems,
        "problems": problems,
        "video_frames": info.video_frames,
        "video_s": info.video_seconds,
        "audio_s": info.audio_seconds,
        "mib": path.stat().st_size / 2**20,
    }


def run(args: argparse.Namespace) -> int:
    cfg, n, m = _config(args)
    keep = args.keep
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kagura-bench-") as tmp:
        folder = Path(keep) if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        modes = ["render"] if args.no_encode_only else ["render", "encode"]
        for mode in modes:
            for enc in (1, n):
                key = f"{mode}-{enc}"
                if key in runs:
                    continue
                out = folder / f"{mode}-{enc}enc.mp4"
                res = _run_child(mode, {**cfg, "encoders": enc, "render_workers": m}, out)
                res["check"] = check_file(out, res["expected_frames"], cfg["fps"])
                runs[key] = res
                print(
                    f"  {res['fps']:.1f} fps, {res['frames']} frames, file "
                    f"{'ok' if res['check']['ok'] else res['check']['problems']}",
                    file=sys.stderr,
                )
    body = report(args, cfg, n, m, runs)
    print(body)
    if not args.no_write:
        from core.benchdoc import write_section

        write_section(args.out, section_key(cfg), body)
        print(f"bench offline: updated {args.out}", file=sys.stderr)
    bad = [k for k, r in runs.items() if not r["check"]["ok"]]
    return 1 if bad else 0


def section_key(cfg: dict) -> str:
    """One section of docs/BENCHMARKS.md per device, chain and x264 preset."""
    key = f"offline-{cfg['device']}"
    if cfg["diffusion"] or cfg["diffusion_random"]:
        key += "-diffusion"
    if cfg["upscale"] != 1:
        key += f"-x{cfg['upscale']}"
    return f"{key}-{cfg['x264_preset']}"


def _command(args: argparse.Namespace, cfg: dict, n: int, m: int) -> str:
    parts = [
        f"--device {cfg['device']}",
        f"--size {cfg['width']}x{cfg['height']}",
        f"--fps {cfg['fps']}",
        f"--seconds {cfg['seconds']:g}",
        f"--preset {cfg['preset']}",
    ]
    if cfg["diffusion_random"]:
        parts.append(f"--diffusion-random {cfg['diffusion_random']}")
    if cfg["diffusion"]:
        parts.append(f"--diffusion {cfg['diffusion']}")
    if args.diffusion_size:
        parts.append(f"--diffusion-size {args.diffusion_size}")
    if cfg["upscale"] != 1:
        parts.append(f"--upscale {cfg['upscale']}")
    if cfg["temporal"] is not None:
        parts.append("--temporal" if cfg["temporal"] else "--no-temporal")
    if cfg["cuda_graphs"] is not None:
        parts.append("--cuda-graphs" if cfg["cuda_graphs"] else "--no-cuda-graphs")
    parts += [f"--encoders {n}", f"--render-workers {m}"]  # as resolved ("auto", the file)
    parts.append(f"--x264-preset {cfg['x264_preset']}")
    if cfg["settings"]:
        parts.append(f"--config {cfg['settings']}")
    return "kagura bench offline " + " ".join(parts)


def _chain(cfg: dict, m: int) -> str:
    from pipeline.model_factory import KAGURA

    req = _request({**cfg, "encoders": 1, "render_workers": m}, Path("x.mp4"))
    render, out = req.sizes() if req.gpu_stages else ((req.width, req.height),) * 2
    who = f"{m} processes" if m > 1 else "1 thread"
    steps = [f"idol {render[0]}x{render[1]} (CPU, {who})"]
    if req.gpu_stages:
        if req.device == "cuda":
            steps.append("upload")
        steps.append(f"stylize ({cfg['preset']})")
        if req.diffusion_on:
            kind = cfg["diffusion_random"] or (
                "Kagura's own model" if cfg["diffusion"] == KAGURA else "checkpoint"
            )
            rnd = ", RANDOM weights" if cfg["diffusion_random"] else ""
            steps.append(f"diffusion ({kind}{rnd})")
        if req.temporal_on:
            steps.append("temporal")
        if req.upscale != 1:
            steps.append(f"upscale x{req.upscale} → {out[0]}x{out[1]}")
        if req.device == "cuda":
            # assemble_graph: opaque files get I420 planes made on the GPU
            steps.append("readback" if req.transparent else "RGBA → I420 (GPU) → readback")
    else:
        steps.append(f"stylize ({cfg['preset']})")
    steps.append(f"MP4 (H.264 libx264 {cfg['x264_preset']}, CRF 20, + AAC)")
    return " → ".join(steps) + f", on {cfg['device']}"


def _device_name(device: str) -> str:
    if device != "cuda":
        return "CPU"
    try:
        import torch

        return torch.cuda.get_device_name()
    except Exception:  # pragma: no cover
        return "cuda"


def report(args, cfg: dict, n: int, m: int, runs: dict[str, dict]) -> str:
    from core.benchdoc import machine_line, today

    fps = cfg["fps"]
    base, par = runs["render-1"], runs.get(f"render-{n}", runs["render-1"])
    lines = [
        f"## Offline render, parallel encoding, {cfg['device']} ({_device_name(cfg['device'])})",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}",
        f"- command: `{_command(args, cfg, n, m)}`",
        f"- chain: {_chain(cfg, m)} (what `kagura render` runs with these options: its "
        "defaults, on cuda Kagura's own model unless `--no-diffusion`)",
        f"- settings file: {cfg['settings'] or 'none'} (read as `kagura render` reads it; the "
        "size and length are the bench's own unless given as flags)",
        f"- input: synthetic AvatarTrack (procedural mouth, vowels, head and body sway, blinks; "
        f"no audio analysis) with the demo song's audio, {cfg['seconds']:g} s at {fps} fps "
        f"= {base['expected_frames']} frames",
        f"- goal: ≥ {GOAL_FPS:g} finished frames/s of 1080p H.264 including encoding (issue)",
        "",
        "| encoders | render workers | frames/s (finished MP4) | × real time | vs 1 encoder | "
        "wall s | setup s | file MiB | file check | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in ("render-1", f"render-{n}"):
        if key not in runs or (key == f"render-{n}" and n == 1):
            continue
        r = runs[key]
        c = r["check"]
        ok = "ok" if c["ok"] else "FAILED: " + "; ".join(c["problems"])
        lines.append(
            f"| {r['encoders']} | {m} | {r['fps']:.1f} | {r['fps'] / fps:.2f} | "
            f"{r['fps'] / base['fps']:.2f}× | {r['seconds']:.2f} | {r['setup_s']:.1f} | "
            f"{c['mib']:.1f} | {ok} ({c['video_frames']} frames, video {c['video_s']:.3f} s, "
            f"audio {c['audio_s']:.3f} s) | {r.get('peak_rss_mib', 0):.0f} |"
        )
    names = sorted(set(base["stage_mean_ms"]) | set(par["stage_mean_ms"]))
    lines += [
        "",
        "Per stage, ms per frame (mean of the time each stage's thread spends per frame; the "
        "stages run at once, so they overlap and do not add up; the GPU chain is one node, "
        "`gpu` its issuing and `gpu wait` its waiting, its stages' GPU times below them):",
        "",
        f"| stage | 1 encoder | {n} encoders |",
        "|---|---|---|",
    ]
    for name in names:
        a = base["stage_mean_ms"].get(name)
        b = par["stage_mean_ms"].get(name)
        lines.append(f"| {name} | {_ms(a)} | {_ms(b)} |")
    if "gpu" in names:  # the GPU chain node: each of its stages' own time
        from app.render_job import GPU_STAGE_NAMES

        how = "on the GPU (CUDA events" if cfg.get("device") == "cuda" else "(wall time"
        for name in GPU_STAGE_NAMES:
            a, b = base["frame_ms"].get(name), par["frame_ms"].get(name)
            if a or b:
                lines.append(
                    f"| {name} {how}, per frame, median / P99) | {_pair(a)} | {_pair(b)} |"
                )
    if "render_worker_ms" in par:
        lines.append(
            f"| idol render inside a worker process (median / P99) | "
            f"{_pair(base.get('render_worker_ms'))} | {_pair(par.get('render_worker_ms'))} |"
        )
    lines.append(
        f"| encoder wall time per frame: colour conversion (RGBA input) or plane copy (I420 "
        "input) + x264 (its own threads) | "
        f"{_ms(base.get('encode_ms'))} | "
        f"{_ms((par.get('convert_ms') or 0) + (par.get('encode_ms') or 0))} |"
    )
    if par.get("sink") == "segmented":
        lines += [
            f"| encoder processes: CPU time per frame, all threads (cores needed = this × "
            f"fps / 1000) | — | {par['encoder_cpu_ms']:.2f} |",
            f"| sink write(): copy into shared memory / wait for a free slot | — | "
            f"{par['write_copy_ms']:.2f} / {par['write_wait_ms']:.2f} |",
            f"| joiner (packet copy + AAC + mux) | — | {par['join_ms']:.2f} |",
            f"| finish (last chunks, flush, rename), s | — | {par['finish_s']:.2f} |",
        ]
    enc1, encn = runs.get("encode-1"), runs.get(f"encode-{n}")
    if enc1:
        lines += [
            "",
            "Encode only (the sink alone, fed a one-second loop of finished frames as fast as it "
            "takes them):",
            "",
            "| encoders | frames/s | vs 1 encoder | encoder CPU ms/frame | file MiB | file check |",
            "|---|---|---|---|---|---|",
        ]
        for r in (enc1, encn):
            if r is None or (r is encn and n == 1):
                continue
            ok = "ok" if r["check"]["ok"] else "FAILED: " + "; ".join(r["check"]["problems"])
            cpu = _ms(r.get("encoder_cpu_ms"))
            lines.append(
                f"| {r['encoders']} | {r['fps']:.1f} | {r['fps'] / enc1['fps']:.2f}× | {cpu} | "
                f"{r['check']['mib']:.1f} | {ok} |"
            )
    if par.get("sink") == "segmented":
        lines += [
            "",
            f"{n} encoders: chunks of {par['gop']} frames (one IDR each) dealt round-robin, "
            f"{par['x264_threads']} x264 threads per encoder.",
        ]
    verdict = "met" if par["fps"] >= GOAL_FPS else "NOT met"
    size = f"{cfg['width']}x{cfg['height']}"
    lines += [
        "",
        f"Goal ≥ {GOAL_FPS:g} frames/s at this size ({size}): {par['fps']:.1f} with {n} encoders "
        f"— **{verdict}**" + ("" if size == "1920x1080" else " (the goal is stated for 1080p)"),
    ]
    return "\n".join(lines)


def _ms(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _pair(v) -> str:
    return "—" if not v else f"{v[0]:.2f} / {v[1]:.2f}"


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
