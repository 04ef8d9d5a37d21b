"""`kagura live` — open the desktop app: a voice (or an audio file) drives the idol live.

    kagura live [--audio-file FILE] [--preset NAME] [--mic NAME] [--size WxH] [--fps N]
                [--quit-after SECONDS] [--screenshot PNG]
                [--device cpu|cuda] [--diffusion PATH | --diffusion-random sd-turbo|tiny]
                [--diffusion-size WxH] [--upscale 1|2|3|4] [--[no-]temporal]
                [--[no-]cuda-graphs] [--budget-ms MS] [--no-ladder] [--stream-batch]

`--audio-file` plays the file through the live path at real-time pace (as if it came from a
microphone; it is also played out loud when an output device exists, unless --no-play-out).
`--quit-after` closes the window cleanly that many seconds after the first frame is on screen
(the session starts after the window: a scripted run always has frames to report), or that
many seconds plus a minute after the window opened if none ever comes; `--screenshot` saves the
window to a PNG just before closing. On exit one JSON line with the run's statistics is printed:
frames shown / dropped / repeated, the latency estimate and the UI thread's milliseconds per
displayed frame (median / P99) — and, with GPU stages, the quality ladder's state.

GPU stages (app/live_gpu.py, pipeline/live_gpu.py): any of `--device cuda`, `--diffusion`,
`--diffusion-random`, `--upscale N`, `--temporal` puts idol → stylize → diffusion → temporal →
upscale into the live session, with the quality ladder holding the frame rate (`--budget-ms`,
default 0.8 × the frame period). Without them the session is the CPU chain, as before.
`--size` is then the OUTPUT size (render size × --upscale; default: 640x360 painted on cuda,
× --upscale); it follows the one size rule of every command (app.config.parse_size).
`--device` is the compute device; the microphone is `--mic` (`--device NAME` other than
cpu/cuda still picks one, with a one-line deprecation notice: the older spelling).

The options are layered over the app's settings (app/config.py `live_config`): a flag wins,
else the value remembered in live_app.json (preset, microphone), else the default; a
remembered preset that no longer exists falls back to studio with a notice in the window's
banner; the preset it starts with (flag, remembered or default) is refused if broken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("live", help="open the live desktop app (microphone or audio file)")
    p.add_argument("--audio-file", type=Path, help="play this file through the live path")
    p.add_argument("--preset", help="style preset (default: the last one used)")
    p.add_argument("--mic", help="microphone: name substring or index (default: last used)")
    p.add_argument(
        "--device",
        metavar="cpu|cuda",
        help="where the stages run (cpu); the microphone is --mic (--device NAME still picks "
        "one, with a deprecation notice)",
    )
    p.add_argument(
        "--size",
        default=None,
        help="frame size WxH (960x540; with GPU stages the output size = render × --upscale)",
    )
    p.add_argument("--fps", type=int, default=30, help="frames per second (30)")
    p.add_argument(
        "--quit-after",
        type=float,
        metavar="SECONDS",
        help="close SECONDS after the first frame is shown",
    )
    p.add_argument("--screenshot", type=Path, metavar="PNG", help="save the window before closing")
    p.add_argument(
        "--no-play-out", action="store_true", help="do not play --audio-file through the speakers"
    )
    p.add_argument(
        "--stage-window",
        action="store_true",
        help="also open the see-through stage window (OBS Window Capture with alpha)",
    )
    p.add_argument(
        "--avatar",
        type=Path,
        default=None,
        metavar="FILE",
        help="your own avatar: a layered .psd, a folder of PNGs or an avatar.toml",
    )
    from app.live_gpu import add_gpu_options

    add_gpu_options(p, device=False)
    p.set_defaults(func=run)
    return p


UI_SWITCH_INTERVAL_S = 0.0005
SIGNAL_POLL_MS = 200  # how often Qt's loop hands Python a moment to run its signal handlers


def audio_file_problem(path: Path) -> str | None:
    """Why `path` cannot be played (one line naming it), or None: checked before the window
    opens, so a bad file never ends in a window that plays nothing and exits 0."""
    from audio.decode import AudioError, decode_audio

    try:
        decode_audio(path, seconds=0.5)
    except AudioError as exc:
        return " ".join(str(exc).split())
    return None


@contextlib.contextmanager
def stop_on_signals(stop):
    """Ctrl+C (SIGINT) and SIGTERM call `stop()` on the UI thread — the window closes, the
    session stops and a recording is finalized — instead of a KeyboardInterrupt traceback
    inside Qt's event loop (which would not even stop it)."""
    import signal

    from PySide6.QtCore import QTimer

    fired: list[int] = []

    def handler(signum, frame):
        if fired:  # a second Ctrl+C: the user means it (stop without the clean close)
            raise KeyboardInterrupt
        fired.append(signum)
        print(f"kagura live: {signal.Signals(signum).name}: stopping", file=sys.stderr)
        stop()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    # Python runs signal handlers only between its own bytecodes; a timer gives it the chance
    poll = QTimer()
    poll.timeout.connect(lambda: None)
    poll.start(SIGNAL_POLL_MS)
    try:
        yield fired
    finally:
        poll.stop()
        for sig, h in old.items():
            signal.signal(sig, h)


def run(args: argparse.Namespace) -> int:
    if args.audio_file is not None:
        problem = audio_file_problem(args.audio_file)
        if problem:
            print(f"kagura live: {problem}", file=sys.stderr)
            return 2
    if args.screenshot is not None:
        from pipeline.sinks.output import OutputError, check_output

        try:  # a screenshot never replaces the audio file it shows
            check_output(args.screenshot, [args.audio_file], overwrite=True, option="--screenshot")
        except OutputError as exc:
            print(f"kagura live: {exc}", file=sys.stderr)
            return 2
    if args.fps <= 0 or args.fps > 240:
        print(f"kagura live: --fps must be 1..240, got {args.fps}", file=sys.stderr)
        return 2
    from app.config import LIVE_SIZE, live_config
    from app.errors import UsageError
    from app.live_settings import Settings
    from presets.loader import PresetError, load_preset

    # defaults ← live_app.json ← the flags (app/config.py); the window gets the same Settings,
    # so what was healed in the file, or a remembered preset that is gone, is in its banner
    settings = Settings()
    try:
        cfg = live_config(args, settings, notices=settings.notices)
    except UsageError as exc:
        print(f"kagura live: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    try:  # the preset it starts with: a broken one is refused, as `render` refuses it
        load_preset(cfg.preset)
    except PresetError as exc:
        print(f"kagura live: {exc}", file=sys.stderr)
        return 2
    if cfg.avatar is not None:
        from render.avatar_source import avatar_spec, set_default_avatar

        try:  # the live sessions' render stages are built without an avatar: they take this
            set_default_avatar(avatar_spec(cfg.avatar))
        except UsageError as exc:
            print(f"kagura live: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    from app.live_gpu import build_live_gpu, launch_first_render

    first_render = launch_first_render(cfg.gpu, cfg.size, cfg.preset)  # before torch's import
    try:
        gpu = build_live_gpu(cfg.gpu, cfg.size)
    except (UsageError, ValueError) as exc:
        if first_render is not None:
            first_render.close()
        print(f"kagura live: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    size = cfg.size or LIVE_SIZE
    if gpu is not None:
        size = gpu.sizes(size)[1]
    try:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
    except ImportError as exc:
        print(f"kagura live: the desktop app needs PySide6 ({exc})", file=sys.stderr)
        return 1
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from app.ui.main_window import LiveOptions, MainWindow
    from core.trace import step

    step("Qt and the window's module imported")

    # The render and stylize threads hold the GIL in stretches (Skia's bindings keep it while
    # drawing); with CPython's default 5 ms switch interval the UI thread's display tick then
    # waits up to 5 ms for it. A shorter interval hands it over sooner.
    sys.setswitchinterval(UI_SWITCH_INTERVAL_S)

    app = QApplication.instance() or QApplication(["kagura"])
    app.setApplicationName("Kagura")
    opts = LiveOptions(
        audio_file=str(cfg.audio_file) if cfg.audio_file else None,
        preset=cfg.preset,
        device=cfg.mic,
        size=size,
        fps=cfg.fps,
        play_out=cfg.play_out,
        avatar=str(cfg.avatar) if cfg.avatar is not None else None,
        gpu=gpu,
        first_render=first_render,
    )
    win = None

    def finish() -> None:
        if win is None:
            return
        if cfg.screenshot is not None:
            cfg.screenshot.parent.mkdir(parents=True, exist_ok=True)
            ok = win.grab().save(str(cfg.screenshot))
            if not ok:
                print(f"kagura live: cannot write {cfg.screenshot}", file=sys.stderr)
        win.close()
        # every window (the see-through stage window, dialogs), then the event loop itself
        app.closeAllWindows()
        app.quit()

    # from here on Ctrl+C / SIGTERM close the app cleanly (queued: run once the loop runs)
    with stop_on_signals(lambda: QTimer.singleShot(0, finish)):
        win = MainWindow(opts, settings)
        win.show()
        step("window shown")
        if cfg.stage_window:
            win.open_stage_window()
        if cfg.quit_after is not None:
            _quit_after_first_frame(win, cfg.quit_after, finish)
        app.exec()
    win.shutdown()
    result = win.run_stats()
    if gpu is not None:  # the session's last statistics (taken by shutdown before stopping)
        result["quality"] = (getattr(win, "_last_session_stats", None) or {}).get("quality")
    print(json.dumps(result), flush=True)
    return 0


def _quit_after_first_frame(win, seconds: float, finish) -> None:
    """Call `finish` `seconds` after the window first shows a frame (polled every 50 ms), or
    `seconds` + 60 s after now if it never does."""
    from PySide6.QtCore import QTimer

    poll = QTimer(win)
    fired = {"done": False}

    def once() -> None:
        if not fired["done"]:
            fired["done"] = True
            poll.stop()
            finish()

    def check() -> None:
        if win.run_stats()["frames_shown"]:
            poll.stop()
            QTimer.singleShot(int(seconds * 1000), once)

    poll.timeout.connect(check)
    poll.start(50)
    QTimer.singleShot(int((seconds + 60.0) * 1000), once)
