"""core.stall_watch: a thread that keeps the GIL (a sort of a long list, C code that never
lets go) is caught — the watch wakes late by about the sort's time, the process was busy
meanwhile, and the sorting thread's own frame is in the event."""

from __future__ import annotations

import random
import threading
import time

import pytest

from core.stall_watch import StallWatch


def test_a_thread_that_keeps_the_gil_is_named_in_the_event():
    data = [random.random() for _ in range(1_500_000)]
    sorted_ = threading.Event()
    release = threading.Event()

    def hold_the_gil() -> None:
        data.sort()  # list.sort keeps the GIL for its whole run
        sorted_.set()
        release.wait(10)  # stay alive, so its frame is still there when the watch reads it

    watch = StallWatch(threshold_ms=20.0, period_ms=2.0).start()
    try:
        time.sleep(0.05)
        t0 = time.perf_counter()
        t = threading.Thread(target=hold_the_gil, name="gil-holder")
        t.start()
        assert sorted_.wait(30)
        sort_ms = (time.perf_counter() - t0) * 1000
        time.sleep(0.05)
    finally:
        watch.stop()
        release.set()
        t.join()
    assert sort_ms > 40, f"the sort took only {sort_ms:.0f} ms: too short to test with"
    caught = [e for e in watch.events if "gil-holder" in e["threads"]]
    assert caught, watch.events
    worst = max(caught, key=lambda e: e["late_ms"])
    assert worst["late_ms"] >= 20.0
    assert worst["cpu_ms"] >= 0.5 * worst["late_ms"]  # the process ran: a thread of ours held it
    assert any("hold_the_gil" in line for line in worst["threads"]["gil-holder"])
    assert all(line.count(":") == 1 for line in worst["threads"]["gil-holder"])
    assert "kagura-stall-watch" not in worst["threads"]


def test_a_period_over_the_threshold_is_refused():
    with pytest.raises(ValueError, match="period"):
        StallWatch(threshold_ms=2.0, period_ms=5.0)
