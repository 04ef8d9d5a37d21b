"""The Qt display path: a widget that paints the latest frame.

Two flavours behind the same `Presenter` interface:

* `QtPresenter(opengl=False)`: a raster QWidget; `present` wraps the numpy frame in a QImage
  (Format_RGBA8888_Premultiplied: Kagura's frames are premultiplied RGBA already, no conversion)
  and asks for a repaint; `paintEvent` draws it scaled to the widget. Ticks come from a precise
  QTimer at the screen's refresh interval (not locked to VSYNC: the X11/raster path has no
  VSYNC signal).
* `QtPresenter(opengl=True)`: a QOpenGLWidget; the same painting through QPainter on GL, and the
  ticks come from `frameSwapped`, i.e. paced by the GL swap interval (VSYNC where the driver
  honours it).

`last_present_ns` is the end of the last paint (raster: the backing store is flushed right after;
GL: the time `frameSwapped` fired) - approximate, as `timing` says.
A transparent background (WA_TranslucentBackground) is requested with `transparent=True`; it
shows through only where a compositor runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QRect, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QWidget

from app.present.base import refresh_ns_from_hz


def _image(rgba: np.ndarray) -> QImage:
    h, w, _ = rgba.shape
    return QImage(rgba.data, w, h, w * 4, QImage.Format.Format_RGBA8888_Premultiplied)


def _checkerboard() -> QImage:
    img = QImage(32, 32, QImage.Format.Format_RGB32)
    img.fill(QColor("#2a2b33"))
    p = QPainter(img)
    p.fillRect(0, 0, 16, 16, QColor("#3a3b45"))
    p.fillRect(16, 16, 16, 16, QColor("#3a3b45"))
    p.end()
    return img


class _PaintMixin:
    """Letterboxed frame; a checkerboard behind transparent frames in the preview; a placeholder
    line before the first frame. A see-through widget (a transparent window for OBS capture)
    paints nothing but the frame, so the desktop shows through its alpha."""

    def _init_paint(self, see_through: bool = False) -> None:
        self._frame: np.ndarray | None = None  # keeps the QImage's memory alive
        self._qimage: QImage | None = None
        self._last_paint_ns: int | None = None
        self.paint_ns: list[int] = []  # CPU time of each paintEvent (for measurements)
        self.see_through = see_through
        self.checker = False  # show a checkerboard behind transparent frames (preview only)
        self.placeholder = ""
        self._checker = _checkerboard()

    def _paint(self, painter: QPainter) -> None:
        t0 = time.perf_counter_ns()
        w, h = self.width(), self.height()
        if not self.see_through:
            painter.fillRect(0, 0, w, h, QColor("#0c0d11"))
        img = self._qimage
        if img is None:
            if self.placeholder:
                painter.setPen(QColor("#6d6f85"))
                painter.drawText(QRect(0, 0, w, h), Qt.AlignmentFlag.AlignCenter, self.placeholder)
        else:
            scale = min(w / img.width(), h / img.height())
            if 1.0 <= scale < 1.5:
                # a little spare room: show the frame 1:1 — a scaled, filtered draw costs
                # several times the UI-thread time of an unscaled one
                scale = 1.0
            tw, th = img.width() * scale, img.height() * scale
            target = QRectF(round((w - tw) / 2), round((h - th) / 2), tw, th)
            if self.checker:
                painter.fillRect(target, self._checker)  # a QImage brush tiles
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, scale != 1.0)
            painter.drawImage(target, img)
        end = time.perf_counter_ns()
        self.paint_ns.append(end - t0)
        if len(self.paint_ns) > 4096:
            del self.paint_ns[:2048]
        self._last_paint_ns = time.monotonic_ns()


class _RasterWidget(QWidget, _PaintMixin):
    def __init__(self, parent=None, see_through: bool = False):
        super().__init__(parent)
        self._init_paint(see_through)
        if not see_through:
            self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    def paintEvent(self, event):
        painter = QPainter(self)
        self._paint(painter)
        painter.end()


def _gl_widget_class():
    from PySide6.QtOpenGLWidgets import QOpenGLWidget

    class _GLWidget(QOpenGLWidget, _PaintMixin):
        def __init__(self, parent=None, see_through: bool = False):
            super().__init__(parent)
            self._init_paint(see_through)

        def paintGL(self):
            painter = QPainter(self)
            self._paint(painter)
            painter.end()

    return _GLWidget


class QtPresenter:
    def __init__(
        self, *, opengl: bool = False, transparent: bool = False, parent: QWidget | None = None
    ):
        self.opengl = opengl
        widget_class = _gl_widget_class() if opengl else _RasterWidget
        self.widget: QWidget = widget_class(parent, see_through=transparent)
        self.transparent = False
        if transparent:
            self.widget.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
            self.widget.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground)
            self.transparent = True
        screen = self.widget.screen()
        self.refresh_ns = refresh_ns_from_hz(screen.refreshRate() if screen is not None else 60.0)
        kind = (
            "QOpenGLWidget, ticks on frameSwapped" if opengl else "QWidget raster, ticks on a timer"
        )
        self.name = f"qt ({kind})"
        self.timing = (
            "approximate: time of frameSwapped"
            if opengl
            else "approximate: end of paintEvent (no VSYNC signal)"
        )
        self._on_tick: Callable[[int], None] | None = None
        self._timer: QTimer | None = None
        self._swap_times: list[int] = []
        if opengl:
            self.widget.frameSwapped.connect(self._swapped)

    def present(self, rgba: np.ndarray) -> None:
        if rgba.ndim != 3 or rgba.shape[2] != 4 or rgba.dtype != np.uint8:
            raise ValueError(f"expected H x W x 4 uint8, got {rgba.shape} {rgba.dtype}")
        frame = np.ascontiguousarray(rgba)
        w = self.widget
        w._frame = frame
        w._qimage = _image(frame)
        w.update()

    def present_now(self, rgba: np.ndarray) -> None:
        """`present` plus a synchronous repaint (measurements: the whole UI-thread cost)."""
        self.present(rgba)
        self.widget.repaint()

    def last_present_ns(self) -> int | None:
        if self.opengl and self._swap_times:
            return self._swap_times[-1]
        return self.widget._last_paint_ns

    def _swapped(self) -> None:
        now = time.monotonic_ns()
        self._swap_times.append(now)
        if len(self._swap_times) > 4096:
            del self._swap_times[:2048]
        if self._on_tick is not None:
            self._on_tick(now)
            self.widget.update()  # keep the swap-paced loop running

    def start_ticks(self, on_tick: Callable[[int], None]) -> None:
        """Call `on_tick(monotonic_ns)` once per display refresh (see the module doc)."""
        self._on_tick = on_tick
        if self.opengl:
            self.widget.update()
            return
        self._timer = QTimer(self.widget)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(max(1, round(self.refresh_ns / 1e6)))
        self._timer.timeout.connect(lambda: on_tick(time.monotonic_ns()))
        self._timer.start()

    def stop_ticks(self) -> None:
        self._on_tick = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def close(self) -> None:
        self.stop_ticks()
        self.widget.close()
