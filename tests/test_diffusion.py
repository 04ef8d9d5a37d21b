"""The latent-diffusion stage on the CPU with TINY random-weight diffusers models.

The models are built here with diffusers/transformers classes, saved with save_pretrained to a
temporary folder and read back through pipeline/diffusion/models.py (the real loading code).
Random weights paint noise, so the tests check the plumbing — shapes, alpha, determinism,
stream-batch lag, preset switching, errors — not the pictures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from pipeline.diffusion import DiffusionStage, ModelError, load_models, write_tiny_tokenizer
from pipeline.diffusion.models import UNET_CONFIGS, build_unet, fuse_lora, random_weights
from presets.schema import Diffusion

W, H = 64, 48  # latent 8 x 6


def _diffusion(**kw) -> Diffusion:
    base = {"prompt": "ink wash idol", "strength": 0.5, "steps": 1, "seed": 3}
    return Diffusion(**{**base, **kw})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from diffusers import AutoencoderTiny, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    root = tmp_path_factory.mktemp("tiny-sd")
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64),
        layers_per_block=1,
        sample_size=8,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=4,
    )
    vae = AutoencoderTiny(
        encoder_block_out_channels=(16, 16, 16, 16),
        decoder_block_out_channels=(16, 16, 16, 16),
        num_encoder_blocks=(1, 1, 1, 1),
        num_decoder_blocks=(1, 1, 1, 1),
    )
    with torch.no_grad():
        # default init fades the signal through the random autoencoder (output ~ independent of
        # the input); He init keeps it, so "painted from which frame" is visible in the output.
        for m in vae.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    m.bias.zero_()
        vae.decoder.layers[-1].weight.mul_(0.08)  # output std ~0.3 around mid-grey:
        vae.decoder.layers[-1].bias.fill_(0.5)  # a blank (black/brown) frame would show
    te = CLIPTextModel(
        CLIPTextConfig(
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=100,
            max_position_embeddings=77,
            bos_token_id=0,
            eos_token_id=2,
            pad_token_id=1,
        )
    )
    unet.save_pretrained(root / "unet")
    vae.save_pretrained(root / "vae")
    te.save_pretrained(root / "text_encoder")
    write_tiny_tokenizer(root / "tokenizer")
    return root


@pytest.fixture(scope="module")
def models(checkpoint):
    return load_models(checkpoint, device="cpu")


def picture(seed: int, w: int = W, h: int = H, corners: bool = True) -> torch.Tensor:
    """A premultiplied RGBA frame: smooth random colours, opaque, transparent corners."""
    g = torch.Generator().manual_seed(seed)
    rgb = torch.rand(3, h // 8, w // 8, generator=g)
    rgb = torch.nn.functional.interpolate(rgb[None], size=(h, w), mode="bilinear")[0]
    img = torch.empty(h, w, 4, dtype=torch.uint8)
    img[..., :3] = (rgb.permute(1, 2, 0) * 255).round().to(torch.uint8)
    img[..., 3] = 255
    if corners:
        img[:6, :10] = 0
        img[-6:, -10:] = 0
        img[-6:, :10, 3] = 128  # half-transparent corner: premultiplied rgb <= alpha
        img[-6:, :10, :3] = 60
    return img


def stage(models, d: Diffusion, **kw) -> DiffusionStage:
    st = DiffusionStage(models, d, W, H, device="cpu", dtype="float32", **kw)
    st.setup(None)
    return st


def not_blank(img: torch.Tensor) -> bool:
    rgb = img[12:36, 16:48, :3].float()  # opaque middle
    return 15.0 < rgb.mean().item() < 240.0 and rgb.std().item() > 1.0


# -- loading ----------------------------------------------------------------------------------


def test_loader_reads_the_saved_folders(models):
    assert models.sampler == "turbo" and models.vae_kind == "tiny" and not models.random
    assert models.cross_attention_dim == 32 and models.dtype == torch.float32
    assert models.alphas_cumprod.shape == (1000,)
    assert models.tokenizer.model_max_length == 77


def _one_line_error(match: str, **kw) -> str:
    with pytest.raises(ModelError) as info:
        load_models(**kw)
    msg = str(info.value)
    assert "\n" not in msg and match in msg, msg
    return msg


def test_missing_and_foreign_folders_raise_one_line(checkpoint, tmp_path):
    missing = tmp_path / "nope"
    msg = _one_line_error("not found", path=missing)
    assert str(missing) in msg
    # a folder holding the autoencoder given as the UNet
    msg = _one_line_error("expected the UNet", path=checkpoint, unet=checkpoint / "vae")
    assert "AutoencoderTiny" in msg and str(checkpoint / "vae") in msg
    # a config but no weights
    empty = tmp_path / "unet"
    empty.mkdir()
    cfg = json.loads((checkpoint / "unet" / "config.json").read_text())
    (empty / "config.json").write_text(json.dumps(cfg))
    _one_line_error("no weights file", path=checkpoint, unet=empty)
    # a folder without config.json, and a tokenizer folder without a vocabulary
    _one_line_error("has no config.json", path=checkpoint, vae=tmp_path)
    _one_line_error("CLIP tokenizer", path=checkpoint, tokenizer=tmp_path)


def test_lora_is_fused_and_selects_lcm(checkpoint, tmp_path):
    from safetensors.torch import save_file

    name = "down_blocks.0.attentions.0.proj_in"
    down, up = torch.randn(2, 32), torch.randn(32, 2)
    file = tmp_path / "pytorch_lora_weights.safetensors"
    save_file(
        {
            f"lora_unet_{name.replace('.', '_')}.lora_down.weight": down,
            f"lora_unet_{name.replace('.', '_')}.lora_up.weight": up,
            f"lora_unet_{name.replace('.', '_')}.alpha": torch.tensor(1.0),
        },
        str(file),
    )
    plain = load_models(checkpoint)
    fused = load_models(checkpoint, lora=tmp_path)
    assert fused.sampler == "lcm"
    w0 = dict(plain.unet.named_modules())[name].weight
    w1 = dict(fused.unet.named_modules())[name].weight
    torch.testing.assert_close(w1 - w0, (0.5 * up @ down).reshape(w0.shape), atol=1e-5, rtol=1e-4)
    bad = tmp_path / "bad.safetensors"
    save_file({"lora_unet_no_such_layer.lora_down.weight": down}, str(bad))
    with pytest.raises(ModelError, match="matches no UNet layer"):
        fuse_lora(plain.unet, bad)


def test_sd_turbo_architecture_numbers():
    cfg = UNET_CONFIGS["sd-turbo"]
    assert cfg["cross_attention_dim"] == 1024 and cfg["use_linear_projection"]
    assert cfg["attention_head_dim"] == [5, 10, 20, 20]
    with torch.device("meta"):  # no memory, no compute
        unet = build_unet("sd-turbo")
    n = sum(p.numel() for p in unet.parameters())
    assert 860e6 < n < 870e6, n  # SD 2.1 UNet: 865.9 M


def test_random_weights_tiny_runs_and_says_random():
    torch.manual_seed(0)
    m = random_weights("tiny", dtype="float16", device="cpu")
    assert m.random and "RANDOM" in m.label and m.dtype == torch.float32  # CPU: float32
    st = DiffusionStage(m, _diffusion(), 32, 16, device="cpu")
    st.setup(None)
    assert st.apply(picture(0, 32, 16, corners=False)).shape == (16, 32, 4)

    # the graphs' step counts lie within the buffers' slots
    with pytest.raises(ValueError, match=r"capture_steps \(3,\) must lie in 1..max_steps \(2\)"):
        DiffusionStage(m, _diffusion(), 32, 16, device="cpu", max_steps=2, capture_steps=(3,))


# -- the stage ----------------------------------------------------------------------------------


def test_shapes_dtypes_and_motion(models):
    st = stage(models, _diffusion())
    assert st.gives.size == (W, H) and st.needs.size == (W, H) and st.latent_size == (8, 6)
    f = Frame(5, 5, AvatarParams(), image=picture(1), motion=torch.ones(H, W, 2))
    out = st.process(f)
    assert out.image.shape == (H, W, 4) and out.image.dtype == torch.uint8
    assert out.pts_ns == 5 and "diffusion" in out.timings and out.motion is f.motion
    # an input size that is not a multiple of 8: padded for the autoencoder, cropped back
    odd = DiffusionStage(models, _diffusion(), 60, 44, device="cpu")
    odd.setup(None)
    assert odd.work_size == (60, 44) and odd.gives.size == (60, 44) and odd.pad_size == (64, 48)
    img = picture(2, 60, 44)
    motion = torch.ones(44, 60, 2)
    out = odd.process(Frame(0, 0, AvatarParams(), image=img, motion=motion))
    assert out.image.shape == (44, 60, 4) and out.motion is motion
    # a smaller ladder rung still paints at its scale, rounded to multiples of 8
    small = DiffusionStage(models, _diffusion(), 60, 44, device="cpu", latent_scale=0.5)
    small.setup(None)
    assert small.work_size == (32, 24) and small.pad_size == (32, 24)
    out = small.process(Frame(0, 0, AvatarParams(), image=img, motion=motion))
    assert out.image.shape == (24, 32, 4) and out.motion.shape == (24, 32, 2)
    assert out.motion[..., 0].mean().item() == pytest.approx(32 / 60, rel=1e-3)


def test_deterministic_under_seed(models):
    a = stage(models, _diffusion(seed=11)).apply(picture(3))
    b = stage(models, _diffusion(seed=11)).apply(picture(3))
    c = stage(models, _diffusion(seed=12)).apply(picture(3))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_alpha_carried_and_premultiplied(models):
    img = picture(4)
    out = stage(models, _diffusion(steps=2)).apply(img)
    assert torch.equal(out[..., 3], img[..., 3])  # the render's alpha, untouched
    assert int(out[:6, :10].max()) == 0 and int(out[-6:, -10:].max()) == 0  # transparent
    assert bool((out[..., :3] <= out[..., 3:]).all())  # valid premultiplied
    assert not_blank(out)


def test_stream_batch_lags_by_steps_minus_one(models):
    a, b, c, x = picture(10), picture(11), picture(12), picture(13)
    d = _diffusion(steps=2, strength=0.6)
    s1, s2 = stage(models, d), stage(models, d)
    assert s1.lag_frames == 1
    out1 = [s1.apply(f) for f in (a, b, x)]
    out2 = [s2.apply(f) for f in (a, c, x)]
    # frame 0: a one-step result of A already (primed slots), not blank
    assert not_blank(out1[0]) and torch.equal(out1[0], out2[0])
    assert not torch.equal(out1[0], stage(models, d).apply(c))  # it depends on the input
    # output 1 is painted from input 0 (A in both streams), whatever input 1 was
    assert torch.equal(out1[1], out2[1])
    # output 2 is painted from input 1 (B vs C): different
    assert (out1[2].float() - out2[2].float()).abs().mean() > 2.0
    # one step without stream batch: no lag
    one = _diffusion(steps=1, strength=0.6)
    p, q = stage(models, one), stage(models, one)
    assert not torch.equal([p.apply(f) for f in (a, b)][1], [q.apply(f) for f in (a, c)][1])
    # stream_batch=False with 2 steps: no lag either, each frame gets both steps
    p, q = stage(models, d, stream_batch=False), stage(models, d, stream_batch=False)
    assert p.lag_frames == 0
    assert not torch.equal([p.apply(f) for f in (a, b)][1], [q.apply(f) for f in (a, c)][1])


def test_preset_switch_mid_stream_rebuilds_nothing(models):
    first = _diffusion(prompt="ink wash idol", steps=2, seed=5)
    second = _diffusion(prompt="neon cyberpunk idol", steps=1, seed=5, strength=0.7)
    st = stage(models, first)
    frames = [picture(20 + i) for i in range(4)]
    st.apply(frames[0])
    st.apply(frames[1])
    big = {n: getattr(st, n).data_ptr() for n in ("_xbuf", "_noise", "_cond", "_img", "_out", "_t")}
    unet, vae = st.models.unet, st.models.vae
    st.set_preset(second)
    assert st.models.unet is unet and st.models.vae is vae
    assert {n: getattr(st, n).data_ptr() for n in big} == big
    assert st.steps == 1 and st.lag_frames == 0
    assert torch.equal(st._cond, st._encode_text("neon cyberpunk idol"))
    out = st.apply(frames[2])
    assert not_blank(out)
    # exactly what a stage started with the second preset paints from that frame
    fresh = stage(models, second, max_steps=1)
    assert torch.equal(out, fresh.apply(frames[2]))
    # and back again: cached embeddings, constants swapped in place, still no blank frame
    st.set_preset(first)
    assert {n: getattr(st, n).data_ptr() for n in big} == big
    assert not_blank(st.apply(frames[3]))
    with pytest.raises(ValueError, match="max_steps=3"):
        st.set_preset(_diffusion(steps=3))


def test_prompt_only_switch_keeps_the_stream(models):
    d1 = _diffusion(prompt="ink wash idol", steps=2)
    d2 = _diffusion(prompt="pastel idol", steps=2)
    a, b = picture(30), picture(31)
    s1, s2 = stage(models, d1), stage(models, d1)
    s1.apply(a), s2.apply(a)
    s2.set_preset(d2)
    assert not bool(s2._fresh)  # in-flight slot kept
    o1, o2 = s1.apply(b), s2.apply(b)
    assert not torch.equal(o1, o2) and not_blank(o2)


def test_negative_prompt_only_with_guidance(models):
    te_calls, unet_batches = [], []
    h1 = models.text_encoder.register_forward_pre_hook(lambda m, a: te_calls.append(1))
    h2 = models.unet.register_forward_pre_hook(lambda m, a: unet_batches.append(a[0].shape[0]))
    try:
        st = stage(models, _diffusion(prompt="solo idol", negative_prompt="blurry"))
        assert len(te_calls) == 1 and set(unet_batches) == {1}  # no negative, no second half
        with pytest.raises(ValueError, match="allow_cfg"):
            st.set_preset(_diffusion(prompt="solo idol", negative_prompt="blurry", guidance=3.0))
        te_calls.clear(), unet_batches.clear()
        g = _diffusion(prompt="guided idol", negative_prompt="blurry", guidance=3.0, steps=2)
        cfg = stage(models, g)
        assert len(te_calls) == 2 and set(unet_batches) == {4}  # 2 steps x (neg, pos)
        assert not_blank(cfg.apply(picture(40)))
        te_calls.clear()
        cfg.set_preset(g)  # cached: no text encoder call
        assert te_calls == []
    finally:
        h1.remove()
        h2.remove()


# -- compiled UNet (CUDA only) ------------------------------------------------------------------


def test_compile_unet_is_refused_on_the_cpu(models, tmp_path):
    """Documented behaviour: compile_unet is CUDA-only (it lives inside the CUDA graphs), so on
    the CPU the constructor raises ValueError saying so — nothing compiles, nothing falls back."""
    with pytest.raises(ValueError, match="compile_unet=True is CUDA-only"):
        DiffusionStage(
            models, _diffusion(), W, H, device="cpu", compile_unet=True, compile_cache=tmp_path
        )
    assert not any(tmp_path.iterdir())  # no cache touched
    st = stage(models, _diffusion())  # the default: no compile, no report
    assert st.compile_unet is False and st.compile_report is None


def test_compile_cache_settings_and_report(tmp_path, monkeypatch):
    import os

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    from pipeline.diffusion.compile import CompileReport, default_compile_cache, use_compile_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/nonexistent-before")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/nonexistent-before")
    # saved and put back by hand: monkeypatch's undo deletes these config entries (torch's
    # config modules are not plain modules), and a later compile in this process needs them
    saved = inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache
    inductor_config.fx_graph_cache = False
    functorch_config.enable_autograd_cache = False
    try:
        root = use_compile_cache(tmp_path / "ind")
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root) == str(tmp_path / "ind")
        assert os.environ["TRITON_CACHE_DIR"] == str(root / "triton")
        assert (root / "triton").is_dir()
        assert inductor_config.fx_graph_cache and functorch_config.enable_autograd_cache
    finally:
        inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = saved
    assert default_compile_cache().parts[-2:] == ("kagura", "inductor")
    before = {"fx_hit": 0, "fx_miss": 0, "fx_bypass": 0, "aot_hit": 0, "aot_miss": 0}
    cold = CompileReport.from_counters(70.0, root, 1, before, {**before, "fx_miss": 1})
    warm = CompileReport.from_counters(9.0, root, 1, before, {**before, "fx_hit": 1, "aot_hit": 1})
    assert not cold.cache_hit and warm.cache_hit
    assert "cache miss" in str(cold) and "cache hit" in str(warm)
    assert warm.as_dict()["cache_hit"] is True
