"""Self-check and measurement of the display paths (needs an X display: real or Xvfb).

    python -m app.present.check [--frames N] [--size 1280x720] [--paths vulkan,qt,qtgl]

For each path: present N frames of a changing test pattern, measure the CPU time each present
costs on the calling (UI) thread (median / P99), and check the pixels that reached the X server
(QScreen.grabWindow) - and, for Vulkan, the swapchain image read back with
vkCmdCopyImageToBuffer. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from core.stats import summary


def pattern(w: int, h: int, k: int) -> np.ndarray:
    """Premultiplied RGBA test frame: four opaque quadrants whose colours depend on `k`."""
    img = np.empty((h, w, 4), np.uint8)
    img[..., 3] = 255
    c = [
        (200, (k * 7) % 256, 30),
        (20, 220, (k * 13) % 256),
        ((k * 29) % 256, 40, 180),
        (250, 250, 250),
    ]
    for q, (r, g, b) in enumerate(c):
        ys = slice(0, h // 2) if q < 2 else slice(h // 2, h)
        xs = slice(0, w // 2) if q % 2 == 0 else slice(w // 2, w)
        img[ys, xs, 0], img[ys, xs, 1], img[ys, xs, 2] = r, g, b
    return img


def _qimage_rgba(qimg) -> np.ndarray:
    from PySide6.QtGui import QImage

    q = qimg.convertToFormat(QImage.Format.Format_RGBA8888)
    arr = np.frombuffer(q.constBits(), np.uint8).reshape(q.height(), q.bytesPerLine() // 4, 4)
    return arr[:, : q.width()].copy()


def _probe_points(w: int, h: int):
    return [(h // 4, w // 4), (h // 4, 3 * w // 4), (3 * h // 4, w // 4), (3 * h // 4, 3 * w // 4)]


def _pixels_match(got: np.ndarray, want: np.ndarray, tol: int = 2) -> bool:
    if got.shape[:2] != want.shape[:2]:
        return False
    pts = _probe_points(want.shape[1], want.shape[0])
    return all(np.abs(got[y, x, :3].astype(int) - want[y, x, :3]).max() <= tol for y, x in pts)


def _stats_ms(ns: list[int]) -> dict:
    s = summary(np.array(ns, dtype=np.float64) / 1e6)
    return {"median_ms": s["median"], "p99_ms": s["p99"], "n": s["n"]}


def _pump(app, seconds: float = 0.05) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.002)


def check_vulkan(app, w: int, h: int, frames: int) -> dict:
    from PySide6.QtGui import QWindow

    from app.present.vulkan_presenter import VulkanPresenter

    win = QWindow()
    win.resize(w, h)
    win.show()
    _pump(app, 0.2)
    out: dict = {}
    try:
        p = VulkanPresenter.for_qwindow(win, (w, h), readback=True)
    except Exception as exc:
        win.destroy()
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    try:
        out.update(name=p.name, timing=p.timing, transparent=p.transparent)
        cost, wall0 = [], time.perf_counter()
        for k in range(frames):
            img = pattern(w, h, k)
            t0 = time.perf_counter_ns()
            p.present(img)
            cost.append(time.perf_counter_ns() - t0)
            app.processEvents()
        wall = time.perf_counter() - wall0
        out["present_cpu"] = _stats_ms(cost[2:])  # the first presents include lazy driver setup
        out["present_rate_hz"] = round(frames / wall, 1)  # FIFO pacing shows as ~refresh rate
        last = pattern(w, h, frames - 1)
        out["readback_match"] = bool(np.array_equal(p.read_last(), last))
        _pump(app, 0.3)
        grab = _qimage_rgba(win.screen().grabWindow(win.winId()).toImage())
        out["screen_match"] = _pixels_match(grab, last)
        out["ok"] = out["readback_match"] and out["screen_match"]
    finally:
        p.close()
        win.destroy()
    return out


def check_qt(app, w: int, h: int, frames: int, opengl: bool) -> dict:
    from app.present.qt_presenter import QtPresenter

    try:
        p = QtPresenter(opengl=opengl)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    p.widget.resize(w, h)
    p.widget.show()
    _pump(app, 0.3)
    out: dict = {"name": p.name, "timing": p.timing}
    try:
        if opengl and not p.widget.isValid():
            return {**out, "ok": False, "error": "QOpenGLWidget has no valid GL context"}
        cost, paint = [], []
        for k in range(frames):
            img = pattern(w, h, k)
            n_paint = len(p.widget.paint_ns)
            t0 = time.perf_counter_ns()
            p.present_now(img)  # present + synchronous repaint: the whole UI-thread cost
            cost.append(time.perf_counter_ns() - t0)
            paint.extend(p.widget.paint_ns[n_paint:])
            app.processEvents()
        out["present_cpu"] = _stats_ms(cost[2:])
        out["paint_cpu"] = _stats_ms(paint[2:]) if len(paint) > 2 else None
        if opengl:  # swap-paced loop: how fast does frameSwapped come back?
            ticks = []
            p.start_ticks(ticks.append)
            _pump(app, 1.0)
            p.stop_ticks()
            out["swap_rate_hz"] = len(ticks)
        last = pattern(w, h, frames - 1)
        _pump(app, 0.3)
        grab = _qimage_rgba(p.widget.grab().toImage())
        out["widget_grab_match"] = _pixels_match(grab, last)
        screen = _qimage_rgba(p.widget.screen().grabWindow(p.widget.winId()).toImage())
        out["screen_match"] = _pixels_match(screen, last)
        out["ok"] = out["screen_match"]
    finally:
        p.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--paths", default="vulkan,qt,qtgl")
    args = ap.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    result = {
        "platform": app.platformName(),
        "refresh_hz": app.primaryScreen().refreshRate(),
        "size": [w, h],
    }
    for path in args.paths.split(","):
        if path == "vulkan":
            result["vulkan"] = check_vulkan(app, w, h, args.frames)
        elif path == "qt":
            result["qt"] = check_qt(app, w, h, args.frames, opengl=False)
        elif path == "qtgl":
            result["qtgl"] = check_qt(app, w, h, args.frames, opengl=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
