"""`-v` on the real command line sets up logging once, and the quality ladder's rung changes
reach stderr through it: the real QualityControl and QualityController fed frames whose
measured stage time (simulated load, on simulated frame times) is over the budget."""

from __future__ import annotations

import pytest

from app import log_setup
from app.cli import build_parser, main
from core.avatar import AvatarParams
from core.frame import Frame
from pipeline.ladder import QualityControl
from pipeline.quality import QualityController

FRAME_NS = 16_666_667  # 60 fps


@pytest.fixture(autouse=True)
def _no_handler_left():
    log_setup.reset()
    yield
    log_setup.reset()


def _overload_the_ladder(frames: int) -> QualityControl:
    """`frames` frames, each costing 25 ms of diffusion against a 10 ms budget."""
    qc = QualityControl(QualityController(10.0, min_samples=30), [], measure=["diffusion"])
    for i in range(frames):
        qc.observe(Frame(i * FRAME_NS, i, AvatarParams(), timings={"diffusion": 25.0}))
    return qc


@pytest.mark.parametrize(
    ("argv", "verbosity"),
    [(["live"], 0), (["live", "-v"], 1), (["-v", "live"], 1), (["bench", "live", "-vv"], 2)],
)
def test_verbose_before_or_after_the_command(argv, verbosity):
    assert build_parser().parse_args(argv).verbose == verbosity


def test_v_shows_the_ladders_rung_change(capsys):
    assert main(["-v", "presets"]) == 0
    capsys.readouterr()
    qc = _overload_the_ladder(40)
    assert [(e.from_rung, e.to_rung) for e in qc.events] == [(0, 1)]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "kagura.quality: quality down: rung 0 (2 steps 640x360 temporal vsr x4) -> "
        "1 (1 step 640x360 temporal vsr x4): P99 25.00 ms over the 10.00 ms budget (30 frames)"
    ]


def test_without_v_the_change_is_not_printed(capsys):
    assert main(["presets"]) == 0
    capsys.readouterr()
    qc = _overload_the_ladder(40)
    assert len(qc.events) == 1  # the same change happened
    assert capsys.readouterr().err == ""
