"""Stylize on CUDA gives the CPU's look (run on the GPU machine: pytest -m gpu)."""

from __future__ import annotations

import pytest
import torch

from app.bench_stylize import idol_frames
from pipeline.stage import Context
from pipeline.stylize import StylizeStage
from presets.loader import load_preset

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = ((a.double() - b.double()) ** 2).mean().item()
    return float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0**2 / mse)).item()


@pytest.mark.parametrize("name", ["studio", "ink-wash", "cyberpunk"])
@pytest.mark.parametrize("transparent", [False, True])
def test_cuda_matches_cpu(name, transparent):
    preset = load_preset(name)
    w, h = 640, 360
    frames = idol_frames(w, h, 4, preset)
    stage = StylizeStage(preset, w, h, transparent=transparent)
    stage.setup(Context(w, h, 30, 48000))
    cpu = stage.apply(frames)
    gpu = stage.apply(frames.cuda())
    assert gpu.device.type == "cuda" and gpu.dtype == torch.uint8
    assert psnr(cpu, gpu.cpu()) >= 40.0
