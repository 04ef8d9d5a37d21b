"""Choosing a display path, and ticking the jitter buffer at every refresh."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QWindow
from PySide6.QtWidgets import QWidget

from app.present.base import Presenter, PresenterError
from app.present.qt_presenter import QtPresenter
from pipeline.presenter import JitterBuffer


def create_presenter(
    frame_size: tuple[int, int],
    *,
    prefer: str = "vulkan",
    parent: QWidget | None = None,
    transparent: bool = False,
    opengl: bool = False,
    allow_cpu_device: bool = False,
) -> tuple[Presenter, QWidget, str]:
    """(presenter, the widget to put in the layout, a line for the UI saying what runs).

    A Vulkan device that is a CPU rasterizer (Mesa's lavapipe) is refused unless
    `allow_cpu_device`: its present is a software copy into the X server (~4.6 ms per 720p
    frame of UI thread, measured) where Qt's raster path costs ~1 ms and has no VSYNC either.
    """
    reason = ""
    if prefer == "vulkan":
        window = None
        try:
            from app.present.vulkan_presenter import VulkanPresenter

            window = QWindow()
            window.resize(*frame_size)
            container = QWidget.createWindowContainer(window, parent)
            container.setMinimumSize(64, 36)
            window.create()
            presenter = VulkanPresenter.for_qwindow(window, frame_size)
            if presenter.is_cpu_device and not allow_cpu_device:
                presenter.close()
                raise PresenterError(
                    f"the only Vulkan device is a CPU rasterizer ({presenter.device_name}); "
                    "Qt's path is cheaper"
                )
            container._kagura_window = window  # keep the QWindow alive with its container
            return presenter, container, f"display: {presenter.name}"
        except Exception as exc:  # anything at all: fall back, and say why
            reason = str(exc) if isinstance(exc, PresenterError) else f"{type(exc).__name__}: {exc}"
            if window is not None:
                window.destroy()
    qt = QtPresenter(opengl=opengl, transparent=transparent, parent=parent)
    qt.widget.resize(*frame_size)
    text = f"display: {qt.name}"
    if reason:
        text += f" (Vulkan unavailable: {reason})"
    return qt, qt.widget, text


class PresentLoop:
    """At every refresh: `buffer.tick(master_now())`, and present the frame when it is new.

    `master_now()` returns the master (audio) clock in ns; `to_rgba(frame)` turns a released
    frame into an H x W x 4 uint8 premultiplied numpy array (e.g. `frame.image.numpy()`).
    Ticks come from the presenter's own pacing when it has one (`start_ticks`), otherwise from
    a precise timer at the refresh interval.
    """

    def __init__(
        self,
        presenter: Presenter,
        buffer: JitterBuffer,
        master_now: Callable[[], int],
        to_rgba: Callable[[object], np.ndarray],
    ):
        self.presenter = presenter
        self.buffer = buffer
        self.master_now = master_now
        self.to_rgba = to_rgba
        self.tick_cpu_ns: list[int] = []
        self._timer: QTimer | None = None

    def tick(self, _now_ns: int | None = None) -> None:
        t0 = time.perf_counter_ns()
        frame = self.buffer.tick(self.master_now(), self.presenter.refresh_ns)
        if frame is not None and self.buffer.last_was_new:
            self.presenter.present(self.to_rgba(frame))
        self.tick_cpu_ns.append(time.perf_counter_ns() - t0)
        if len(self.tick_cpu_ns) > 4096:
            del self.tick_cpu_ns[:2048]

    def start(self) -> None:
        if isinstance(self.presenter, QtPresenter):
            self.presenter.start_ticks(self.tick)
            return
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(max(1, round(self.presenter.refresh_ns / 1e6)))
        self._timer.timeout.connect(self.tick)
        self._timer.start()

    def stop(self) -> None:
        if isinstance(self.presenter, QtPresenter):
            self.presenter.stop_ticks()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
