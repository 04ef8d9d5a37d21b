"""The quality ladder with a simulated slow stage (deterministic fake timings)."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest

from pipeline.quality import DEFAULT_LADDER, QosEvent, QualityController

BUDGET = 20.0


def fake_stage(costs: list[float], seed: int = 0, spikes: float = 0.002):
    """GPU time per frame at a rung: costs[level] x load x (1 + 3 % jitter), and with
    probability `spikes` a 1.5x spike."""
    rng = np.random.default_rng(seed)

    def timing(level: int, load: float) -> float:
        t = costs[level] * load * (1.0 + 0.03 * rng.standard_normal())
        if rng.random() < spikes:
            t *= 1.5
        return float(t)

    return timing


def run(ctl: QualityController, timing, loads: list[float]) -> list[int]:
    levels = []
    for i, load in enumerate(loads):
        ctl.feed(timing(ctl.level, load), pts_ns=i * 33_333_333)
        levels.append(ctl.level)
    return levels


COSTS = [26.0, 17.0, 13.0, 11.0, 8.0, 7.0, 6.0]  # ms per rung (best -> cheapest)


def test_ladder_is_ordered_best_to_cheapest():
    assert DEFAULT_LADDER[0].steps == 2 and DEFAULT_LADDER[-1].vsr_scale == 2
    lat = [r.latent[0] * r.latent[1] for r in DEFAULT_LADDER]
    assert lat == sorted(lat, reverse=True)


def test_steps_down_under_load_and_logs(caplog):
    ctl = QualityController(BUDGET, window=60, min_samples=30, up_frames=90)
    with caplog.at_level(logging.INFO, logger="kagura.quality"):
        levels = run(ctl, fake_stage(COSTS), [1.0] * 300)
    assert levels[-1] == 1  # 26 ms does not fit, 17 ms does (and is above 0.75 x 20 = 15)
    assert len(ctl.events) == 1
    ev = ctl.events[0]
    assert isinstance(ev, QosEvent) and (ev.from_rung, ev.to_rung) == (0, 1)
    assert "over the 20.00 ms budget" in ev.reason
    assert ev.pts_ns == 29 * 33_333_333  # decided on the 30th frame (min_samples)
    assert any("quality down" in r.message for r in caplog.records)


def test_heavy_load_walks_down_one_rung_at_a_time():
    ctl = QualityController(BUDGET, window=60, min_samples=30)
    run(ctl, fake_stage(COSTS), [2.0] * 400)  # doubled cost: only 8 ms rungs fit (16 ms)
    assert [(e.from_rung, e.to_rung) for e in ctl.events] == [(i, i + 1) for i in range(4)]
    assert ctl.level == 4


def test_climbs_back_with_hysteresis():
    ctl = QualityController(BUDGET, window=60, min_samples=30, up_frames=90)
    loads = [2.0] * 300 + [0.5] * 1200  # a heavy passage, then headroom
    levels = run(ctl, fake_stage(COSTS), loads)
    assert max(levels) == 4
    ups = [e for e in ctl.events if e.to_rung < e.from_rung]
    assert ups and "under 0.75 x budget" in ups[0].reason
    assert levels[-1] == 0  # at half load 13 ms fits again
    # no climb before 90 calm frames after the load dropped
    first_up = next(i for i, lv in enumerate(levels) if i > 300 and lv < 4)
    assert first_up >= 300 + 90


def test_no_oscillation_when_better_rung_does_not_fit():
    # rung 0 costs 23 ms (never fits), rung 1 costs 13 ms (< 15 ms: calm, so it tries to
    # climb): without back-off this flaps 0 <-> 1 every ~120 frames
    costs = [23.0, 13.0, 11.0, 9.0, 8.0, 7.0, 6.0]
    ctl = QualityController(BUDGET, window=60, min_samples=30, up_frames=90)
    levels = run(ctl, fake_stage(costs, seed=3), [1.0] * 6000)
    # first drop, then failed climbs with doubling holds 180, 360, 720, 1440 (the cap):
    # about a dozen changes in 200 s instead of ~100
    assert len(ctl.events) <= 14, [(e.from_rung, e.to_rung, e.reason) for e in ctl.events]
    assert sum(lv == 1 for lv in levels) > 0.95 * len(levels)
    assert "climb failed" in ctl.events[2].reason
    holds = [
        int(e.reason.rsplit("waits ", 1)[1].split()[0]) for e in ctl.events if "waits" in e.reason
    ]
    assert holds[:4] == [180, 360, 720, 1440] and set(holds[4:]) <= {1440}
    ups = [i for i, (a, b) in enumerate(itertools.pairwise(levels)) if b < a]
    gaps = np.diff(ups)
    assert list(gaps[:3]) == [210, 390, 750]  # hold + 30 frames to see the climb fail
    assert all(g >= 1440 for g in gaps[3:])  # then at most one try per 1440 frames


def test_steady_load_under_budget_never_changes():
    ctl = QualityController(BUDGET, start=2)
    run(ctl, fake_stage(COSTS, spikes=0.0), [1.3] * 1000)  # rung 2: 16.9 ms: fits, not calm
    assert ctl.events == [] and ctl.level == 2
    for i in range(59):  # one isolated 30 ms spike in a 60-frame window is not the P99
        ctl.feed(30.0 if i == 40 else 16.0, i)
    assert ctl.events == []
    ctl.feed(30.0, 60)  # a second one is
    assert ctl.events[-1].to_rung == 3


def test_cheapest_rung_stays_and_force():
    ctl = QualityController(BUDGET, start=len(DEFAULT_LADDER) - 1)
    run(ctl, fake_stage(COSTS), [5.0] * 200)
    assert ctl.events == []
    ev = ctl.force(0, 5, "preset switch")
    assert ev == QosEvent(5, len(DEFAULT_LADDER) - 1, 0, "preset switch")
    with pytest.raises(ValueError):
        QualityController(0.0)


def test_a_long_session_keeps_only_the_latest_changes_but_counts_them_all(monkeypatch):
    import pipeline.quality

    monkeypatch.setattr(pipeline.quality, "MAX_EVENTS_KEPT", 3)
    ctl = QualityController(BUDGET, window=60, min_samples=30)
    run(ctl, fake_stage(COSTS), [2.0] * 400)  # four steps down, as above
    assert ctl.event_count == 4
    assert [(e.from_rung, e.to_rung) for e in ctl.events] == [(1, 2), (2, 3), (3, 4)]
