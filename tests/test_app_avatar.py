"""Your own avatar in the desktop app (pytest-qt, offscreen, real live sessions): File ▸ Open
avatar… shows the sheet and what was found, the live view and the see-through stage window
draw the avatar, the choice survives a restart, bad files are one banner line, a PSD can be
dropped on the window, an avatar saved over is read again by File ▸ Reload avatar."""

from __future__ import annotations

import hashlib
import json
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["KAGURA_NO_KEYRING"] = "1"

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from app.live_settings import Settings
from app.ui.avatar_menu import SHEET_CELL
from app.ui.main_window import LiveOptions, MainWindow
from render.avatar_source import BUILTIN, as_spec, set_default_avatar
from tests.avatar_art import BACK_RGB, write_png_folder, write_psd
from tests.hostile import write_wav_s16

SIZE = (320, 180)
FPS = 15


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(d))
    yield d
    set_default_avatar(BUILTIN)  # the windows set the process's default avatar


@pytest.fixture(scope="module")
def psd(tmp_path_factory):
    return write_psd(tmp_path_factory.mktemp("app_avatar") / "mika.psd")


def _window(qtbot, **kw) -> MainWindow:
    win = MainWindow(LiveOptions(size=SIZE, fps=FPS, play_out=False, **kw))
    qtbot.addWidget(win)
    win.show()
    return win


def _count(rgba: np.ndarray | None, rgb, tol: int = 24) -> int:
    if rgba is None:
        return 0
    close = np.abs(rgba[..., :3].astype(np.int16) - np.array(rgb)).max(axis=-1) <= tol
    return int((close & (rgba[..., 3] > 245)).sum())


def _rgba(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    w, h = image.width(), image.height()
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(h, image.bytesPerLine())
    return rows[:, : 4 * w].reshape(h, w, 4).copy()


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_open_avatar_goes_live_see_through_and_is_remembered(qtbot, psd, tmp_path, config_dir):
    audio = write_wav_s16(tmp_path / "voice.wav", 20.0)
    before = _digest(psd)
    # see-through from the start: the stage window below then needs no look rebuilt (time)
    (config_dir / "live_app.json").write_text('{"transparent": true}')
    win = _window(qtbot, audio_file=str(audio))
    shown = lambda: win.preview_widget._frame  # noqa: E731  (what the preview was handed)
    try:
        qtbot.waitUntil(
            lambda: win.jitter is not None and win.jitter.stats().shown >= 1, timeout=20000
        )
        assert _count(shown(), BACK_RGB) == 0  # the built-in idol (and the check can tell)
        win.avatar_menu.open(psd)
        qtbot.waitUntil(lambda: win.avatar_menu.dialog is not None, timeout=20000)
        dialog = win.avatar_menu.dialog
        assert dialog.isVisible() and win.avatar_menu.label.text() == "Avatar: mika.psd"
        # what was found, missing layers named (the test avatar has no eyes_half, no background)
        assert dialog.text.startswith("mika.psd: 512x512, 14 layers; missing eyes_half")
        mouths, eyes = dialog.report_label.text().splitlines()[:2]
        assert mouths.startswith("mouths: mouth_a") and "(missing)" not in mouths
        assert "eyes_half (missing)" in eyes
        sheet = _rgba(dialog.sheet_label.pixmap().toImage())  # the avatar's poses
        assert sheet.shape[1] == 6 * SHEET_CELL and _count(sheet, BACK_RGB) > 2000
        # the running session restarts drawing the avatar
        qtbot.waitUntil(lambda: _count(shown(), BACK_RGB) > 500, timeout=20000)

        win.open_stage_window()  # the see-through window for OBS window capture
        stage = win.stage_presenter.widget
        qtbot.waitUntil(
            lambda: (
                stage._frame is not None
                and stage._frame[0, 0, 3] == 0
                and _count(stage._frame, BACK_RGB) > 500
            ),
            timeout=20000,
        )
        painted = _rgba(stage.grab().toImage())
        assert painted.shape[:2] == (SIZE[1], SIZE[0])
        assert painted[:8, :8, 3].max() == 0, "the window's corners should show the desktop"
        assert _count(painted, BACK_RGB) > 500  # and the avatar is painted opaque over it
        assert win.banner_kind is None, win.banner_text
    finally:
        win.close()
    assert not dialog.isVisible()  # the sheet window closes with the main one
    assert _digest(psd) == before  # the avatar is only read
    assert Settings(config_dir / "live_app.json")["avatar"] == str(psd.resolve())

    set_default_avatar(BUILTIN)
    again = _window(qtbot, autostart=False)
    try:
        assert again.avatar_menu.spec.path == str(psd.resolve())
        assert as_spec(None) == again.avatar_menu.spec  # what its sessions will draw
        again.avatar_menu.use_builtin()
        assert as_spec(None) == BUILTIN and again.settings["avatar"] is None
        assert again.avatar_menu.label.text() == "Avatar: built-in idol"
    finally:
        again.close()


def _drag(win, path, cls=QDragEnterEvent):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    at = QPoint(20, 20) if cls is QDragEnterEvent else QPointF(20, 20)
    ev = cls(at, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier(0))
    ev.setAccepted(False)
    QApplication.sendEvent(win, ev)
    return ev.isAccepted()


def test_bad_avatar_files_are_one_banner_line_and_a_dropped_psd_loads(qtbot, psd, tmp_path):
    notes = tmp_path / "notes.psd"
    notes.write_text("not a picture")
    mouthless = write_psd(tmp_path / "plain.psd", mouths=("mouth_a",))
    files = {p: _digest(p) for p in (notes, mouthless)}
    win = _window(qtbot, autostart=False)
    try:
        for path, says in (
            (notes, "notes.psd: not a PSD file"),
            (mouthless, "plain.psd: no mouth layers for lip sync: missing mouth_i, mouth_u"),
            (tmp_path / "gone.psd", "gone.psd: no such file"),
        ):
            win.avatar_menu.open(path)
            qtbot.waitUntil(lambda: not win.avatar_menu.loading, timeout=10000)
            text = win.banner_text
            assert win.banner_kind == "avatar" and "\n" not in text, text
            assert says in text and text.endswith("still drawing the built-in idol"), text
            assert win.avatar_menu.spec == BUILTIN and win.avatar_menu.dialog is None
        assert {p: _digest(p) for p in files} == files  # nothing of the user's written
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config", "notes.psd", "plain.psd"]
        assert win.settings["avatar"] is None

        assert not _drag(win, tmp_path / "notes.txt")  # not an avatar: the drop is refused
        assert _drag(win, psd)
        assert _drag(win, psd, QDropEvent)
        qtbot.waitUntil(lambda: win.avatar_menu.dialog is not None, timeout=20000)
        assert win.avatar_menu.spec.path == str(psd.resolve())
        assert win.banner_kind is None  # the old error line is gone

        # a PNG folder, one PNG saved over in the drawing app, File ▸ Reload avatar (F5)
        folder = write_png_folder(tmp_path / "pngs")
        win.avatar_menu.open(folder)
        qtbot.waitUntil(lambda: win.avatar_menu.spec.path == str(folder.resolve()), timeout=20000)
        first = win.avatar_menu.dialog
        assert "missing eyes_half, background" in first.text
        Image.new("RGBA", (512, 512)).save(folder / "brows.png")  # the brows erased
        win.avatar_menu.reload_action.trigger()
        qtbot.waitUntil(lambda: win.avatar_menu.dialog is not first, timeout=20000)
        text = win.avatar_menu.dialog.text
        assert "missing eyes_half, brows, background" in text, text
        assert "note: skipped fully transparent layers: brows" in text
    finally:
        win.close()


def test_a_remembered_avatar_that_is_gone_falls_back_with_one_line(qtbot, psd, tmp_path):
    path = Settings().path
    gone = tmp_path / "moved.psd"
    path.write_text(json.dumps({"avatar": str(gone), "preset": "ink-wash"}))
    win = _window(qtbot, autostart=False)
    try:
        assert win.avatar_menu.spec == BUILTIN and as_spec(None) == BUILTIN
        text = win.settings_notice  # in the banner, or the status bar when "no microphone" is
        assert text in (win.banner_text, win.statusBar().currentMessage()) and "\n" not in text
        assert "moved.psd: no such file" in text and "drawing the built-in idol" in text, text
    finally:
        win.close()
    healed = Settings(path)
    assert healed["avatar"] is None and healed["preset"] == "ink-wash" and not healed.notices

    # `kagura live --avatar` wins over what was remembered, and is remembered itself
    path.write_text(json.dumps({"avatar": str(gone)}))
    given = _window(qtbot, autostart=False, avatar=str(psd))
    try:
        assert given.avatar_menu.spec.path == str(psd.resolve()) == as_spec(None).path
        assert not given.settings.notices
    finally:
        given.close()
    assert Settings(path)["avatar"] == str(psd.resolve())
