"""Kagura's own model loaded as plain torch modules (pipeline/diffusion/kagura_torch.py): the
same numbers as the diffusers/transformers modules on the shipped weights (float32, CPU), the
whole DiffusionStage on a rendered idol frame the same under both loaders, nothing of
diffusers/transformers/peft imported on the way, and every config it does not implement
refused in one line (load_kagura then takes the diffusers loader)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline.diffusion import DiffusionStage, ModelError, load_models, save_models
from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS, build_kagura, load_kagura
from pipeline.diffusion.kagura_torch import (
    TextEncoder,
    UNet,
    UnsupportedConfig,
    load_kagura_torch,
)
from presets.loader import load_preset
from tests.kagura_frames import PRESETS, H, W, rendered_frame, token_ids

ROOT = Path(__file__).resolve().parents[1]
TIGHT = {"rtol": 1e-5, "atol": 1e-5}
HEAVY = ("diffusers", "transformers", "peft", "accelerate", "huggingface_hub", "torch._dynamo")


@pytest.fixture(scope="module")
def both():
    """(plain torch, diffusers/transformers) loads of the shipped weights, float32 on the CPU."""
    return (
        load_kagura_torch(KAGURA_WEIGHTS, "float32", "cpu"),
        load_models(KAGURA_WEIGHTS, dtype="float32", device="cpu"),
    )


# -- the modules on the shipped weights -----------------------------------------------------


def test_the_plain_modules_hold_the_shipped_tensors_under_the_same_names(both):
    plain, ref = both
    for part in ("unet", "vae", "text_encoder"):
        a, b = getattr(plain, part).state_dict(), getattr(ref, part).state_dict()
        b = {k: v for k, v in b.items() if k != "embeddings.position_ids"}  # a buffer
        assert sorted(a) == sorted(b), part
        for k in a:
            assert torch.equal(a[k], b[k]), f"{part}.{k}"
    assert (plain.prediction_type, plain.sampler, plain.vae_kind, plain.vae_scale) == (
        ref.prediction_type,
        ref.sampler,
        ref.vae_kind,
        ref.vae_scale,
    )
    assert plain.image_residual and torch.equal(plain.alphas_cumprod, ref.alphas_cumprod)


def test_every_presets_prompt_gives_the_same_tokens_and_embedding(both):
    plain, ref = both
    texts = []
    for name in PRESETS:
        d = load_preset(name).diffusion
        texts += [d.prompt, d.negative_prompt]
    texts += ["", "Ünïcode & (brackets), UPPER case\tand   spaces! " * 6]  # long: truncated
    assert plain.tokenizer.model_max_length == ref.tokenizer.model_max_length == 77
    with torch.no_grad():
        for text in texts:
            ids = token_ids(ref, text)
            assert torch.equal(token_ids(plain, text), ids), text
            a, b = plain.text_encoder(ids)[0], ref.text_encoder(ids)[0]
            assert a.shape == b.shape == (1, 77, 64)
            torch.testing.assert_close(a, b, **TIGHT)


@pytest.mark.parametrize("latent", [(80, 45), (80, 48)], ids=["45-rows", "48-rows"])
def test_unet_forward_is_the_same(both, latent):
    """Batch 3 at the stream's timesteps; 45 rows is the side that needs the upsampling to
    the skip's size, 48 the plain factor 2."""
    plain, ref = both
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, latent[1], latent[0], generator=gen)
    t = torch.tensor([999, 499, 0])
    with torch.no_grad():
        emb = ref.text_encoder(token_ids(ref, load_preset("cyberpunk").diffusion.prompt))[0]
        emb = emb.expand(3, -1, -1)
        a = plain.unet(x, t, encoder_hidden_states=emb, return_dict=False)[0]
        b = ref.unet(x, t, encoder_hidden_states=emb, return_dict=False)[0]
        one = plain.unet(x[:1], 999, encoder_hidden_states=emb[:1])[0]  # a scalar timestep
    assert a.shape == b.shape == (3, 4, latent[1], latent[0])
    assert b.abs().max() > 0.1  # the trained UNet changes the latent
    torch.testing.assert_close(a, b, **TIGHT)
    torch.testing.assert_close(one, b[:1], **TIGHT)


def test_autoencoder_encode_and_guided_decode_are_the_same(both):
    plain, ref = both
    img = rendered_frame("ink-wash")[..., :3].permute(2, 0, 1)[None].float() / 127.5 - 1.0
    with torch.no_grad():
        za, zb = plain.vae.encode(img, return_dict=False)[0], ref.vae.encode(img)[0]
        torch.testing.assert_close(za, zb, **TIGHT)
        ya = plain.vae.decode(zb, img, return_dict=False)[0]
        yb = ref.vae.decode(zb, img, return_dict=False)[0]
    assert ya.shape == img.shape
    torch.testing.assert_close(ya, yb, **TIGHT)


@pytest.mark.parametrize("preset", PRESETS)
def test_the_diffusion_stage_paints_the_same_frames(both, preset):
    """The real stage code (stream batch at the preset's steps, the guided decoder) on a
    rendered idol frame and its neighbours, once per loader."""
    frames = [rendered_frame(p) for p in (preset, *[q for q in PRESETS if q != preset])]
    outs = []
    for models in both:
        st = DiffusionStage(models, load_preset(preset), W, H)
        st.setup()
        outs.append([st.apply(f) for f in frames])
    for n, (a, b) in enumerate(zip(*outs, strict=True)):
        diff = (a.int() - b.int()).abs()
        assert diff.max() <= 1, f"frame {n}: max |Δ| {diff.max()}"
        assert (diff > 0).float().mean() < 1e-3, f"frame {n}: {(diff > 0).float().mean():.2e}"
    assert (outs[0][0][..., :3].int() - frames[0][..., :3].int()).abs().float().mean() > 1.0


# -- what loading imports -----------------------------------------------------------------------

PROBE = """
import json, sys, torch
from pipeline.model_factory import load_diffusion_models
from pipeline.diffusion import DiffusionStage
from presets.loader import load_preset
models = load_diffusion_models("kagura", None, "cpu")
st = DiffusionStage(models, load_preset("ink-wash"), 64, 40)
st.setup()
st.apply(torch.full((40, 64, 4), 200, dtype=torch.uint8))
print(json.dumps([models.label, sorted(m for m in {heavy!r} if m in sys.modules)]))
"""


def test_the_default_model_loads_and_paints_without_diffusers_transformers_or_peft():
    """The factory the render and live paths call for `--diffusion kagura` (and cuda's
    default), then a stage set up and one frame painted, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    label, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert "plain torch" in label
    assert heavy == []


def test_a_render_with_the_model_imports_none_of_them(tmp_path):
    """The real command (`kagura render --diffusion kagura`), every process of it traced by
    `-X importtime` (the analysis process inherits the flag)."""
    out = tmp_path / "kagura.mp4"
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "app.cli",
            "render",
            str(ROOT / "audio/assets/demo_song.ogg"),
            "-o",
            str(out),
            "--seconds",
            "1",
            "--size",
            "160x96",
            "--diffusion",
            "kagura",
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.stat().st_size > 0 and "NOTICE" not in done.stderr
    imported = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "torch" in imported and "safetensors.torch" in imported  # the trace is complete
    assert [m for m in HEAVY if m in imported] == []


# -- configs it does not implement ----------------------------------------------------------


@pytest.fixture
def shipped_copy(tmp_path) -> Path:
    return Path(shutil.copytree(KAGURA_WEIGHTS, tmp_path / "kagura"))


def _edit(file: Path, **changes) -> None:
    cfg = json.loads(file.read_text())
    for key, value in changes.items():
        if value is KeyError:
            del cfg[key]
        else:
            cfg[key] = value
    file.write_text(json.dumps(cfg))


@pytest.mark.parametrize(
    ("part", "changes", "names"),
    [
        ("unet", {"mid_block_type": "UNetMidBlock2DCrossAttn"}, "mid_block_type"),
        ("unet", {"down_block_types": ["CrossAttnDownBlock2D"] * 3}, "down_block_types"),
        ("unet", {"time_cond_proj_dim": 256}, "time_cond_proj_dim"),
        ("unet", {"resnet_time_scale_shift": KeyError}, "resnet_time_scale_shift"),
        ("unet", {"some_new_switch": True}, "some_new_switch"),
        ("unet", {"norm_num_groups": None}, "norm_num_groups"),
        ("vae", {"_class_name": "AutoencoderTiny"}, "_class_name"),
        ("vae", {"encoder_channels": [24, 48]}, "builds no plain-torch model"),
        ("text_encoder", {"hidden_act": "gelu"}, "hidden_act"),
        ("text_encoder", {"architectures": ["CLIPTextModelWithProjection"]}, "architectures"),
    ],
)
def test_a_config_it_does_not_implement_is_refused_in_one_line(shipped_copy, part, changes, names):
    file = shipped_copy / part / "config.json"
    _edit(file, **changes)
    with pytest.raises(UnsupportedConfig) as e:
        load_kagura_torch(shipped_copy, "float32", "cpu")
    msg = str(e.value)
    assert msg.startswith(str(file)) and names in msg and "\n" not in msg
    assert isinstance(e.value, ModelError)


def test_a_weights_file_it_cannot_read_is_an_error_not_a_fallback(shipped_copy):
    vae = shipped_copy / "vae" / "diffusion_pytorch_model.safetensors"
    vae.write_bytes(vae.read_bytes()[:5000])  # truncated
    with pytest.raises(ModelError) as e:
        load_kagura(folder=shipped_copy, device="cpu")
    assert not isinstance(e.value, UnsupportedConfig)
    assert str(e.value).startswith(str(vae)) and "\n" not in str(e.value)


def test_load_kagura_takes_the_diffusers_loader_for_another_architecture(tmp_path):
    """A Kagura-style model whose UNet has cross-attention (what a user could train): the
    plain loader refuses its config, load_kagura loads it through diffusers and says so."""
    from diffusers import UNet2DConditionModel

    from pipeline.diffusion.kagura_model import KAGURA_UNET_CONFIG

    models = build_kagura(seed=2)
    cfg = {**KAGURA_UNET_CONFIG, "down_block_types": ["CrossAttnDownBlock2D", *["DownBlock2D"] * 2]}
    cfg["up_block_types"] = [*["UpBlock2D"] * 2, "CrossAttnUpBlock2D"]
    torch.manual_seed(2)
    models.unet = UNet2DConditionModel(**cfg).eval()
    folder = save_models(models, tmp_path / "cross")
    m = load_kagura(folder=folder, device="cpu")
    assert type(m.unet).__name__ == "UNet2DConditionModel"
    assert "diffusers:" in m.label and "down_block_types" in m.label
    st = DiffusionStage(m, load_preset("studio"), 64, 40)
    st.setup()
    assert st.apply(torch.full((40, 64, 4), 255, dtype=torch.uint8)).shape == (40, 64, 4)


def test_a_retrained_export_loads_as_plain_torch(tmp_path):
    """What `kagura train --export` writes (save_models of the diffusers parts) is the
    configuration the plain loader implements."""
    folder = save_models(build_kagura(seed=3), tmp_path / "export")
    m = load_kagura(folder=folder, device="cpu")
    assert "plain torch" in m.label and type(m.unet) is UNet


# -- the free numbers of the configuration --------------------------------------------------


def test_other_widths_and_depths_match_diffusers_too():
    """The numbers the plain UNet and text tower take from their configs (channels, levels,
    depth, heads, the sinusoid's order and shift) mean what they mean to diffusers and
    transformers: random weights of another size, the same outputs."""
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from pipeline.diffusion.kagura_model import KAGURA_UNET_CONFIG
    from pipeline.diffusion.kagura_torch import check_unet_config

    torch.manual_seed(4)
    ref = UNet2DConditionModel(
        **{
            **KAGURA_UNET_CONFIG,
            "in_channels": 4,
            "out_channels": 3,
            "block_out_channels": [32, 64],
            "down_block_types": ["DownBlock2D"] * 2,
            "up_block_types": ["UpBlock2D"] * 2,
            "layers_per_block": 2,
            "norm_num_groups": 16,
            "cross_attention_dim": 32,
            "addition_embed_type_num_heads": 2,
            "flip_sin_to_cos": False,
            "freq_shift": 1,
        }
    ).eval()
    cfg = dict(ref.config)
    check_unet_config(Path("config.json"), cfg)
    plain = UNet(cfg).eval()
    plain.load_state_dict(ref.state_dict(), strict=True)
    x, emb = torch.randn(2, 4, 13, 18), torch.randn(2, 7, 32)
    with torch.no_grad():
        a = plain(x, torch.tensor([5, 700]), encoder_hidden_states=emb)[0]
        b = ref(x, torch.tensor([5, 700]), encoder_hidden_states=emb, return_dict=False)[0]
    torch.testing.assert_close(a, b, **TIGHT)

    tcfg = {
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "max_position_embeddings": 20,
        "vocab_size": 50,
        "layer_norm_eps": 1e-5,
        "hidden_act": "quick_gelu",
    }
    te = CLIPTextModel(CLIPTextConfig(**tcfg)).eval()
    plain_te = TextEncoder(tcfg).eval()
    state = {k: v for k, v in te.state_dict().items() if not k.endswith("position_ids")}
    plain_te.load_state_dict(state, strict=True)
    ids = torch.randint(0, 50, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(plain_te(ids)[0], te(ids)[0], **TIGHT)
