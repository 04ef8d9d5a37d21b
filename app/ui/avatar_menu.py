"""Your own avatar in the live app: File ▸ Open avatar…, drag and drop, remembered.

    menu = AvatarMenu(window)     # adds its actions to the window's File menu
    menu.open("mika.psd")         # what the menu, the folder dialog and a drop all call
    menu.spec                     # the avatar the live sessions draw (render/avatar_source.py)

Loading reads the file and draws the preview sheet on a helper thread (a big PSD takes a
while); then the sheet and what was found (missing layers named) open in a small window, the
choice is saved in live_app.json, and a running session restarts with the new avatar. A file
that cannot be used is one line in the banner; the avatar on screen stays, and the file is
only read.

At the start the avatar given as `kagura live --avatar` wins, else the remembered one. A
remembered avatar that no longer loads (moved, deleted, damaged) falls back to the built-in
idol with one line among the settings notices.

The live sessions build their render stages without an `avatar=` argument, so the choice
reaches them as the default avatar (`render.avatar_source.set_default_avatar`), the way
`kagura live --avatar` does.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
)

from render.avatar_source import BUILTIN, AvatarSpec, avatar_spec, set_default_avatar

log = logging.getLogger(__name__)

AVATAR_FILES = "Layered avatar (*.psd *.psb *.toml);;All files (*)"
AVATAR_SUFFIXES = (".psd", ".psb", ".toml")
SHEET_SIZE = (640, 360)  # the frame the sheet's poses are drawn in (cropped to the avatar)
SHEET_CELL = 160  # six cells a row: the sheet fits a 1000-pixel-wide window


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def droppable(path: Path) -> bool:
    """What a drop may be: a PSD/PSB, an avatar.toml, or a folder (of PNGs)."""
    return path.is_dir() or path.suffix.lower() in AVATAR_SUFFIXES


class AvatarSheetDialog(QDialog):
    """The preview sheet and the importer's report of the avatar just loaded (not modal)."""

    def __init__(self, parent, summary: str, lines: list[str], sheet: QImage) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Avatar — {summary.split(':', 1)[0]}")
        self.setModal(False)
        lay = QVBoxLayout(self)
        self.summary_label = QLabel(summary)
        self.summary_label.setWordWrap(True)
        lay.addWidget(self.summary_label)
        self.report_label = QLabel("\n".join(lines))
        self.report_label.setObjectName("dim")
        self.report_label.setWordWrap(True)
        self.report_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.report_label)
        self.sheet_label = QLabel()
        self.sheet_label.setPixmap(QPixmap.fromImage(sheet))
        scroll = QScrollArea()
        scroll.setWidget(self.sheet_label)
        scroll.setMinimumSize(min(sheet.width() + 24, 1000), min(sheet.height() + 24, 600))
        lay.addWidget(scroll, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay.addWidget(buttons)

    @property
    def text(self) -> str:
        return self.summary_label.text() + "\n" + self.report_label.text()


def _load(path: str) -> tuple[AvatarSpec, str, list[str], QImage]:
    """On a helper thread: the checked avatar, its report and its preview sheet."""
    from render.avatar_report import found_lines, summary
    from render.avatar_sheet import preview_sheet

    spec = avatar_spec(path, notices=False)
    doc = spec.doc()
    lines = found_lines(doc) + [f"note: {text}" for text in doc.notices]
    sheet = preview_sheet(doc, SHEET_SIZE, SHEET_CELL).convert("RGB")
    w, h = sheet.size
    # QImage is safe to build off the UI thread (QPixmap is not); copy() owns its memory
    image = QImage(sheet.tobytes(), w, h, 3 * w, QImage.Format.Format_RGB888).copy()
    return spec, summary(doc), lines, image


class AvatarMenu(QObject):
    """The avatar actions of a `MainWindow` (see the module notes)."""

    def __init__(self, win) -> None:
        super().__init__(win)
        self.win = win
        self.spec: AvatarSpec = BUILTIN
        self.loading = False
        self.dialog: AvatarSheetDialog | None = None
        self.last_error: str | None = None
        self._build_actions()
        self._build_look_row()
        win.setAcceptDrops(True)
        win.installEventFilter(self)
        self._restore()

    # -- menu ---------------------------------------------------------------------------------

    def _build_actions(self) -> None:
        win = self.win
        self.open_action = QAction("Open &avatar… (PSD)", win)
        self.open_action.setShortcut("Ctrl+Shift+O")
        self.open_action.setToolTip("A layered .psd, or an avatar.toml (docs/AVATARS.md)")
        self.open_action.triggered.connect(self.open_file_dialog)
        self.folder_action = QAction("Open avatar &folder (PNGs)…", win)
        self.folder_action.triggered.connect(self.open_folder_dialog)
        self.reload_action = QAction("&Reload avatar", win)
        self.reload_action.setShortcut("F5")
        self.reload_action.setToolTip("Read the avatar again after saving it in your drawing app")
        self.reload_action.triggered.connect(self.reload)
        self.builtin_action = QAction("Use the &built-in idol", win)
        self.builtin_action.triggered.connect(self.use_builtin)
        file_menu = win.menuBar().actions()[0].menu()
        # before the separator above Quit
        first_sep = next((a for a in file_menu.actions() if a.isSeparator()), None)
        new = [self.open_action, self.folder_action, self.reload_action, self.builtin_action]
        if first_sep is None:
            file_menu.addSeparator()
            file_menu.addActions(new)
        else:
            file_menu.insertSeparator(first_sep)
            file_menu.insertActions(first_sep, new)

    def _build_look_row(self) -> None:
        """'Avatar: NAME  [Avatar…]' under the LOOK group's controls, so the choice shows."""
        self.label = QLabel()
        self.label.setObjectName("dim")
        self.button = QPushButton("Avatar…")
        self.button.setToolTip("Your own layered avatar: a PSD, or a folder of PNGs (File menu)")
        self.button.clicked.connect(self.open_file_dialog)
        look = self.win.transparent_box.parentWidget().layout()
        row = QHBoxLayout()
        row.addWidget(self.label, 1)
        row.addWidget(self.button)
        look.addLayout(row)

    def _show_name(self) -> None:
        self.label.setText(f"Avatar: {self.spec.label()}")
        self.label.setToolTip(self.spec.path or "")

    def _start_dir(self) -> str:
        if self.spec.path:
            return str(Path(self.spec.path).parent)
        return str(Path("~").expanduser())

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.win, "Open your avatar", self._start_dir(), AVATAR_FILES
        )
        if path:
            self.open(path)

    def open_folder_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self.win, "Open a folder of PNG layers (with avatar.toml)", self._start_dir()
        )
        if path:
            self.open(path)

    # -- loading ------------------------------------------------------------------------------

    def reload(self) -> None:
        """The same avatar read again (edited and saved since): sessions restart with it."""
        if self.spec.path is None:
            self.win.statusBar().showMessage("The built-in idol has nothing to reload", 3000)
            return
        self.open(self.spec.path)

    def open(self, path: str | Path) -> None:
        """Load `path` off the UI thread; `_loaded` applies it (or says why not)."""
        if self.loading:
            self.win.statusBar().showMessage("Still loading the last avatar…", 3000)
            return
        self.loading = True
        name = Path(path).name
        self.win.statusBar().showMessage(f"Loading avatar {name}…")
        self.win._in_background(lambda: _load(str(path)), lambda r: self._loaded(path, r))

    def _loaded(self, path: str | Path, result: Any) -> None:
        self.loading = False
        if isinstance(result, Exception):
            if not isinstance(result, ValueError):  # AvatarError is one: the others are bugs
                log.error("avatar %s", path, exc_info=result)
            self.last_error = one_line(result)
            now = "the built-in idol" if self.spec.builtin else self.spec.label()
            self.win.show_banner(
                f"Avatar not loaded: {self.last_error} — still drawing {now}", "avatar"
            )
            self.win.statusBar().clearMessage()
            return
        spec, summary, lines, sheet = result
        self.last_error = None
        self.win.clear_banner("avatar")
        self._use(spec, restart=True)  # also the same file opened again: it may have changed
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = AvatarSheetDialog(self.win, summary, lines, sheet)
        self.dialog.show()
        self.win.statusBar().showMessage(f"Avatar: {summary}", 8000)

    def use_builtin(self) -> None:
        self.win.clear_banner("avatar")
        self._use(BUILTIN, restart=not self.spec.builtin)
        self.win.statusBar().showMessage("Avatar: the built-in idol", 4000)

    def _use(self, spec: AvatarSpec, restart: bool) -> None:
        self.spec = spec
        self._show_name()
        set_default_avatar(spec)
        self.win.settings["avatar"] = spec.path
        self.win.settings.save()
        if restart:
            self._restart_session()

    def _restart_session(self) -> None:
        """A running session draws the avatar its look was built with: restart it (once a
        start or stop in flight has finished)."""
        win = self.win
        if win._closing:
            return
        if win._busy:
            QTimer.singleShot(100, self._restart_session)
        elif win.session is not None:
            win.restart_live()

    def _restore(self) -> None:
        """At the start: `kagura live --avatar`, else the remembered avatar, else the idol."""
        s = self.win.settings
        given = getattr(self.win.options, "avatar", None)
        path = given or s["avatar"]
        spec = BUILTIN
        if path:
            try:  # on the UI thread: the session about to start needs it (cached after this)
                spec = avatar_spec(path, notices=False)
            except Exception as exc:
                line = f"settings: avatar: {one_line(exc)}; drawing the built-in idol"
                log.warning("%s", line)
                s.notices.append(line)
        self.spec = spec
        self._show_name()
        set_default_avatar(spec)
        if s["avatar"] != spec.path:
            s["avatar"] = spec.path
            s.save()
        if spec.path:
            self.win.statusBar().showMessage(f"Avatar: {spec.label()}", 5000)

    # -- drag and drop ------------------------------------------------------------------------

    @staticmethod
    def _dropped(event) -> Path | None:
        mime = event.mimeData()
        if not mime.hasUrls() or len(mime.urls()) != 1 or not mime.urls()[0].isLocalFile():
            return None
        path = Path(mime.urls()[0].toLocalFile())
        return path if droppable(path) else None

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if obj is self.win and kind == QEvent.Type.Close and self.dialog is not None:
            self.dialog.close()  # the sheet window goes with the main one
        elif obj is self.win and kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove):
            if self._dropped(event) is not None:
                event.acceptProposedAction()
                return True
        elif obj is self.win and kind == QEvent.Type.Drop:
            path = self._dropped(event)
            if path is not None:
                event.acceptProposedAction()
                self.open(path)
                return True
        return super().eventFilter(obj, event)
