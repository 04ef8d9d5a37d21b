"""pipeline/resident.py: the GPU chains a long-lived process keeps set up between renders, here
with a real CPU stage (tests/test_serve.py renders through them from the shell and compares the
frames with a fresh process's)."""

from __future__ import annotations

from collections.abc import Callable

from core.stage import Context
from pipeline.resident import ResidentChains
from pipeline.stylize import StylizeStage
from presets.loader import load_preset

CTX = Context(64, 48, 30, 48_000)


def stylize_parts(made: list) -> Callable[[], list]:
    def parts() -> list:
        made.append(StylizeStage(load_preset("ink-wash"), 64, 48))
        return [made[-1]]

    return parts


def test_a_shape_seen_before_gets_its_set_up_chain_and_the_oldest_is_closed():
    resident = ResidentChains(keep=1)
    made: list = []
    first, _ = resident.nodes("shape a", stylize_parts(made), "cpu")
    first.setup(CTX)
    first.close()  # the graph's close: the chain stays set up
    again, _ = resident.nodes("shape a", stylize_parts(made), "cpu")
    assert again is first and len(made) == 1
    again.setup(CTX)  # reset, not set up again
    assert again.runs == 2 and again._set_up == made
    other, _ = resident.nodes("shape b", stylize_parts(made), "cpu")
    assert other is not first and len(made) == 2 and len(resident) == 1
    assert first._set_up == []  # the least recently used shape was closed
    resident.close()
    assert len(resident) == 0
