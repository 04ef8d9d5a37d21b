"""The cyclic garbage collector is off during a CPU render's setup and on again afterwards:
at the first frame (freeze_setup_objects), after an error, and never turned on where the
caller had turned it off."""

from __future__ import annotations

import contextlib
import gc
import io

import pytest

from pipeline.cpu_memory import freeze_setup_objects, pause_gc_for_setup, resume_gc


@pytest.fixture(autouse=True)
def _gc_on_afterwards():
    was = gc.isenabled()
    yield
    resume_gc()
    gc.enable() if was else gc.disable()


def test_paused_until_the_setup_is_frozen():
    gc.enable()
    pause_gc_for_setup()
    assert not gc.isenabled()
    freeze_setup_objects()
    assert gc.isenabled()
    gc.unfreeze()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    pause_gc_for_setup()
    freeze_setup_objects()
    resume_gc()
    assert not gc.isenabled()
    gc.unfreeze()


def test_on_again_after_a_render_that_fails(tmp_path):
    from app.cli import main
    from audio.demo_song import demo_song_path

    gc.enable()
    out = tmp_path / "out.mp4"
    out.write_bytes(b"an earlier render")  # refused without -y, before any work
    with contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["render", str(demo_song_path()), "-o", str(out), "--quiet"])
    assert code == 2 and "out.mp4" in err.getvalue()
    assert gc.isenabled()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _garbage_cycle():
    import weakref

    c = _Cycle()
    return weakref.ref(c)


def test_a_paused_setup_freezes_its_garbage_instead_of_walking_the_heap():
    # a one-shot render's set-up: its few garbage cycles stay (frozen), no walk of the heap
    gc.enable()
    pause_gc_for_setup()
    ref = _garbage_cycle()
    freeze_setup_objects()
    assert ref() is not None
    gc.unfreeze()
    gc.collect()
    assert ref() is None


def test_a_setup_that_did_not_pause_collects_its_garbage_before_freezing():
    gc.enable()
    ref = _garbage_cycle()
    freeze_setup_objects()
    assert ref() is None
    gc.unfreeze()
