"""The desktop app's main window (pytest-qt, offscreen): presets, devices, banner, recording,
settings that survive a restart."""

from __future__ import annotations

import os
import shutil

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import av
import pytest

pytest.importorskip("pytestqt")

from app.ui.main_window import NO_MIC_TEXT, LiveOptions, MainWindow
from tests.signals import speech_then_silence

SIZE = (320, 180)
FPS = 20


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    d = tmp_path / "config"
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    if not shutil.which("espeak-ng"):
        pytest.skip("needs espeak-ng")
    path = tmp_path_factory.mktemp("app") / "speech.wav"
    speech_then_silence(path)
    return path


def _window(qtbot, **kw) -> MainWindow:
    opts = LiveOptions(size=SIZE, fps=FPS, play_out=False, **kw)
    win = MainWindow(opts)
    qtbot.addWidget(win)
    win.show()
    return win


def _close(win: MainWindow) -> None:
    win.close()


def test_window_plays_a_file_switches_presets_and_records(qtbot, speech, tmp_path):
    win = _window(qtbot, audio_file=str(speech), preset="studio")
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=20000)
        qtbot.waitUntil(
            lambda: win.jitter is not None and win.jitter.stats().shown >= 5, timeout=10000
        )
        assert win.session.preset_name == "studio"
        win.set_preset("ink-wash")
        qtbot.waitUntil(lambda: win.session.preset_name == "ink-wash", timeout=10000)
        assert win.preset_combo.currentData() == "ink-wash"

        out = tmp_path / "ui_take.mp4"
        assert win.start_recording(out) == out
        qtbot.wait(2000)
        win.stop_recording()
        qtbot.waitUntil(lambda: win.last_recording is not None, timeout=10000)
        assert win.last_recording["seconds"] == pytest.approx(2.0, abs=0.3)
        with av.open(str(out)) as c:
            assert sorted(s.type for s in c.streams) == ["audio", "video"]
            assert sum(1 for _ in c.decode(video=0)) == win.last_recording["frames"]

        ui = win.ui_ms()
        assert ui["frames"] > 10 and ui["median"] < 50
        stats = win.run_stats()
        assert stats["frames_shown"] > 10
        # a recording still running when the window closes (Ctrl+C, SIGTERM, --quit-after
        # close it) is finished, not lost
        left_on = tmp_path / "left_on.mp4"
        assert win.start_recording(left_on) == left_on
        qtbot.waitUntil(
            lambda: (win.session.stats()["recording"] or {}).get("frames", 0) >= 10, timeout=10000
        )
    finally:
        _close(win)
    assert win.session is None
    assert win.last_recording["path"] == str(left_on)
    with av.open(str(left_on)) as c:
        assert sorted(s.type for s in c.streams) == ["audio", "video"]
        assert sum(1 for _ in c.decode(video=0)) == win.last_recording["frames"] >= 10


def test_no_input_device_shows_banner_and_file_still_works(qtbot, speech, monkeypatch):
    import audio.capture

    monkeypatch.setattr(audio.capture, "list_input_devices", lambda refresh=False: [])
    win = _window(qtbot)
    try:
        win._source_kind = "mic"
        win.refresh_devices()
        win.start_live()
        qtbot.waitUntil(lambda: win.banner.isVisible(), timeout=5000)
        assert win.banner_text == NO_MIC_TEXT
        assert win.session is None
        win.play_file(str(speech))
        qtbot.waitUntil(lambda: win.session is not None, timeout=20000)
        qtbot.waitUntil(
            lambda: win.jitter is not None and win.jitter.stats().shown >= 3, timeout=10000
        )
        assert not win.banner.isVisible()
    finally:
        _close(win)


def test_device_list_fills_from_pulseaudio(qtbot, pulse):
    win = _window(qtbot, autostart=False)
    try:
        win.refresh_devices(rescan=True)
        names = win.device_names
        assert names, "no input devices listed with a PulseAudio server running"
        assert any("pulse" in n.lower() or "default" in n.lower() for n in names), names
        assert win.device_combo.isEnabled()
        assert win.banner_text != NO_MIC_TEXT
    finally:
        _close(win)


def test_settings_survive_a_restart(qtbot, config_dir):
    win = _window(qtbot, autostart=False)
    win.set_preset("cyberpunk")
    win.set_control("gain_db", 6)
    win.set_control("gate_db", 18)
    win.set_control("smoothing", 0.5)
    win.transparent_box.setChecked(True)
    win.format_combo.setCurrentIndex(win.format_combo.findData("webm"))
    _close(win)
    assert (config_dir / "live_app.json").is_file()

    again = _window(qtbot, autostart=False)
    try:
        s = again.settings
        assert again.preset_combo.currentData() == "cyberpunk" == s["preset"]
        assert again.sliders["gain_db"][0].value() == 6 and s["gain_db"] == 6
        assert again.sliders["gate_db"][0].value() == 18
        assert again.sliders["smoothing"][0].value() == 50 and s["smoothing"] == 0.5
        assert again.transparent_box.isChecked()
        assert again.format_combo.currentData() == "webm"
    finally:
        _close(again)


def test_microphone_lost_mid_show_banner_then_recovery(qtbot, pulse):
    """The mic vanishes while live: a plain-words banner, then it clears by itself when the
    device delivers again — no restart, frames keep coming."""
    pulse.wait_for_data()
    win = _window(qtbot, device="pulse")
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=20000)
        qtbot.waitUntil(
            lambda: win.jitter is not None and win.jitter.stats().shown > 5, timeout=20000
        )
        pulse.unload_sink()
        qtbot.waitUntil(lambda: win.banner_kind == "lost", timeout=5000)
        assert "Microphone lost" in win.banner_text
        pulse.load_sink()
        qtbot.waitUntil(lambda: win.banner_kind != "lost", timeout=10000)
        shown = win.jitter.stats().shown
        qtbot.waitUntil(lambda: win.jitter.stats().shown > shown + 5, timeout=5000)
    finally:
        _close(win)


def test_window_sessions_run_the_gpu_chain_they_are_given(qtbot, speech):
    """`kagura live --device cuda` hands its LiveGpu to the window (LiveOptions.gpu), and every
    session the window builds runs that chain (here: temporal refinement only, on the CPU)."""
    from pipeline.live_gpu import LiveGpu

    gpu = LiveGpu(device="cpu", temporal=True, render_process=False, label="temporal only")
    win = _window(qtbot, audio_file=str(speech), preset="studio", gpu=gpu)
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=20000)
        qtbot.waitUntil(
            lambda: win.jitter is not None and win.jitter.stats().shown >= 3, timeout=10000
        )
        quality = win.session.stats()["quality"]
        assert quality is not None and quality["label"] == "temporal only"
        assert quality["device"] == "cpu"
    finally:
        _close(win)
