"""`kagura bench soak --minutes N`: the live session for a long time, watched for slow decay.

    kagura bench soak --minutes 60 [--device cpu|cuda] [--diffusion-random KIND] [--upscale N]
                      [--preset NAME] [--size WxH] [--fps N] [--sample-s S] [--no-write]

Headless (no Qt, no sound device): the demo song, looped, through `pipeline.live.LiveSession`
(the GPU stages with the GPU options, as `kagura live` builds them). A consumer thread takes
every frame as it is published and measures its latency — arrival on the master clock minus
the frame's pts, plus the age of the audio its mouth was drawn from — so the number is
audio-to-publication (the display's own wait, a constant, is left out). Every `--sample-s`
seconds it records the frames published and dropped, the latency median and P99 of that
window, the process's resident memory (VmRSS), its open file descriptors and threads.

What it reports (and appends to docs/BENCHMARKS.md as `soak-<device>`): latency drift = the
median of the last tenth of the windows' medians − that of the first tenth after warm-up; RSS growth from the first
sample after warm-up to the last, in %; the change in open files and threads; drops in all.
The goals (issue 17): drift < 5 ms, RSS growth < 2 %, no growth in open files.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from app.errors import UsageError

GOAL_DRIFT_MS = 5.0
GOAL_RSS_PCT = 2.0


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from app.live_gpu import add_gpu_options

    b = bench_subparsers.add_parser(
        "soak", help="the live session for N minutes: drops, latency drift, memory, open files"
    )
    b.add_argument("--minutes", type=float, default=60.0, help="how long (default 60)")
    b.add_argument("--sample-s", type=float, default=10.0, help="seconds per sample (10)")
    b.add_argument("--warm-up", type=float, default=30.0, help="seconds not counted (30)")
    b.add_argument("--preset", default="studio")
    b.add_argument("--size", default=None, help="frame size WxH (960x540)")
    b.add_argument("--fps", type=int, default=30)
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    add_gpu_options(b)
    return b


def rss_bytes() -> int:
    """This process's resident set (VmRSS), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


class FrameConsumer:
    """Takes every published frame; one row per frame (`row`: its latency, audio to
    publication) into the current window, handed over by `take`."""

    def __init__(self, session) -> None:
        self.session = session
        self.lock = threading.Lock()
        self.window: list = []
        self.frames = 0
        self.thread = threading.Thread(target=self._run, name="kagura-soak", daemon=True)
        self.thread.start()

    def row(self, frame, since_pts_ms: float, age_ms: float):
        """What one frame adds to the window (scripts/soak_starved.py keeps its parts too)."""
        return since_pts_ms + age_ms

    def _run(self) -> None:
        import math

        from pipeline.live import AUDIO_AGE
        from pipeline.queues import Closed

        while True:
            try:
                frame = self.session.output.get()
            except Closed:
                return
            now = self.session.clock.now_ns()
            age = frame.timings.get(AUDIO_AGE)
            with self.lock:
                self.frames += 1
                if age is not None and math.isfinite(age):
                    self.window.append(self.row(frame, (now - frame.pts_ns) / 1e6, age))

    def take(self) -> tuple[int, list]:
        with self.lock:
            window, self.window = self.window, []
            return self.frames, window


def _pct(values: list[float], q: float) -> float | None:
    from core.stats import percentile

    return round(percentile(values, q), 2) if values else None


def measure(args: argparse.Namespace) -> dict:
    import json

    from app.config import live_gpu_config, parse_size
    from app.live_gpu import build_live_gpu
    from audio.demo_song import demo_song_path
    from pipeline.live import FilePlayback, LiveSession

    if args.minutes <= 0 or args.sample_s <= 0 or args.warm_up < 0:
        raise UsageError("--minutes and --sample-s must be > 0, --warm-up >= 0")
    if not 1 <= args.fps <= 240:
        raise UsageError(f"--fps {args.fps}: expected 1..240")
    size = parse_size(args.size) if args.size else None
    gpu = build_live_gpu(live_gpu_config(args), size)
    src = FilePlayback(demo_song_path(), loop=True, play_out=False, start=False)
    session = LiveSession(src, args.preset, size=size or (960, 540), fps=args.fps, gpu=gpu)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # as `kagura live` does
    session.start()
    consumer = FrameConsumer(session)
    samples: list[dict] = []
    t0 = time.monotonic()
    end = t0 + args.warm_up + args.minutes * 60.0
    try:
        next_at = t0 + args.sample_s
        while True:
            time.sleep(max(0.0, min(next_at, end) - time.monotonic()))
            now = time.monotonic()
            frames, window = consumer.take()
            st = session.stats()
            samples.append(
                {
                    "t_s": round(now - t0, 1),
                    "warm": now - t0 >= args.warm_up,
                    "frames": frames,
                    "dropped": st["output_dropped"],
                    "late_ticks": st["late_ticks"],
                    "stalled_ticks": st["stalled_ticks"],
                    "shed_ticks": st.get("shed_ticks", 0),
                    "audio_skipped_s": st["audio_skipped_s"],
                    "latency_p50_ms": _pct(window, 50),
                    "latency_p99_ms": _pct(window, 99),
                    "rss_mb": round(rss_bytes() / 2**20, 1),
                    "open_files": open_files(),
                    "threads": threading.active_count(),
                    "load_1min": round(os.getloadavg()[0], 2),
                }
            )
            # one line per sample as it happens: a run cut short still leaves its numbers
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
            if session.error or now >= end:
                break
            next_at += args.sample_s
        error = session.error
    finally:
        sys.setswitchinterval(switch)
        session.stop()
        consumer.thread.join(timeout=10)
    return summarize(args, samples, error, gpu)


def summarize(args, samples: list[dict], error, gpu) -> dict:
    from core.stats import median

    counted = [s for s in samples if s["warm"] and s["latency_p50_ms"] is not None]
    first, last = (counted[0], counted[-1]) if counted else (None, None)
    # drift: the first tenth of the windows against the last tenth (one window's median alone
    # moves with every hiccup of a shared machine)
    k = max(1, len(counted) // 10)
    drift = None
    if counted:
        head = median(s["latency_p50_ms"] for s in counted[:k])
        tail = median(s["latency_p50_ms"] for s in counted[-k:])
        drift = round(tail - head, 2)

    def delta(key):
        return None if first is None else round(last[key] - first[key], 2)

    rss_pct = None
    if first is not None and first["rss_mb"]:
        rss_pct = round(100.0 * (last["rss_mb"] - first["rss_mb"]) / first["rss_mb"], 2)
    total = samples[-1] if samples else {}
    return {
        "device": args.device,
        "label": gpu.label if gpu is not None else "CPU chain (idol + stylize)",
        "preset": args.preset,
        "fps": args.fps,
        "minutes": args.minutes,
        "warm_up_s": args.warm_up,
        "frames": total.get("frames", 0),
        "frames_expected": round((args.minutes * 60 + args.warm_up) * args.fps),
        "dropped": total.get("dropped", 0),
        "late_ticks": total.get("late_ticks", 0),
        "stalled_ticks": total.get("stalled_ticks", 0),
        "shed_ticks": total.get("shed_ticks", 0),
        "audio_skipped_s": total.get("audio_skipped_s", 0.0),
        "latency_drift_ms": drift,
        "drift_windows": k,
        "rss_growth_pct": rss_pct,
        "open_files_change": delta("open_files"),
        "threads_change": delta("threads"),
        "samples": samples,
        "load_min": min((s["load_1min"] for s in samples), default=None),
        "load_max": max((s["load_1min"] for s in samples), default=None),
        "error": error,
    }


def report(r: dict, command: str) -> str:
    import datetime
    import platform

    def ok(good: bool | None) -> str:
        return "n/a" if good is None else ("met" if good else "NOT met")

    drift, rss, fds = r["latency_drift_ms"], r["rss_growth_pct"], r["open_files_change"]
    lines = [
        f"## Soak: the live session for {r['minutes']:g} min, {r['device']}",
        "",
        f"{datetime.date.today().isoformat()} · {platform.node()} · {platform.processor() or platform.machine()} "
        f"· {os.cpu_count()} cores · `{command}`",
        "",
        f"{r['label']}, preset {r['preset']}, {r['fps']} fps, demo song looped; latency = "
        "audio to publication (arrival − pts + the mouth's audio age), medians per window. "
        f"Machine load (1-min average, all processes) {r['load_min']}..{r['load_max']}: other "
        "work on the machine shows up as drops and latency here.",
        "",
        "| what | value | goal |",
        "|---|---|---|",
        f"| frames published / expected | {r['frames']} / {r['frames_expected']} | |",
        f"| output-queue drops · late ticks · stalled ticks | {r['dropped']} · {r['late_ticks']} "
        f"· {r['stalled_ticks']} | |",
        f"| audio the starved analysis skipped · frames shed for it | {r['audio_skipped_s']} s "
        f"· {r.get('shed_ticks', 0)} | |",
        f"| latency drift (last − first {r['drift_windows']} window medians) | {drift} ms | < {GOAL_DRIFT_MS:g} ms: "
        f"{ok(None if drift is None else abs(drift) < GOAL_DRIFT_MS)} |",
        f"| RSS growth (first counted sample → last) | {rss} % | < {GOAL_RSS_PCT:g} %: "
        f"{ok(None if rss is None else rss < GOAL_RSS_PCT)} |",
        f"| open files change | {fds} | no growth: {ok(None if fds is None else fds <= 0)} |",
        f"| threads change | {r['threads_change']} | |",
        "",
        "| t (s) | frames | drops | latency P50 / P99 (ms) | RSS (MB) | open files | threads "
        "| load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    samples = r["samples"]
    step = max(1, len(samples) // 12)  # at most about a dozen rows
    shown = samples[::step] + ([samples[-1]] if samples and (len(samples) - 1) % step else [])
    for s in shown:
        lines.append(
            f"| {s['t_s']:g}{'' if s['warm'] else ' (warm-up)'} | {s['frames']} | {s['dropped']} "
            f"| {s['latency_p50_ms']} / {s['latency_p99_ms']} | {s['rss_mb']} "
            f"| {s['open_files']} | {s['threads']} | {s['load_1min']} |"
        )
    return "\n".join(lines)


def _command(args: argparse.Namespace) -> str:
    parts = ["kagura bench soak", f"--minutes {args.minutes:g}", f"--device {args.device}"]
    if args.warm_up != 30.0:
        parts.append(f"--warm-up {args.warm_up:g}")
    if args.sample_s != 10.0:
        parts.append(f"--sample-s {args.sample_s:g}")
    if args.size:
        parts.append(f"--size {args.size}")
    if args.fps != 30:
        parts.append(f"--fps {args.fps}")
    if args.preset != "studio":
        parts.append(f"--preset {args.preset}")
    if getattr(args, "diffusion_random", None):
        parts.append(f"--diffusion-random {args.diffusion_random}")
    if getattr(args, "upscale", 1) != 1:
        parts.append(f"--upscale {args.upscale}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    import json

    from core.benchdoc import write_section

    r = measure(args)
    print(json.dumps(r, default=str), flush=True)
    if r["error"]:
        print(f"kagura bench soak: the live session failed: {r['error']}", file=sys.stderr)
        return 1
    body = report(r, _command(args))
    print(body)
    if not args.no_write:
        write_section(args.out, f"soak-{args.device}", body)
    return 0
