"""Arrays kept on disk between runs (render/disk_cache.py) and the backgrounds that use it:
the same pixels whether drawn or read back, and a bad cache file or folder only costs the
drawing."""

from __future__ import annotations

import numpy as np
import pytest

from render import backgrounds, disk_cache
from render.disk_cache import cache_dir, cached_array


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _maker(calls: list):
    def make():
        calls.append(1)
        return np.arange(24, dtype=np.float32).reshape(4, 6)

    return make


def test_drawn_once_then_read_back():
    calls: list = []
    first = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    second = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    assert len(calls) == 1
    np.testing.assert_array_equal(first, second)
    assert second.flags.writeable
    assert len(list(cache_dir("t").glob("*.npy"))) == 1
    cached_array("t", "another key", _maker(calls), (4, 6), np.float32)
    assert len(calls) == 2


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other shape"])
def test_a_bad_file_is_drawn_again(damage):
    calls: list = []
    good = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    (path,) = cache_dir("t").glob("*.npy")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        path.write_bytes(b"not an array at all")
    else:
        np.save(path, np.zeros((2, 2), np.float32))
    again = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    assert len(calls) == 2
    np.testing.assert_array_equal(again, good)
    assert cached_array("t", "key", _maker(calls), (4, 6), np.float32).shape == (4, 6)
    assert len(calls) == 2  # the drawing replaced the bad file


def test_a_folder_that_cannot_be_written_costs_only_the_drawing():
    blocked = cache_dir("t")
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the folder should be")
    calls: list = []
    arr = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    arr = cached_array("t", "key", _maker(calls), (4, 6), np.float32)
    assert len(calls) == 2 and arr.shape == (4, 6)
    assert blocked.read_text() == "a file where the folder should be"


def test_keeps_the_most_recent_files():
    for i in range(5):
        cached_array("t", f"key {i}", _maker([]), (4, 6), np.float32, keep=3)
    assert len(list(cache_dir("t").glob("*.npy"))) == 3
    assert not list(cache_dir("t").glob("*.tmp"))


@pytest.mark.parametrize("kind", ["gradient", "paper", "city-glow"])
def test_a_background_read_back_is_the_one_drawn(kind):
    from presets.schema import Background

    bg = Background(kind=kind, colors=["#203040", "#d0c0b0"])
    backgrounds._cached.cache_clear()
    backgrounds.paper_grain.cache_clear()
    drawn = backgrounds.make_background(bg, 96, 54, seed=3).clone()
    stored = len(list(cache_dir("backgrounds").glob("*.npy")))
    assert stored == (2 if kind == "paper" else 1)  # the paper's grain is kept too
    backgrounds._cached.cache_clear()
    backgrounds.paper_grain.cache_clear()
    read = backgrounds.make_background(bg, 96, 54, seed=3)
    assert read.shape == (54, 96, 3) and read.dtype == drawn.dtype
    assert bool((read == drawn).all())
    other_seed = backgrounds.make_background(bg, 96, 54, seed=4)
    assert not bool((other_seed == drawn).all())


def test_the_sources_are_part_of_the_key_and_an_unreadable_one_stores_nothing(tmp_path):
    code = tmp_path / "code.py"
    code.write_text("A = 1\n")
    calls: list = []
    cached_array("t", "key", _maker(calls), (4, 6), np.float32, sources=(str(code),))
    cached_array("t", "key", _maker(calls), (4, 6), np.float32, sources=(str(code),))
    assert len(calls) == 1
    code.write_text("A = 2\n")  # the same key with other code: drawn again
    disk_cache.source_version.cache_clear()
    cached_array("t", "key", _maker(calls), (4, 6), np.float32, sources=(str(code),))
    assert len(calls) == 2 and len(list(cache_dir("t").glob("*.npy"))) == 2
    gone = str(tmp_path / "gone.py")
    for _ in range(2):
        cached_array("t", "key", _maker(calls), (4, 6), np.float32, sources=(gone,))
    assert len(calls) == 4 and len(list(cache_dir("t").glob("*.npy"))) == 2
