"""The looks' empty frames (pipeline/stylize/base.py) and ink wash's streaks kept in the user's
cache folder: a look set up from the stored arrays makes the same pixels as one that computed
them, and a preset that differs in anything never reads another's frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.stylize import make_effect
from presets.loader import load_preset
from render.disk_cache import cache_dir

W, H = 160, 96


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _idol(n: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    x = torch.zeros(n, H, W, 4, dtype=torch.uint8)
    x[:, 30:70, 60:100, :3] = torch.randint(0, 200, (n, 40, 40, 3), generator=g, dtype=torch.uint8)
    x[:, 30:70, 60:100, 3] = 255
    return x


@pytest.mark.parametrize(
    "name, transparent",
    [("studio", False), ("ink-wash", False), ("cyberpunk", False), ("cyberpunk", True)],
)
def test_a_look_from_stored_empty_frames_makes_the_same_pixels(name, transparent):
    preset = load_preset(name)
    idx = torch.arange(3)
    first = make_effect(preset, W, H, transparent)
    computed = first(_idol(), idx)
    assert len(list(cache_dir("looks").glob("*.npy"))) == 1
    # ink wash's bristle streaks are kept too: the second look reads both back
    assert len(list(cache_dir("streaks").glob("*.npy"))) == (name == "ink-wash")
    second = make_effect(preset, W, H, transparent)
    read_back = second(_idol(), idx)
    assert torch.equal(second.empty, first._make_empty(torch.device("cpu")))
    assert torch.equal(read_back, computed)


def test_the_stored_frames_are_what_a_look_reads_and_another_preset_reads_its_own():
    preset = load_preset("cyberpunk")
    make_effect(preset, W, H)(_idol(1), torch.arange(1))
    (stored,) = cache_dir("looks").glob("*.npy")
    marked = np.load(stored)
    marked[:, 0, 0] = [1, 2, 3, 255]
    np.save(stored, marked)
    assert make_effect(preset, W, H)._empty(torch.device("cpu"))[0, 0, 0].tolist() == [1, 2, 3, 255]
    # one post-process value changed: another key, its own frames, the marked file untouched
    other = preset.model_copy(update={"post": preset.post.model_copy(update={"bloom": 0.1})})
    fresh = make_effect(other, W, H)
    assert torch.equal(fresh._empty(torch.device("cpu")), fresh._make_empty(torch.device("cpu")))
    assert len(list(cache_dir("looks").glob("*.npy"))) == 2
