"""The idol draws no motion vectors where no later stage reads them (render/stage.py
`drop_unread_motion`), and the picture is the same either way."""

from __future__ import annotations

import tomllib
from pathlib import Path

import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context, spec
from presets.schema import Preset
from render.stage import RenderStage, drop_unread_motion

PRESET = Preset.model_validate(
    tomllib.loads((Path(__file__).parents[1] / "presets" / "studio.toml").read_text())
)
W, H = 160, 96


class _Needs:
    def __init__(self, *fields: str) -> None:
        self.needs = spec(*fields)


def _frames(stage: RenderStage) -> list[Frame]:
    stage.setup(Context(W, H, 30, 48_000))
    poses = [AvatarParams(pts_ns=0), AvatarParams(pts_ns=33_333_333, head_yaw=15.0, breath=0.6)]
    return [stage.process(Frame(p.pts_ns, i, p)) for i, p in enumerate(poses)]


def test_motion_is_dropped_only_when_nothing_reads_it():
    with_motion = RenderStage(W, H, PRESET.palette, PRESET.line)
    drop_unread_motion(with_motion, [_Needs("image"), _Needs("image", "motion")])
    assert "motion" in with_motion.gives.fields
    without = RenderStage(W, H, PRESET.palette, PRESET.line)
    drop_unread_motion(without, [_Needs("image"), _Needs("image"), object()])
    assert "motion" not in without.gives.fields

    kept, dropped = _frames(with_motion), _frames(without)
    assert kept[1].motion is not None and kept[1].motion.abs().max() > 0.5  # it did move
    for a, b in zip(kept, dropped, strict=True):
        assert b.motion is None
        assert torch.equal(a.image, b.image)
