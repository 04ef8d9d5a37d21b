"""StatsOverlay: numbers, per-stage histograms, Copy and Set in OBS (fake client and real
ObsSync against an unreachable port)."""

from __future__ import annotations

import os
import socket

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from app.obs_sync import ObsSync
from app.ui.stats_overlay import StatsOverlay, histogram


@pytest.fixture(autouse=True)
def _config(tmp_path, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "config"))


class FakeObs:
    def __init__(self, inputs=("Mic/Aux",)):
        self.inputs = list(inputs)
        self.calls: list[tuple[str, int]] = []

    def list_audio_inputs(self):
        return self.inputs

    def set_audio_sync_offset(self, name, ms):
        self.calls.append((name, ms))
        return round(ms)


def test_histogram_bins():
    assert histogram([1, 2, 16, 33, 34, 70, 1000, float("nan")], budget_ms=33.3, bins=4) == [
        3,
        1,
        1,
        2,
    ]


def test_shows_the_numbers(qtbot):
    w = StatsOverlay()
    qtbot.addWidget(w)
    w.resize(360, 200)
    w.show()
    assert not w.copy_button.isEnabled() and not w.obs_button.isEnabled()
    for i in range(30):
        w.update_stats(
            {
                "fps": 29.94,
                "target_fps": 30,
                "stages": {"render": 4.0 + i % 3, "stylize": 20.0 + (60 if i == 5 else 0)},
                "drops": 2,
                "repeats": 1,
                "latency_ms": 117.6,
                "latency_parts": {"audio in": 10, "present": 60},
            }
        )
    w.update_stats({"stage_ms": {"upscale": {"median": 6.0, "p99": 9.5}}})
    w.update_stats({"stages": {"render": [3.0, 3.5, 70.0]}})
    assert w.fps_label.text() == "29.9 fps / 30"
    assert w.counters_label.text() == "drops 2 · repeats 1"
    assert w.latency_label.text() == "audio → photon: 118 ms"
    assert "present: 60 ms" in w.latency_label.toolTip()
    assert list(w.stages) == ["render", "stylize", "upscale"]
    stylize = w.stages["stylize"]
    assert len(stylize.values) == 30 and sum(stylize.counts) == 30
    assert stylize.counts[-1] == 1  # the 80 ms frame: past 2x budget, the last bin
    assert list(w.stages["render"].values) == [3.0, 3.5, 70.0]
    assert w.stages["upscale"].text() == "upscale  6.0 ms (p99 9.5)"
    # presenter-style counters
    w.update_stats({"dropped_late": 3, "dropped_overflow": 4, "repeated": 5})
    assert w.counters_label.text() == "drops 7 · repeats 5"
    img = w.grab().toImage()  # paints without errors, and is see-through at the corner
    assert img.width() > 0 and img.pixelColor(0, 0).alpha() < 255


def test_copy_puts_whole_ms_on_the_clipboard(qtbot):
    from PySide6.QtGui import QGuiApplication

    w = StatsOverlay()
    qtbot.addWidget(w)
    w.update_stats({"audio_to_photon_ms": 92.4})
    assert w.copy_button.isEnabled()
    w.copy_button.click()
    assert QGuiApplication.clipboard().text() == "92"
    assert "copied 92 ms" in w.status_label.text()


def test_set_in_obs_sends_the_latency(qtbot):
    w = StatsOverlay()
    qtbot.addWidget(w)
    w.update_stats({"latency_ms": 133.5})
    assert not w.obs_button.isEnabled()  # no OBS configured yet
    obs = FakeObs(inputs=["Mic/Aux"])
    w.set_obs(obs)  # no input named: the only audio input is used
    assert w.obs_button.isEnabled()
    with qtbot.waitSignal(w.obsOffsetSet, timeout=3000) as sig:
        w.obs_button.click()
    assert sig.args == ["Mic/Aux", 134]
    assert obs.calls == [("Mic/Aux", 134)]
    assert "now delayed by 134 ms" in w.status_label.text()

    obs2 = FakeObs(inputs=["Desktop Audio", "Mic/Aux"])
    w.set_obs(obs2, "Mic/Aux")
    w.update_stats({"latency_ms": 80})
    with qtbot.waitSignal(w.obsOffsetSet, timeout=3000):
        w.obs_button.click()
    assert obs2.calls == [("Mic/Aux", 80)]


def test_set_in_obs_reports_an_unreachable_obs(qtbot):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    w = StatsOverlay()
    qtbot.addWidget(w)
    w.update_stats({"latency_ms": 100})
    w.set_obs(ObsSync("127.0.0.1", port, timeout=1), "Mic/Aux")
    with qtbot.waitSignal(w.obsFailed, timeout=5000) as sig:
        w.obs_button.click()
    assert sig.args[0].startswith(f"OBS is not reachable at 127.0.0.1:{port}")
    assert w.status_label.text() == sig.args[0]
    assert w.obs_button.isEnabled()  # can try again
