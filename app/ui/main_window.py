"""The Kagura main window: live preview, source/look/voice controls, expressions, recording.

    app = QApplication([])
    win = MainWindow(LiveOptions(audio_file="song.ogg"))
    win.show(); app.exec()
    win.run_stats()          # frames shown / dropped / repeated, latency, ui_ms median/p99

All pipeline work runs in `pipeline.live.LiveSession` on its own threads; the UI thread only
moves finished frames to the screen and forwards controls. Slow steps (opening a device,
building a session, finishing a recording) run on short-lived helper threads and report back
through a Qt signal, so the UI thread never waits on them.

Display path: a pump thread (`pipeline.display_feed.FramePump`, the same one the headless live
bench uses) takes frames from the session's LATEST queue and pushes them into the jitter buffer
(`pipeline.display_feed.live_jitter_buffer`) with their arrival time on the master clock; a timer at the display refresh calls `tick()` and hands a newly released frame to
the presenter widget. The UI thread's time per displayed frame (tick + hand-over + paint) is
measured and exposed as `ui_ms()` (median / P99).

Presenter: `app.present` (Qt / Vulkan presenters, written alongside) is used when it offers a Qt
widget presenter; until then `PreviewWidget` below (QPainter on a QImage wrapping the frame's
memory) stands in with the same `present(rgba)` surface.

Settings: JSON in `core.paths.settings_file()` (live_app.json in the user config folder, or in
KAGURA_CONFIG_DIR when set), written on every change and restored on the next start;
checked field by field and healed at load (`app.live_settings`), the OBS password kept apart.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QColor, QKeySequence, QPainter, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSizePolicy,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.live_settings import DEFAULTS, SETTINGS_FILE, Settings, config_dir
from core.frame import MOUTH_TIMING
from core.stats import summary
from core.trace import mark, step

log = logging.getLogger(__name__)

NO_MIC_TEXT = "No microphone found — you can still play an audio file: File ▸ Open"
HOTKEY_TIP = (
    "Shortcuts work while any Kagura window has focus (Qt application shortcuts). "
    "True system-wide hotkeys need a platform library (X11/Wayland portal, Win32 "
    "RegisterHotKey, macOS Carbon) that Kagura does not ship yet."
)
EXPRESSION_KEYS = {"happy": "F1", "sad": "F2", "surprised": "F3", "wink": "F4"}
EXPRESSION_LABELS = {"happy": "Happy", "sad": "Sad", "surprised": "Surprised", "wink": "Wink"}
RECORD_FORMATS = {"mp4": "MP4 (H.264 + AAC)", "webm": "WebM with alpha (VP9 + Opus)"}

DARK_QSS = """
QWidget { background: #15161c; color: #e6e6ef; font-size: 10pt; }
QMainWindow::separator { background: #15161c; }
QGroupBox { border: 1px solid #2c2e3a; border-radius: 8px; margin-top: 14px; padding: 8px 8px 6px 8px;
            background: #1b1c24; }
QGroupBox::title { subcontrol-origin: margin; left: 10px; padding: 0 4px; color: #ff8fc7;
                   font-weight: 600; letter-spacing: 1px; background: transparent; }
QLabel { background: transparent; }
QLabel#dim { color: #9a9cb0; }
QPushButton { background: #262836; border: 1px solid #3a3d50; border-radius: 6px; padding: 6px 10px; }
QPushButton:hover { background: #30334a; border-color: #ff8fc7; }
QPushButton:pressed { background: #3b2a3a; }
QPushButton:checked { background: #5b2a4a; border-color: #ff5fae; }
QPushButton#primary { background: #ff5fae; color: #15161c; font-weight: 700; border: none; }
QPushButton#primary:hover { background: #ff7fbe; }
QPushButton#record { background: #2b1d22; border-color: #ff4d5e; color: #ff9aa5; font-weight: 600; }
QPushButton#record:checked { background: #ff4d5e; color: #ffffff; }
QComboBox { background: #232531; border: 1px solid #3a3d50; border-radius: 6px; padding: 4px 8px; }
QComboBox QAbstractItemView { background: #232531; selection-background-color: #5b2a4a; }
QSlider::groove:horizontal { height: 6px; background: #2c2e3a; border-radius: 3px; }
QSlider::sub-page:horizontal { background: #ff5fae; border-radius: 3px; }
QSlider::handle:horizontal { background: #ffffff; width: 14px; margin: -5px 0; border-radius: 7px; }
QCheckBox::indicator { width: 14px; height: 14px; border: 1px solid #5a5d75; border-radius: 4px;
                       background: #232531; }
QCheckBox::indicator:checked { background: #ff5fae; border-color: #ff5fae; }
QStatusBar { background: #101116; color: #9a9cb0; }
QMenuBar { background: #101116; }
QMenuBar::item:selected { background: #30334a; }
QMenu { background: #1b1c24; border: 1px solid #3a3d50; }
QMenu::item:selected { background: #5b2a4a; }
QFrame#banner { background: #4a2a12; border: 1px solid #c77a2e; border-radius: 6px; }
QFrame#banner QLabel { color: #ffd9a8; }
QFrame#previewFrame { background: #0c0d11; border: 1px solid #2c2e3a; border-radius: 10px; }
"""


# ---------------------------------------------------------------------------------------------
# settings


# config_dir, DEFAULTS and Settings live in app/live_settings.py (schema-checked, self-healing,
# the OBS password outside the JSON); re-exported here for callers of this module
__all__ = ["DEFAULTS", "SETTINGS_FILE", "LiveOptions", "MainWindow", "Settings", "config_dir"]


# ---------------------------------------------------------------------------------------------
# preview (stand-in presenter)


def _make_presenter(parent: QWidget) -> tuple[Any, QWidget, str]:
    """The display path: Vulkan (FIFO swapchain) on X11 where it works, else Qt's widget.

    Returns (presenter, its widget, a line saying which path runs and why)."""
    from PySide6.QtGui import QGuiApplication

    from app.present import create_presenter

    prefer = "vulkan" if QGuiApplication.platformName() == "xcb" else "qt"
    presenter, widget, text = create_presenter((960, 540), prefer=prefer, parent=parent)
    if hasattr(widget, "placeholder"):
        widget.placeholder = "Press Start to go live"
    log.info("%s", text)
    return presenter, widget, text


class LevelMeter(QWidget):
    """A horizontal input-level bar, -60..0 dBFS, with a peak hold tick."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFixedHeight(12)
        self.db = -120.0
        self.peak = -120.0

    def set_level(self, db: float) -> None:
        self.db = db
        self.peak = max(db, self.peak - 0.7)
        self.update()

    def _x(self, db: float) -> float:
        return max(0.0, min(1.0, (db + 60.0) / 60.0)) * self.width()

    def paintEvent(self, event: Any) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        r = QRectF(self.rect())
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor("#2c2e3a"))
        p.drawRoundedRect(r, 5, 5)
        x = self._x(self.db)
        colour = "#4ee1a0" if self.db < -12 else "#ffd35c" if self.db < -3 else "#ff4d5e"
        p.setBrush(QColor(colour))
        p.drawRoundedRect(QRectF(0, 0, x, r.height()), 5, 5)
        p.setBrush(QColor("#ffffff"))
        p.drawRect(QRectF(max(self._x(self.peak) - 2, 0), 0, 2, r.height()))
        p.end()


# ---------------------------------------------------------------------------------------------
# background work → UI thread


class _Bridge(QObject):
    """Signals that carry results of helper threads into the UI thread (queued connections)."""

    call = Signal(object)  # a zero-argument callable to run on the UI thread
    state = Signal(str, str)  # session/source state changes


def _stop_orphan(result: Any) -> None:
    """Stop a session that a helper thread started after its window had closed."""
    stop = getattr(result, "stop", None)
    if callable(stop) and not isinstance(result, (dict, Exception)):
        with contextlib.suppress(Exception):
            stop()


@dataclass
class LiveOptions:
    """What `kagura live` passes in; None = use the saved setting."""

    audio_file: str | None = None
    preset: str | None = None
    device: str | None = None
    size: tuple[int, int] = (960, 540)
    fps: int = 30
    autostart: bool = True
    play_out: bool | None = None
    avatar: str | None = None  # `kagura live --avatar`; None = the remembered one (avatar_menu)
    gpu: Any = None  # the sessions' LiveGpu (app/live_gpu.py); None: the CPU chain
    # the first session's render process, started by `kagura live` before torch's import
    # (app.live_gpu.launch_first_render); the first session adopts it or closes it
    first_render: Any = None


# ---------------------------------------------------------------------------------------------
# the window


class MainWindow(QMainWindow):
    # what opens the virtual camera (pyvirtualcam.Camera's signature); None: pyvirtualcam itself
    virtual_camera_factory: Callable[..., Any] | None = None

    def __init__(self, options: LiveOptions | None = None, settings: Settings | None = None):
        super().__init__()
        self.options = options or LiveOptions()
        self.settings = settings or Settings()
        if self.options.preset:
            self.settings["preset"] = self.options.preset
        if self.options.device:
            self.settings["device"] = self.options.device
        self.session: Any = None
        self._first_render = self.options.first_render
        self.jitter: Any = None
        self._pump: Any = None  # pipeline.display_feed.FramePump while live
        self._fps_mark = (time.monotonic(), 0)  # (when, frames shown) for the shown-fps meter
        self._shown_fps = 0.0
        self.stage_presenter: Any = None  # the see-through stage window (OBS window capture)
        self.vcam: Any = None  # the virtual camera sink, when on
        self._busy = False  # a start/stop is in flight on a helper thread
        self._source_kind = "file" if self.options.audio_file else "mic"
        self._audio_file: str | None = self.options.audio_file or self.settings["audio_file"]
        self._devices: list[Any] = []
        self._ui_ms: deque[float] = deque(maxlen=2000)
        self._shown_any = False  # a frame reached the screen (`kagura bench e2e`'s time stamp)
        self._pending_ui_ms: float | None = None
        self._shown_total = 0
        self._repeated_total = 0
        self._dropped_total = 0
        self._latency_ms: deque[float] = deque(maxlen=600)
        self._closing = False
        self._bg_lock = threading.Lock()
        self._bg_threads: list[threading.Thread] = []
        self._last_latency: float | None = None
        self._last_session_stats: dict[str, Any] = {}
        self.last_recording: dict[str, Any] | None = None
        self.banner_kind: str | None = None
        self._notices_shown: set[str] = set()

        self._bridge = _Bridge(self)  # parented: deleted by Qt on the UI thread, never by the GC
        # bound methods of a QObject of the UI thread: queued across threads (never a lambda,
        # which PySide6 would call directly on the emitting thread)
        self._bridge.call.connect(self._run_call, Qt.ConnectionType.QueuedConnection)
        self._bridge.state.connect(self._on_state, Qt.ConnectionType.QueuedConnection)

        self.setWindowTitle("Kagura — live")
        self.setStyleSheet(DARK_QSS)
        self._build_ui()
        step("window: widgets built")
        self._build_menu()
        from app.ui.avatar_menu import AvatarMenu  # File ▸ Open avatar…, drops, remembered

        self.avatar_menu = AvatarMenu(self)
        self._build_shortcuts()
        self._restore()
        self.stats_overlay.obsOffsetSet.connect(self._remember_obs_input)
        self.stats_overlay.obsInputMissing.connect(self._forget_obs_input)
        self._connect_obs()
        step("window: OBS link made")
        self.refresh_devices()
        step("window: microphones listed")
        self._show_settings_notice()

        self._tick_timer = QTimer(self)
        self._tick_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._tick_timer.timeout.connect(self._tick)
        self._tick_timer.start(max(1, round(self.preview.refresh_ns / 1e6)))
        self._meter_timer = QTimer(self)
        self._meter_timer.timeout.connect(self._update_meters)
        self._meter_timer.start(100)
        if self.options.autostart:
            QTimer.singleShot(0, self.start_live)

    def _show_settings_notice(self) -> None:
        """live_app.json was healed at load: say what, once — in the banner, or in the status
        bar when the banner already says something more urgent (no microphone)."""
        notices = self.settings.notices
        if not notices:
            return
        more = len(notices) - 1
        self.settings_notice = notices[0] + (f" (+{more} more in the log)" if more else "")
        if self.banner_kind is None:
            self.show_banner(self.settings_notice, "settings")
        else:
            self.statusBar().showMessage(self.settings_notice, 20000)

    @Slot(object)
    def _run_call(self, fn: Callable[[], None]) -> None:
        fn()

    # -- construction -------------------------------------------------------------------------

    def _build_ui(self) -> None:
        central = QWidget()
        root = QVBoxLayout(central)
        root.setContentsMargins(12, 10, 12, 8)
        root.setSpacing(8)

        self.banner = QFrame(objectName="banner")
        bl = QHBoxLayout(self.banner)
        bl.setContentsMargins(10, 6, 10, 6)
        self.banner_label = QLabel()
        self.banner_label.setWordWrap(True)
        bl.addWidget(self.banner_label, 1)
        close = QPushButton("✕")
        close.setFixedWidth(28)
        close.clicked.connect(self.clear_banner)
        bl.addWidget(close)
        self.banner.hide()
        root.addWidget(self.banner)

        body = QHBoxLayout()
        body.setSpacing(12)
        root.addLayout(body, 1)

        # left: preview + performance controls
        left = QVBoxLayout()
        left.setSpacing(8)
        frame = QFrame(objectName="previewFrame")
        fl = QVBoxLayout(frame)
        fl.setContentsMargins(6, 6, 6, 6)
        self.preview, self.preview_widget, self.display_text = _make_presenter(frame)
        self.preview_widget.setMinimumSize(480, 270)
        self.preview_widget.setSizePolicy(
            QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding
        )
        fl.addWidget(self.preview_widget)
        left.addWidget(frame, 1)

        expr = QHBoxLayout()
        expr.setSpacing(6)
        title = QLabel("EXPRESSIONS")
        title.setObjectName("dim")
        expr.addWidget(title)
        self.expr_buttons: dict[str, QPushButton] = {}
        for name, label in EXPRESSION_LABELS.items():
            b = QPushButton(f"{label}  ·  {EXPRESSION_KEYS[name]}")
            b.setToolTip(f"{label}: blends in and out over ~150 ms.\n{HOTKEY_TIP}")
            b.clicked.connect(lambda _=False, n=name: self.trigger(n))
            expr.addWidget(b)
            self.expr_buttons[name] = b
        expr.addStretch(1)
        left.addLayout(expr)

        rec = QHBoxLayout()
        rec.setSpacing(6)
        self.start_button = QPushButton("Start", objectName="primary")
        self.start_button.setMinimumWidth(110)
        self.start_button.clicked.connect(self.toggle_live)
        rec.addWidget(self.start_button)
        self.record_button = QPushButton("● Record", objectName="record")
        self.record_button.setCheckable(True)
        self.record_button.clicked.connect(self.toggle_recording)
        rec.addWidget(self.record_button)
        self.format_combo = QComboBox()
        for key, label in RECORD_FORMATS.items():
            self.format_combo.addItem(label, key)
        self.format_combo.currentIndexChanged.connect(self._on_format)
        rec.addWidget(self.format_combo)
        self.rec_label = QLabel("")
        self.rec_label.setObjectName("dim")
        rec.addWidget(self.rec_label, 1)
        left.addLayout(rec)
        body.addLayout(left, 1)

        # right: side panel
        side = QVBoxLayout()
        side.setSpacing(6)
        panel = QWidget()
        panel.setFixedWidth(360)
        panel.setLayout(side)
        body.addWidget(panel)

        src = QGroupBox("SOURCE")
        sl = QVBoxLayout(src)
        self.device_combo = QComboBox()
        self.device_combo.setToolTip("Microphone (input device) for live capture")
        self.device_combo.activated.connect(self._on_device)
        sl.addWidget(self.device_combo)
        self.level = LevelMeter()
        sl.addWidget(self.level)
        row = QHBoxLayout()
        self.file_button = QPushButton("Open audio file…")
        self.file_button.clicked.connect(self.open_file_dialog)
        row.addWidget(self.file_button)
        self.refresh_button = QPushButton("↻")
        self.refresh_button.setFixedWidth(34)
        self.refresh_button.setToolTip("Look for microphones again (after plugging one in)")
        self.refresh_button.clicked.connect(lambda: self.refresh_devices(rescan=True))
        row.addWidget(self.refresh_button)
        sl.addLayout(row)
        self.source_label = QLabel("")
        self.source_label.setObjectName("dim")
        self.source_label.setWordWrap(True)
        sl.addWidget(self.source_label)
        side.addWidget(src)

        look = QGroupBox("LOOK")
        ll = QVBoxLayout(look)
        self.preset_combo = QComboBox()
        self.preset_combo.activated.connect(self._on_preset)
        ll.addWidget(self.preset_combo)
        self.transparent_box = QCheckBox("Transparent background")
        self.transparent_box.setToolTip(
            "Draw the idol without a background (alpha). Use with WebM-with-alpha recording "
            "or window capture in OBS."
        )
        self.transparent_box.toggled.connect(self._on_transparent)
        ll.addWidget(self.transparent_box)
        side.addWidget(look)

        voice = QGroupBox("VOICE")
        grid = QGridLayout(voice)
        grid.setVerticalSpacing(4)
        self.sliders: dict[str, tuple[QSlider, QLabel, Callable[[int], float], str]] = {}
        specs = (
            ("gain_db", "Gain", -20, 30, lambda v: float(v), "{:+.0f} dB"),
            ("gate_db", "Noise gate", 4, 30, lambda v: float(v), "{:.0f} dB"),
            ("smoothing", "Smoothing", 0, 100, lambda v: v / 100.0, "{:.2f}"),
        )
        for row_i, (key, label, lo, hi, conv, fmt) in enumerate(specs):
            name = QLabel(label)
            value = QLabel("")
            value.setObjectName("dim")
            value.setAlignment(Qt.AlignmentFlag.AlignRight)
            s = QSlider(Qt.Orientation.Horizontal)
            s.setRange(lo, hi)
            s.valueChanged.connect(lambda v, k=key: self._on_slider(k, v))
            grid.addWidget(name, 2 * row_i, 0)
            grid.addWidget(value, 2 * row_i, 1)
            grid.addWidget(s, 2 * row_i + 1, 0, 1, 2)
            self.sliders[key] = (s, value, conv, fmt)
        side.addWidget(voice)

        stats = QGroupBox("PERFORMANCE")
        stl = QVBoxLayout(stats)
        self.stats_label = QLabel("—")
        self.stats_label.setObjectName("dim")
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)
        self.stats_label.setWordWrap(True)
        stl.addWidget(self.stats_label)
        from app.ui.stats_overlay import StatsOverlay

        # In the side panel, not over the preview: an overlapping, semi-transparent child is
        # repainted with every preview frame (measured: +1.5 ms of UI thread per frame).
        # F12 toggles it.
        self.stats_overlay = StatsOverlay(stats)
        stl.addWidget(self.stats_overlay)
        side.addWidget(stats)
        side.addStretch(1)

        self.setCentralWidget(central)
        self.statusBar().showMessage("Ready")

    def _build_menu(self) -> None:
        m = self.menuBar().addMenu("&File")
        act = QAction("&Open audio file…", self)
        act.setShortcut(QKeySequence.StandardKey.Open)
        act.triggered.connect(self.open_file_dialog)
        m.addAction(act)
        act = QAction("Use &microphone", self)
        act.triggered.connect(self.use_microphone)
        m.addAction(act)
        m.addSeparator()
        act = QAction("&Quit", self)
        act.setShortcut(QKeySequence.StandardKey.Quit)
        act.triggered.connect(self.close)
        m.addAction(act)
        tools = self.menuBar().addMenu("&Tools")
        act = QAction("&Calibrate lip-sync…", self)
        act.triggered.connect(self._open_calibration)
        tools.addAction(act)
        tools.addSeparator()
        act = QAction("&Stage window with transparency (OBS window capture)", self)
        act.setToolTip(
            "The alpha route to OBS: add this window with Window Capture; the virtual camera "
            "carries no alpha"
        )
        act.triggered.connect(self.open_stage_window)
        tools.addAction(act)
        self.vcam_action = QAction("&Virtual camera (no alpha)", self, checkable=True)
        self.vcam_action.toggled.connect(self.set_virtual_camera)
        tools.addAction(self.vcam_action)
        act = QAction("&OBS audio sync…", self)
        act.triggered.connect(self.configure_obs)
        tools.addAction(act)

    def _build_shortcuts(self) -> None:
        self.shortcuts: dict[str, QShortcut] = {}
        for name, key in EXPRESSION_KEYS.items():
            sc = QShortcut(QKeySequence(key), self)
            sc.setContext(Qt.ShortcutContext.ApplicationShortcut)
            sc.activated.connect(lambda n=name: self.trigger(n))
            self.shortcuts[name] = sc
        sc = QShortcut(QKeySequence("F12"), self)
        sc.setContext(Qt.ShortcutContext.ApplicationShortcut)
        sc.activated.connect(
            lambda: self.stats_overlay.setVisible(not self.stats_overlay.isVisible())
        )
        self.shortcuts["stats"] = sc
        sc = QShortcut(QKeySequence("Ctrl+R"), self)
        sc.setContext(Qt.ShortcutContext.ApplicationShortcut)
        sc.activated.connect(self.record_button.click)
        self.shortcuts["record"] = sc

    def _restore(self) -> None:
        from presets.loader import available_names

        s = self.settings
        names = available_names()
        self.preset_combo.clear()
        for n in names:
            self.preset_combo.addItem(n.replace("-", " ").title(), n)
        i = self.preset_combo.findData(s["preset"])
        self.preset_combo.setCurrentIndex(max(i, 0))
        self.settings["preset"] = self.preset_combo.currentData()
        for key, (slider, _, _, _) in self.sliders.items():
            v = float(s[key])
            slider.setValue(round(v * 100) if key == "smoothing" else round(v))
            self._show_slider(key)
        self.transparent_box.blockSignals(True)
        self.transparent_box.setChecked(bool(s["transparent"]))
        self.transparent_box.blockSignals(False)
        self.preview_widget.checker = bool(s["transparent"])
        i = self.format_combo.findData(s["record_format"])
        self.format_combo.setCurrentIndex(max(i, 0))
        geo = s["geometry"]
        if isinstance(geo, list) and len(geo) == 4:
            self.setGeometry(*[int(v) for v in geo])
        else:
            self.resize(1400, 820)

    # -- banner -------------------------------------------------------------------------------

    def show_banner(self, text: str, kind: str = "warning") -> None:
        self.banner_label.setText(text)
        self.banner_kind = kind
        self.banner.show()

    def clear_banner(self, kind: str | None = None) -> None:
        if kind is None or kind == self.banner_kind:
            self.banner.hide()
            self.banner_kind = None

    @property
    def banner_text(self) -> str:
        return self.banner_label.text() if self.banner.isVisible() else ""

    # -- devices ------------------------------------------------------------------------------

    def refresh_devices(self, rescan: bool = False) -> None:
        try:
            from audio.capture import list_input_devices

            if rescan and (self.session is None or self._source_kind != "mic"):
                self._devices = list_input_devices(refresh=True)
            else:
                self._devices = list_input_devices()
        except Exception as exc:  # PortAudio missing: no microphones, files still work
            log.warning("devices: %s", exc)
            self._devices = []
        self.device_combo.clear()
        for d in self._devices:
            self.device_combo.addItem(f"{d.name}{'  (default)' if d.is_default else ''}", d.name)
        if not self._devices:
            self.device_combo.addItem("No microphone found", None)
            self.device_combo.setEnabled(False)
            if self._source_kind == "mic":
                self.show_banner(NO_MIC_TEXT, "no-mic")
        else:
            self.device_combo.setEnabled(True)
            i = self.device_combo.findData(self.settings["device"])
            if i < 0:
                i = next((k for k, d in enumerate(self._devices) if d.is_default), 0)
            self.device_combo.setCurrentIndex(i)
            self.clear_banner("no-mic")

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self._devices]

    # -- controls -----------------------------------------------------------------------------

    def _on_device(self, index: int) -> None:
        name = self.device_combo.itemData(index)
        if name is None:
            return
        self.settings["device"] = name
        self.settings.save()
        self.use_microphone()

    def use_microphone(self) -> None:
        self._source_kind = "mic"
        if not self._devices:
            self.show_banner(NO_MIC_TEXT, "no-mic")
            return
        self.restart_live()

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Play an audio file",
            str(Path(self._audio_file or "~").expanduser().parent),
            "Audio (*.wav *.mp3 *.ogg *.opus *.flac *.m4a *.aac);;All files (*)",
        )
        if path:
            self.play_file(path)

    def play_file(self, path: str) -> None:
        self._audio_file = str(path)
        self._source_kind = "file"
        self.settings["audio_file"] = self._audio_file
        self.settings.save()
        self.restart_live()

    def _on_preset(self, index: int) -> None:
        name = self.preset_combo.itemData(index)
        self.set_preset(name)

    def set_preset(self, name: str) -> None:
        i = self.preset_combo.findData(name)
        if i >= 0 and self.preset_combo.currentIndex() != i:
            self.preset_combo.setCurrentIndex(i)
        self.settings["preset"] = name
        self.settings.save()
        if self.session is not None:
            self.session.set_preset(name)  # builds off-thread; returns at once

    def _on_transparent(self, on: bool) -> None:
        self.settings["transparent"] = bool(on)
        self.settings.save()
        self.preview_widget.checker = bool(on)
        if self.session is not None:
            self.session.set_transparent(bool(on))

    def _on_format(self, index: int) -> None:
        self.settings["record_format"] = self.format_combo.itemData(index)
        self.settings.save()

    def _on_slider(self, key: str, raw: int) -> None:
        _, _, conv, _ = self.sliders[key]
        value = conv(raw)
        self.settings[key] = value
        self._show_slider(key)
        self.settings.save()
        s = self.session
        if s is not None:
            {"gain_db": s.set_gain, "gate_db": s.set_noise_gate, "smoothing": s.set_smoothing}[key](
                value
            )

    def _show_slider(self, key: str) -> None:
        slider, label, conv, fmt = self.sliders[key]
        label.setText(fmt.format(conv(slider.value())))

    def set_control(self, key: str, value: float) -> None:
        """Move a slider programmatically (tests, scripts)."""
        slider = self.sliders[key][0]
        slider.setValue(round(value * 100) if key == "smoothing" else round(value))

    def trigger(self, name: str) -> None:
        if self.session is not None:
            self.session.trigger(name)
            self.statusBar().showMessage(f"Expression: {EXPRESSION_LABELS[name]}", 1500)

    def _open_calibration(self) -> None:
        from app.ui.calibration_dialog import CalibrationDialog

        CalibrationDialog(self, device=self.settings["device"]).exec()

    # -- OBS routes ---------------------------------------------------------------------------

    def open_stage_window(self) -> None:
        """A frameless, see-through window showing only the idol: OBS Window Capture keeps its
        alpha (needs a compositing window manager; the virtual camera cannot carry alpha)."""
        from app.present.qt_presenter import QtPresenter

        if self.stage_presenter is None:
            # a window of its own, but owned by this one: Qt deletes it with this window on the
            # UI thread; a parentless widget is deleted by Python's collector on whichever
            # thread runs it (a crash off the UI thread)
            self.stage_presenter = QtPresenter(transparent=True, parent=self)
            w = self.stage_presenter.widget
            w.setWindowTitle("Kagura stage")
            w.setWindowFlags(Qt.WindowType.Window | Qt.WindowType.FramelessWindowHint)
            w.resize(*self.options.size)
            if not self.settings["transparent"]:
                self.transparent_box.setChecked(True)  # the idol alone, no background
        self.stage_presenter.widget.show()

    def set_virtual_camera(self, on: bool) -> None:
        from core.stage import Context
        from pipeline.sinks.virtual_camera import VirtualCameraSink, virtual_camera_status

        if not on:
            if self.vcam is not None:
                if self._pump is not None and self.vcam in self._pump.sinks:
                    self._pump.sinks.remove(self.vcam)
                self.vcam.finish()
                self.vcam = None
            return
        if self.virtual_camera_factory is None:
            available, backend, how_to = virtual_camera_status()
        else:  # a camera handed in by the embedder (tests): no system check
            available, backend, how_to = True, "custom", ""
        if not available:
            self._vcam_off(f"No virtual camera here. {how_to}")
            return
        w, h = self.options.size
        try:
            sink = VirtualCameraSink(
                w, h, self.options.fps, camera_factory=self.virtual_camera_factory
            )
            # the camera opens at the live frame rate; the context carries only that
            sink.setup(Context(w, h, self.options.fps, 48_000))
        except (ValueError, RuntimeError) as exc:  # VirtualCameraError is a RuntimeError
            self._vcam_off(" ".join(str(exc).split()))
            return
        self.vcam = sink
        if self._pump is not None:
            self._pump.sinks.append(sink)
        where = sink.camera_device or backend
        self.statusBar().showMessage(f"Virtual camera on ({where}); it carries no alpha", 5000)

    def _vcam_off(self, why: str) -> None:
        """The toggle back off, without re-entering set_virtual_camera, and the reason shown."""
        self.vcam_action.blockSignals(True)
        self.vcam_action.setChecked(False)
        self.vcam_action.blockSignals(False)
        self.show_banner(why, "vcam")

    def configure_obs(self) -> None:
        """Where obs-websocket listens, for the stats panel's "Set in OBS" button."""
        from PySide6.QtWidgets import QInputDialog, QLineEdit

        s = self.settings
        text, ok = QInputDialog.getText(
            self,
            "OBS audio sync",
            "obs-websocket host:port",
            text=f"{s['obs_host']}:{s['obs_port']}",
        )
        if not ok:
            return
        host, _, port = text.strip().rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            self.show_banner(
                f"OBS address {text!r}: expected host:port, e.g. localhost:4455", "obs"
            )
            return
        password, ok = QInputDialog.getText(
            self, "OBS audio sync", "Password (empty if none)", QLineEdit.EchoMode.Password
        )
        s["obs_host"], s["obs_port"] = host, int(port)
        if ok:  # kept in the keyring or a 0600 file, never in live_app.json
            s["obs_password"] = password or None
        s.save()
        self._connect_obs()

    def _remember_obs_input(self, name: str, ms: int) -> None:
        """The OBS input the user picked for "Set in OBS": asked once, remembered."""
        if name and name != self.settings["obs_input"]:
            self.settings["obs_input"] = name
            self.settings.save()

    def _forget_obs_input(self, name: str) -> None:
        """OBS no longer has the remembered input (renamed, removed): ask again next time."""
        if self.settings["obs_input"] == name:
            self.settings["obs_input"] = None
            self.settings.save()

    def _connect_obs(self) -> None:
        from app.obs_sync import ObsSync

        s = self.settings
        # the password read when OBS is asked (keyring: slow to load, may ask to be unlocked)
        self.stats_overlay.set_obs(
            ObsSync(s["obs_host"], s["obs_port"], lambda: s["obs_password"]), s["obs_input"]
        )

    # -- live session -------------------------------------------------------------------------

    def _in_background(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        def run() -> None:
            try:
                result: Any = work()
            except Exception as exc:
                result = exc
            with self._bg_lock:
                if not self._closing:
                    self._bridge.call.emit(lambda: done(result))
                    return
            # the window closed while this ran: a session it started must not outlive it
            # (its threads in native code at interpreter exit abort the process)
            _stop_orphan(result)

        t = threading.Thread(target=run, name="kagura-ui-worker", daemon=True)
        self._bg_threads = [w for w in self._bg_threads if w.is_alive()] + [t]
        t.start()

    def toggle_live(self) -> None:
        if self.session is None:
            self.start_live()
        else:
            self.stop_live()

    def restart_live(self) -> None:
        if self.session is None:
            self.start_live()
        else:
            self.stop_live(then=self.start_live)

    def _make_source(self) -> Any:
        if self._source_kind == "file":
            if not self._audio_file:
                raise RuntimeError("no audio file chosen: File ▸ Open")
            from pipeline.live import FilePlayback

            play = (
                self.settings["play_out"]
                if self.options.play_out is None
                else self.options.play_out
            )
            return FilePlayback(self._audio_file, play_out=bool(play), start=False)
        from audio.capture import Capture

        if not self._devices:
            raise LookupError(NO_MIC_TEXT)
        return Capture(self.settings["device"], start=False)

    def start_live(self) -> None:
        if self.session is not None or self._busy:
            return
        if self._source_kind == "mic" and not self._devices:
            self.show_banner(NO_MIC_TEXT, "no-mic")
            self.start_button.setText("Start")
            return
        self._busy = True
        step("window: session starting")
        self.start_button.setEnabled(False)
        self.start_button.setText("Starting…")
        s = self.settings
        opts = self.options

        first_render, self._first_render = self._first_render, None

        def work() -> Any:
            from pipeline.live import LiveSession

            src = self._make_source()
            session = LiveSession(
                src,
                s["preset"],
                size=opts.size,
                fps=opts.fps,
                transparent=bool(s["transparent"]),
                gain_db=float(s["gain_db"]),
                gate_db=float(s["gate_db"]),
                smoothing=float(s["smoothing"]),
                on_state=lambda st, msg: self._bridge.state.emit(st, msg),
                gpu=opts.gpu,
                first_render=first_render,
            )
            try:
                session.start()
            except Exception:
                session.stop()
                raise
            mark("live started")  # `kagura bench e2e --commands app`: launch → first shown
            return session

        self._in_background(work, self._started)

    def _started(self, result: Any) -> None:
        self._busy = False
        self.start_button.setEnabled(True)
        if isinstance(result, Exception):
            self.start_button.setText("Start")
            msg = str(result)
            if isinstance(result, LookupError) or "not found" in msg:
                self.show_banner(NO_MIC_TEXT, "no-mic")
            else:
                self.show_banner(f"Could not start: {msg}", "error")
            return
        if self._closing:  # delivered while shutting down: stop it here and now
            _stop_orphan(result)
            return
        from pipeline.display_feed import FramePump, live_jitter_buffer

        self.session = result
        self.jitter = live_jitter_buffer(self.options.fps)
        # phase-locked (see _tick): the buffer releases each frame at the tick it was started
        # for, so its delay follows the session's instead of a percentile of arrival − pts
        self.jitter.follow(self.session.release_delay_ns)
        self._pump = FramePump(self.session, self.jitter, name="kagura-ui-pump")
        if self.vcam is not None:
            self._pump.sinks.append(self.vcam)
        self.start_button.setText("Stop")
        src = self.session.source
        what = getattr(src, "device_name", "input")
        self.source_label.setText(f"{what} · {src.sample_rate} Hz")
        if self._source_kind == "file":
            self.clear_banner("no-mic")
        self.statusBar().showMessage(f"Live: {what}", 3000)
        if self._closing:
            self.stop_live()

    def stop_live(self, then: Callable[[], None] | None = None) -> None:
        session = self.session
        if session is None or self._busy:
            return
        self._busy = True
        self.start_button.setEnabled(False)
        self._collect_jitter_stats()
        self.session = None
        self.record_button.setChecked(False)

        def work() -> Any:
            return session.stop()

        def done(result: Any) -> None:
            self._busy = False
            self.start_button.setEnabled(True)
            self.start_button.setText("Start")
            self.jitter = None
            self._pump = None
            if isinstance(result, dict):
                self._recording_done(result)
            if then is not None:
                then()

        self._in_background(work, done)

    def _collect_jitter_stats(self) -> None:
        j = self.jitter
        if j is not None:
            st = j.stats()
            self._shown_total += st.shown
            self._repeated_total += st.repeated
            self._dropped_total += st.dropped_late + st.dropped_overflow
            self._last_latency = round(st.audio_to_photon_ms, 1)
        if self.session is not None:
            self._last_session_stats = self.session.stats()

    @Slot(str, str)
    def _on_state(self, state: str, message: str) -> None:
        if state == "lost":
            self.show_banner(
                f"Microphone lost — {message}. Kagura keeps trying; it resumes when the device "
                "is back.",
                "lost",
            )
        elif state == "running":
            if self.banner_kind == "lost":
                self.statusBar().showMessage("Microphone is back", 4000)
            self.clear_banner("lost")
        elif state == "ended":
            self.statusBar().showMessage("The audio file has ended", 4000)
        elif state == "error":
            self.show_banner(message, "error")

    # -- recording ----------------------------------------------------------------------------

    def record_dir(self) -> Path:
        d = self.settings["record_dir"]
        if d:
            return Path(d).expanduser()
        from core.paths import recordings_dir

        return recordings_dir()

    def toggle_recording(self) -> None:
        if self.session is None:
            self.record_button.setChecked(False)
            self.statusBar().showMessage("Start the live view first", 3000)
            return
        if self.session.recording:
            self.stop_recording()
        else:
            self.start_recording()

    def start_recording(self, path: str | os.PathLike | None = None) -> Path | None:
        if self.session is None:
            return None
        fmt = self.format_combo.currentData()
        if path is None:
            d = self.record_dir()
            d.mkdir(parents=True, exist_ok=True)
            stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
            path = d / f"kagura-{stamp}.{fmt}"
        path = Path(path)
        alpha = path.suffix.lower() == ".webm"
        try:
            if alpha and not self.transparent_box.isChecked():
                self.transparent_box.setChecked(True)  # WebM-with-alpha needs alpha frames
            self.session.start_recording(path, alpha=True if alpha else None)
        except Exception as exc:
            self.record_button.setChecked(False)
            self.show_banner(f"Cannot record: {exc}", "error")
            return None
        self.record_button.setChecked(True)
        self.record_button.setText("■ Stop recording")
        self.rec_label.setText(f"Recording → {path.name}")
        return path

    def stop_recording(self) -> None:
        session = self.session
        self.record_button.setChecked(False)
        self.record_button.setText("● Record")
        if session is None or not session.recording:
            return
        self.rec_label.setText("Finishing the file…")
        self._in_background(session.stop_recording, self._recording_done)

    def _recording_done(self, result: Any) -> None:
        if isinstance(result, Exception):
            self.rec_label.setText("")
            self.show_banner(f"Recording failed: {result}", "error")
            return
        self.last_recording = result
        self.rec_label.setText(f"Saved {Path(result['path']).name} ({result['seconds']:.1f} s)")

    # -- the display tick (UI thread) ---------------------------------------------------------

    def _tick(self) -> None:
        j, s = self.jitter, self.session
        if j is None or s is None:
            return
        # Phase-lock the session's frame starts to this tick (pipeline/live.py,
        # set_display_timing): each frame is then due just before the tick that takes it. This
        # tick is a QTimer, not VSYNC (the raster path has no VSYNC signal), so it is locked to
        # the timer's own instants and interval; no present-before-VSYNC lead is applied here.
        s.set_display_timing(time.monotonic_ns(), self._tick_timer.interval() * 1_000_000)
        t0 = time.perf_counter()
        frame = j.tick(s.clock.now_ns(), self.preview.refresh_ns)
        if frame is not None and j.last_was_new:
            self.preview.present(frame.image.numpy())
            self.preview_widget.repaint()  # paint now, so the measured time includes it
            if not self._shown_any:  # the process's first frame on screen
                self._shown_any = True
                mark("first shown frame")
            if self.stage_presenter is not None and self.stage_presenter.widget.isVisible():
                self.stage_presenter.present(frame.image.numpy())
            self._ui_ms.append((time.perf_counter() - t0) * 1000.0)

    def ui_ms(self) -> dict[str, float | None]:
        """UI-thread milliseconds per displayed frame (tick + hand-over + paint)."""
        s = summary(self._ui_ms)
        if s is None:
            return {"median": None, "p99": None, "frames": 0}
        return {"median": s["median"], "p99": s["p99"], "frames": s["n"]}

    def _update_meters(self) -> None:
        s = self.session
        if s is None:
            self.level.set_level(-120.0)
            return
        self.level.set_level(s.level_db)
        st = s.stats()
        for note in st.get("notices", ()):
            if note not in self._notices_shown:  # once each: the user may close the banner
                self._notices_shown.add(note)
                self.show_banner(note.removeprefix("NOTICE: "), "notice")
        js = self.jitter.stats() if self.jitter is not None else None
        ui = self.ui_ms()
        stage = st["stage_ms"]

        def ms(name: str) -> str:
            v = stage.get(name)
            return f"{v['median']:.1f}" if v else "–"

        lines = [
            f"<b style='color:#e6e6ef'>{st['preset']}</b> · {s.fps} fps · {s.size[0]}×{s.size[1]}",
            # with the late mouth the idol is drawn ahead; only its mouth is on the frame's path
            f"idol ahead {ms('render')} · mouth {ms(MOUTH_TIMING)} · stylize {ms('stylize')} ms"
            if MOUTH_TIMING in stage
            else f"render {ms('render')} ms · stylize {ms('stylize')} ms",
        ]
        if js is not None:
            lines.append(
                f"shown {js.shown} · dropped {js.dropped_late + js.dropped_overflow} · "
                f"repeated {js.repeated}"
            )
            lines.append(
                f"latency ≈ {js.audio_to_photon_ms:.0f} ms (buffer {js.target_delay_ms:.0f})"
            )
        if st["lipsync_lag_ms"] is not None:
            lines.append(f"lip-sync lag {st['lipsync_lag_ms']:.0f} ms")
        if ui["median"] is not None:
            lines.append(f"UI thread {ui['median']:.2f} ms (P99 {ui['p99']:.2f})")
        lines.append(self.display_text)
        self.stats_label.setText("<br>".join(lines))
        now = time.monotonic()
        shown = js.shown if js is not None else 0
        last_t, last_shown = self._fps_mark
        if now > last_t:
            self._shown_fps = 0.7 * self._shown_fps + 0.3 * (shown - last_shown) / (now - last_t)
        self._fps_mark = (now, shown)
        self.stats_overlay.update_stats(
            {
                "fps": self._shown_fps,
                "target_fps": s.fps,
                "stage_ms": stage,
                **(
                    {
                        "dropped_late": js.dropped_late,
                        "dropped_overflow": js.dropped_overflow,
                        "repeated": js.repeated,
                        "audio_to_photon_ms": js.audio_to_photon_ms,
                    }
                    if js is not None
                    else {}
                ),
            }
        )
        rec = st["recording"]
        if rec is not None:
            self.rec_label.setText(
                f"● REC {rec['frames'] / s.fps:5.1f} s → {Path(rec['path']).name}"
            )

    # -- statistics / life cycle --------------------------------------------------------------

    def run_stats(self) -> dict[str, Any]:
        """The run's statistics: frames shown/dropped/repeated, latency, ui_ms median/p99."""
        shown, repeated, dropped = self._shown_total, self._repeated_total, self._dropped_total
        latency = self._last_latency
        j = self.jitter
        if j is not None:
            st = j.stats()
            shown += st.shown
            repeated += st.repeated
            dropped += st.dropped_late + st.dropped_overflow
            latency = round(st.audio_to_photon_ms, 1)
        s = self.session
        ss = s.stats() if s is not None else self._last_session_stats
        ui = self.ui_ms()
        return {
            "frames_shown": shown,
            "frames_dropped": dropped + int(ss.get("output_dropped", 0) or 0),
            "frames_repeated": repeated,
            "frames_produced": ss.get("frames_produced"),
            # audio a starved analysis skipped to keep the mouth on the present
            # (pipeline/live_analysis.py)
            "audio_skipped_s": ss.get("audio_skipped_s"),
            # frames not started so that the starved analysis could catch up
            # (pipeline/shedding.py)
            "frames_shed": ss.get("shed_ticks"),
            "latency_ms": latency,
            "lipsync_lag_ms": ss.get("lipsync_lag_ms"),
            "ui_ms_median": ui["median"],
            "ui_ms_p99": ui["p99"],
            # per stage {"median", "p99", "n"} ms: the snapshot the stats panel shows
            "stage_ms": ss.get("stage_ms"),
            "preset": self.settings["preset"],
            "presenter": getattr(self.preview, "name", "?"),
            # the session names its source; a run stopped before it started names the planned one
            "source": ss.get("source") or self._planned_source(),
        }

    def _planned_source(self) -> str | None:
        if self._source_kind == "file" and self._audio_file:
            return f"file: {Path(self._audio_file).name}"
        return None

    def shutdown(self, timeout: float = 15.0) -> None:
        """Stop the session synchronously (used on close: the app is going away anyway)."""
        with self._bg_lock:
            self._closing = True
        # a start or stop still running on a helper thread: let it end, then take its result
        for t in self._bg_threads:
            t.join(timeout)
        self._bg_threads = []
        from PySide6.QtCore import QCoreApplication

        QCoreApplication.processEvents()  # a result already queued for the UI thread
        self._tick_timer.stop()
        self._meter_timer.stop()
        session = self.session
        if session is not None:
            self._collect_jitter_stats()
            self.session = None
            self.jitter = None
            with contextlib.suppress(Exception):
                result = session.stop()
                if isinstance(result, dict):
                    self.last_recording = result
        if self._pump is not None:
            self._pump.thread.join(timeout)
            self._pump = None

    def closeEvent(self, event: Any) -> None:
        g = self.geometry()
        self.settings["geometry"] = [g.x(), g.y(), g.width(), g.height()]
        self.settings.save()
        self.shutdown()
        if self._first_render is not None:  # no session was started to adopt it
            self._first_render.close()
            self._first_render = None
        self.stats_overlay.finish_obs()
        # the windows that belong to this one go with it (else the app never quits)
        if self.stage_presenter is not None:
            with contextlib.suppress(Exception):
                self.stage_presenter.widget.close()
        if self.vcam is not None:
            with contextlib.suppress(Exception):
                self.vcam.finish()
            self.vcam = None
        super().closeEvent(event)
