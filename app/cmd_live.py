"""`kagura live` — open the desktop app: a voice (or an audio file) drives the idol live.

    kagura live [--audio-file FILE] [--preset NAME] [--device NAME] [--size WxH] [--fps N]
                [--quit-after SECONDS] [--screenshot PNG]

`--audio-file` plays the file through the live path at real-time pace (as if it came from a
microphone; it is also played out loud when an output device exists, unless --no-play-out).
`--quit-after` closes the window cleanly after that many seconds; `--screenshot` saves the
window to a PNG just before closing. On exit one JSON line with the run's statistics is printed:
frames shown / dropped / repeated, the latency estimate and the UI thread's milliseconds per
displayed frame (median / P99).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WxH like 960x540, got {text!r}") from None
    if w <= 0 or h <= 0 or w % 2 or h % 2:
        raise argparse.ArgumentTypeError(f"size {text} must be positive and even")
    return w, h


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("live", help="open the live desktop app (microphone or audio file)")
    p.add_argument("--audio-file", type=Path, help="play this file through the live path")
    p.add_argument("--preset", help="style preset (default: the last one used)")
    p.add_argument("--device", help="microphone: name substring or index (default: last used)")
    p.add_argument("--size", type=_size, default=(960, 540), help="render size WxH (960x540)")
    p.add_argument("--fps", type=int, default=30, help="frames per second (30)")
    p.add_argument("--quit-after", type=float, metavar="SECONDS", help="close after SECONDS")
    p.add_argument("--screenshot", type=Path, metavar="PNG", help="save the window before closing")
    p.add_argument(
        "--no-play-out", action="store_true", help="do not play --audio-file through the speakers"
    )
    p.set_defaults(func=run)
    return p


UI_SWITCH_INTERVAL_S = 0.0005


def run(args: argparse.Namespace) -> int:
    if args.audio_file is not None and not args.audio_file.is_file():
        print(f"kagura live: {args.audio_file}: no such file", file=sys.stderr)
        return 2
    if args.fps <= 0 or args.fps > 240:
        print(f"kagura live: --fps must be 1..240, got {args.fps}", file=sys.stderr)
        return 2
    if args.preset:
        from presets.loader import PresetError, load_preset

        try:
            load_preset(args.preset)
        except PresetError as exc:
            print(f"kagura live: {exc}", file=sys.stderr)
            return 2
    try:
        from PySide6.QtCore import QTimer
        from PySide6.QtWidgets import QApplication
    except ImportError as exc:
        print(f"kagura live: the desktop app needs PySide6 ({exc})", file=sys.stderr)
        return 1
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from app.ui.main_window import LiveOptions, MainWindow

    # The render and stylize threads hold the GIL in stretches (Skia's bindings keep it while
    # drawing); with CPython's default 5 ms switch interval the UI thread's display tick then
    # waits up to 5 ms for it. A shorter interval hands it over sooner.
    sys.setswitchinterval(UI_SWITCH_INTERVAL_S)

    app = QApplication.instance() or QApplication(["kagura"])
    app.setApplicationName("Kagura")
    opts = LiveOptions(
        audio_file=str(args.audio_file) if args.audio_file else None,
        preset=args.preset,
        device=args.device,
        size=args.size,
        fps=args.fps,
        play_out=False if args.no_play_out else None,
    )
    win = MainWindow(opts)
    win.show()
    result: dict = {}

    def finish() -> None:
        if args.screenshot is not None:
            args.screenshot.parent.mkdir(parents=True, exist_ok=True)
            ok = win.grab().save(str(args.screenshot))
            if not ok:
                print(f"kagura live: cannot write {args.screenshot}", file=sys.stderr)
        win.close()

    if args.quit_after is not None:
        QTimer.singleShot(int(args.quit_after * 1000), finish)
    app.exec()
    win.shutdown()
    result = win.run_stats()
    print(json.dumps(result), flush=True)
    return 0
