"""StatsOverlay: the quality ladder's rung and last change (LiveSession.stats()["quality"])."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

pytest.importorskip("PySide6")

from app.ui.stats_overlay import StatsOverlay, quality_text


def test_quality_line(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(tmp_path / "config"))
    w = StatsOverlay()
    qtbot.addWidget(w)
    w.update_stats({"fps": 30.0, "quality": None})  # no ladder (the CPU chain): no line
    assert w.quality_label.isHidden()
    q = {
        "level": 2,
        "rungs": 6,
        "rung": "1 step 512x288 vsr x4",
        "last_event": {
            "direction": "down",
            "reason": "P99 11.44 ms over the 9.00 ms budget (30 frames)",
        },
    }
    w.update_stats({"quality": q})
    assert not w.quality_label.isHidden()
    assert w.quality_label.text() == quality_text(q)
    assert w.quality_label.text().startswith("quality 3/6: 1 step 512x288 vsr x4")
    assert "↓ P99 11.44 ms over the 9.00 ms budget" in w.quality_label.text()
    assert "over the 9.00 ms budget" in w.quality_label.toolTip()
    up = {**q, "level": 1, "last_event": {"direction": "up", "reason": "P99 5 ms under"}}
    assert "↑ P99 5 ms under" in quality_text(up)
    assert "setting up the lower rungs" not in quality_text(q)
    held = {**q, "level": 0, "held": True, "last_event": None}
    assert quality_text(held).endswith("(setting up the lower rungs)")
