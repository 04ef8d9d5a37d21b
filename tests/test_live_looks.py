"""Look switching (pipeline/live_looks.py): builds off the caller's thread, the latest request
wins, a failed build keeps the current look. The builder is the test's: it makes a Look of
the requested preset (no stages: the switcher never touches them) and can be held mid-build."""

from __future__ import annotations

import threading

from core.stats import Timings
from pipeline.live_looks import LookSwitcher
from pipeline.look import Look


class Builder:
    def __init__(self) -> None:
        self.built: list[tuple[str, bool]] = []
        self.go = threading.Event()
        self.go.set()
        self.building = threading.Event()

    def __call__(self, preset: str, transparent: bool) -> Look:
        self.building.set()
        assert self.go.wait(10)
        if preset == "broken":
            raise ValueError("no such preset")
        self.built.append((preset, transparent))
        return Look(preset, preset, transparent, None, None, build_ms=5.0)


def test_the_latest_request_wins_and_a_failure_keeps_the_current_look():
    build, errors, timings = Builder(), [], Timings()
    looks = LookSwitcher(build, "studio", False, timings, errors.append, thread_name="test-look")
    assert looks.current.name == "studio" and build.built == [("studio", False)]

    build.go.clear()
    build.building.clear()
    looks.set_preset("cyberpunk")  # returns at once; its build is held
    assert build.building.wait(10)
    assert looks.current.name == "studio"
    looks.set_preset("ink-wash")  # both arrive during one build: only the last is built next
    looks.set_transparent(True)
    build.go.set()
    assert looks.wait(10)
    assert looks.current.name == "ink-wash" and looks.current.transparent
    assert build.built[1:] == [("cyberpunk", False), ("ink-wash", True)]
    assert looks.switches == 2 and timings.snapshot()["look_build"]["n"] == 2

    looks.set_preset("broken")
    assert looks.wait(10)
    assert looks.current.name == "ink-wash" and looks.switches == 2
    assert errors == looks.errors and "broken" in errors[0]

    looks.set_preset("ink-wash", transparent=True)  # the look it has: nothing is built
    assert looks.wait(10) and len(build.built) == 3
