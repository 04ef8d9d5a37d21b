"""The live app's loose ends: live_app.json that heals, the OBS password out of it, the virtual
camera toggle, the OBS input remembered, every window closed, Ctrl+C / SIGTERM / --quit-after
ending `kagura live` cleanly with its stats line."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import ClassVar

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["KAGURA_NO_KEYRING"] = "1"  # the 0600-file store; the keyring is the user's

import keyring
import keyring.backend
import keyring.errors
import numpy as np
import pytest

from app.live_settings import DEFAULTS, Settings
from tests.hostile import cli_env, write_wav_s16

pytest.importorskip("pytestqt")

BAD = (
    '{"gain_db": "loud", "gate_db": 1e308, "smoothing": NaN, "obs_port": 99999999, '
    '"geometry": [1, 2, 3], "record_format": "avi", "preset": "ink-wash", '
    '"obs_password": "hunter2", "audio_file": "' + "x" * 10_000 + '"}'
)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(d))
    return d


def test_bad_fields_fall_back_with_a_notice_and_a_backup(config_dir):
    path = config_dir / "live_app.json"
    path.write_text(BAD)
    s = Settings(path)
    healed = {"gain_db", "gate_db", "smoothing", "obs_port", "geometry", "record_format"}
    for key in healed | {"audio_file"}:
        assert s[key] == DEFAULTS[key], key
        assert any(n.startswith(f"settings: {key}=") for n in s.notices), (key, s.notices)
    assert s["preset"] == "ink-wash"  # the good field survives
    assert all(len(n) < 300 for n in s.notices)  # a 10 000-character value is not echoed
    assert (config_dir / "live_app.json.bad").read_text() == BAD  # the file as it was
    # the file on disk is healed: strict JSON, no password, no notice on the next start
    on_disk = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert "obs_password" not in on_disk and "hunter2" not in path.read_text()
    again = Settings(path)
    assert again.notices == [] and again["gain_db"] == 0.0


def test_obs_password_in_a_0600_file_never_in_the_json(config_dir):
    path = config_dir / "live_app.json"
    s = Settings(path)
    s["obs_password"] = "s3cret"
    s["obs_host"] = "studio.local"
    s.save()
    secret = config_dir / "obs_password"
    assert secret.read_text() == "s3cret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "s3cret" not in path.read_text()
    assert Settings(path)["obs_password"] == "s3cret"
    s["obs_password"] = None
    assert not secret.exists()


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend (keyring's own plug-in surface) holding passwords in a dict."""

    priority = 1

    def __init__(self):
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.store.get((service, username))

    def set_password(self, service, username, password):
        self.store[(service, username)] = password

    def delete_password(self, service, username):
        self.store.pop((service, username))


class LockedKeyring(MemoryKeyring):
    def get_password(self, service, username):
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def set_password(self, service, username, password):
        raise keyring.errors.PasswordSetError("the keyring is locked")


def test_obs_password_in_the_system_keyring_else_the_0600_file(config_dir, monkeypatch):
    monkeypatch.delenv("KAGURA_NO_KEYRING")
    path, secret = config_dir / "live_app.json", config_dir / "obs_password"
    before, ring = keyring.get_keyring(), MemoryKeyring()
    keyring.set_keyring(ring)
    try:
        secret.write_text("from-file")  # kept before a keyring was usable: moved into it
        assert Settings(path)["obs_password"] == "from-file" and not secret.exists()
        s = Settings(path)
        s["obs_password"] = "s3cret"
        s.save()
        assert list(ring.store.values()) == ["s3cret"] and not secret.exists()
        assert "s3cret" not in path.read_text()
        assert Settings(path)["obs_password"] == "s3cret"
        keyring.set_keyring(LockedKeyring())  # a keyring that refuses: the 0600 file
        s = Settings(path)
        assert s["obs_password"] is None
        s["obs_password"] = "s3cret-2"
        assert secret.read_text() == "s3cret-2"
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    finally:
        keyring.set_keyring(before)


def test_not_json_at_all_is_healed(config_dir):
    path = config_dir / "live_app.json"
    path.write_bytes(b"\x00\xffnot json{")
    s = Settings(path)
    assert s.values == {k: v for k, v in DEFAULTS.items() if k != "obs_password"}
    assert "not valid JSON" in s.notices[0]
    assert (config_dir / "live_app.json.bad").read_bytes() == b"\x00\xffnot json{"


def _window(qtbot, **kw):
    from app.ui.main_window import LiveOptions, MainWindow

    win = MainWindow(LiveOptions(size=(320, 180), fps=20, play_out=False, autostart=False, **kw))
    qtbot.addWidget(win)
    win.show()
    return win


def test_window_starts_on_a_bad_settings_file_and_says_so(qtbot, config_dir):
    (config_dir / "live_app.json").write_text(BAD)
    win = _window(qtbot)
    try:
        text = win.settings_notice
        assert "gain_db='loud'" in text and "more in the log" in text
        assert text in (win.banner_text, win.statusBar().currentMessage())
        assert win.sliders["gate_db"][0].value() == 12
    finally:
        win.close()


class FakeCamera:
    """pyvirtualcam.Camera's surface: what the window sends, kept for the test."""

    opened: ClassVar[list] = []

    def __init__(self, width, height, fps, **kw):
        self.width, self.height, self.fps = width, height, fps
        self.device = "/dev/fake-video9"
        self.frames: list[np.ndarray] = []
        self.closed = False
        FakeCamera.opened.append(self)

    def send(self, rgb):
        self.frames.append(rgb)

    def close(self):
        self.closed = True


class RefusingCamera(FakeCamera):
    def __init__(self, *a, **kw):
        raise RuntimeError("device busy")


def test_virtual_camera_toggle_opens_or_says_why(qtbot, monkeypatch):
    from app.ui.main_window import MainWindow

    monkeypatch.setattr(MainWindow, "virtual_camera_factory", FakeCamera)
    win = _window(qtbot)
    try:
        win.vcam_action.setChecked(True)  # the menu toggle: opened with the live fps
        (cam,) = FakeCamera.opened
        assert (cam.width, cam.height, cam.fps) == (320, 180, 20.0)
        assert win.vcam is not None and win.vcam_action.isChecked()
        win.vcam_action.setChecked(False)
        assert cam.closed and win.vcam is None
        monkeypatch.setattr(MainWindow, "virtual_camera_factory", RefusingCamera)
        win.vcam_action.setChecked(True)
        assert not win.vcam_action.isChecked() and win.vcam is None
        assert win.banner_kind == "vcam" and "device busy" in win.banner_text
    finally:
        win.close()


def test_obs_input_remembered_and_windows_closed_together(qtbot, config_dir):
    win = _window(qtbot)
    win.stats_overlay.obsOffsetSet.emit("Mic/Aux", 120)  # OBS accepted the offset
    assert Settings(config_dir / "live_app.json")["obs_input"] == "Mic/Aux"
    win.open_stage_window()
    stage = win.stage_presenter.widget
    assert stage.isVisible() and stage.isWindow()  # a window of its own for OBS to capture
    win.close()
    assert not stage.isVisible()  # else the app never quits


def test_a_closed_window_leaves_the_collector_no_live_qt_object(qtbot):
    """Python's cyclic collector runs on whichever thread allocates when it triggers; a Qt
    object it frees there is deleted off the UI thread, and a QWidget deleted so crashes the
    process (CI died with a segfault in the OBS test that follows the stage-window test). Once
    Qt has deleted the window, nothing Python owns of it may still be a live Qt object."""
    import gc

    import shiboken6
    from PySide6.QtCore import QCoreApplication, QEvent, QObject

    from app.ui.main_window import LiveOptions, MainWindow

    gc.collect()  # the earlier tests' garbage, freed here on the UI thread
    win = MainWindow(LiveOptions(size=(320, 180), fps=20, play_out=False, autostart=False))
    win.show()
    win.open_stage_window()
    stage = win.stage_presenter.widget
    win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert not shiboken6.isValid(win) and not shiboken6.isValid(stage)
    del win, stage
    gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collector would free, to look at it
    try:
        gc.collect()
        live = [
            type(o).__name__
            for o in gc.garbage
            if isinstance(o, QObject) and shiboken6.isValid(o) and shiboken6.ownedByPython(o)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()
    assert live == []


def test_an_obs_input_gone_from_obs_is_forgotten(qtbot, config_dir):
    """The remembered input was renamed in OBS: the real client, against a small obs-websocket
    server, says so in one line, and the name is forgotten so the next press asks again."""
    from tests.obs_server import FakeObs

    server = FakeObs()
    settings = {"obs_host": "127.0.0.1", "obs_port": server.port, "obs_input": "Old mic"}
    (config_dir / "live_app.json").write_text(json.dumps(settings))
    win = _window(qtbot)
    try:
        overlay = win.stats_overlay
        overlay.update_stats({"latency_ms": 90})
        with qtbot.waitSignal(overlay.obsFailed, timeout=5000) as sig:
            overlay.obs_button.click()
        assert sig.args[0].startswith("OBS has no input named 'Old mic'")
        assert "pick the input" in sig.args[0] and overlay.obs_input is None
        assert Settings(config_dir / "live_app.json")["obs_input"] is None
        sent = {"inputName": "Old mic", "inputAudioSyncOffset": 90}
        assert server.requests[-1] == ("SetInputAudioSyncOffset", sent)
    finally:
        win.close()
        server.close()
    # closing waited for the OBS thread: nothing of it is left to emit into the closed window
    assert not [t for t in threading.enumerate() if t.name == "kagura-obs-sync"]


def _live(tmp_path, *extra):
    audio = write_wav_s16(tmp_path / "voice.wav", 30.0)
    cmd = [sys.executable, "-m", "app.cli", "live", "--audio-file", str(audio), "--no-play-out"]
    cmd += ["--size", "320x180", "--fps", "15", *extra]
    env = cli_env(KAGURA_CONFIG_DIR=str(tmp_path / "cfg"), KAGURA_NO_KEYRING="1")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("how", ["quit-after", "SIGTERM"])
def test_live_ends_cleanly_with_its_stats_line(tmp_path, how):
    """--quit-after with the stage window open, and SIGTERM: every window closes, the process
    exits 0 and prints its one JSON stats line (no traceback)."""
    proc = _live(
        tmp_path, *(["--quit-after", "0.5", "--stage-window"] if how == "quit-after" else [])
    )
    try:
        if how == "SIGTERM":
            deadline = time.monotonic() + 90  # the window is up once it has saved its settings
            while not (tmp_path / "cfg" / "live_app.json").exists():
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.1)
            time.sleep(1.0)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    stats = json.loads(out.strip().splitlines()[-1])
    assert stats["source"].startswith("file:")
    if how == "SIGTERM":
        assert "SIGTERM: stopping" in err
