"""`CalibrationDialog`: record your vowels for live lip-sync (the desktop twin of
`kagura calibrate`, app/cmd_calibrate.py, on audio/calibration.py's code).

One vowel at a time — A I U E O, then an optional closed-mouth hum N — with a big prompt and a
Record button. Each take lasts `seconds` (2 s) and is recorded on a worker thread through
`audio.capture.Capture`, so the window never freezes; while it records, a level meter and a
confidence meter (how strongly the *current* profile hears the vowel being asked for) move.
A take without enough steady voice is refused with a hint and can be repeated; any vowel can
be re-recorded by clicking it. Once A–O are in, a profile is built
(`calibrate_from_recordings`) and every take shows how confidently the new profile recognises
it. "Test" listens live and shows the detected vowel. "Save" writes the profile
(`save_profile` first copies the old one to a timestamped backup beside it), "Restore
previous" brings back the newest backup (the profile it replaces is backed up in turn, so a
second press undoes the first) and "Reset to default" writes the built-in default profile
(again backing up the current one). Each of the three emits `profileSaved(path)`.

`recorder(seconds, device) -> (samples, sample_rate)` replaces the microphone (tests,
alternative sources); if it also accepts keyword arguments `on_block(samples, sr)` and
`on_start()` it drives the live meters like the built-in recorder does.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from audio.calibration import (
    Profile,
    ProfileError,
    VowelMatcher,
    calibrate_from_recordings,
    default_profile_path,
    load_profile,
    save_profile,
    templates_from_signal,
    user_profile_path,
    voiced_mask,
)
from audio.mfcc import mfcc_frames

__all__ = ["PROMPTS", "CalibrationDialog", "capture_recorder", "find_backups", "vowel_confidence"]

RATE = 16000  # profiles are built at the analysis rate
VOWEL_ORDER = ("A", "I", "U", "E", "O", "N")
KANA = {"A": "あ", "I": "い", "U": "う", "E": "え", "O": "お", "N": "ん"}
PROMPTS = {
    "A": "Hold 'aaa' as in 'father'",
    "I": "Hold 'iii' as in 'see'",
    "U": "Hold 'uuu' as in 'food'",
    "E": "Hold 'eee' as in 'bed'",
    "O": "Hold 'ooo' as in 'go'",
    "N": "Hum 'nnn' with your mouth closed (optional)",
}
LEVEL_FLOOR_DB = -60.0

Recorder = Callable[..., tuple[np.ndarray, int]]


# --------------------------------------------------------------------------------------------
# recording and scoring (no Qt)


def capture_recorder(
    seconds: float,
    device: str | int | None = None,
    *,
    on_block: Callable[[np.ndarray, int], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> tuple[np.ndarray, int]:
    """The dialog's default recorder: audio.capture.record at the profile rate, feeding the
    live meters (on_block) and starting the take's clock when sound flows (on_start)."""
    from audio.capture import record

    return record(seconds, device, sample_rate=RATE, on_block=on_block, on_start=on_start)


def _accepts(fn: Callable, *names: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return True
    return all(n in params for n in names)


def _to_rate(x: np.ndarray, sr: int) -> np.ndarray:
    from audio.features import resample_mono

    return resample_mono(np.asarray(x, np.float32).reshape(-1), int(sr), RATE)


def vowel_confidence(profile: Profile, samples: np.ndarray, vowel: str) -> tuple[str, float]:
    """(vowel the profile hears most, mean probability of `vowel`) over the voiced frames."""
    from core.avatar import VOWELS

    f = mfcc_frames(samples, profile.sample_rate, profile.mfcc)
    mask = voiced_mask(f.level_db, f.flatness, f.periodicity)
    if not mask.any():
        return "-", 0.0
    p = VowelMatcher(profile).probs(f.mfcc[mask]).mean(axis=0)
    return VOWELS[int(np.argmax(p))], float(p[VOWELS.index(vowel)])


def find_backups(path: str | Path) -> list[Path]:
    """Backups `save_profile` made of `path`, newest first (by the time stamp in the name)."""
    p = Path(path)
    found = list(p.parent.glob(f"{p.stem}.*.bak{p.suffix}"))
    return sorted(found, key=lambda b: b.name[len(p.stem) + 1 :], reverse=True)


def _db(x: np.ndarray) -> float:
    if len(x) == 0:
        return -120.0
    return float(20 * np.log10(np.sqrt(np.mean(np.square(x, dtype=np.float64))) + 1e-9))


# --------------------------------------------------------------------------------------------
# the dialog


class _Bridge(QObject):
    """Carries results from worker threads to the GUI thread (queued signal delivery)."""

    started = Signal(str)
    level = Signal(str, float, float)  # vowel, level dBFS, confidence 0..1
    done = Signal(str, object, int)  # vowel, samples, rate
    failed = Signal(str, str)


class CalibrationDialog(QDialog):
    """Per-vowel calibration; see the module notes. Emits `profileSaved(path)`."""

    profileSaved = Signal(str)
    recordingStarted = Signal(str)  # the vowel: sound now goes into the take
    # the vowel, and "" when the take was usable, else why not (one line)
    vowelRecorded = Signal(str, str)
    profileReady = Signal()  # all of A-O recorded: a new profile exists (unsaved)

    def __init__(
        self,
        parent: QWidget | None = None,
        device: str | int | None = None,
        recorder: Recorder | None = None,
        *,
        seconds: float = 2.0,
        profile_path: str | Path | None = None,
        include_hum: bool = True,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Calibrate lip-sync")
        self.device = device
        self.recorder: Recorder = recorder or capture_recorder
        self.seconds = float(seconds)
        self._profile_path = Path(profile_path) if profile_path is not None else None
        self.recordings: dict[str, np.ndarray] = {}  # vowel -> float32 at RATE
        self.results: dict[str, tuple[str, float]] = {}  # vowel -> (heard as, confidence)
        self.profile: Profile | None = None  # the new, unsaved profile
        self.current = "A"
        self.recording = False
        self._record_t0 = 0.0
        self._reference = self._load_current()  # for the live confidence meter
        self._reference_matcher = VowelMatcher(self._reference)
        self._test: _LiveTest | None = None

        self._bridge = _Bridge(self)  # parented: deleted by Qt on the UI thread, never by the GC
        self._bridge.started.connect(self._on_started)
        self._bridge.level.connect(self._on_level)
        self._bridge.done.connect(self._on_done)
        self._bridge.failed.connect(self._on_failed)

        self._build(include_hum)
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(50)
        self._progress_timer.timeout.connect(self._tick_progress)
        self._select(self.current)

    # -- layout ---------------------------------------------------------------------------------

    def _build(self, include_hum: bool) -> None:
        big = QFont(self.font())
        big.setPointSizeF(big.pointSizeF() * 4)
        big.setBold(True)
        self.prompt_label = QLabel()
        self.prompt_label.setFont(big)
        self.prompt_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint_label = QLabel()
        self.hint_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self.vowel_buttons: dict[str, QPushButton] = {}
        self.result_labels: dict[str, QLabel] = {}
        grid = QGridLayout()
        for col, v in enumerate(VOWEL_ORDER):
            b = QPushButton(f"{v} {KANA[v]}")
            b.setCheckable(True)
            b.clicked.connect(lambda _=False, v=v: self._select(v))
            r = QLabel("–")
            r.setAlignment(Qt.AlignmentFlag.AlignCenter)
            grid.addWidget(b, 0, col)
            grid.addWidget(r, 1, col)
            self.vowel_buttons[v], self.result_labels[v] = b, r
        self.hum_check = QCheckBox("include a hum (N) for closed-mouth sounds")
        self.hum_check.setChecked(include_hum)
        self.hum_check.toggled.connect(self._hum_toggled)

        self.record_button = QPushButton()
        self.record_button.setDefault(True)
        self.record_button.clicked.connect(self.start_recording)
        self.skip_button = QPushButton("Skip the hum")
        self.skip_button.clicked.connect(lambda: self.hum_check.setChecked(False))
        self.time_bar = QProgressBar()
        self.time_bar.setRange(0, 1000)
        self.time_bar.setTextVisible(False)
        self.level_bar = QProgressBar()
        self.level_bar.setRange(0, 100)
        self.level_bar.setFormat("level %v %")
        self.confidence_bar = QProgressBar()
        self.confidence_bar.setRange(0, 100)
        self.confidence_bar.setFormat("heard as asked: %v %")
        self.status_label = QLabel("")
        self.status_label.setWordWrap(True)

        self.test_button = QPushButton("Test")
        self.test_button.setCheckable(True)
        self.test_button.setToolTip("Listen live and show which vowel is detected")
        self.test_button.toggled.connect(self.set_test_mode)
        self.detected_label = QLabel("")
        self.detected_label.setFont(big)
        self.detected_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.save_button = QPushButton("Save")
        self.save_button.clicked.connect(self.save)
        self.restore_button = QPushButton("Restore previous")
        self.restore_button.clicked.connect(self.restore_previous)
        self.reset_button = QPushButton("Reset to default")
        self.reset_button.clicked.connect(self.reset_to_default)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)

        rec_row = QHBoxLayout()
        rec_row.addWidget(self.record_button, 2)
        rec_row.addWidget(self.skip_button, 1)
        meters = QGridLayout()
        meters.addWidget(QLabel("time"), 0, 0)
        meters.addWidget(self.time_bar, 0, 1)
        meters.addWidget(QLabel("level"), 1, 0)
        meters.addWidget(self.level_bar, 1, 1)
        meters.addWidget(QLabel("confidence"), 2, 0)
        meters.addWidget(self.confidence_bar, 2, 1)
        buttons = QHBoxLayout()
        for b in (self.test_button, self.save_button, self.restore_button, self.reset_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.close_button)

        layout = QVBoxLayout(self)
        layout.addWidget(self.prompt_label)
        layout.addWidget(self.hint_label)
        layout.addLayout(grid)
        layout.addWidget(self.hum_check)
        layout.addLayout(rec_row)
        layout.addLayout(meters)
        layout.addWidget(self.detected_label)
        layout.addWidget(self.status_label)
        layout.addLayout(buttons)

    # -- state ----------------------------------------------------------------------------------

    @property
    def profile_path(self) -> Path:
        """Where Save writes (the user's profile unless given; KAGURA_CONFIG_DIR is honoured)."""
        return self._profile_path or user_profile_path()

    def vowels(self) -> tuple[str, ...]:
        return VOWEL_ORDER if self.hum_check.isChecked() else VOWEL_ORDER[:5]

    def _load_current(self) -> Profile:
        try:
            p = self.profile_path
            return load_profile(p if p.exists() else default_profile_path())
        except ProfileError:
            return load_profile(default_profile_path())

    def _select(self, vowel: str) -> None:
        if self.recording:
            return
        self.current = vowel
        for v, b in self.vowel_buttons.items():
            b.setChecked(v == vowel)
            b.setEnabled(v in self.vowels())
        self.prompt_label.setText(f"{KANA[vowel]}  {vowel}")
        self.hint_label.setText(f"{PROMPTS[vowel]} for {self.seconds:g} s, then relax.")
        again = "again " if vowel in self.recordings else ""
        self.record_button.setText(f"● Record {vowel} {again}({self.seconds:g} s)")
        self.skip_button.setVisible(vowel == "N")
        self._refresh()

    def _refresh(self) -> None:
        idle = not self.recording
        testing = self._test is not None
        self.record_button.setEnabled(idle and not testing and self.current in self.vowels())
        self.skip_button.setEnabled(idle)
        self.hum_check.setEnabled(idle)
        for v, b in self.vowel_buttons.items():
            b.setEnabled(idle and v in self.vowels())
        self.test_button.setEnabled(idle)
        self.save_button.setEnabled(idle and self.profile is not None)
        self.restore_button.setEnabled(idle and bool(find_backups(self.profile_path)))
        self.reset_button.setEnabled(idle)

    def _hum_toggled(self, on: bool) -> None:
        if not on:
            self.recordings.pop("N", None)
            self.results.pop("N", None)
            self.result_labels["N"].setText("–")
            if self.current == "N":
                self._select("O")
        self._rebuild_profile()
        self._refresh()

    # -- recording ------------------------------------------------------------------------------

    def start_recording(self) -> None:
        """Record the current vowel on a worker thread (the Record button)."""
        if self.recording or self._test is not None:
            return
        vowel = self.current
        self.recording = True
        self.status_label.setText(f"get ready: {PROMPTS[vowel].lower()}…")
        self.time_bar.setValue(0)
        self.level_bar.setValue(0)
        self.confidence_bar.setValue(0)
        self._record_t0 = 0.0
        self._refresh()
        bridge, recorder, device, seconds = self._bridge, self.recorder, self.device, self.seconds
        matcher, ref = self._reference_matcher, self._reference
        live = _accepts(recorder, "on_block", "on_start")

        def on_start() -> None:
            bridge.started.emit(vowel)

        meter = _Meter(matcher, ref, vowel)

        def on_block(block: np.ndarray, sr: int) -> None:
            level, conf = meter.push(block, sr)
            if level is not None:
                bridge.level.emit(vowel, level, conf)

        def work() -> None:
            try:
                if live:
                    x, sr = recorder(seconds, device, on_block=on_block, on_start=on_start)
                else:
                    on_start()
                    x, sr = recorder(seconds, device)
                bridge.done.emit(vowel, np.asarray(x, np.float32), int(sr))
            except Exception as exc:  # CaptureError, AudioError, a recorder's own errors
                bridge.failed.emit(vowel, " ".join(str(exc).split()) or type(exc).__name__)

        threading.Thread(target=work, name="kagura-calibrate-record", daemon=True).start()

    def _on_started(self, vowel: str) -> None:
        self._record_t0 = time.monotonic()
        self._progress_timer.start()
        self.status_label.setText(f"recording {vowel}: {PROMPTS[vowel].lower()}")
        self.recordingStarted.emit(vowel)

    def _tick_progress(self) -> None:
        if self._record_t0:
            frac = (time.monotonic() - self._record_t0) / max(self.seconds, 1e-3)
            self.time_bar.setValue(min(1000, int(frac * 1000)))

    def _on_level(self, vowel: str, level_db: float, confidence: float) -> None:
        span = -LEVEL_FLOOR_DB
        self.level_bar.setValue(int(np.clip((level_db - LEVEL_FLOOR_DB) / span, 0, 1) * 100))
        self.confidence_bar.setValue(round(confidence * 100))

    def _on_failed(self, vowel: str, message: str) -> None:
        self._end_take()
        self.status_label.setText(f"{vowel}: {message}")
        self.vowelRecorded.emit(vowel, message)

    def _end_take(self) -> None:
        self.recording = False
        self._progress_timer.stop()
        self.time_bar.setValue(1000)
        self._refresh()

    def _on_done(self, vowel: str, samples: np.ndarray, sr: int) -> None:
        self._end_take()
        x = _to_rate(samples, sr)
        peak = float(np.max(np.abs(x))) if len(x) else 0.0
        try:
            templates_from_signal(x, RATE, self._reference.mfcc)
        except ValueError as exc:
            self.result_labels[vowel].setText("too quiet")
            self.status_label.setText(
                f"{vowel}: not enough steady voice ({exc}; peak "
                f"{20 * np.log10(peak + 1e-9):.0f} dBFS) — hold the vowel the whole "
                f"{self.seconds:g} s, a little louder, and record it again"
            )
            self.vowelRecorded.emit(vowel, f"not enough steady voice ({exc})")
            return
        self.recordings[vowel] = x
        self.status_label.setText(
            f"{vowel}: recorded {len(x) / RATE:.1f} s, peak {20 * np.log10(peak + 1e-9):.0f} dBFS"
        )
        self._rebuild_profile()
        if self.profile is None:
            self.result_labels[vowel].setText("✓")
        nxt = next((v for v in self.vowels() if v not in self.recordings), None)
        self._select(nxt or vowel)
        if nxt is None:
            self.status_label.setText(
                self.status_label.text() + " — all vowels in: check the scores, Test, then Save"
            )
        self.vowelRecorded.emit(vowel, "")

    def _rebuild_profile(self) -> None:
        if not all(v in self.recordings for v in VOWEL_ORDER[:5]):
            self.profile = None
            return
        recs = {v: x for v, x in self.recordings.items() if v in self.vowels()}
        try:
            self.profile = calibrate_from_recordings(
                recs, RATE, self._reference.mfcc, source="kagura calibration dialog"
            )
        except ValueError as exc:
            self.profile = None
            self.status_label.setText(str(exc))
            return
        for v, x in recs.items():
            heard, conf = vowel_confidence(self.profile, x, v)
            self.results[v] = (heard, conf)
            mark = "" if heard == v else f" (as {heard})"
            self.result_labels[v].setText(f"{conf:.0%}{mark}")
        self._refresh()
        self.profileReady.emit()

    # -- test mode ------------------------------------------------------------------------------

    def set_test_mode(self, on: bool) -> None:
        """Listen to the device and show the detected vowel (the new profile, else the saved)."""
        if on and self._test is None:
            profile = self.profile or self._load_current()
            try:
                self._test = _LiveTest(self.device, profile)
            except Exception as exc:
                self.status_label.setText(f"test: {' '.join(str(exc).split())}")
                self.test_button.setChecked(False)
                return
            self._test_timer = QTimer(self)
            self._test_timer.setInterval(40)
            self._test_timer.timeout.connect(self._tick_test)
            self._test_timer.start()
            self.status_label.setText("testing: say any vowel")
        elif not on and self._test is not None:
            self._test_timer.stop()
            self._test.close()
            self._test = None
            self.detected_label.setText("")
        if self.test_button.isChecked() != (self._test is not None):
            self.test_button.setChecked(self._test is not None)
        self._refresh()

    @property
    def detected_vowel(self) -> str | None:
        """What test mode hears now (None: silent, or not testing)."""
        return None if self._test is None else self._test.vowel

    def _tick_test(self) -> None:
        if self._test is None:
            return
        self._test.poll()
        t = self._test
        self._on_level(t.vowel or "", t.level_db, t.confidence)
        if t.vowel is None:
            self.detected_label.setText("…")
        else:
            self.detected_label.setText(f"{KANA[t.vowel]} {t.vowel}  {t.confidence:.0%}")

    # -- save / restore / reset -----------------------------------------------------------------

    def save(self) -> Path | None:
        """Write the new profile (the old one is backed up first); returns the backup path."""
        if self.profile is None:
            return None
        return self._write(self.profile, "saved")

    def restore_previous(self) -> Path | None:
        """Bring back the newest backup; the profile it replaces is backed up in turn."""
        backups = find_backups(self.profile_path)
        if not backups:
            self.status_label.setText("no earlier profile to restore")
            return None
        try:
            previous = load_profile(backups[0])
        except ProfileError as exc:
            self.status_label.setText(str(exc))
            return None
        self._write(previous, f"restored {backups[0].name}")
        return backups[0]

    def reset_to_default(self) -> None:
        """Write the built-in default profile (the current one is backed up first)."""
        self._write(load_profile(default_profile_path()), "reset to the built-in default")

    def _write(self, profile: Profile, what: str) -> Path | None:
        path = self.profile_path
        try:
            backup = save_profile(profile, path)
        except OSError as exc:
            self.status_label.setText(f"{path}: cannot write ({exc.strerror or exc})")
            return None
        kept = f"; the previous one is kept as {backup.name}" if backup else ""
        self.status_label.setText(f"{what}: {path}{kept}")
        self._reference = profile
        self._reference_matcher = VowelMatcher(profile)
        self._refresh()
        self.profileSaved.emit(str(path))
        return backup

    # -- closing --------------------------------------------------------------------------------

    def done(self, result: int) -> None:
        self.set_test_mode(False)
        self._progress_timer.stop()
        super().done(result)

    def closeEvent(self, event) -> None:
        self.set_test_mode(False)
        super().closeEvent(event)


class _Meter:
    """Level and confidence of the newest ~50 ms of a take (runs on the recording thread)."""

    def __init__(self, matcher: VowelMatcher, profile: Profile, vowel: str) -> None:
        from core.avatar import VOWELS

        self.matcher, self.profile = matcher, profile
        self.index = VOWELS.index(vowel)
        self.tail = np.zeros(0, np.float32)
        self.last = 0.0

    def push(self, block: np.ndarray, sr: int) -> tuple[float | None, float]:
        keep = int(0.05 * sr)
        self.tail = np.concatenate([self.tail, np.asarray(block, np.float32)])[-keep:]
        now = time.monotonic()
        if now - self.last < 0.04 or len(self.tail) < keep:
            return None, 0.0
        self.last = now
        x = _to_rate(self.tail, sr)
        f = mfcc_frames(x, RATE, self.profile.mfcc)
        level = _db(x)
        if len(f) == 0 or not (f.flatness[-1] < 0.3 or f.periodicity[-1] > 0.3):
            return level, 0.0
        p = self.matcher.probs(f.mfcc[-1])
        return level, float(p[self.index])


class _LiveTest:
    """Test mode: a Capture and the live lip-sync engine, polled from a GUI timer."""

    def __init__(self, device: str | int | None, profile: Profile) -> None:
        from audio.capture import Capture
        from audio.live_lipsync import LiveLipSync

        self.cap = Capture(device, sample_rate=RATE, channels=1, buffer_s=4.0)
        self.reader = self.cap.reader()
        self.lips = LiveLipSync(profile, sample_rate=RATE)
        self.rate = self.cap.sample_rate
        self.vowel: str | None = None
        self.confidence = 0.0
        self.level_db = -120.0
        self.history: list[str] = []  # every detected (non-silent) vowel, for tests and logs

    def poll(self) -> None:
        block = self.reader.read()
        if not len(block):
            return
        x = block[:, 0]
        if self.rate != RATE:
            x = _to_rate(x, self.rate)
        frames = self.lips.push(x)
        if not frames:
            return
        last = frames[-1]
        self.level_db = float(last.level_db)
        if last.silent:
            self.vowel, self.confidence = None, 0.0
        else:
            self.vowel, self.confidence = last.vowel, float(last.confidence)
        self.history += [f.vowel for f in frames if not f.silent]

    def close(self) -> None:
        self.cap.close()
