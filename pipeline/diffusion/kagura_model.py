"""Kagura's own latent-diffusion model: its architecture, its autoencoder, where its weights live.

    AutoencoderLayers(nn.Module)                      the model's own autoencoder (below), torch
    autoencoder_class() -> KaguraAutoencoder          the same as a diffusers model (training,
                                                      save_pretrained)
    build_kagura(seed=0) -> DiffusionModels           fresh weights (float32, CPU) for training
    load_kagura(dtype, device, folder=None)           the shipped weights as plain torch modules
                                                      (kagura_torch.py), other architectures
                                                      via load_models(); ModelError (one line)
                                                      when unusable
    KAGURA_WEIGHTS                                    the committed weights folder (diffusers
                                                      layout: unet/ vae/ text_encoder/ tokenizer/
                                                      scheduler/)
    style_prompts() -> {preset: prompt}                the prompts it was trained on

The model is a conditional denoiser in the latent space of a small autoencoder, conditioned on
the fast render (the procedural look that reaches the diffusion stage) and on the preset:

- UNet (diffusers UNet2DConditionModel, ~6 M parameters): the noisy latent and the *clean
  latent of the fast render* are stacked (8 input channels, as InstructPix2Pix conditions on its
  input image), three levels (80x45 -> 40x23 -> 20x12 for 640x360) of ResNet blocks and one
  more ResNet block at the bottleneck (diffusers builds "UNetMidBlock2D" inside this UNet
  without attention: the weights hold none), no attention over the picture. The preset
  enters through the text pathway — its prompt, through a tiny frozen CLIP text tower, pooled by
  diffusers' TextTimeEmbedding into the time embedding (addition_embed_type "text") — so every
  ResNet block is modulated by the style, and the stage's prompt cache and preset switching
  work unchanged. It predicts the clean latent (prediction_type "sample") as the fast render's
  latent plus a learned change ("image_residual": the procedural look is already most of the
  picture), trained as an x0 (rectified) objective from any noise level, so 1 or 2 steps paint
  the frame.
- Autoencoder (KaguraAutoencoder, ~1 M parameters, 8x down, 4 latent channels): built for a
  2-core CPU as much as for the GPU — no convolution runs at full resolution. The encoder
  starts with a pixel-unshuffle (space-to-depth, 3 -> 12 channels at half size), the decoder
  ends with a pixel-shuffle (12 channels at half size -> RGB). Images are in [-1, 1] like
  TAESD's interface (encode(x) -> latents, decode(z) -> image, `return_dict=False` tuples).
- The DDPM schedule every SD model uses (scaled-linear betas 0.00085..0.012, 1000 steps), so
  the diffusion stage's timesteps, strength and stream batch apply unchanged.

Imports: only torch. diffusers/transformers are imported inside the functions that build or
save the diffusers form (build_kagura, autoencoder_class: training, tests); load_kagura needs
neither for the shipped weights.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.model_factory import KAGURA  # re-exported: its torch-free home

__all__ = [
    "KAGURA",
    "KAGURA_AE_CONFIG",
    "KAGURA_TEXT_CONFIG",
    "KAGURA_UNET_CONFIG",
    "KAGURA_WEIGHTS",
    "STYLE_PRESETS",
    "AutoencoderLayers",
    "autoencoder_class",
    "build_kagura",
    "load_kagura",
    "style_prompts",
]

KAGURA_WEIGHTS = Path(__file__).resolve().parent / "kagura"

# The built-in presets the model learned: their diffusion prompts (presets/*.toml) are what the
# text tower was trained on; other prompts give an untrained style embedding (see the model card).
STYLE_PRESETS = ("studio", "ink-wash", "cyberpunk")

KAGURA_UNET_CONFIG: dict[str, Any] = {
    "sample_size": 48,
    "in_channels": 8,  # noisy latent + clean latent of the fast render
    "out_channels": 4,
    "down_block_types": ["DownBlock2D", "DownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "UpBlock2D", "UpBlock2D"],
    "mid_block_type": "UNetMidBlock2D",
    "block_out_channels": [64, 128, 192],
    "layers_per_block": 1,
    "norm_num_groups": 32,
    "attention_head_dim": 32,
    "cross_attention_dim": 64,
    "addition_embed_type": "text",
    "addition_embed_type_num_heads": 4,
    "act_fn": "silu",
    "flip_sin_to_cos": True,
    "freq_shift": 0,
}
KAGURA_TEXT_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 77,
    "vocab_size": 84,  # write_tiny_tokenizer's vocabulary
    "projection_dim": 64,
    "bos_token_id": 82,
    "eos_token_id": 83,
    "pad_token_id": 83,
}

KAGURA_AE_CONFIG: dict[str, Any] = {
    "latent_channels": 4,
    "encoder_channels": [24, 48, 96],  # at 1/2, 1/4, 1/8
    "encoder_blocks": [0, 1, 1],  # residual blocks per level
    "decoder_channels": [96, 64, 32],  # at 1/8, 1/4, 1/2
    "decoder_blocks": [2, 1, 0],
    "guide_channels": [32, 48],  # the fast render's features at 1/2, 1/4 (guided decoder)
    "scaling_factor": 1.0,
}


class _Res(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.a = nn.Conv2d(c, c, 3, padding=1)
        self.b = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + self.b(nn.functional.silu(self.a(nn.functional.silu(x))))


def _level(c_in: int, c: int, n: int) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c, 3, padding=1), *[_Res(c) for _ in range(n)]]


class AutoencoderLayers(nn.Module):
    """The autoencoder's layers and its encode/decode, in plain torch: the diffusers class
    (`autoencoder_class()`, for training and saving) and the plain-torch loader
    (kagura_torch.py) both build exactly these, so both read the same weight files.
    Subclasses call `super().__init__()` and then `_build(**config)`.

    encode(x in [-1, 1]) -> (latents,); decode(z, guide=None) -> (image in [-1, 1],).
    With `guide_channels` the decoder is *guided*: decode(z, guide) adds a residual to
    `guide` (the fast render, (B, 3, H, W) in [-1, 1]), computed from the latent and the
    guide's own features at 1/2 and 1/4 size, so the fast render's lines, eyes and
    highlights reach the output exactly and the latent carries only the painting."""

    def _build(
        self,
        latent_channels: int = 4,
        encoder_channels: tuple[int, ...] = (24, 48, 96),
        encoder_blocks: tuple[int, ...] = (0, 1, 1),
        decoder_channels: tuple[int, ...] = (96, 64, 32),
        decoder_blocks: tuple[int, ...] = (2, 1, 0),
        guide_channels: tuple[int, ...] = (),
        scaling_factor: float = 1.0,
    ) -> None:
        e1, e2, e3 = encoder_channels
        d3, d2, d1 = decoder_channels
        n1, n2, n3 = encoder_blocks
        m3, m2, m1 = decoder_blocks
        self.guided = len(guide_channels) == 2
        self.encoder = nn.Sequential(
            nn.PixelUnshuffle(2),  # 1/2, 12 channels
            *_level(12, e1, n1),
            nn.Conv2d(e1, e2, 3, stride=2, padding=1),  # 1/4
            *[_Res(e2) for _ in range(n2)],
            nn.Conv2d(e2, e3, 3, stride=2, padding=1),  # 1/8
            *[_Res(e3) for _ in range(n3)],
            nn.SiLU(),
            nn.Conv2d(e3, latent_channels, 3, padding=1),
        )
        if not self.guided:  # the first Kagura models' decoder: their weights load as-is
            self.decoder = nn.Sequential(
                *_level(latent_channels, d3, m3),
                nn.Upsample(scale_factor=2.0, mode="nearest"),  # 1/4
                *_level(d3, d2, m2),
                nn.Upsample(scale_factor=2.0, mode="nearest"),  # 1/2
                *_level(d2, d1, m1),
                nn.SiLU(),
                nn.Conv2d(d1, 12, 3, padding=1),
                nn.PixelShuffle(2),  # full size, RGB
            )
            return
        g1, g2 = guide_channels
        self.guide_2 = nn.Sequential(
            nn.PixelUnshuffle(2), nn.Conv2d(12, g1, 3, padding=1), nn.SiLU()
        )
        self.guide_4 = nn.Sequential(nn.Conv2d(g1, g2, 3, stride=2, padding=1), nn.SiLU(), _Res(g2))
        self.dec_8 = nn.Sequential(*_level(latent_channels, d3, m3))
        self.dec_4 = nn.Sequential(*_level(d3 + g2, d2, m2))
        self.dec_2 = nn.Sequential(*_level(d2 + g1, d1, m1), nn.SiLU())
        self.dec_out = nn.Sequential(nn.Conv2d(d1, 12, 3, padding=1), nn.PixelShuffle(2))
        # an untrained guided decoder returns the guide unchanged: training starts from
        # the fast look, never from a blur of it
        nn.init.zeros_(self.dec_out[0].weight)
        nn.init.zeros_(self.dec_out[0].bias)

    def encode(self, x: torch.Tensor, return_dict: bool = False):
        # soft clamp to +-3 like TAESD's latents: bounded, and noise of unit std is "large"
        z = self.encoder(x)
        return (torch.tanh(z / 3.0) * 3.0,)

    def decode(self, z: torch.Tensor, guide: torch.Tensor | None = None, return_dict: bool = False):
        if not self.guided:
            return (torch.tanh(self.decoder(z)),)
        if guide is None:
            raise ValueError("KaguraAutoencoder: this decoder is guided: pass guide=")
        up = nn.functional.interpolate
        f2 = self.guide_2(guide)  # 1/2
        f4 = self.guide_4(f2)  # 1/4
        x = up(self.dec_8(z), scale_factor=2.0, mode="nearest")
        x = self.dec_4(torch.cat([x[..., : f4.shape[-2], : f4.shape[-1]], f4], dim=1))
        x = up(x, scale_factor=2.0, mode="nearest")
        x = self.dec_2(torch.cat([x[..., : f2.shape[-2], : f2.shape[-1]], f2], dim=1))
        return ((guide + self.dec_out(x)).clamp(-1.0, 1.0),)

    def forward(self, x: torch.Tensor, guide: torch.Tensor | None = None):
        return self.decode(self.encode(x)[0], guide)[0]


@functools.cache
def autoencoder_class():
    """KaguraAutoencoder: AutoencoderLayers as a diffusers model (from_pretrained,
    save_pretrained), defined on first use so importing this module needs only torch."""
    from diffusers.configuration_utils import ConfigMixin, register_to_config
    from diffusers.models.modeling_utils import ModelMixin

    # AutoencoderLayers first: its encode/decode/forward win, and ModelMixin's attribute
    # lookup still reaches nn.Module's (ConfigMixin's would not find the layers)
    class KaguraAutoencoder(AutoencoderLayers, ModelMixin, ConfigMixin):
        """8x-down autoencoder without full-resolution convolutions (see the module doc)."""

        _supports_gradient_checkpointing = False

        @register_to_config
        def __init__(
            self,
            latent_channels: int = 4,
            encoder_channels: tuple[int, ...] = (24, 48, 96),
            encoder_blocks: tuple[int, ...] = (0, 1, 1),
            decoder_channels: tuple[int, ...] = (96, 64, 32),
            decoder_blocks: tuple[int, ...] = (2, 1, 0),
            guide_channels: tuple[int, ...] = (),
            scaling_factor: float = 1.0,
        ):
            super().__init__()
            self._build(
                latent_channels,
                encoder_channels,
                encoder_blocks,
                decoder_channels,
                decoder_blocks,
                guide_channels,
                scaling_factor,
            )

    return KaguraAutoencoder


def style_prompts() -> dict[str, str]:
    """{preset name: its [diffusion] prompt} for the built-in presets the model learned."""
    from presets.loader import load_preset

    return {name: load_preset(name).diffusion.prompt for name in STYLE_PRESETS}


def build_kagura(seed: int = 0):
    """Fresh (untrained) Kagura model parts, float32 on the CPU, as a DiffusionModels with
    prediction_type "sample" — what training starts from and tests save to disk."""
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    from pipeline.diffusion.models import DEFAULT_SCHEDULE, _assemble, write_tiny_tokenizer

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(**KAGURA_UNET_CONFIG)
    vae = autoencoder_class()(**KAGURA_AE_CONFIG)
    te = CLIPTextModel(CLIPTextConfig(**KAGURA_TEXT_CONFIG)).eval().requires_grad_(False)
    tok_dir = write_tiny_tokenizer(Path(tempfile.mkdtemp(prefix="kagura-tok-")))
    tok = CLIPTokenizer.from_pretrained(tok_dir, local_files_only=True)
    cpu = torch.device("cpu")
    # the fast look is already most of the picture: predict the change (see stage.py); the
    # last convolution starts at zero, so an untrained UNet returns the input unchanged
    torch.nn.init.zeros_(unet.conv_out.weight)
    torch.nn.init.zeros_(unet.conv_out.bias)
    sched = {**DEFAULT_SCHEDULE, "prediction_type": "sample", "image_residual": True}
    return _assemble(
        unet,
        vae,
        te,
        tok,
        sched,
        "turbo",
        "sample",
        torch.float32,
        cpu,
        random=False,
        label="Kagura model (untrained)",
    )


def load_kagura(
    dtype: str | torch.dtype = "float16", device: str | torch.device = "cpu", folder=None
):
    """The shipped weights (or `folder`) as plain torch modules (kagura_torch.py: no diffusers,
    transformers or peft imported); a folder whose configs that loader does not implement
    (another architecture) goes through the diffusers loader, load_models(). A missing,
    truncated or foreign weight file raises ModelError with one line naming the file; callers
    fall back to the procedural look with a visible notice (see app/render_job.py)."""
    from pipeline.diffusion.kagura_torch import UnsupportedConfig, load_kagura_torch
    from pipeline.diffusion.models import ModelError

    if folder is None:  # KAGURA_WEIGHTS_DIR: e.g. weights retrained by `kagura train --export`
        from core.paths import weights_dir

        folder = weights_dir(KAGURA_WEIGHTS)
    root = Path(folder)
    try:
        models = load_kagura_torch(root, dtype=dtype, device=device)
        loader = "plain torch"
    except UnsupportedConfig as why:
        from pipeline.diffusion.models import load_models

        models = load_models(root, dtype=dtype, device=device)
        loader = f"diffusers: {why}"
    if models.prediction_type != "sample" or not models.image_residual:
        raise ModelError(
            root / "scheduler" / "scheduler_config.json",
            "is not Kagura's own model (expected prediction_type 'sample' with image_residual)",
        )
    models.label = f"Kagura's own model ({root}; {loader})"
    return models
