"""The diffusion stage on CUDA: a RANDOM-weight SD-Turbo-size UNet (866 M) + TAESD at 640x360,
float16, one step — eager against CUDA-graph replay, timed with CUDA events (median of 40).
Run on the GPU machine: `pytest -m gpu tests/test_diffusion_gpu.py -s`.

Imports are safe without CUDA (and without diffusers): every test is skipped there.
"""

from __future__ import annotations

import pytest
import torch

from pipeline.diffusion import DiffusionStage, random_weights
from pipeline.diffusion.stage import GraphCaptureError
from presets.schema import Diffusion
from tests.gpu_timing import cuda_median_ms

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

W, H = 640, 360  # latent 80 x 45


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return random_weights("sd-turbo", dtype="float16", device="cuda")


def frame() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    img = torch.randint(0, 256, (H, W, 4), dtype=torch.uint8, generator=g)
    img[..., 3] = 255
    img[:40, :60] = 0  # a transparent corner
    return img.cuda()


@pytest.mark.parametrize("steps", [1, 2])
def test_cuda_graph_step_is_faster_than_eager(models, steps):
    d = Diffusion(prompt="anime idol singing", strength=0.5, steps=steps, seed=7)
    eager = DiffusionStage(models, d, W, H, device="cuda", dtype="float16")
    graph = DiffusionStage(models, d, W, H, device="cuda", dtype="float16", cuda_graph=True)
    eager.setup(None)
    graph.setup(None)  # captures and checks the graphs; raises GraphCaptureError on failure
    assert models.random and models.unet.dtype == torch.float16
    img = frame()
    out_e, out_g = eager.apply(img), graph.apply(img)
    assert out_g.shape == (H, W, 4) and out_g.dtype == torch.uint8 and out_g.is_cuda
    assert torch.equal(out_g[..., 3], img[..., 3]) and int(out_g[:40, :60].max()) == 0
    # same stream state, same input: the replay paints what eager paints
    assert (out_e.float() - out_g.float()).abs().mean().item() < 1.0

    ms_eager = cuda_median_ms(eager.step)
    ms_graph = cuda_median_ms(graph.step)
    ms_frame = cuda_median_ms(lambda: graph.apply(img))
    print(
        f"\nsd-turbo-size UNet (random weights) + TAESD, {W}x{H} fp16, steps={steps} "
        f"(UNet batch {steps}): eager step {ms_eager:.2f} ms, CUDA-graph step {ms_graph:.2f} ms "
        f"({ms_eager / ms_graph:.2f}x); whole frame with uint8 in/out {ms_frame:.2f} ms"
    )
    assert ms_graph < ms_eager


def test_preset_switch_keeps_graphs(models):
    a = Diffusion(prompt="ink wash idol", strength=0.5, steps=2, seed=1)
    b = Diffusion(prompt="neon idol", strength=0.6, steps=1, seed=2)
    st = DiffusionStage(models, a, W, H, device="cuda", dtype="float16", cuda_graph=True)
    st.setup(None)
    graphs = dict(st._graphs)
    img = frame()
    st.apply(img)
    st.set_preset(b)
    out = st.apply(img)
    assert st._graphs == graphs  # nothing captured again
    # the first frame after the switch is what a fresh (eager) stage with preset b paints
    ref = DiffusionStage(models, b, W, H, device="cuda", dtype="float16")
    ref.setup(None)
    assert (out.float() - ref.apply(img).float()).abs().mean().item() < 1.0


def test_capture_steps_captures_only_the_steps_asked(models):
    """An offline render's stage (one preset for the whole song) captures the preset's step
    count only, replays it like eager, and names a step count it did not capture."""
    d = Diffusion(prompt="ink wash idol", strength=0.5, steps=2, seed=1)
    st = DiffusionStage(
        models,
        d,
        W,
        H,
        device="cuda",
        dtype="float16",
        cuda_graph=True,
        stream_batch=False,
        capture_steps=(2,),
    )
    st.setup(None)
    assert set(st._graphs) == {(2, False)}
    eager = DiffusionStage(models, d, W, H, device="cuda", dtype="float16", stream_batch=False)
    eager.setup(None)
    img = frame()
    assert (st.apply(img).float() - eager.apply(img).float()).abs().mean().item() < 1.0
    st.set_preset(Diffusion(prompt="ink wash idol", strength=0.5, steps=1, seed=1))
    with pytest.raises(GraphCaptureError, match="steps=1"):
        st.apply(img)
