"""`kagura bench live`: the demo song through the live path.

    kagura bench live [--seconds S] [--size WxH] [--preset NAME]          the desktop app
    kagura bench live --headless [--device cpu|cuda] [--diffusion PATH | --diffusion-random
                      sd-turbo|tiny] [--upscale N] [--[no-]temporal] [--budget-ms MS]
                      [--fps N] [--vsync-hz HZ] [--present-lead-ms MS] [--[no-]phase-lock]
                      [--release follow|adaptive] [--frame-margin-ms MS] [--[no-]latch-mouth]
                      [--[no-]late-mouth] [--[no-]render-process] [--stream-batch]
                      [--section KEY]
                      [--seconds S] [--size WxH] [--preset NAME]

Desktop app (default): each run is a real `kagura live --audio-file … --quit-after N` in its
own process: Qt's offscreen platform and, where xvfb-run exists, an X server (what a desktop
has, minus the GPU). The app prints its run statistics as one JSON line on exit; this
collects them.

Headless (`--headless`, for the GPU machine: no Qt, no sound device, no librosa needed): the
real `LiveSession` (pipeline/live.py) with the GPU stages and the quality ladder when GPU
options are given (pipeline/live_gpu.py, the same options as `kagura live`), fed by
`FilePlayback` of the demo song paced in real time on the system clock (play_out=False: the
sounddevice module is never imported), a pump thread moving frames into the presenter's
`JitterBuffer` (arrival = master clock now; the first `--warm-up` seconds shown but not
learnt from, as the app does), and a simulated display: this thread ticks the jitter buffer
once per refresh of a `--vsync-hz` (60) display on the monotonic clock. SIMULATED, not real:
there is no swap chain; VSYNC k is the instant t0 + k · refresh, and the flip is modelled as a
FIFO swap chain's: a frame presented (handed over) at time t is on screen from the first VSYNC
after t.

* `--present-lead-ms L` (default 4; what Special K's / RTSS's "latent sync" does on a real
  display): the tick of VSYNC k fires at t0 + k · refresh − L, so the frame it releases flips
  at VSYNC k — if the tick and its hand-over finished before it; otherwise at the next one
  (counted: `present_missed`). L = 0: the tick fires at VSYNC k (as a display timer that
  follows VSYNC does) and flips at VSYNC k + 1, a whole refresh later.
* `--phase-lock` (default): the session is told the tick instants
  (`LiveSession.set_display_timing`), so each frame starts at the tick that will show it minus
  the predicted frame time, and (`--release follow`, default) the jitter buffer releases it at
  that tick (`JitterBuffer.follow(session.release_delay_ns)`); `--release adaptive` keeps the
  buffer's own delay, which the session's lead then covers. `--no-phase-lock`: the session's
  free-running frame timer, whose phase to the ticks is arbitrary.

It reports:

* **audio-to-photon latency** (median / P99 over the frames presented in the `--seconds` after
  the warm-up — or, with GPU stages, after their set-up beside the first frames, if that ends
  later):
      latency = T_flip − t_audio
  T_flip: the master-clock time (the audio-sample clock, pipeline/live_source.py MasterClock)
  of the simulated VSYNC that puts the frame on screen (above: the first VSYNC after the tick that
  released it finished; a tick that woke more than a refresh late skips VSYNCs, counted in
  `vsync_missed`). t_audio: the master-clock time of the audio the picture's mouth
  was analysed from — the centre of the 12 ms level window that sets the mouth openness
  (newest analysed sample − 6 ms; the lip-sync hop — or the mouth latched between hops,
  LiveLipSync.latch — ending there is the newest one the frame thread had when it started the
  frame) — and, through the diffusion stream batch (the picture
  lags k − 1 frames at k steps), that of the frame whose picture is shown. Computed per frame
  as T_flip − pts + timings["audio_age"]. Not included: the input latency of a capture device
  (file playback puts each sample into the ring at its real-time instant, as a zero-latency
  microphone would), the scan-out of the flipped frame (0 .. one refresh, top to bottom) and
  the display's own processing.
* per-stage times, median / P99: on cuda the GPU time of each stage from CUDA events
  (upload, stylize, diffusion, temporal, upscale, readback; "ladder total" = what the ladder
  is fed), the CPU time of the idol render ("render": drawn ahead of the frame's start, off its
  critical path unless `--no-late-mouth`) and of the late mouth ("mouth": redrawn from the
  newest audio at the frame's start, the copy out of the render process included); "frame" =
  wall time from the tick that started a frame to its publication (mouth + GPU + readback
  wait);
* drops: frames never started because the GPU had `max_in_flight` frames (gpu-busy ticks),
  ticks the frame thread started more than a period late, frames superseded in the session's
  output queue, frames the jitter buffer dropped late or on overflow, and repeated refreshes;
* every quality-ladder change (QosEvent) with its time, rungs and reason.

It appends (replaces) the section `live-headless-<device>` of docs/BENCHMARKS.md.
Importing it pulls in neither PySide6, nor librosa, nor sounddevice (the analysis runs
without pitch/idle motion where librosa is missing, and says so in the report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from app.errors import UsageError
from core.benchdoc import machine_line, today, write_section

UI_GOAL_MS = 2.0
LATENCY_GOAL_MS = 50.0  # audio-to-photon P99, live (the GPU-pipeline issue)
PRESENT_LEAD_MS = 4.0  # default --present-lead-ms (see the module docstring)
SETUP_WAIT_S = 30.0  # the longest the counting waits for the GPU chain's set-up beside the frames


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "live", help="the desktop app on the demo song: fps, drops, UI ms"
    )
    b.add_argument("--seconds", type=float, default=12.0, help="seconds per run (default 12)")
    b.add_argument(
        "--size", default=None, help="frame size WxH (960x540; headless GPU: the output size)"
    )
    b.add_argument(
        "--preset",
        default=None,
        help="the look (--headless: as `kagura live` starts, the one remembered in "
        "live_app.json, else studio; the desktop-app runs use a fresh settings folder: studio)",
    )
    b.add_argument(
        "--avatar", type=Path, default=None, metavar="FILE", help="a layered avatar (--headless)"
    )
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    h = b.add_argument_group("headless (no Qt, no sound device; the GPU machine)")
    h.add_argument(
        "--headless",
        action="store_true",
        help="LiveSession + jitter buffer on a simulated VSYNC: audio-to-photon latency, "
        "per-stage GPU times, drops, quality-ladder events",
    )
    h.add_argument("--fps", type=int, default=30, help="frames per second (30)")
    h.add_argument("--vsync-hz", type=float, default=60.0, help="simulated display refresh (60)")
    h.add_argument(
        "--present-lead-ms",
        type=float,
        default=PRESENT_LEAD_MS,
        help="the display tick fires this long before each simulated VSYNC and its frame flips "
        f"at that VSYNC; 0: the tick right after a VSYNC, flipped at the next ({PRESENT_LEAD_MS:g})",
    )
    h.add_argument(
        "--phase-lock",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start each frame at the display tick that shows it minus the predicted frame time "
        "(LiveSession.set_display_timing); --no-phase-lock: the free-running frame timer",
    )
    h.add_argument(
        "--frame-margin-ms",
        type=float,
        default=None,
        help="with --phase-lock: added to the predicted (P99) frame time in the lead "
        "(default: pipeline.phase_lock.FRAME_MARGIN_NS)",
    )
    h.add_argument(
        "--latch-mouth",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="publish the mouth latched from the newest audio between lip-sync hops "
        "(LiveLipSync.latch; default on); --no-latch-mouth: only at hops",
    )
    h.add_argument(
        "--late-mouth",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draw each frame's idol ahead and redraw its mouth from the newest audio when the "
        "frame starts (render/stage.py; default on); --no-late-mouth: the whole idol at the start",
    )
    h.add_argument(
        "--relearn-after-setup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="forget the frame times learnt while the quality ladder's lower rungs were set up "
        "beside the first frames, once they are ready (PhaseLock.forget; default on)",
    )
    h.add_argument(
        "--frame-window",
        type=int,
        default=None,
        metavar="N",
        help="with --phase-lock: the recent frames whose P99 the lead covers "
        "(default: pipeline.phase_lock.FRAME_PREDICT_WINDOW)",
    )
    h.add_argument(
        "--hold-ladder",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold the quality ladder (measure, decide nothing) while its lower rungs are set up "
        "beside the first frames (QualityControl.hold; default on)",
    )
    h.add_argument(
        "--stall-watch",
        type=float,
        default=None,
        metavar="MS",
        help="with --trace: a thread that notes each time it wakes MS or more late (the GIL "
        "held, or the process not running) and what every thread was in (core/stall_watch.py); "
        "the events go to TRACE.stalls.jsonl",
    )
    h.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        metavar="MS",
        help="Python's thread switch interval during the run (default: as kagura live sets it, "
        "app.cmd_live.UI_SWITCH_INTERVAL_S): how long a thread waiting for the GIL waits "
        "before asking the holder to drop it",
    )
    h.add_argument(
        "--realtime-priority",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the GPU session's frame and publishing threads and its render process ask for "
        "real-time scheduling (core.priority; default on, as kagura live); what they got is in "
        "the JSON's "
        '"priority"',
    )
    h.add_argument(
        "--temporal-graph",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --cuda-graphs: the temporal stage replayed as a CUDA graph (default on); "
        "--no-temporal-graph: issued eagerly (the A/B arm)",
    )
    h.add_argument(
        "--learn-min",
        type=int,
        default=None,
        metavar="N",
        help="with --phase-lock: frames learnt before their times set the lead, one frame "
        "period until then (default: pipeline.phase_lock.FRAME_LEARN_MIN)",
    )
    h.add_argument(
        "--lead-outliers",
        type=int,
        default=None,
        metavar="N",
        help="with --phase-lock: the worst frame times and start errors the lead leaves out "
        "(default: pipeline.phase_lock.LEAD_OUTLIERS_LEFT_OUT; 0: none, the plain P99)",
    )
    h.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="JSONL",
        help="write one JSON line per shown frame (the warm-up's too): its start (s from the session's "
        "start), audio-to-photon ms and the frame's own timings (lead, target, start, stages)",
    )
    h.add_argument(
        "--release",
        choices=("follow", "adaptive"),
        default="follow",
        help="with --phase-lock: 'follow' (default) — the jitter buffer's delay is the one that "
        "makes each frame due at the tick it was started for (JitterBuffer.follow); "
        "'adaptive' — its own P99-of-lateness delay, which the session's lead then covers",
    )
    h.add_argument(
        "--section",
        default=None,
        metavar="KEY",
        help="the BENCHMARKS.md section to replace (default live-headless-<device>): keeps "
        "runs of other settings side by side",
    )
    h.add_argument(
        "--warm-up",
        type=float,
        default=1.0,
        help="seconds at the start shown but not counted (and not learnt by the jitter buffer)",
    )
    from app.live_gpu import add_gpu_options

    add_gpu_options(b)
    return b


def _run_app(platform: str, args: argparse.Namespace, size: str, song: Path) -> dict:
    cmd = [
        sys.executable, "-m", "app.cli", "live", "--audio-file", str(song), "--no-play-out",
        "--quit-after", f"{args.seconds:g}", "--size", size, "--preset", args.preset or "studio",
    ]  # fmt: skip
    env = {**os.environ, "KAGURA_CONFIG_DIR": tempfile.mkdtemp(prefix="kagura-bench-")}
    if platform == "xvfb":
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1440x900x24", *cmd]
        env["QT_QPA_PLATFORM"] = "xcb"
    else:
        env["QT_QPA_PLATFORM"] = "offscreen"
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=args.seconds + 120
        )
    finally:
        shutil.rmtree(env["KAGURA_CONFIG_DIR"], ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"kagura live ({platform}) exited {done.returncode}: {done.stderr[-500:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> int:
    if getattr(args, "avatar", None) is not None:
        if not args.headless:
            raise UsageError("bench live: --avatar needs --headless")
        from render.avatar_source import avatar_spec, set_default_avatar

        set_default_avatar(avatar_spec(args.avatar))  # the session's render stage draws it
    if args.headless:
        return run_headless(args)
    if _gpu_options_given(args):
        raise UsageError("bench live: the GPU options need --headless")
    size = args.size or "960x540"
    from app.config import parse_size

    parse_size(size)  # the one size rule, before any run
    from audio.demo_song import demo_song_path

    song = demo_song_path()
    platforms = ["offscreen"] + (["xvfb"] if shutil.which("xvfb-run") else [])
    rows = []
    for platform in platforms:
        print(f"bench live: {platform} …", file=sys.stderr)
        rows.append((platform, _run_app(platform, args, size, song)))
    preset = args.preset or "studio"  # the app runs in a settings folder of its own
    cmd = f"kagura bench live --seconds {args.seconds:g} --size {size} --preset {preset}"
    lines = [
        "## Desktop app, live path on the CPU",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}",
        f"- command: `{cmd}`",
        f"- input: the demo song played through the live path at real-time pace ({size}, 30 fps, "
        f"preset {preset}, procedural stages on the CPU, no GPU); each run includes start-up",
        f"- goal: UI thread under {UI_GOAL_MS:g} ms per displayed frame",
        "",
        "| Qt platform | display path | produced | shown | dropped | repeated | audio→photon (ms) | lip-sync lag (ms) | UI ms/frame median / P99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for platform, r in rows:
        lines.append(
            f"| {platform} | {r['presenter']} | {r['frames_produced']} | {r['frames_shown']} | "
            f"{r['frames_dropped']} | {r['frames_repeated']} | {r['latency_ms']:.0f} | "
            f"{r['lipsync_lag_ms']:.0f} | {r['ui_ms_median']:.2f} / {r['ui_ms_p99']:.2f} |"
        )
    lines += [
        "",
        "UI ms = the display tick on the UI thread: jitter-buffer tick, hand-over and a synchronous "
        "paint of the frame (scaled when the preview is not 1:1). P99 includes waits for the GIL "
        "held by the render and stylize threads. audio→photon = the jitter buffer's target delay "
        "(which includes the pipeline's latency) plus one refresh.",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(args.out, "live", body)
    return 0


# ---------------------------------------------------------------------------------------------
# headless


def _gpu_options_given(args: argparse.Namespace) -> bool:
    return (
        args.device != "cpu"
        or args.diffusion is not None
        or args.diffusion_random is not None
        or args.diffusion_size is not None
        or args.upscale != 1
        or args.temporal is not None
        or args.cuda_graphs is not None
        or args.budget_ms is not None
        or args.no_ladder
    )


def _pct(values: list[float]) -> dict[str, float | None]:
    from core.stats import summary

    return summary(values, digits=2) or {"median": None, "p99": None, "n": 0}


def measure_headless(args: argparse.Namespace) -> dict:
    """Run the live session headless for `args.seconds`; returns the measurements."""
    import math
    import time

    from app.config import live_config, parse_size
    from app.live_gpu import build_live_gpu, launch_first_render
    from app.live_settings import Settings
    from audio.demo_song import demo_song_path
    from core.stall_watch import STALLS_SUFFIX, CollectorTime, StallWatch
    from core.trace import mark
    from pipeline.display_feed import FramePump, live_jitter_buffer
    from pipeline.live import FilePlayback, LiveSession
    from pipeline.live_frames import AUDIO_AGE, LEAD, STARTED

    if args.fps <= 0 or args.fps > 240:
        raise UsageError(f"--fps {args.fps}: expected 1..240")
    if args.vsync_hz <= 0 or args.seconds <= 0:
        raise UsageError("--vsync-hz and --seconds must be positive")
    from app.cmd_live import UI_SWITCH_INTERVAL_S

    ms = args.switch_interval_ms
    if ms is not None and not 0.01 <= ms <= 100:
        raise UsageError(f"--switch-interval-ms {ms:g}: expected 0.01 .. 100")
    switch_s = UI_SWITCH_INTERVAL_S if ms is None else ms / 1000
    if args.stall_watch is not None:
        if args.trace is None:
            raise UsageError("--stall-watch needs --trace (its events go beside the trace)")
        if not 1 <= args.stall_watch <= 1000:
            raise UsageError(f"--stall-watch {args.stall_watch:g}: expected 1 .. 1000 ms")
    if not 0 <= args.present_lead_ms < 1000 / args.vsync_hz:
        raise UsageError(f"--present-lead-ms {args.present_lead_ms:g}: expected 0 .. one refresh")
    size = parse_size(args.size) if args.size else None
    # the preset and the GPU options as `kagura live` layers them: defaults ← live_app.json ←
    # the flags (app/config.py)
    settings = Settings()
    live = live_config(args, settings, notices=settings.notices)
    preset, cfg = live.preset, live.gpu
    if args.preset is not None:
        preset_from = "--preset"
    else:  # the one the file remembers, or the default it falls back to
        preset_from = settings.path.name if settings.path.exists() else "the default"
    for notice in settings.notices:
        print(f"bench live: {notice}", file=sys.stderr)
    first_render = launch_first_render(cfg, size, preset)  # as `kagura live` does
    try:
        gpu = build_live_gpu(cfg, size)
        if gpu is not None:
            gpu.temporal_graph = args.temporal_graph
        src = FilePlayback(demo_song_path(), loop=True, play_out=False, start=False)
        t_setup = time.perf_counter()
        session = LiveSession(
            src,
            preset,
            size=size or (960, 540),
            fps=args.fps,
            gpu=gpu,
            first_render=first_render,
        )
    except BaseException:
        if first_render is not None:
            first_render.close()
        raise
    setup_s = time.perf_counter() - t_setup
    refresh_ns = round(1e9 / args.vsync_hz)
    jitter = live_jitter_buffer(args.fps)
    warm_ns = int(args.warm_up * 1e9)
    latency: list[float] = []
    # its parts, per shown frame: pts -> flip, the mouth's audio age at pts, the frame's lead
    after_pts: list[float] = []
    ages: list[float] = []
    leads: list[float] = []
    wake_late: list[float] = []
    tick_to_flip: list[float] = []  # ms from a tick's wake-up to the VSYNC that flips its frame
    ticks = missed_ticks = present_missed = 0
    lead_ns = round(args.present_lead_ms * 1e6)
    # as `kagura live` does: hand the GIL over sooner, so the VSYNC thread wakes on time
    switch = sys.getswitchinterval()
    sys.setswitchinterval(switch_s)
    session.latch_mouth = args.latch_mouth
    session.late_mouth = args.late_mouth
    session.relearn_after_setup = args.relearn_after_setup
    if args.frame_window is not None:
        session.phase_lock.predict_window = args.frame_window
    if not args.hold_ladder:
        session.hold_ladder(False)  # the A/B arm: decide on the frames beside the set-up too
    if args.learn_min is not None:
        session.phase_lock.learn_min = max(2, args.learn_min)
    if args.lead_outliers is not None:
        session.phase_lock.outliers_left_out = args.lead_outliers
    trace: list[dict] = []
    # --trace: the collector's time between traced frames (its totals when the last was traced)
    collector = CollectorTime().start() if args.trace is not None else None
    traced_gc = (0, 0)
    watch = None
    if args.stall_watch is not None:
        watch = StallWatch(threshold_ms=args.stall_watch, period_ms=min(2.0, args.stall_watch))
    if args.frame_margin_ms is not None:
        session.frame_margin_ns = round(args.frame_margin_ms * 1e6)
    session.start()
    if watch is not None:
        watch.start()
    mark("live started")  # `kagura bench e2e`: time stamps from launch to the first frame shown
    first_shown = False
    started = session.started_at or time.monotonic()
    pump = FramePump(session, jitter, warm_up_ns=warm_ns, name="kagura-bench-pump")
    try:
        # VSYNC k at t0 + k * refresh; its display tick `lead` before it (0: right at it)
        t0 = time.monotonic_ns()
        if args.phase_lock and args.release == "follow":
            # the jitter buffer releases each frame at the tick the session started it for
            session.set_display_timing(t0 + refresh_ns - lead_ns, refresh_ns)
            jitter.follow(session.release_delay_ns)
        elif args.phase_lock:  # the buffer keeps its own adaptive delay; the lead covers it
            session.set_display_timing(
                t0 + refresh_ns - lead_ns, refresh_ns, lambda: jitter.target_delay_ns
            )
        k = 1  # the VSYNC this tick belongs to
        # counted: `--seconds` from the end of the warm-up, or from the end of the GPU chain's
        # set-up beside the first frames if that comes later (its frames share the GPU and the
        # GIL with it: start-up, not the steady state), at most SETUP_WAIT_S more
        count_from: int | None = None
        end = t0 + round((args.warm_up + args.seconds) * 1e9)
        while True:
            now = time.monotonic_ns()
            waited = now - t0 >= warm_ns + SETUP_WAIT_S * 1e9
            if (
                count_from is None
                and now - t0 >= warm_ns
                and (not session.gpu_setting_up or waited)
            ):
                count_from = now
                end = now + round(args.seconds * 1e9)
            if count_from is not None and now >= end:
                break
            due = t0 + k * refresh_ns - lead_ns
            if due > now:
                time.sleep((due - now) / 1e9)
            woke = time.monotonic_ns()
            master = session.clock.now_ns()
            frame = jitter.tick(master, refresh_ns)
            done = time.monotonic_ns()  # the hand-over is done: the frame is presented
            ticks += 1
            if frame is not None and not first_shown:
                first_shown = True
                mark("first shown frame")
            # a FIFO swap chain flips to it at the first VSYNC after the present
            k_flip = (done - t0) // refresh_ns + 1
            present_missed += k_flip - (k if lead_ns > 0 else k + 1)
            t_flip = master + (t0 + k_flip * refresh_ns - woke)
            counting = count_from is not None and woke >= count_from
            if counting:
                wake_late.append((woke - due) / 1e6)
                tick_to_flip.append((t0 + k_flip * refresh_ns - woke) / 1e6)
            if frame is not None and jitter.last_was_new and args.trace is not None:
                age = frame.timings.get(AUDIO_AGE)
                trace.append(
                    {
                        "start_s": frame.timings.get(STARTED, 0.0) / 1e3 - started,
                        "counted": counting,
                        "audio_to_photon_ms": None
                        if age is None
                        else (t_flip - frame.pts_ns) / 1e6 + age,
                        # the collector since the last row (any thread)
                        "gc_ms": (collector.ns - traced_gc[0]) / 1e6,
                        "gc_full": collector.full - traced_gc[1],
                        **frame.timings,
                    }
                )
                traced_gc = (collector.ns, collector.full)
            if frame is not None and jitter.last_was_new and counting:
                age = frame.timings.get(AUDIO_AGE)
                if age is not None and math.isfinite(age):
                    latency.append((t_flip - frame.pts_ns) / 1e6 + age)
                    after_pts.append((t_flip - frame.pts_ns) / 1e6)
                    ages.append(age)
                    if LEAD in frame.timings:
                        leads.append(frame.timings[LEAD])
            # the next tick still ahead (a tick that woke over a refresh late skips VSYNCs)
            k_next = max(k + 1, -((t0 - lead_ns - time.monotonic_ns()) // refresh_ns))
            missed_ticks += k_next - k - 1
            k = k_next
        stats = session.stats()
        events = session.quality_events()
        error = session.error
    finally:
        if watch is not None:
            watch.stop()
        if collector is not None:
            collector.stop()
        sys.setswitchinterval(switch)
        session.stop()
        pump.thread.join(timeout=10)
    js = jitter.stats()
    if args.trace is not None:
        with open(args.trace, "w") as f:
            for row in trace:
                f.write(json.dumps(row) + "\n")
    if watch is not None:
        with open(f"{args.trace}{STALLS_SUFFIX}", "w") as f:
            for event in watch.events:
                # the start as the trace's frames have theirs: s from the session's start
                event = {**event, "start_s": event["at_s"] - started}
                f.write(json.dumps(event) + "\n")
    for ev in events:
        ev["t_s"] = round(ev.pop("t") - started, 2)
    gpu_name = None
    if args.device == "cuda":
        import torch

        gpu_name = torch.cuda.get_device_name(0)
    return {
        "device": args.device,
        "gpu": gpu_name,
        "label": gpu.label if gpu is not None else "CPU chain (idol + stylize)",
        "preset": preset,
        "preset_from": preset_from,
        "fps": args.fps,
        "vsync_hz": args.vsync_hz,
        "seconds": args.seconds,
        "warm_up_s": args.warm_up,
        "counted_from_s": round((count_from - t0) / 1e9, 2) if count_from else None,
        "setup_s": round(setup_s, 2),
        "render_size": stats["render_size"],
        "size": stats["size"],
        "audio_to_photon_ms": _pct(latency),
        "latency_parts_ms": {
            "pts_to_flip": _pct(after_pts),
            "audio_age": _pct(ages),
            "lead": _pct(leads),
            "max": round(max(latency), 2) if latency else None,
        },
        "jitter_estimate_ms": round(js.audio_to_photon_ms, 1),
        "target_delay_ms": round(js.target_delay_ms, 1),
        "lipsync_lag_ms": stats["lipsync_lag_ms"],
        "frames_produced": stats["frames_produced"],
        "frames_expected": round(((end - t0) / 1e9) * args.fps),
        "shown": js.shown,
        "dropped_output_queue": stats["output_dropped"],
        "dropped_late": js.dropped_late,
        "dropped_overflow": js.dropped_overflow,
        "repeated": js.repeated,
        "gpu_busy_ticks": stats["gpu_busy_ticks"],
        "late_ticks": stats["late_ticks"],
        "stalled_ticks": stats["stalled_ticks"],
        "vsync_ticks": ticks,
        "vsync_missed": missed_ticks,
        "present_lead_ms": args.present_lead_ms,
        "present_missed": present_missed,
        "tick_to_flip_ms": _pct(tick_to_flip),
        "phase_lock": bool(args.phase_lock),
        "release": args.release if args.phase_lock else "adaptive",
        "frame_lead_ms": stats["frame_lead_ms"],
        "start_error_ms": stats["start_error_ms"],
        "lipsync_lag_p99_ms": stats["lipsync_lag_p99_ms"],
        "vsync_wake_late_ms": _pct(wake_late),
        "stage_ms": stats["stage_ms"],
        "quality": stats["quality"],
        "quality_events": events,
        "analysis_note": stats["analysis_note"],
        "priority": stats["priority"],
        "analysis_hops": stats["analysis_hops"],
        "error": error,
    }


def _headless_command(args: argparse.Namespace) -> str:
    parts = ["kagura bench live --headless", f"--device {args.device}"]
    if getattr(args, "avatar", None) is not None:
        parts.append(f"--avatar {args.avatar}")
    if args.diffusion is not None:
        parts.append(f"--diffusion {args.diffusion}")
    if args.diffusion_random is not None:
        parts.append(f"--diffusion-random {args.diffusion_random}")
    if args.diffusion_size:
        parts.append(f"--diffusion-size {args.diffusion_size}")
    if args.upscale != 1:
        parts.append(f"--upscale {args.upscale}")
    if args.temporal is not None:
        parts.append("--temporal" if args.temporal else "--no-temporal")
    if args.budget_ms is not None:
        parts.append(f"--budget-ms {args.budget_ms:g}")
    if args.no_ladder:
        parts.append("--no-ladder")
    if not args.latch_mouth:
        parts.append("--no-latch-mouth")
    if not args.late_mouth:
        parts.append("--no-late-mouth")
    if args.frame_margin_ms is not None:
        parts.append(f"--frame-margin-ms {args.frame_margin_ms:g}")
    if args.phase_lock and args.release != "follow":
        parts.append(f"--release {args.release}")
    if not getattr(args, "render_process", True):
        parts.append("--no-render-process")
    if getattr(args, "stream_batch", False):
        parts.append("--stream-batch")
    if args.size:
        parts.append(f"--size {args.size}")
    parts += [f"--fps {args.fps}", f"--present-lead-ms {args.present_lead_ms:g}"]
    if not args.phase_lock:
        parts.append("--no-phase-lock")
    parts.append(f"--seconds {args.seconds:g}")
    if args.preset is not None:
        parts.append(f"--preset {args.preset}")
    return " ".join(parts)


def _ms(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def _parts_line(parts: dict | None) -> str:
    """The shown frames' audio→photon split into what the display side and the audio side
    added (median / P99 of each, over the same frames), and the leads they were started with."""
    if not parts or not parts["pts_to_flip"]["n"]:
        return "Latency parts: none measured."
    a, b, c = parts["pts_to_flip"], parts["audio_age"], parts["lead"]
    lead = f"{_ms(c['median'])} / {_ms(c['p99'])} ms" if c["n"] else "– (not phase-locked)"
    return (
        f"Latency parts, median / P99 over the same frames: pts → flip {_ms(a['median'])} / "
        f"{_ms(a['p99'])} ms, the mouth's audio age at pts {_ms(b['median'])} / "
        f"{_ms(b['p99'])} ms; the frames' lead {lead}; worst audio→photon {_ms(parts['max'])} ms."
    )


def headless_report(r: dict, command: str) -> str:
    lat = r["audio_to_photon_ms"]
    q = r["quality"]
    where = r["device"] + (f" ({r['gpu']})" if r["gpu"] else "")
    rs, out = r["render_size"], r["size"]
    verdict = ""
    if lat["p99"] is not None:
        ok = lat["p99"] <= LATENCY_GOAL_MS
        verdict = f" — {'meets' if ok else 'MISSES'} the {LATENCY_GOAL_MS:g} ms P99 goal"
    lines = [
        f"## Live path, headless, {r['device']}",
        "",
        f"- date: {today()}",
        f"- machine: {machine_line()}" + (f", GPU {r['gpu']}" if r["gpu"] else ""),
        f"- command: `{command}`",
        f"- chain: idol {rs[0]}x{rs[1]} on the CPU"
        + (
            f" → GPU stages on {where} → {out[0]}x{out[1]}; models: {r['label']}"
            if q is not None
            else f" → stylize on the CPU ({r['label']})"
        ),
        f"- input: the demo song through FilePlayback at real-time pace, {r['fps']} fps, preset "
        f"{r['preset']} (from {r.get('preset_from', '--preset')}), simulated "
        f"{r['vsync_hz']:g} Hz VSYNC; {r['seconds']:g} s counted after "
        f"{r['warm_up_s']:g} s warm-up"
        + (
            f" (counted from {r['counted_from_s']:.2f} s: the GPU chain's set-up beside the "
            "first frames ended then)"
            if r.get("counted_from_s") and r["counted_from_s"] > r["warm_up_s"] + 0.02
            else ""
        )
        + f"; session setup {r['setup_s']:.1f} s (not counted)",
        f"- display model: tick {r['present_lead_ms']:g} ms before each VSYNC"
        + (
            ", flipped at that VSYNC"
            if r["present_lead_ms"] > 0
            else " (i.e. at it), flipped at the next VSYNC"
        )
        + f" ({r['present_missed']} presents missed their VSYNC); frame starts "
        + (
            f"phase-locked to the ticks (lead {_ms(r['frame_lead_ms'])} ms; start error "
            f"median / P99 {_ms((r['start_error_ms'] or {}).get('median'))} / "
            f"{_ms((r['start_error_ms'] or {}).get('p99'))} ms); jitter buffer: "
            + (
                "releases each frame at the tick it was started for (follows the session)"
                if r["release"] == "follow"
                else "its own adaptive delay (P99 of arrival − pts + 3 ms), covered by the lead"
            )
            if r["phase_lock"]
            else "on the session's free-running timer"
        ),
    ]
    if r["analysis_note"]:
        lines.append(f"- audio analysis: lip-sync only — {r['analysis_note']}")
    if r.get("priority"):  # what the OS gave the threads that asked for real-time scheduling
        said = "; ".join(f"{k}: {v.rstrip('.')}" for k, v in sorted(r["priority"].items()))
        lines.append(f"- scheduling: {said}")
    lines += [
        "",
        "| audio→photon median (ms) | P99 (ms) | frames | jitter-buffer delay (ms) | "
        "lip-sync lag (ms) |",
        "|---|---|---|---|---|",
        f"| {_ms(lat['median'])} | {_ms(lat['p99'])}{verdict} | {lat['n']} | "
        f"{r['target_delay_ms']:.1f} | {_ms(r['lipsync_lag_ms'])} |",
        "",
        _parts_line(r.get("latency_parts_ms")),
        "",
        "| produced / expected | shown | output-queue drops | late drops | overflow | repeated "
        "| GPU-busy ticks | late ticks | VSYNC ticks missed |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {r['frames_produced']} / {r['frames_expected']} | {r['shown']} | "
        f"{r['dropped_output_queue']} | {r['dropped_late']} | {r['dropped_overflow']} | "
        f"{r['repeated']} | {r['gpu_busy_ticks']} | {r['late_ticks']} | {r['vsync_missed']} |",
        "",
        "| stage | median (ms) | P99 (ms) |",
        "|---|---|---|",
    ]
    for name, v in r["stage_ms"].items():
        if name == "look_build" or not isinstance(v, dict):
            continue
        lines.append(f"| {name} | {_ms(v.get('median'))} | {_ms(v.get('p99'))} |")
    lines.append("")
    if q is not None:
        rungs = "; ".join(f"{i}: {n}" for i, n in enumerate(q["ladder"]))
        fixed = "" if q.get("adaptive", True) else "OFF (--no-ladder: measured only); "
        lines.append(
            f"Quality ladder ({fixed}budget {q['budget_ms']:.2f} ms P99 for the ladder stages; "
            f"{len(q['ladder'])} rungs: {rungs}). Final rung: {q['level']} ({q['rung']}). "
            + (
                f"The diffusion was set up beside the first frames (unpainted until then): "
                f"painting {q['painting_after_s']:.2f} s after the chain's set-up began. "
                if q.get("painting_after_s") is not None
                else ""
            )
            + "Changes:"
        )
        lines.append("")
        if r["quality_events"]:
            lines += ["| t (s) | change | reason |", "|---|---|---|"]
            for ev in r["quality_events"]:
                lines.append(
                    f"| {ev['t_s']:.2f} | {ev['direction']} {ev['from_rung']} → {ev['to_rung']} "
                    f"({ev['to']}) | {ev['reason']} |"
                )
        else:
            lines.append("none (every rung change would be listed here with its reason)")
        lines.append("")
    lines.append(
        "audio→photon = T_flip − t_audio: T_flip the master-clock time of the simulated VSYNC "
        "that shows the frame (presented at the tick that releases it, flipped by a FIFO swap "
        "chain at the first VSYNC after that present); t_audio the centre of the 12 ms lip-sync "
        "level window "
        "the picture's mouth comes from (through the diffusion stream batch: of the frame whose "
        "picture is shown). Excludes capture-device input latency, scan-out and the display. "
        "Stage times on cuda are CUDA-event GPU times (render, mouth: CPU); 'render' is the idol "
        "drawn ahead of its frame's start, 'mouth' its mouth redrawn from the newest audio at "
        "the start; 'frame' is the wall time from a frame's tick to its publication."
    )
    return "\n".join(lines)


def run_headless(args: argparse.Namespace) -> int:
    import json

    from app.log_setup import configure

    # the ladder's changes belong in a bench's log even without -v
    configure(max(1, getattr(args, "verbose", 0)))
    r = measure_headless(args)
    if r["error"] or not r["analysis_hops"]:
        print(json.dumps(r, default=str), flush=True)
        print(
            f"kagura bench live: the live session failed: {r['error'] or 'no audio analysed'}",
            file=sys.stderr,
        )
        return 1
    body = headless_report(r, _headless_command(args))
    print(body)
    print(json.dumps(r, default=str), flush=True)
    if not args.no_write:
        write_section(args.out, args.section or f"live-headless-{args.device}", body)
    return 0
