"""kagura live's GPU chain on CUDA with Kagura's own model at 640x360 x3: the diffusion is set
up beside the first frames (they pass it by until then): its CUDA graphs and the lower rungs'
are captured on a helper thread (pipeline/ladder/prepare.py) while frames are issued on the chain's stream — every capture is
checked against eager there, so a capture the frames disturbed fails the set-up. Then every
rung runs. Run on the GPU machine: `pytest -m gpu tests/test_live_rungs_gpu.py`."""

from __future__ import annotations

import argparse

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _live_gpu():
    from app.config import live_gpu_config
    from app.live_gpu import add_gpu_options, build_live_gpu

    p = argparse.ArgumentParser()
    add_gpu_options(p)
    args = p.parse_args(["--device", "cuda", "--upscale", "3"])
    return build_live_gpu(live_gpu_config(args), (1920, 1080))


def test_lower_rungs_are_captured_beside_the_frames_then_every_rung_runs():
    from core.avatar import AvatarParams
    from core.frame import Frame
    from pipeline.look import build_look

    gpu = _live_gpu()
    render_size, out_size = gpu.sizes((1920, 1080))
    look = build_look("studio", render_size, 60, False, "cuda", for_model=True)
    chain = gpu.build(look.preset, render_size, out_size, 60)
    chain.setup(look)
    try:
        assert len(chain.plan.rungs) > 1
        variants = chain.diffusion.variants
        # every variant, the start rung's too, is set up beside the first frames (the CUDA
        # default: LiveGpu.paint_beside), which pass the diffusion by until it is ready
        assert not chain.diffusion.painting and chain.ladder_pending
        assert not all(v.setup_done for v in variants.values())  # still being set up

        def frame(i: int):
            f = look.render.process(Frame(i * 16_666_667, i, AvatarParams()))
            out = chain.submit(f, look.stylize)
            assert out.ready is not None  # issued, not waited for
            return chain.finish(out)

        shown = painted = 0
        while chain.ladder_pending:  # frames issued while the captures run
            out = frame(shown)
            assert tuple(out.image.shape) == (out_size[1], out_size[0], 4)
            painted += out.timings["diffusion.steps"] > 0
            shown += 1
        assert chain.wait_ladder(60), chain.spec.notices
        assert all(v.setup_done for v in variants.values())
        assert frame(shown).timings["diffusion.steps"] > 0 and chain.diffusion.painting
        print(f"\n{shown} frames issued while the diffusion was set up, {painted} painted")
        for level in range(len(chain.plan.rungs)):
            chain.qc.force(level, 0, "test")
            out = frame(1000 + level)
            img = out.image
            assert tuple(img.shape) == (out_size[1], out_size[0], 4)
            assert out.timings["diffusion.rung"] == level
            assert float(img[..., :3].float().std()) > 1.0  # a picture, not a blank
    finally:
        chain.close()
        look.close()
