"""Stylize on CUDA gives the CPU's look (run on the GPU machine: pytest -m gpu)."""

from __future__ import annotations

import pytest
import torch

from app.bench_stylize import idol_frames
from core.stage import Context
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


@pytest.mark.parametrize("name", ["studio", "ink-wash", "cyberpunk"])
def test_cuda_graphs_match_eager_and_cost_less_host_time(name):
    """Set up on cuda, the stage replays one captured graph per grain variant; its frames are
    the eager frames (±1 level) and the host thread spends less time per frame."""
    import time

    preset = load_preset(name)
    w, h = 640, 360
    frames = idol_frames(w, h, 12, preset).cuda()
    ctx = Context(w, h, 30, 48000, extras={"device": "cuda"})
    graphed = StylizeStage(preset, w, h)
    eager = StylizeStage(preset, w, h, cuda_graph=False)
    graphed.setup(ctx)
    eager.setup(ctx)
    assert graphed._graphs is not None and len(graphed._graphs) == graphed.effect.variants
    assert eager._graphs is None
    idx = torch.arange(frames.shape[0]) + 5  # every grain variant, not starting at 0
    a, b = graphed.apply(frames, idx), eager.apply(frames, idx)
    assert (a.int() - b.int()).abs().max().item() <= 1

    def host_ms(stage) -> float:
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(frames.shape[0]):
                stage.apply(frames[i : i + 1], idx[i : i + 1])
            times.append((time.perf_counter() - t0) * 1e3 / frames.shape[0])
            torch.cuda.synchronize()
        return sorted(times)[2]

    g_ms, e_ms = host_ms(graphed), host_ms(eager)
    print(f"stylize {name}: host ms/frame graphs {g_ms:.3f}, eager {e_ms:.3f}")
    assert g_ms < e_ms
