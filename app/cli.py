"""`kagura` — the command line.

    kagura render AUDIO -o OUT [--preset NAME] [--size WxH] [--fps N] [--start S] [--seconds N]
                  [--transparent] [--seed N] [--quiet]
                  [--device cpu|cuda] [--diffusion PATH|kagura | --diffusion-random sd-turbo|tiny
                  | --no-diffusion] [--diffusion-size WxH] [--upscale 1|2|3|4] [--[no-]temporal]
                  [--[no-]cuda-graphs] [--encoders N|auto] [--render-workers M|auto]
                  [--x264-preset PRESET]
                  [--config FILE]   (settings: render.toml in the config folder, app/render_settings.py)
    kagura demo [-o OUT] [--preset NAME] [...]   render the built-in demo song (default out/demo.mp4)
    kagura still AUDIO --at SECONDS -o PNG [--preset NAME] [--size WxH] [--transparent] [--config FILE]
    kagura presets                                list the style presets
    kagura avatar check FILE [--sheet OUT.png]    what a layered avatar (PSD, PNG folder) has
    kagura avatar export-builtin OUT.psd          the built-in idol as a layered PSD template
                                                  (--avatar FILE on render/demo/still/live)
    kagura live [--audio-file FILE] [--preset NAME] [--quit-after S] [--screenshot PNG]
                [--device cuda] [--diffusion PATH | --diffusion-random KIND] [--upscale N]
                [--[no-]temporal] [--budget-ms MS]
                                                  the desktop app (live stage, OBS routes);
                                                  GPU stages + quality ladder when asked
    kagura lipsync AUDIO --json OUT [--live]      mouth openness and vowel weights as JSON
    kagura calibrate [--mic NAME]                 record your vowels into a lip-sync profile
    kagura devices                                list audio input devices
    kagura bench render [...]                     offline render speed per preset → docs/BENCHMARKS.md
    kagura bench stylize [--device cuda] [...]    the preset post-process alone, CPU or GPU
    kagura bench lipsync [...]                    live lip-sync cost, lag, accuracy, endurance
    kagura bench live [...]                       the desktop app on the demo song: fps, UI ms
    kagura bench live --headless [--device cuda] [--diffusion-random KIND] [--upscale N] [...]
                                                  no Qt/sound device: audio-to-photon latency,
                                                  per-stage GPU times, drops, quality ladder
    kagura bench pipeline [--device cuda] [...]   the GPU chain: per-stage CUDA-event times
    kagura bench offline [--device cuda] [...]    finished MP4 frames/s, N encoders against 1
    kagura bench model [--device cuda] [...]      Kagura's own model: ms/frame, vs its painters
    kagura bench soak --minutes N [--device cuda] the live session for N minutes: drops, latency
                                                  drift, memory and open files over time
    kagura train [--device cuda] [--steps N] [--minutes M] [...]
                                                  train Kagura's own diffusion model (one GPU)
    kagura farm JOBS.toml [--ray local|auto|ADDRESS] [--gpus-per-job N] [--report OUT.json]
                                                  many renders (and long ones cut by time) as
                                                  Ray tasks on GPUs and hosts
    kagura bench farm [...]                       farm throughput: N slots vs 1, split vs not

`-v` (before or after the command; `-vv` for debug) logs what happens to stderr, e.g. the
quality ladder's rung changes in `kagura live -v` (app/log_setup.py).

Bad input (missing or non-audio file, unknown or malformed preset, bad size, …) and OS errors
(disk full, read-only, permission denied, …) end with exit status 2 and one line on stderr that
names the problem. Outputs follow `pipeline.sinks.output`: never an input, an existing file only
with --overwrite/-y, one job per output; a stopped render keeps its frames as
NAME.interrupted.EXT.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from app.errors import EXIT_USAGE, UsageError

__all__ = ["EXIT_USAGE", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other bad input
        raise UsageError(message)


def _add_verbose(p: argparse.ArgumentParser, default) -> None:
    """-v/--verbose, on `kagura` and on every command, so `kagura -v live` and `kagura live -v`
    both work (the commands' default is SUPPRESS: they do not reset what came before them)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="log what happens (the quality ladder's changes, ...): -v info, -vv debug",
    )


def _add_look_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset", default="studio", help="style preset name or .toml path (see `kagura presets`)"
    )
    p.add_argument("--size", default="1280x720", help="output size WIDTHxHEIGHT (default 1280x720)")
    p.add_argument(
        "--transparent", action="store_true", help="transparent background (WebM with alpha)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed for blinks and idle motion (default 0)"
    )
    p.add_argument(
        "-y", "--overwrite", action="store_true", help="replace the output file if it exists"
    )
    p.add_argument(
        "--avatar",
        type=Path,
        default=None,
        metavar="FILE",
        help="your own avatar: a layered .psd, a folder of PNGs or an avatar.toml "
        "(docs/AVATARS.md; default: the built-in idol)",
    )


# `kagura demo`'s encoder: on the demo's 720p frames superfast costs about half of veryfast's
# CPU per frame for a higher PSNR at about twice the bit rate (docs/BENCHMARKS.md)
DEMO_X264_PRESET = "superfast"


def _add_render_options(p: argparse.ArgumentParser, x264_preset: str = "veryfast") -> None:
    from app.config import add_lipsync_model_option
    from app.gpu_options import add_gpu_options

    _add_look_options(p)
    p.add_argument("--fps", type=int, default=30, help="frames per second (default 30)")
    p.add_argument(
        "--start", type=float, default=0.0, help="start at this time in the audio, seconds"
    )
    p.add_argument("--seconds", type=float, default=None, help="render only this many seconds")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_lipsync_model_option(p)
    # --size: None here means "not given" (1280x720, or the diffusion size × --upscale)
    p.set_defaults(size=None)
    add_gpu_options(p)
    from app.config import MAX_WORKERS, X264_PRESETS

    g = p.add_argument_group("parallel offline work (auto: one of each below 8 cores)")
    g.add_argument(
        "--encoders",
        default="auto",
        metavar="N|auto",
        help=f"libx264 processes encoding chunks of the MP4 at once, joined losslessly "
        f"(1..{MAX_WORKERS}; default auto)",
    )
    g.add_argument(
        "--render-workers",
        default="auto",
        metavar="M|auto",
        help=f"processes rendering the idol ahead (1..{MAX_WORKERS}; default auto)",
    )
    g.add_argument(
        "--x264-preset",
        choices=X264_PRESETS,
        default=x264_preset,
        help=f"libx264 speed/size trade-off for MP4 (default {x264_preset})",
    )


# the options a render settings file may set (app/render_settings.py): not given is None, so
# that the file's value stands unless the flag is on the command line (app/config.py layers)
_FROM_SETTINGS = (
    "preset",
    "fps",
    "seed",
    "transparent",
    "quiet",
    "device",
    "upscale",
    "encoders",
    "render_workers",
    "x264_preset",
    "lipsync_model",
)


def _add_settings_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="render settings (TOML) to use instead of render.toml in the config folder; "
        "flags win over it (app/render_settings.py lists the keys)",
    )
    p.set_defaults(**dict.fromkeys(_FROM_SETTINGS))


class _LazyCommands(argparse._SubParsersAction):
    """Subcommands whose options are added only when that subcommand is the one being parsed.

    Adding a command's options imports the module that defines them (and, through it, numpy,
    torch, …); `kagura --help` and every command should pay only for what it runs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._fills: dict[str, tuple[argparse.ArgumentParser, Callable]] = {}

    def add_lazy(self, name: str, help: str, fill: Callable) -> None:
        p = self.add_parser(name, help=help)
        _add_verbose(p, argparse.SUPPRESS)
        self._fills[name] = (p, fill)

    def fill_all(self) -> None:
        while self._fills:
            _, (parser, fill) = self._fills.popitem()
            fill(parser)
            for action in parser._actions:  # a command with subcommands of its own (bench)
                if isinstance(action, _LazyCommands):
                    action.fill_all()

    def __call__(self, parser, namespace, values, option_string=None):
        if values:
            entry = self._fills.pop(values[0], None)
            if entry is not None:
                entry[1](entry[0])
        super().__call__(parser, namespace, values, option_string)


class _Into:
    """Hands a module's `add_parser(subparsers)` the parser already made for its command."""

    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        return self.parser


def _module_fill(module: str, *extra) -> Callable:
    def fill(p: argparse.ArgumentParser) -> None:
        import importlib

        importlib.import_module(module).add_parser(_Into(p), *extra)

    return fill


def _add_server_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-server",
        action="store_true",
        help="render in this process even when `kagura serve` is running",
    )


def _fill_render(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "audio", type=Path, help="audio file (WAV, MP3, FLAC, OGG, M4A, … anything FFmpeg reads)"
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="output .mp4 (H.264+AAC) or .webm (VP9+alpha, Opus)",
    )
    _add_render_options(p)
    _add_settings_option(p)
    _add_server_option(p)


def render_parser(prog: str = "kagura render") -> argparse.ArgumentParser:
    """`kagura render`'s own options on a parser of their own, bad input as one-line
    UsageErrors; with `render_request`, what farm/jobs.py checks each job with."""
    p = _Parser(prog=prog)
    _fill_render(p)
    return p


def _fill_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=Path, default=None, help=f"default {DEMO_OUT}")
    _add_render_options(p, x264_preset=DEMO_X264_PRESET)
    _add_settings_option(p)
    _add_server_option(p)


def _fill_still(p: argparse.ArgumentParser) -> None:
    p.add_argument("audio", type=Path)
    p.add_argument("--at", type=float, required=True, help="time in the audio, seconds")
    p.add_argument("-o", "--output", type=Path, required=True, help="output .png")
    _add_look_options(p)
    from app.config import add_lipsync_model_option

    add_lipsync_model_option(p)
    _add_settings_option(p)  # the look's keys of render.toml (app/still.py STILL_KEYS)
    p.set_defaults(size=None)  # not given: the file's size, else 1280x720


def _fill_bench_render(b: argparse.ArgumentParser) -> None:
    b.add_argument("--size", default="1280x720")
    b.add_argument("--fps", type=int, default=30)
    b.add_argument(
        "--seconds", type=float, default=10.0, help="seconds of the demo song per preset"
    )
    b.add_argument(
        "--presets", nargs="*", default=None, help="preset names (default: all built-in)"
    )
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    b.add_argument(
        "--avatar",
        type=Path,
        default=None,
        metavar="FILE",
        help="also measure this avatar's render frames/s against the built-in idol's",
    )


def _fill_bench_stylize(b: argparse.ArgumentParser) -> None:
    b.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    b.add_argument("--size", default="1280x720")
    b.add_argument("--frames", type=int, default=32, help="rendered idol frames to stylize")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)"
    )
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")


# (name, help in the listing, fill): the listing's help lives here so that listing the
# commands imports none of their modules
_BENCHES = (
    ("render", "offline render speed per preset", _fill_bench_render),
    ("lipsync", "live lip-sync cost, lag, accuracy, endurance", _module_fill("app.bench_lipsync")),
    ("live", "the desktop app on the demo song: fps, drops, UI ms", _module_fill("app.bench_live")),
    (
        "pipeline",
        "the live GPU chain: per-stage CUDA-event times, eager vs CUDA graphs",
        _module_fill("app.bench_pipeline"),
    ),
    (
        "model",
        "Kagura's own diffusion model: ms/frame (CUDA graphs) or frames/s (CPU)",
        _module_fill("app.bench_model"),
    ),
    (
        "offline",
        "finished MP4 frames/s of an offline render, N encoders against 1",
        _module_fill("app.bench_offline", _add_render_options, _add_settings_option),
    ),
    ("stylize", "the preset post-process alone, CPU or CUDA", _fill_bench_stylize),
    (
        "soak",
        "the live session on the demo song looped: drops, latency drift, memory, files",
        _module_fill("app.bench_soak"),
    ),
    (
        "e2e",
        "the real commands from the shell: wall time, first frame, setup (cold and warm)",
        _module_fill("app.bench_e2e"),
    ),
    (
        "sharpness",
        "Laplacian RMS of renders with and without Kagura's model, per preset",
        _module_fill("app.bench_sharpness"),
    ),
    (
        "farm",
        "kagura farm on Ray: N jobs at once vs one, split vs unsplit",
        _module_fill("app.bench_farm"),
    ),
)


def _fill_bench(p: argparse.ArgumentParser) -> None:
    bench = p.add_subparsers(
        dest="bench", required=True, parser_class=_Parser, action=_LazyCommands
    )
    for name, text, fill in _BENCHES:
        bench.add_lazy(name, text, fill)


_COMMANDS = (
    ("render", "render a music video from an audio file", _fill_render),
    ("demo", "render the built-in demo song to out/demo.mp4", _fill_demo),
    ("still", "render one frame of an audio file to a PNG", _fill_still),
    ("presets", "list the style presets", lambda p: None),
    (
        "live",
        "open the live desktop app (microphone or audio file)",
        _module_fill("app.cmd_live"),
    ),
    (
        "lipsync",
        "mouth openness and vowels of an audio file → JSON",
        _module_fill("app.cmd_lipsync"),
    ),
    ("calibrate", "record your vowels for live lip-sync", _module_fill("app.cmd_calibrate")),
    (
        "devices",
        "list input devices (microphones) for live capture",
        _module_fill("app.cmd_devices"),
    ),
    (
        "train",
        "train Kagura's own diffusion model on its renders (one GPU)",
        _module_fill("app.cmd_train"),
    ),
    (
        "avatar",
        "check a layered avatar or export the idol as a PSD",
        _module_fill("app.cmd_avatar"),
    ),
    ("bench", "benchmarks; results go to docs/BENCHMARKS.md", _fill_bench),
    ("farm", "render the jobs of a jobs file as Ray tasks", _module_fill("app.cmd_farm")),
    (
        "serve",
        "keep the models warm and render the jobs of `kagura render` and `demo`",
        _module_fill("app.cmd_serve"),
    ),
)


def build_parser(full: bool = False) -> argparse.ArgumentParser:
    """The `kagura` parser. Each command's options are added when that command is parsed
    (`full=True`: all of them now, e.g. to inspect the whole parser)."""
    parser = _Parser(
        prog="kagura", description="Turn a voice into a singing, stylized virtual idol."
    )
    _add_verbose(parser, 0)
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, action=_LazyCommands
    )
    for name, text, fill in _COMMANDS:
        sub.add_lazy(name, text, fill)
    if full:
        sub.fill_all()
    return parser


def render_request(args: argparse.Namespace, audio: Path):
    """The RenderRequest `kagura render` makes of its parsed options (not yet checked:
    app.render_job.check_output_safety / check_request do that)."""
    from app.config import render_config

    return render_config(args, audio=audio).request()


def _run_render(cfg, server: bool = True) -> int:
    """Render `cfg` (an app.config.RenderConfig): on the running `kagura serve` when there is
    one that takes it (app/serve_link.py), else here."""
    notices: list[str] = []  # why a server did not take it: said once the checks pass
    if server:
        from app.serve_link import hand_over

        served = hand_over(cfg, notices)
        if served is not None:
            return served
    from pipeline.cpu_memory import pause_gc_for_setup, resume_gc

    if cfg.gpu.device == "cpu":  # the GPU path's setup stays as it was
        pause_gc_for_setup()  # on again at the first frame (Graph.run), or here after an error
    try:
        return _render(cfg, notices)
    finally:
        resume_gc()


def _render(cfg, notices: list[str]) -> int:
    from app import render_job
    from app.early_analysis import AnalysisProcess, worth_a_process
    from core.trace import mark
    from pipeline.progress import RenderProgress

    def start_analysis(req):
        return AnalysisProcess(req.lipsync_model) if worth_a_process() else None

    # the audio analysis runs on another core while torch, the models and the stages load
    # here; started once the request is known to be possible (a refused one starts no
    # process). On cuda the audio is decoded and handed to it before the GPU checks, which
    # import torch: it is analysed meanwhile
    analysis = early = None
    try:
        req = cfg.request()
        render_job.check_output_safety(req)  # never an input, a folder, or (without -y) a file
        gpu = req.device != "cpu"
        render_job.check_request(req, gpu=not gpu)
        analysis = start_analysis(req)
        if gpu:
            if analysis is not None:
                early = render_job.TrackInProgress(req, analysis.analyze)
            render_job.check_gpu_options(req)
        mark("checked")
        graph, ctx, total = render_job.build_graph(
            req, analyze=analysis.analyze if analysis is not None else None, early=early
        )
        for line in notices:  # the request is whole (its preset, its audio): it renders here
            print(line, file=sys.stderr)
        mark("graph built")
        # the stages set up while the analysis finishes: the graph's source waits for it
        # (render_job.PendingTrack), so the analysis is kept until the graph has run
        with RenderProgress(total, quiet=cfg.quiet, label=req.output.name) as progress:
            failed = render_job.run_graph(graph, ctx, progress.on_frame)
            if failed is not None:  # a render or encoder process died: one line, exit 1
                progress.close(ok=False)
                print(failed, file=sys.stderr)
                return 1
    finally:
        if analysis is not None:
            analysis.close()
    mark("finished")
    print(f"kagura: wrote {req.output}", file=sys.stderr)
    return 0


def _layered_render_config(args: argparse.Namespace, **kwargs):
    """render_config over the render settings file (app.render_settings.layered)."""
    from app.config import render_config
    from app.render_settings import layered

    cfg, settings = layered(args, lambda a, **kw: render_config(a, **kw, **kwargs))
    if settings.values:  # sizes that do not fit together may come from the file: say so
        try:
            cfg.gpu.sizes(cfg.size)
        except UsageError as exc:
            raise UsageError(f"{exc} (with the {settings.name})") from None
    return cfg


def cmd_render(args: argparse.Namespace) -> int:
    return _run_render(_layered_render_config(args), server=not args.no_server)


DEMO_OUT = Path("out/demo.mp4")


def demo_config(args: argparse.Namespace):
    """`kagura demo`'s RenderConfig: the demo song, out/demo.mp4 unless -o, and the demo's own
    x264 preset as a default under the settings file."""
    from audio.demo_song import demo_song_path

    return _layered_render_config(
        args,
        audio=demo_song_path(),
        output=args.output or DEMO_OUT,
        base={"x264_preset": DEMO_X264_PRESET},
    )


def cmd_demo(args: argparse.Namespace) -> int:
    # Kagura's own default file: a second run has nothing to do
    if args.output is None and DEMO_OUT.exists() and not args.overwrite:
        print(f"kagura: {DEMO_OUT} is already there (pass -y to render it again)", file=sys.stderr)
        return 0
    return _run_render(demo_config(args), server=not args.no_server)


def cmd_still(args: argparse.Namespace) -> int:
    from app.render_settings import layered
    from app.still import render_still, still_config

    cfg, _ = layered(args, still_config)
    render_still(cfg)
    print(f"kagura: wrote {args.output}", file=sys.stderr)
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from presets.loader import list_presets

    def short(text: str, n: int) -> str:  # a preset file's title is not printed by the MB
        text = " ".join(str(text).split())
        return text if len(text) <= n else text[: n - 1] + "…"

    broken: list = []
    for entry in list_presets(broken):
        print(
            f"{short(entry.name, 40):<14} {short(entry.title, 40):<14} {short(entry.description, 120)}"
        )
    for err in broken:  # listed apart, one line each: a render with one of these is refused
        print(f"kagura presets: broken, not usable: {short(err, 400)}", file=sys.stderr)
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    from app import cmd_live

    return cmd_live.run(args)


def cmd_lipsync(args: argparse.Namespace) -> int:
    from app import cmd_lipsync

    return cmd_lipsync.run(args)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from app import cmd_calibrate

    return cmd_calibrate.run(args)


def cmd_train(args: argparse.Namespace) -> int:
    from app import cmd_train

    return cmd_train.run(args)


def cmd_avatar(args: argparse.Namespace) -> int:
    from app import cmd_avatar

    return cmd_avatar.run(args)


def cmd_farm(args: argparse.Namespace) -> int:
    from app import cmd_farm

    return cmd_farm.run(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from app import cmd_serve

    return cmd_serve.run(args)


def cmd_devices(args: argparse.Namespace) -> int:
    from app import cmd_devices

    return cmd_devices.run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench == "stylize":
        from app.bench_stylize import bench_stylize

        return bench_stylize(args)
    if args.bench == "render":
        if getattr(args, "avatar", None) is not None:
            from app.bench_avatar import bench_avatar

            return bench_avatar(args)
        from app.bench import bench_render

        return bench_render(args)
    import importlib

    # every other bench is app/bench_<name>.py with add_parser() and run()
    return importlib.import_module(f"app.bench_{args.bench}").run(args)


COMMANDS = {
    "render": cmd_render,
    "demo": cmd_demo,
    "still": cmd_still,
    "presets": cmd_presets,
    "live": cmd_live,
    "lipsync": cmd_lipsync,
    "calibrate": cmd_calibrate,
    "devices": cmd_devices,
    "train": cmd_train,
    "bench": cmd_bench,
    "avatar": cmd_avatar,
    "farm": cmd_farm,
    "serve": cmd_serve,
}


def main(argv: list[str] | None = None) -> int:
    from app.errors import raise_on_sigterm, report
    from core.trace import mark

    mark("main")  # `kagura bench e2e`: the interpreter and this module are up
    raise_on_sigterm()
    try:
        args = build_parser().parse_args(argv)
        mark("parsed")
        from app.log_setup import configure

        configure(args.verbose)  # the one place logging is set up
        # after parsing: --help need not wait for libc's lookup (find_library runs ldconfig)
        from pipeline.cpu_memory import keep_freed_memory

        keep_freed_memory()  # big per-frame tensors: reuse heap blocks instead of page-faulting
        return COMMANDS[args.command](args)
    except SystemExit:
        raise  # --help: done
    except BaseException as exc:  # the one error path: one line, exit 2 (input/OS) or 1 (bug)
        return report(exc)


def run() -> None:
    """The `kagura` script (and `python -m app.cli`): `main()`, then an exit without the
    interpreter's teardown of torch, av and skia's modules (half a second of CPU on a small
    machine, docs/BENCHMARKS.md) when nothing is left to wait for: no other thread, no child
    process, stdout and stderr flushed. Otherwise, the ordinary exit."""
    code = main()
    import os
    import threading

    mp = sys.modules.get("multiprocessing")
    if threading.active_count() == 1 and not (mp is not None and mp.active_children()):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: let the ordinary exit report it
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
