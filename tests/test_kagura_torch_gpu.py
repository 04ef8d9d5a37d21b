"""Kagura's own model as plain torch modules on CUDA in float16: the same numbers as the
diffusers/transformers modules (UNet, autoencoder, every preset's prompt), the DiffusionStage
the same under both loaders eager, through its CUDA graphs and with the UNet compiled
(compile_unet), and the cuda load importing none of diffusers/transformers/peft. Run on the
GPU machine:
`pytest -m gpu -s tests/test_kagura_torch_gpu.py`. Every test is skipped without CUDA.

float16 tolerance: two float16 computations of the same float32 function differ by rounding
(other kernels, other summation orders), so the plain modules are held to (a) a direct bound
against diffusers' float16 output and (b) being no further from the float32 result than
diffusers' float16 output is (a factor 2 of slack).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline.diffusion import DiffusionStage, load_models
from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS
from pipeline.diffusion.kagura_torch import load_kagura_torch
from presets.loader import load_preset
from tests.kagura_frames import PRESETS, H, W, rendered_frame, token_ids

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def loads():
    """{(loader, dtype): DiffusionModels} on cuda: plain/diffusers in float16 and float32."""
    out = {}
    for dt in ("float16", "float32"):
        out["plain", dt] = load_kagura_torch(KAGURA_WEIGHTS, dt, "cuda")
        out["diffusers", dt] = load_models(KAGURA_WEIGHTS, dtype=dt, device="cuda")
    return out


def close_in_float16(plain: torch.Tensor, ref16: torch.Tensor, ref32: torch.Tensor, what: str):
    plain, ref16, ref32 = plain.float(), ref16.float(), ref32.float()
    scale = ref32.abs().max().item()
    direct = (plain - ref16).abs().max().item()
    err_plain = (plain - ref32).abs().mean().item()
    err_ref = (ref16 - ref32).abs().mean().item()
    print(
        f"{what}: max |plain16 - diffusers16| {direct:.2e} (scale {scale:.2f}); mean error "
        f"against float32: plain {err_plain:.2e}, diffusers {err_ref:.2e}"
    )
    assert direct <= 1e-2 * max(scale, 1.0), what
    assert err_plain <= 2.0 * err_ref + 1e-4, what


@torch.no_grad()
def test_text_embeddings_of_every_presets_prompts(loads):
    for name in PRESETS:
        d = load_preset(name).diffusion
        for text in (d.prompt, d.negative_prompt):
            ids = token_ids(loads["diffusers", "float32"], text).cuda()
            assert torch.equal(token_ids(loads["plain", "float16"], text).cuda(), ids)
            outs = {k: m.text_encoder(ids)[0] for k, m in loads.items()}
            close_in_float16(
                outs["plain", "float16"],
                outs["diffusers", "float16"],
                outs["diffusers", "float32"],
                f"text {name}",
            )


@torch.no_grad()
@pytest.mark.parametrize("latent", [(80, 45), (80, 48)])
def test_unet_forward(loads, latent):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, latent[1], latent[0], generator=gen).cuda()
    t = torch.tensor([999, 499, 0], device="cuda")
    ids = token_ids(loads["diffusers", "float32"], load_preset("cyberpunk").diffusion.prompt)
    emb = loads["diffusers", "float32"].text_encoder(ids.cuda())[0].expand(3, -1, -1)
    cl = torch.channels_last
    outs = {}
    for (loader, dt), m in loads.items():
        dtype = m.dtype
        m.unet.to(memory_format=cl)  # as the stage runs it on CUDA
        xin = x.to(dtype).contiguous(memory_format=cl)
        outs[loader, dt] = m.unet(xin, t, encoder_hidden_states=emb.to(dtype), return_dict=False)[0]
    torch.testing.assert_close(
        outs["plain", "float32"].float(), outs["diffusers", "float32"].float(), rtol=1e-3, atol=1e-3
    )
    close_in_float16(
        outs["plain", "float16"],
        outs["diffusers", "float16"],
        outs["diffusers", "float32"],
        f"unet {latent}",
    )


@torch.no_grad()
def test_autoencoder_encode_and_guided_decode(loads):
    img = rendered_frame("ink-wash")[..., :3].permute(2, 0, 1)[None].float().cuda() / 127.5 - 1
    z32 = loads["diffusers", "float32"].vae.encode(img)[0]
    zs = {k: m.vae.encode(img.to(m.dtype))[0] for k, m in loads.items()}
    close_in_float16(zs["plain", "float16"], zs["diffusers", "float16"], z32, "encode")
    ys = {k: m.vae.decode(z32.to(m.dtype), img.to(m.dtype))[0] for k, m in loads.items()}
    close_in_float16(
        ys["plain", "float16"], ys["diffusers", "float16"], ys["diffusers", "float32"], "decode"
    )


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "cuda-graph"])
def test_the_stage_paints_the_same_frames(loads, preset, graph):
    """The real stage in float16 on a rendered idol frame and the other presets' frames,
    eager and replaying its CUDA graphs (captured and checked against eager in setup)."""
    frames = [rendered_frame(p).cuda() for p in (preset, *[q for q in PRESETS if q != preset])]
    outs = []
    for loader in ("plain", "diffusers"):
        st = DiffusionStage(
            loads[loader, "float16"], load_preset(preset), W, H, device="cuda", cuda_graph=graph
        )
        st.setup()
        outs.append([st.apply(f) for f in frames])
    for n, (a, b) in enumerate(zip(*outs, strict=True)):
        diff = (a.int() - b.int()).abs().float()
        print(f"{preset} graph={graph} frame {n}: mean |Δ| {diff.mean():.4f}, max {diff.max():.0f}")
        assert diff.mean() < 0.25, f"frame {n}: mean |Δ| {diff.mean():.4f}"
        assert (diff > 2).float().mean() < 1e-3, f"frame {n}"


def test_the_compiled_plain_unet_paints_the_same_frames(loads, tmp_path):
    """compile_unet (torch.compile, fullgraph, then the CUDA graphs): the plain UNet compiles
    without a graph break and paints what diffusers' graphed UNet paints."""
    preset = load_preset("cyberpunk")
    frames = [rendered_frame(p).cuda() for p in PRESETS]
    outs = []
    for loader, compiled in (("plain", True), ("diffusers", False)):
        st = DiffusionStage(
            loads[loader, "float16"],
            preset,
            W,
            H,
            device="cuda",
            cuda_graph=True,
            compile_unet=compiled,
            compile_cache=tmp_path if compiled else None,
        )
        st.setup()
        if compiled:
            print(f"compiled plain UNet: {st.compile_report}")
        outs.append([st.apply(f) for f in frames])
    for n, (a, b) in enumerate(zip(*outs, strict=True)):
        diff = (a.int() - b.int()).abs().float()
        print(f"compiled frame {n}: mean |Δ| {diff.mean():.4f}, max {diff.max():.0f}")
        assert diff.mean() < 0.25, f"frame {n}: mean |Δ| {diff.mean():.4f}"


PROBE = """
import json, sys, time
t0 = time.perf_counter()
import torch
from pipeline.diffusion import DiffusionStage
from presets.loader import load_preset
t1 = time.perf_counter()
{load}
torch.cuda.synchronize()
t2 = time.perf_counter()
st = DiffusionStage(models, load_preset("ink-wash"), 640, 360, device="cuda", cuda_graph=True)
st.setup()
st.apply(torch.full((360, 640, 4), 200, dtype=torch.uint8, device="cuda"))
t3 = time.perf_counter()
heavy = ("diffusers", "transformers", "peft", "accelerate", "huggingface_hub")
print(json.dumps({{
    "label": models.label, "heavy": sorted(m for m in heavy if m in sys.modules),
    "dynamo": "torch._dynamo" in sys.modules,
    "imports_s": t1 - t0, "load_s": t2 - t1, "stage_s": t3 - t2,
}}))
"""
LOADS = {
    # what render and live call for the default model
    "plain torch (load_diffusion_models)": "from pipeline.model_factory import "
    "load_diffusion_models\nmodels = load_diffusion_models('kagura', None, 'cuda')",
    # the loader before: the same weights through diffusers/transformers, for comparison
    "diffusers (load_models)": "from pipeline.diffusion import load_models\n"
    "from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS\n"
    "models = load_models(KAGURA_WEIGHTS, dtype='float16', device='cuda')",
}


def _probe(load: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(load=load)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_cuda_load_imports_none_of_diffusers_transformers_peft():
    """A fresh process each: imports, the load on cuda, the stage set up with its CUDA graphs
    and one frame. Printed for both loaders (BENCHMARKS material); asserted for the plain."""
    got = {}
    for name, load in LOADS.items():  # the plain one first: the other warms no cache for it
        got[name] = r = _probe(load)
        print(
            f"{name}: imports {r['imports_s']:.2f} s, load {r['load_s']:.2f} s, stage setup "
            f"with CUDA graphs + 1 frame {r['stage_s']:.2f} s; imported: {r['heavy']}, "
            f"torch._dynamo {r['dynamo']}"
        )
    plain = got["plain torch (load_diffusion_models)"]
    assert "plain torch" in plain["label"]
    assert plain["heavy"] == []
