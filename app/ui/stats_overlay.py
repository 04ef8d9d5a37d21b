"""`StatsOverlay`: a small semi-transparent panel over the idol with the live numbers.

`update_stats(stats)` takes a plain dict (every key optional, unknown keys ignored)::

    {
        "fps": 29.9,                         # frames presented per second
        "target_fps": 30,                    # the graph's rate (bars turn red over 1/target)
        "stages": {"render": 4.2, "stylize": [17.9, 18.3, ...],
                   "upscale": {"median": 6.1, "p99": 9.0}},   # ms per stage: the latest value
                                             # (collected here), a list of recent ones, or a
                                             # summary (its median is collected, p99 shown)
        "drops": 3, "repeats": 1,            # presenter counters (totals)
        "latency_ms": 118.0,                 # estimated audio-to-photon latency
        "latency_parts": {"audio in": 12, "lip-sync": 12, "render": 30, "present": 64},
        "quality": {"level": 1, "rungs": 7, "rung": "1 step 640x360 temporal vsr x4",
                    "last_event": {"direction": "down", "to": "...", "reason": "P99 ..."}},
                                             # the quality ladder (LiveSession.stats()
                                             # ["quality"]; None / absent: no ladder)
    }

Aliases, so `LiveSession.stats()` / `PresenterStats` fields can be passed as they are:
"stage_ms" for "stages"; "dropped", or "dropped_late" + "dropped_overflow", for "drops";
"repeated" for "repeats"; "audio_to_photon_ms" for "latency_ms".

The latency is what a streamer types into OBS's audio sync offset for the microphone, so it
has a "Copy" button (the whole number of ms to the clipboard) and a "Set in OBS" button that
sends it through `app.obs_sync.ObsSync` on a worker thread — enabled once `set_obs()` gave
the overlay an ObsSync (and, optionally, the input to delay; otherwise the user picks one).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import deque
from collections.abc import Iterable, Sequence

from PySide6.QtCore import QObject, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPainter, QPen
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

__all__ = ["StageHistogram", "StatsOverlay", "histogram", "quality_text"]

HISTORY = 120  # frame times kept per stage (4 s at 30 fps)
BINS = 12


def histogram(values: Iterable[float], budget_ms: float, bins: int = BINS) -> list[int]:
    """Counts of `values` in `bins` equal bins over 0 .. 2·budget (the last bin takes the rest)."""
    counts = [0] * bins
    top = max(2.0 * budget_ms, 1e-6)
    for v in values:
        if not math.isfinite(v):
            continue
        counts[min(bins - 1, max(0, int(v / top * bins)))] += 1
    return counts


class StageHistogram(QWidget):
    """One stage: its name, the latest and mean ms, and tiny bars of its frame-time spread."""

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.values: deque[float] = deque(maxlen=HISTORY)
        self.budget_ms = 1000.0 / 30
        self.p99: float | None = None  # from a summary, when the caller sends one
        self.setMinimumHeight(18)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(260, 18)

    @property
    def counts(self) -> list[int]:
        return histogram(self.values, self.budget_ms)

    @property
    def latest(self) -> float | None:
        return self.values[-1] if self.values else None

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    def text(self) -> str:
        if not self.values:
            return f"{self.name}  –"
        spread = f"p99 {self.p99:.1f}" if self.p99 is not None else f"avg {self.mean:.1f}"
        return f"{self.name}  {self.latest:.1f} ms ({spread})"

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        w, h = self.width(), self.height()
        bars_w = min(96, w // 3)
        p.setPen(QColor(235, 235, 235))
        p.drawText(
            QRectF(0, 0, w - bars_w - 6, h),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
            self.text(),
        )
        counts = self.counts
        peak = max(counts) or 1
        x0 = w - bars_w
        bw = bars_w / len(counts)
        for i, c in enumerate(counts):
            if not c:
                continue
            over = (i + 0.5) / len(counts) * 2.0 > 1.0  # bins past the frame budget
            p.fillRect(
                QRectF(
                    x0 + i * bw, h - 1 - (h - 3) * c / peak, max(1.0, bw - 1), (h - 3) * c / peak
                ),
                QColor(235, 90, 80) if over else QColor(110, 210, 130),
            )
        p.setPen(QPen(QColor(255, 255, 255, 90)))
        mid = x0 + bars_w / 2  # the frame budget
        p.drawLine(int(mid), 0, int(mid), h)
        p.end()


class _Bridge(QObject):
    done = Signal(str, int)
    failed = Signal(str, str)  # the one-line reason; the input OBS no longer has, or ""


class StatsOverlay(QWidget):
    """Semi-transparent live statistics; see the module notes for the `stats` dict."""

    obsOffsetSet = Signal(str, int)  # input name, ms — after OBS accepted the offset
    obsFailed = Signal(str)  # one-line reason
    obsInputMissing = Signal(str)  # OBS has no input of the remembered name any more

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StatsOverlay")
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, False)
        self.setAutoFillBackground(False)
        self.stats: dict = {}
        self.latency_ms: float | None = None
        self.stages: dict[str, StageHistogram] = {}
        self.obs_sync = None
        self.obs_input: str | None = None
        self._obs_busy = False
        self._obs_thread: threading.Thread | None = None
        # parented: Qt deletes it with this widget, on the UI thread (a parentless one would be
        # deleted by Python's collector on whichever thread happened to run it)
        self._bridge = _Bridge(self)
        self._bridge.done.connect(self._obs_done)
        self._bridge.failed.connect(self._obs_failed)

        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        self.fps_label = QLabel("– fps")
        big = QFont(self.font())
        big.setPointSizeF(big.pointSizeF() * 1.4)
        big.setBold(True)
        self.fps_label.setFont(big)
        self.counters_label = QLabel("drops 0 · repeats 0")
        self.latency_label = QLabel("audio → photon: – ms")
        self.quality_label = QLabel("")  # the quality ladder's rung and last change
        self.quality_label.setWordWrap(True)
        self.quality_label.setFont(small)
        self.quality_label.hide()
        self.latency_label.setFont(big)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the latency (ms) for OBS's audio sync offset")
        self.copy_button.clicked.connect(self.copy_latency)
        self.obs_button = QPushButton("Set in OBS")
        self.obs_button.clicked.connect(self.set_in_obs)
        self.status_label = QLabel("")
        self.status_label.setWordWrap(True)
        self.status_label.setFont(small)
        for w in (
            self.fps_label,
            self.counters_label,
            self.latency_label,
            self.quality_label,
            self.status_label,
        ):
            w.setStyleSheet("color: rgb(240, 240, 240); background: transparent;")
        for b in (self.copy_button, self.obs_button):
            b.setStyleSheet(
                "QPushButton { color: white; background: rgba(255,255,255,40); "
                "border: 1px solid rgba(255,255,255,90); border-radius: 4px; padding: 2px 8px; }"
                "QPushButton:disabled { color: rgba(255,255,255,90); }"
            )

        self.stage_box = QVBoxLayout()
        self.stage_box.setSpacing(1)
        top = QHBoxLayout()
        top.addWidget(self.fps_label)
        top.addStretch(1)
        top.addWidget(self.counters_label)
        lat = QHBoxLayout()
        lat.addWidget(self.latency_label)
        lat.addStretch(1)
        lat.addWidget(self.copy_button)
        lat.addWidget(self.obs_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(self.stage_box)
        layout.addWidget(self.quality_label)
        layout.addLayout(lat)
        layout.addWidget(self.status_label)
        self._refresh_buttons()

    # -- data -----------------------------------------------------------------------------------

    def update_stats(self, stats: dict) -> None:
        """Show a new snapshot (call it a few times a second from the GUI thread)."""
        self.stats = dict(stats)
        fps = _num(stats.get("fps"))
        target = _num(stats.get("target_fps"))
        if fps is not None:
            self.fps_label.setText(f"{fps:.1f} fps" + (f" / {target:g}" if target else ""))
        drops = stats.get("drops", stats.get("dropped"))
        if drops is None and ("dropped_late" in stats or "dropped_overflow" in stats):
            drops = int(stats.get("dropped_late") or 0) + int(stats.get("dropped_overflow") or 0)
        repeats = stats.get("repeats", stats.get("repeated"))
        if drops is not None or repeats is not None:
            self.counters_label.setText(f"drops {int(drops or 0)} · repeats {int(repeats or 0)}")
        budget = 1000.0 / target if target else (1000.0 / fps if fps else None)
        stages = stats.get("stages", stats.get("stage_ms")) or {}
        for name, value in stages.items():
            hist = self.stages.get(name)
            if hist is None:
                hist = self.stages[name] = StageHistogram(str(name), self)
                self.stage_box.addWidget(hist)
            if budget:
                hist.budget_ms = budget
            if isinstance(value, dict):
                hist.p99 = _num(value.get("p99"))
                value = value.get("median", value.get("mean"))
            if isinstance(value, Sequence) and not isinstance(value, str):
                hist.values.clear()
                hist.values.extend(float(v) for v in value)
            elif _num(value) is not None:
                hist.values.append(float(value))
            hist.update()
        latency = _num(stats.get("latency_ms", stats.get("audio_to_photon_ms")))
        if latency is not None:
            self.latency_ms = latency
            self.latency_label.setText(f"audio → photon: {round(latency)} ms")
            parts = stats.get("latency_parts") or {}
            tip = "\n".join(f"{k}: {float(v):.0f} ms" for k, v in parts.items())
            self.latency_label.setToolTip(
                (tip + "\n\n" if tip else "")
                + "Delay your microphone in OBS by this much (Advanced Audio Properties ▸ "
                "Sync Offset) so the voice matches the idol's mouth."
            )
        quality = stats.get("quality")
        if isinstance(quality, dict) and quality.get("rung"):
            self.quality_label.setText(quality_text(quality))
            last = quality.get("last_event") or {}
            self.quality_label.setToolTip(str(last.get("reason", "")))
            self.quality_label.show()
        self._refresh_buttons()
        self.update()

    def latency_text(self) -> str:
        """The latency as OBS wants it: whole milliseconds ('' before the first estimate)."""
        return "" if self.latency_ms is None else str(round(self.latency_ms))

    # -- actions --------------------------------------------------------------------------------

    def copy_latency(self) -> None:
        text = self.latency_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.status_label.setText(f"copied {text} ms — paste it into OBS's Sync Offset")

    def set_obs(self, obs_sync=None, input_name: str | None = None) -> None:
        """Enable "Set in OBS" with an `app.obs_sync.ObsSync` (None disables it).

        `input_name`: the OBS audio input to delay (the microphone); None asks the user.
        """
        self.obs_sync = obs_sync
        self.obs_input = input_name
        self._refresh_buttons()

    def set_in_obs(self) -> None:
        if self.obs_sync is None or self.latency_ms is None or self._obs_busy:
            return
        name = self.obs_input
        if not name:
            name = self._choose_input()
            if not name:
                return
        ms = round(self.latency_ms)
        self._obs_busy = True
        self._refresh_buttons()
        self.status_label.setText(f"setting {name!r} to {ms} ms in OBS…")
        sync, bridge = self.obs_sync, self._bridge

        def work() -> None:
            try:
                got = sync.set_audio_sync_offset(name, ms)
                bridge.done.emit(name, int(got if got is not None else ms))
            except Exception as exc:  # ObsError, or anything a custom client raises
                from app.obs_sync import ObsNoSuchInput

                missing = name if isinstance(exc, ObsNoSuchInput) else ""
                bridge.failed.emit(" ".join(str(exc).split()) or type(exc).__name__, missing)

        self._obs_thread = threading.Thread(target=work, name="kagura-obs-sync", daemon=True)
        self._obs_thread.start()

    def finish_obs(self, timeout: float = 4.0) -> None:
        """Before the window goes: wait (at most `timeout` s, a little over the OBS client's own
        timeout) for a "Set in OBS" still under way, and cut the bridge, so its thread never
        emits into a widget Qt has destroyed."""
        thread, self._obs_thread = self._obs_thread, None
        if thread is not None:
            thread.join(timeout)
        with contextlib.suppress(RuntimeError, TypeError):  # already disconnected
            self._bridge.done.disconnect(self._obs_done)
            self._bridge.failed.disconnect(self._obs_failed)

    def _choose_input(self) -> str | None:
        try:
            names = list(self.obs_sync.list_audio_inputs())
        except Exception as exc:
            self._obs_failed(" ".join(str(exc).split()))
            return None
        if not names:
            self._obs_failed("OBS has no audio inputs; add your microphone to OBS first")
            return None
        if len(names) == 1:
            return names[0]
        name, ok = QInputDialog.getItem(
            self, "Set in OBS", "Which OBS input is your microphone?", names, 0, False
        )
        if ok and name:
            self.obs_input = name
            return name
        return None

    def _obs_done(self, name: str, ms: int) -> None:
        self._obs_busy = False
        self.obs_input = name
        self.status_label.setText(f"OBS: {name!r} now delayed by {ms} ms")
        self._refresh_buttons()
        self.obsOffsetSet.emit(name, ms)

    def _obs_failed(self, message: str, missing: str = "") -> None:
        self._obs_busy = False
        if missing and missing == self.obs_input:
            # renamed or removed in OBS: forget it, so the next press asks again
            self.obs_input = None
            message += " — press Set in OBS again to pick the input"
            self.obsInputMissing.emit(missing)
        self.status_label.setText(message)
        self._refresh_buttons()
        self.obsFailed.emit(message)

    def _refresh_buttons(self) -> None:
        have = self.latency_ms is not None
        self.copy_button.setEnabled(have)
        self.obs_button.setEnabled(have and self.obs_sync is not None and not self._obs_busy)
        self.obs_button.setToolTip(
            "Send the latency to OBS as your microphone's audio sync offset"
            if self.obs_sync is not None
            else "Connect to OBS in the settings (Tools ▸ WebSocket Server Settings in OBS)"
        )

    # -- look -----------------------------------------------------------------------------------

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(12, 12, 20, 170))
        p.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 8, 8)
        p.end()


def quality_text(q: dict) -> str:
    """'quality 2/7: <the rung's name>' (and that the ladder is held while its lower rungs are
    set up) and, after a change, 'last ↓ <its reason>'."""
    level, n = q.get("level"), q.get("rungs")
    head = f"quality {int(level) + 1}/{int(n)}" if level is not None and n else "quality"
    text = f"{head}: {q.get('rung')}"
    if q.get("held"):  # the lower rungs are still being set up: measured, no change yet
        text += " (setting up the lower rungs)"
    last = q.get("last_event")
    if isinstance(last, dict) and last.get("reason"):
        arrow = "↓" if last.get("direction", "down") == "down" else "↑"
        text += f"\nlast {arrow} {last.get('reason')}"
    return text


def _num(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
