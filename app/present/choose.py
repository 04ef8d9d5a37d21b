"""Choosing a display path: Vulkan FIFO when it works, Qt otherwise."""

from __future__ import annotations

from PySide6.QtGui import QWindow
from PySide6.QtWidgets import QWidget

from app.present.base import Presenter, PresenterError
from app.present.qt_presenter import QtPresenter


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
    `allow_cpu_device`: its present is a software copy into the X server, several times the
    UI-thread time of Qt's raster path, which has no VSYNC either (`python -m app.present.check`
    measures both).
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
