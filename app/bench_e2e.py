"""`kagura bench e2e`: the real commands, from the shell to the finished file, cold and warm.

    kagura bench e2e [--device cpu|cuda] [--commands render demo live app] [--audio FILE]
                     [--size WxH]
                     [--seconds S] [--upscale N] [--extra "ARGS"] [--repeats N]
                     [--cold-repeats N] [--served N] [--live-seconds S] [--no-imports]
                     [--section KEY]
                     [--out docs/BENCHMARKS.md] [--no-write] [--json FILE]

Every run is a fresh `python -m app.cli …` process (what the `kagura` script runs), given only
the options named here: everything else is the command's own default (`render`/`demo` on
cuda: Kagura's model + temporal). `render` renders the demo song file, `demo` the built-in demo
song; `live` is `kagura bench live --headless` (no Qt, no sound device) to its first shown frame;
`app` is the desktop app itself, `kagura live --audio-file SONG --no-play-out --quit-after S`
(the song as its microphone; Qt offscreen where there is no display), to its window's first
frame on screen.

* cold: each run gets an empty cache folder (XDG_CACHE_HOME → platformdirs' user cache: numba's
  compiled librosa, inductor/triton, fontconfig, torch, the drawn backgrounds; CUDA_CACHE_PATH:
  the CUDA driver's kernels), so it compiles what a fresh machine compiles. The OS file cache is not emptied (that needs root and hurts every other process).
* warm: the machine's own caches, after one untimed run has filled them.
* served (`--served N`, render and demo): N runs handed to a `kagura serve` the bench starts
  first with the same options (app/cmd_serve.py), after one untimed served run; each starts
  the audio a millisecond later than the one before (`--start`), so the server analyses audio
  it has not seen, as for a new song. "served again": N runs of the untimed run's audio, whose
  analysis the server kept (a song rendered again with another look). The server's own start
  and warm-up are reported beside them, not in the runs. The other modes never reach a server
  (their KAGURA_SERVE_SOCKET names none).

Each child writes time stamps (core/trace.py, KAGURA_TRACE) that split its wall time into
start-up (interpreter + CLI), argument checks, setup (decode, analysis, models, stages), the
first frame handed to the encoder, the frames, and finishing the file. With imports on (the
default), one more warm run with PYTHONPROFILEIMPORTTIME (the CLI and the processes it starts)
names the slowest top-level imports.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.errors import UsageError
from core.stats import median_p99, percentile

COMMANDS = ("render", "demo", "live", "app")
MODES = ("cold", "warm", "served", "served again")
LIVE_COMMANDS = ("live", "app")  # timed to their first shown frame
CACHE_VARS = ("NUMBA_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "KAGURA_CACHE_DIR")
SONG = Path(__file__).resolve().parents[1] / "audio" / "assets" / "demo_song.ogg"
# the phases of a run, each from the previous event to this one
PHASES = (
    ("start-up", "main"),
    ("parse", "parsed"),
    ("checks", "checked"),
    ("setup", "graph built"),
    ("first frame", "first frame"),
    ("frames", "last frame"),
    ("finish", "finished"),
)
STEP_PREFIX = "setup: "  # finer time stamps inside a phase (core.trace.step)
LIVE_PHASES = (
    ("start-up", "main"),
    ("parse", "parsed"),
    ("session setup", "live started"),
    ("first shown", "first shown frame"),
)


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "e2e", help="the real commands from the shell: wall time, first frame, setup"
    )
    b.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    b.add_argument(
        "--commands", nargs="+", choices=COMMANDS, default=["render", "demo"], metavar="CMD"
    )
    b.add_argument(
        "--audio", type=Path, default=SONG, help="the song `render` renders (the demo song's file)"
    )
    b.add_argument("--size", default=None, help="--size for render/demo (default theirs)")
    b.add_argument("--seconds", type=float, default=None, help="--seconds for render/demo")
    b.add_argument("--upscale", type=int, default=None, help="--upscale for render/demo")
    b.add_argument("--extra", default="", help="more options for render/demo, one string")
    b.add_argument("--repeats", type=int, default=5, help="warm runs per command (5)")
    b.add_argument("--cold-repeats", type=int, default=2, help="cold runs per command (2)")
    b.add_argument(
        "--served",
        type=int,
        default=0,
        metavar="N",
        help="render/demo: N more runs handed to a `kagura serve` started with the same options",
    )
    b.add_argument(
        "--live-seconds",
        type=float,
        default=3.0,
        help="live: bench live --headless --seconds; app: live --quit-after (3)",
    )
    b.add_argument("--no-imports", action="store_true", help="skip the import-time run per command")
    b.add_argument("--timeout", type=float, default=1800.0, help="seconds per run (1800)")
    b.add_argument("--section", default=None, help="BENCHMARKS.md section (default e2e-…)")
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    b.add_argument("--json", type=Path, default=None, help="also write the runs as JSON here")
    return b


# ---------------------------------------------------------------------------- one run


def command_argv(args: argparse.Namespace, command: str, out_dir: Path) -> list[str]:
    """The `kagura …` arguments of one run: only what the bench was given."""
    if command == "live":
        return [
            *("bench", "live", "--headless", "--device", args.device, "--no-write"),
            *("--seconds", f"{args.live_seconds:g}", "--warm-up", "0"),
        ]
    if command == "app":  # the desktop app itself, playing the song as its microphone
        return [
            *("live", "--audio-file", str(args.audio), "--no-play-out"),
            *("--device", args.device, "--quit-after", f"{args.live_seconds:g}"),
        ]
    if command == "render":
        argv = ["render", str(args.audio), "-o", str(out_dir / "render.mp4")]
    else:
        argv = ["demo", "-o", str(out_dir / "demo.mp4")]
    argv += ["--device", args.device, "--quiet", "-y"]  # -y: each repeat rewrites the file
    if args.size:
        argv += ["--size", args.size]
    if args.seconds is not None:
        argv += ["--seconds", f"{args.seconds:g}"]
    if args.upscale is not None:
        argv += ["--upscale", str(args.upscale)]
    return argv + shlex.split(args.extra)


def _child_env(trace: Path, cache: Path | None, socket: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, KAGURA_TRACE=str(trace), PYTHONUNBUFFERED="1")
    # a render server only where the run is meant to be served (a socket no server has: none)
    env["KAGURA_SERVE_SOCKET"] = str(socket or trace.parent / "no-server.sock")
    # the commands' own defaults: a settings file on the bench machine (render.toml) must not
    # change what is measured, so the config folder is an empty one beside the trace
    config = trace.parent / "config"
    config.mkdir(exist_ok=True)
    env["KAGURA_CONFIG_DIR"] = str(config)
    if cache is not None:  # cold: every cache under an empty folder
        env["XDG_CACHE_HOME"] = str(cache)
        env["CUDA_CACHE_PATH"] = str(cache / "nv")  # the driver's compiled-kernel cache
        for var in CACHE_VARS:
            env.pop(var, None)
    return env


def run_once(
    argv: list[str],
    cache: Path | None,
    work: Path,
    timeout: float,
    importtime: bool = False,
    socket: Path | None = None,
) -> dict:
    """One fresh process; its wall time, events (seconds from the launch) and phases.
    `socket`: the `kagura serve` it hands its render to."""
    trace = work / f"trace-{time.time_ns()}.jsonl"
    cmd = [sys.executable, "-m", "app.cli", *argv]
    env = _child_env(trace, cache, socket)
    if importtime:  # the variable, not -X importtime: the analysis process reports too
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    t0_ns = time.time_ns()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            cmd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"bench e2e: `kagura {' '.join(argv)}` ran past {timeout:g} s") from None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the run and the processes it waited for: on a machine shared with other
    # work, what the run cost even when the wall clock waited for someone else's
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"bench e2e: `kagura {' '.join(argv)}` exited {done.returncode}: {tail}")
    if socket is not None and "declined" in done.stderr:
        raise RuntimeError(f"bench e2e: the server declined: {done.stderr.strip()[:300]}")
    events: dict[str, float] = {}
    frames = None
    for line in trace.read_text().splitlines() if trace.exists() else []:
        ev = json.loads(line)
        events.setdefault(ev["event"], (ev["t_ns"] - t0_ns) / 1e9)
        frames = ev.get("frames", frames)
    run = {"wall_s": wall, "cpu_s": cpu, "events": events, "frames": frames}
    if importtime:
        run["imports"] = top_imports(done.stderr)
    return run


def phases(events: dict[str, float], wall: float, live: bool = False) -> dict[str, float]:
    """Seconds per phase: from the previous event seen to this one; "exit" to the wall."""
    out: dict[str, float] = {}
    prev = 0.0
    for name, event in LIVE_PHASES if live else PHASES:
        if event in events:
            out[name] = events[event] - prev
            prev = events[event]
    if not live:
        out["exit"] = wall - prev
    return out


def top_imports(importtime_stderr: str, n: int = 6) -> list[tuple[str, float]]:
    """The slowest top-level imports (seconds, cumulative) of an `-X importtime` log, each
    summed over the processes that wrote to it (the CLI, its analysis process, workers)."""
    found: dict[str, float] = {}
    for line in importtime_stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        if name.startswith(" ") and not name.startswith("  "):  # depth 0: one space
            found[name.strip()] = found.get(name.strip(), 0.0) + int(parts[1]) / 1e6
    return sorted(found.items(), key=lambda kv: -kv[1])[:n]


# ---------------------------------------------------------------------------- the bench


def summarize(runs: list[dict], live: bool) -> dict:
    """Median and P99 over the runs of one command and mode."""
    first_event = "first shown frame" if live else "first frame"
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    firsts = [r["events"][first_event] for r in runs if first_event in r["events"]]
    fps = [r["frames"] / r["wall_s"] for r in runs if r.get("frames")]
    per_phase: dict[str, list[float]] = {}
    for r in runs:
        for name, s in phases(r["events"], r["wall_s"], live).items():
            per_phase.setdefault(name, []).append(s)
    return {
        "runs": len(runs),
        "wall_s": list(median_p99(walls)),
        "cpu_s": list(median_p99(cpus)),
        "first_frame_s": list(median_p99(firsts)) if firsts else None,
        "fps_whole": [percentile(fps, 50), percentile(fps, 1)] if fps else None,
        "frames": runs[0].get("frames"),
        "phases_s": {k: percentile(v, 50) for k, v in per_phase.items()},
        "steps_s": _step_medians(runs),
    }


def _step_medians(runs: list[dict]) -> dict[str, float]:
    """Seconds from the launch to each set-up step the command marked ("setup: …" events),
    median over the runs, in the order they happened."""
    seen: dict[str, list[float]] = {}
    for r in runs:
        for event, t in r["events"].items():
            if event.startswith(STEP_PREFIX):
                seen.setdefault(event[len(STEP_PREFIX) :], []).append(t)
    steps = {k: percentile(v, 50) for k, v in seen.items()}
    return dict(sorted(steps.items(), key=lambda kv: kv[1]))


def measure(args: argparse.Namespace) -> dict:
    counts = (("--repeats", args.repeats), ("--cold-repeats", args.cold_repeats))
    for name, value in (*counts, ("--served", args.served)):
        if value < 0:
            raise UsageError(f"{name} {value}: expected 0 or more")
    if args.repeats == 0 and args.cold_repeats == 0 and args.served == 0:
        raise UsageError("--repeats 0 --cold-repeats 0: nothing to run")
    if {"render", "app"} & set(args.commands) and not Path(args.audio).is_file():
        raise UsageError(f"--audio {args.audio}: no such file")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: torch sees no GPU")
    results: dict = {"commands": {}}
    with tempfile.TemporaryDirectory(prefix="kagura-e2e-") as tmp:
        work = Path(tmp)
        for command in args.commands:
            live = command in LIVE_COMMANDS
            argv = command_argv(args, command, work)
            entry: dict = {"argv": argv}
            print(f"bench e2e: kagura {' '.join(argv)}", file=sys.stderr)
            cold = []
            for i in range(args.cold_repeats):
                cache = work / f"cache-{command}-{i}"
                cache.mkdir()
                cold.append(run_once(argv, cache, work, args.timeout))
                print(f"  cold {i + 1}: {cold[-1]['wall_s']:.2f} s", file=sys.stderr)
            warm = []
            if args.repeats:
                fill = run_once(argv, None, work, args.timeout)
                entry["fill_wall_s"] = fill["wall_s"]
                print(f"  fill: {fill['wall_s']:.2f} s (untimed)", file=sys.stderr)
            for i in range(args.repeats):
                warm.append(run_once(argv, None, work, args.timeout))
                print(f"  warm {i + 1}: {warm[-1]['wall_s']:.2f} s", file=sys.stderr)
            served, again = [], []
            if args.served and not live:
                served, again, entry["server"] = run_served(args, argv, command, work)
            if cold:
                entry["cold"] = summarize(cold, live)
            if warm:
                entry["warm"] = summarize(warm, live)
            if served:
                entry["served"] = summarize(served, live)
                entry["served again"] = summarize(again, live)
            if not args.no_imports:
                entry["imports"] = run_once(argv, None, work, args.timeout, importtime=True)[
                    "imports"
                ]
            entry["runs"] = {"cold": cold, "warm": warm, "served": served, "served again": again}
            results["commands"][command] = entry
    return results


def run_served(
    args: argparse.Namespace, argv: list[str], command: str, work: Path
) -> tuple[list[dict], list[dict], dict]:
    """`kagura serve` with the runs' render options (warmed up for them), one untimed served
    run, then `args.served` timed runs of audio it has not analysed and as many of the audio it
    has, interleaved; the server's start-up seconds."""
    socket = work / f"serve-{command}.sock"
    options = argv[argv.index("--device") :]
    options = [a for a in options if a not in ("--quiet", "-y")]
    env = _child_env(work / "server-trace.jsonl", None, socket)
    env.pop("KAGURA_TRACE")
    log = (work / f"serve-{command}.log").open("w")
    t0 = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        info = {"argv": ["serve", *options]}
        for line in server.stdout:
            if "listening on" in line:
                info["listening_s"] = time.perf_counter() - t0
                break
        else:
            raise RuntimeError(f"bench e2e: `kagura serve` exited {server.wait()} before listening")
        print(f"  server listening after {info['listening_s']:.2f} s", file=sys.stderr)
        run_once(argv, None, work, args.timeout, socket=socket)  # untimed: as `warm` does
        new, again = [], []
        for i in range(args.served):
            later = [*argv, "--start", f"{0.001 * (i + 1):g}"]
            new.append(run_once(later, None, work, args.timeout, socket=socket))
            again.append(run_once(argv, None, work, args.timeout, socket=socket))
            print(
                f"  served {i + 1}: {new[-1]['wall_s']:.2f} s; the same audio again: "
                f"{again[-1]['wall_s']:.2f} s",
                file=sys.stderr,
            )
        return new, again, info
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def _device_line(device: str) -> str:
    from core.benchdoc import machine_line

    line = machine_line()
    if device == "cuda":
        import torch

        line += f", {torch.cuda.get_device_name(0)}"
    return line


def section_key(args: argparse.Namespace) -> str:
    if args.section:
        return args.section
    key = f"e2e-{args.device}-{'-'.join(args.commands)}"
    if args.size:
        key += f"-{args.size}"
    if args.seconds is not None:
        key += f"-{args.seconds:g}s"
    if args.upscale is not None:
        key += f"-x{args.upscale}"
    return key


def bench_command(args: argparse.Namespace) -> str:
    parts = ["kagura bench e2e", f"--device {args.device}", "--commands " + " ".join(args.commands)]
    if Path(args.audio).resolve() != SONG:
        parts.append(f"--audio {Path(args.audio).name}")
    for flag, value in (("--size", args.size), ("--seconds", args.seconds)):
        if value is not None:
            parts.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
    if args.upscale is not None:
        parts.append(f"--upscale {args.upscale}")
    if args.extra:
        parts.append(f"--extra {shlex.quote(args.extra)}")
    parts += [f"--repeats {args.repeats}", f"--cold-repeats {args.cold_repeats}"]
    if args.served:
        parts.append(f"--served {args.served}")
    return " ".join(parts)


def _pair(v, unit: str = "", digits: int = 2) -> str:
    return "–" if not v else f"{v[0]:.{digits}f} / {v[1]:.{digits}f}{unit}"


def report(args: argparse.Namespace, results: dict, date: str, machine: str) -> str:
    lines = [
        f"## From the shell to the finished file (bench e2e), {args.device}",
        "",
        f"- date: {date}",
        f"- machine: {machine}",
        f"- command: `{bench_command(args)}`",
        "- each run: a fresh `python -m app.cli …` process (what `kagura` runs) with only the "
        "options shown below; everything else is the command's own default",
        "- cold: an empty cache folder per run (XDG_CACHE_HOME: numba, inductor/triton, backgrounds, "
        "fontconfig, torch; CUDA_CACHE_PATH; the OS file cache stays warm); warm: the "
        "machine's caches after one untimed run; served: handed to a running `kagura serve` "
        "(the same options, warmed up) after one untimed served run, each run's audio starting "
        "1 ms later (audio the server has not analysed); served again: the untimed run's audio, "
        "its analysis kept by the server",
        "",
        "| command | mode | runs | wall s median / P99 | first frame s median / P99 | "
        "frames | frames/s over the command median / worst | CPU s median / P99 | "
        "where the time went, median s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in results["commands"].values():
        for mode in MODES:
            s = entry.get(mode)
            if not s:
                continue
            setup = ", ".join(f"{k} {v:.2f}" for k, v in s["phases_s"].items())
            lines.append(
                f"| `kagura {' '.join(_short(entry['argv']))}` | {mode} | {s['runs']} | "
                f"{_pair(s['wall_s'])} | {_pair(s['first_frame_s'])} | {s['frames'] or '–'} | "
                f"{_pair(s['fps_whole'], digits=1)} | {_pair(s['cpu_s'])} | {setup} |"
            )
    steps = [
        f"- `{command}` {mode}: " + ", ".join(f"{k} {v:.2f}" for k, v in s["steps_s"].items())
        for command, entry in results["commands"].items()
        for mode in MODES
        if (s := entry.get(mode)) and s.get("steps_s")
    ]
    servers = [
        f"- `{command}` served: `kagura {' '.join(entry['server']['argv'])}` listened "
        f"{entry['server']['listening_s']:.2f} s after its launch (its warm-up render included)"
        for command, entry in results["commands"].items()
        if entry.get("server")
    ]
    if servers:
        lines += ["", "The render server of the served runs, started once before them:", ""]
        lines += servers
    if steps:
        lines += ["", "Set-up steps, seconds from the launch (median of the runs):", ""]
        lines += steps
    imports = [
        f"- `{command}`: " + ", ".join(f"{name} {secs:.2f} s" for name, secs in entry["imports"])
        for command, entry in results["commands"].items()
        if entry.get("imports")
    ]
    if imports:
        lines += [
            "",
            "Slowest top-level imports of one more warm run (PYTHONPROFILEIMPORTTIME; summed "
            "over its processes: the CLI and its audio-analysis process run side by side):",
            "",
        ]
        lines += imports
    lines += [
        "",
        "first frame = launch → the first frame handed to the encoder (live: the first frame "
        "the simulated display shows; app: the window's first frame on screen; – = none within "
        "the run; a cuda session's first frames pass the diffusion by while it is set up beside "
        "them: its first painted frame is the set-up step 'live first painted frame ready'). "
        "CPU s = user + system time "
        "of the run and its child processes (a served run's: the client's only; the wall clock "
        "also waits for other work on a "
        "shared machine). frames/s over the command = frames / wall time, setup "
        "included. Phases, each from the previous time stamp (core/trace.py): start-up = "
        "interpreter + CLI import; checks = the request checks; setup = decode, audio analysis, "
        "models and stages built; first frame = stage set-up (model load, graph capture, "
        "encoder start) and the first frame through the chain; frames = first → last frame; "
        "finish = flushing and muxing the file; exit = the interpreter's exit.",
    ]
    return "\n".join(lines)


def _short(argv: list[str]) -> list[str]:
    """The argv as a user would type it: temp paths replaced by their file names."""
    out = []
    for a in argv:
        out.append(Path(a).name if os.sep in a else a)
    return out


def run(args: argparse.Namespace) -> int:
    from core.benchdoc import today, write_section

    try:
        results = measure(args)
    except RuntimeError as exc:  # a child failed: its command and last lines, one line
        print(" ".join(str(exc).split()), file=sys.stderr)
        return 1
    body = report(args, results, today(), _device_line(args.device))
    print(body)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    if not args.no_write:
        write_section(args.out, section_key(args), body)
        print(f"bench e2e: updated {args.out}", file=sys.stderr)
    return 0
