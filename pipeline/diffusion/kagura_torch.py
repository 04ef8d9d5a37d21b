"""Kagura's own model in plain torch: its weight files loaded without diffusers or transformers.

    load_kagura_torch(folder, dtype, device) -> DiffusionModels
        the UNet, autoencoder, text encoder and tokenizer of a Kagura weights folder (the
        diffusers layout load_models() reads: unet/ vae/ text_encoder/ tokenizer/ scheduler/),
        as the modules below. Every config is checked before any weight is read: one this
        module does not implement raises UnsupportedConfig (a ModelError, one line naming the
        config file and the key), and load_kagura() then takes the diffusers loader.
    UNet, TextEncoder, Autoencoder, Tokenizer   the plain-torch parts (below)

Why: importing diffusers costs seconds over torch (it pulls in transformers, peft and torch's
dynamo) and transformers' CLIP more; Kagura's model is ~7 M parameters of convolutions, group
norms and two tiny attentions, so the default render and live paths need none of that. The
diffusers classes stay for user checkpoints (`--diffusion PATH`), random weights and training.

What is implemented is exactly the configuration Kagura's model is built with
(kagura_model.KAGURA_*_CONFIG); the numbers (channels, depth, groups, heads, widths) are free,
every switch that would change the computation must have Kagura's value:
- UNet: diffusers' UNet2DConditionModel with DownBlock2D / UpBlock2D blocks only (no
  cross-attention anywhere), a "UNetMidBlock2D" mid block (diffusers builds it as one ResNet
  block, without attention, inside this UNet), positional (sinusoidal) timesteps and the text
  pathway "addition_embed_type": "text" (the prompt's hidden states pooled by attention into
  the time embedding). The parameter names are diffusers', so the same safetensors load.
- Text encoder: transformers' CLIPTextModel (pre-norm causal transformer, quick_gelu); it
  returns (last_hidden_state,), the only output the stage and training read.
- Autoencoder: kagura_model.AutoencoderLayers, the very layers the diffusers class builds.
- Tokenizer: the folder's tokenizer.json run by the `tokenizers` package, called as the stage
  calls transformers' CLIPTokenizer (padding to max_length, truncation, tensors).
The equality with the diffusers/transformers modules on the shipped weights is tested
(tests/test_kagura_torch.py; float16 on CUDA: tests/test_kagura_torch_gpu.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.diffusion.kagura_model import AutoencoderLayers
from pipeline.diffusion.models import (
    DiffusionModels,
    ModelError,
    _assemble,
    _dtype,
    _one_line,
    _read_config,
    _scheduler_config,
    check_text_width,
)

__all__ = [
    "Autoencoder",
    "TextEncoder",
    "Tokenizer",
    "UNet",
    "UnsupportedConfig",
    "load_kagura_torch",
]


class UnsupportedConfig(ModelError):
    """A config this module does not implement: the diffusers loader is the one to use."""


class Config(dict):
    """A model's config.json as read, with attribute access (`config.in_channels`) like the
    diffusers/transformers config objects the stage reads."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


_ABSENT = object()


def _check(file: Path, cfg: dict, fixed: dict[str, Any], free: tuple[str, ...], ignored=()):
    """`fixed` keys must hold exactly these values, `free` keys must be present; any key not
    named (a switch this module does not know) is refused too, as is a missing one."""
    for key, want in fixed.items():
        got = cfg.get(key, _ABSENT)
        if got is _ABSENT:
            raise UnsupportedConfig(file, f"has no {key!r} (the plain-torch loader needs it)")
        if got != want:
            raise UnsupportedConfig(
                file, f"{key} = {got!r}: the plain-torch loader implements only {want!r}"
            )
    for key in free:
        if key not in cfg:
            raise UnsupportedConfig(file, f"has no {key!r} (the plain-torch loader needs it)")
    known = {*fixed, *free, *ignored}
    for key in cfg:
        if not key.startswith("_") and key not in known:
            raise UnsupportedConfig(file, f"{key!r} is not implemented by the plain-torch loader")


# -- UNet -------------------------------------------------------------------------------------

UNET_FIXED: dict[str, Any] = {
    "act_fn": "silu",
    "addition_embed_type": "text",
    "addition_time_embed_dim": None,
    "attention_type": "default",
    "center_input_sample": False,
    "class_embed_type": None,
    "class_embeddings_concat": False,
    "conv_in_kernel": 3,
    "conv_out_kernel": 3,
    "cross_attention_norm": None,
    "downsample_padding": 1,
    "dropout": 0.0,
    "dual_cross_attention": False,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "mid_block_only_cross_attention": None,
    "mid_block_scale_factor": 1,
    "mid_block_type": "UNetMidBlock2D",
    "num_attention_heads": None,
    "num_class_embeds": None,
    "only_cross_attention": False,
    "projection_class_embeddings_input_dim": None,
    "resnet_out_scale_factor": 1.0,
    "resnet_skip_time_act": False,
    "resnet_time_scale_shift": "default",
    "reverse_transformer_layers_per_block": None,
    "time_cond_proj_dim": None,
    "time_embedding_act_fn": None,
    "time_embedding_dim": None,
    "time_embedding_type": "positional",
    "timestep_post_act": None,
    "transformer_layers_per_block": 1,
    "upcast_attention": False,
    "use_linear_projection": False,
}
UNET_FREE = (
    "in_channels",
    "out_channels",
    "block_out_channels",
    "down_block_types",
    "up_block_types",
    "layers_per_block",
    "norm_num_groups",
    "norm_eps",
    "cross_attention_dim",
    "addition_embed_type_num_heads",
    "flip_sin_to_cos",
    "freq_shift",
)
# sample_size is a hint for pipelines; attention_head_dim sizes attention this UNet has none of
UNET_IGNORED = ("sample_size", "attention_head_dim")


def check_unet_config(file: Path, cfg: dict) -> None:
    _check(file, cfg, UNET_FIXED, UNET_FREE, UNET_IGNORED)
    chans = cfg["block_out_channels"]
    n = len(chans) if isinstance(chans, list) else 0
    if n == 0 or not all(isinstance(c, int) for c in chans):
        raise UnsupportedConfig(file, f"block_out_channels = {chans!r}: expected a list of ints")
    for key, kind in (("down_block_types", "DownBlock2D"), ("up_block_types", "UpBlock2D")):
        if cfg[key] != [kind] * n:
            raise UnsupportedConfig(
                file, f"{key} = {cfg[key]!r}: the plain-torch loader implements only {kind}"
            )
    _ints(file, cfg, ("in_channels", "out_channels", "layers_per_block", "norm_num_groups"))
    _ints(file, cfg, ("cross_attention_dim", "addition_embed_type_num_heads"))
    if chans[0] % 2:
        raise UnsupportedConfig(file, "block_out_channels[0] is odd (no sinusoidal embedding)")
    if cfg["cross_attention_dim"] % cfg["addition_embed_type_num_heads"]:
        raise UnsupportedConfig(
            file, "cross_attention_dim is not a multiple of addition_embed_type_num_heads"
        )


def _ints(file: Path, cfg: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise UnsupportedConfig(file, f"{key} = {cfg[key]!r}: expected one int >= 1")


class _Resnet(nn.Module):
    """diffusers' ResnetBlock2D as this UNet uses it: the time embedding added after conv1."""

    def __init__(self, c_in: int, c_out: int, temb: int, groups: int, eps: float):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, c_in, eps=eps)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb, c_out)
        self.norm2 = nn.GroupNorm(groups, c_out, eps=eps)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else None

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        """`temb`: the time embedding after its SiLU (the same for every block)."""
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(temb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return (x if self.conv_shortcut is None else self.conv_shortcut(x)) + h


class _Resample(nn.Module):
    """A 3x3 convolution under the name diffusers' Downsample2D / Upsample2D give it."""

    def __init__(self, c: int, stride: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, stride=stride, padding=1)


class _Block(nn.Module):
    def __init__(self, resnets: list[_Resnet], sampler: str | None, c: int):
        super().__init__()
        self.resnets = nn.ModuleList(resnets)
        if sampler == "down":
            self.downsamplers = nn.ModuleList([_Resample(c, 2)])
        elif sampler == "up":
            self.upsamplers = nn.ModuleList([_Resample(c, 1)])


class _TimestepMLP(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.linear_1 = nn.Linear(c_in, c_out)
        self.linear_2 = nn.Linear(c_out, c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class _AttentionPool(nn.Module):
    """Multi-head attention of one query — the mean of the tokens plus a learned offset —
    over that query and the tokens: the prompt as one vector (diffusers' AttentionPooling)."""

    def __init__(self, heads: int, dim: int):
        super().__init__()
        self.heads = heads
        self.positional_embedding = nn.Parameter(torch.empty(1, dim))
        self.k_proj = nn.Linear(dim, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, dim = x.shape
        head = dim // self.heads
        query = x.mean(dim=1, keepdim=True) + self.positional_embedding.to(x.dtype)
        seq = torch.cat([query, x], dim=1)

        def split(t: torch.Tensor) -> torch.Tensor:  # (b, n, dim) -> (b, heads, n, head)
            return t.view(b, t.shape[1], self.heads, head).transpose(1, 2)

        q, k, v = split(self.q_proj(query)), split(self.k_proj(seq)), split(self.v_proj(seq))
        # both factors scaled before the product (not the product after): float16 stays in
        # range; the softmax in float32
        s = 1.0 / math.sqrt(math.sqrt(head))
        w = torch.softmax(((q * s) @ (k * s).transpose(-1, -2)).float(), dim=-1).to(q.dtype)
        return (w @ v).transpose(1, 2).reshape(b, dim)


class _TextTimeEmbedding(nn.Module):
    def __init__(self, text_dim: int, temb: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(text_dim)
        self.pool = _AttentionPool(heads, text_dim)
        self.proj = nn.Linear(text_dim, temb)
        self.norm2 = nn.LayerNorm(temb)

    def forward(self, text: torch.Tensor) -> torch.Tensor:
        return self.norm2(self.proj(self.pool(self.norm1(text))))


class UNet(nn.Module):
    """The conditional denoiser (see the module doc), called as the stage calls diffusers'
    UNet2DConditionModel: unet(sample, timestep, encoder_hidden_states=..., return_dict=False)
    -> (sample,)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = Config(config)
        chans = list(config["block_out_channels"])
        groups, eps = int(config["norm_num_groups"]), float(config["norm_eps"])
        per = int(config["layers_per_block"])
        temb = 4 * chans[0]
        self.time_embedding = _TimestepMLP(chans[0], temb)
        self.add_embedding = _TextTimeEmbedding(
            int(config["cross_attention_dim"]), temb, int(config["addition_embed_type_num_heads"])
        )
        self.conv_in = nn.Conv2d(int(config["in_channels"]), chans[0], 3, padding=1)
        last = len(chans) - 1
        down, c_prev = [], chans[0]
        for i, c in enumerate(chans):
            res = [_Resnet(c_prev if j == 0 else c, c, temb, groups, eps) for j in range(per)]
            down.append(_Block(res, "down" if i < last else None, c))
            c_prev = c
        self.down_blocks = nn.ModuleList(down)
        self.mid_block = _Block([_Resnet(chans[-1], chans[-1], temb, groups, eps)], None, 0)
        # each up block takes per + 1 skips: its level's resnets' outputs and the one below
        # (the last of them comes from the level below); the first resnet also takes the
        # block below's output
        up, rev = [], chans[::-1]
        for i, c in enumerate(rev):
            below, c_prev = rev[min(i + 1, last)], rev[max(i - 1, 0)]
            res = [
                _Resnet(
                    (c_prev if j == 0 else c) + (below if j == per else c), c, temb, groups, eps
                )
                for j in range(per + 1)
            ]
            up.append(_Block(res, "up" if i < last else None, c))
        self.up_blocks = nn.ModuleList(up)
        self.conv_norm_out = nn.GroupNorm(groups, chans[0], eps=eps)
        self.conv_out = nn.Conv2d(chans[0], int(config["out_channels"]), 3, padding=1)

    def _time_proj(self, t: torch.Tensor) -> torch.Tensor:
        """Sinusoidal embedding of the timesteps (float32), cos first with flip_sin_to_cos."""
        half = self.time_embedding.linear_1.in_features // 2
        steps = torch.arange(half, dtype=torch.float32, device=t.device)
        freqs = torch.exp(-math.log(10000.0) * steps / (half - float(self.config.freq_shift)))
        arg = t[:, None].float() * freqs[None]
        sin, cos = torch.sin(arg), torch.cos(arg)
        return torch.cat([cos, sin] if self.config.flip_sin_to_cos else [sin, cos], dim=-1)

    def forward(
        self,
        sample: torch.Tensor,
        timestep: torch.Tensor | int | float,
        encoder_hidden_states: torch.Tensor,
        return_dict: bool = False,
    ) -> tuple[torch.Tensor]:
        if return_dict:
            raise ValueError("kagura UNet: only return_dict=False (a tuple) is implemented")
        t = torch.as_tensor(timestep, device=sample.device)
        t = (t[None] if t.ndim == 0 else t).expand(sample.shape[0])
        emb = self.time_embedding(self._time_proj(t).to(sample.dtype))
        emb = emb + self.add_embedding(encoder_hidden_states)
        temb = F.silu(emb)  # every ResNet block's input nonlinearity of the embedding
        x = self.conv_in(sample)
        skips = [x]
        for block in self.down_blocks:
            for resnet in block.resnets:
                x = resnet(x, temb)
                skips.append(x)
            if hasattr(block, "downsamplers"):
                x = block.downsamplers[0].conv(x)
                skips.append(x)
        x = self.mid_block.resnets[0](x, temb)
        for block in self.up_blocks:
            for resnet in block.resnets:
                x = resnet(torch.cat([x, skips.pop()], dim=1), temb)
            if hasattr(block, "upsamplers"):
                # to the size of the level above (a latent side of 45 halves to 23, not 22.5)
                x = F.interpolate(x, size=skips[-1].shape[-2:], mode="nearest")
                x = block.upsamplers[0].conv(x)
        return (self.conv_out(F.silu(self.conv_norm_out(x))),)


# -- text encoder -------------------------------------------------------------------------------

TEXT_FIXED: dict[str, Any] = {
    "architectures": ["CLIPTextModel"],
    "hidden_act": "quick_gelu",
    "model_type": "clip_text_model",
}
TEXT_FREE = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_hidden_layers",
    "max_position_embeddings",
    "vocab_size",
    "layer_norm_eps",
)
# dropout is off at inference; the token ids name special tokens (the tokenizer's business);
# projection_dim belongs to CLIPTextModelWithProjection; the rest records how it was saved
TEXT_IGNORED = (
    "attention_dropout",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "projection_dim",
    "initializer_factor",
    "initializer_range",
    "dtype",
    "torch_dtype",
    "transformers_version",
)


class _Holder(nn.Module):
    """A parameter-free container: its children carry transformers' parameter names."""

    def __init__(self, **children: nn.Module):
        super().__init__()
        for name, child in children.items():
            self.add_module(name, child)


class _SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, dim = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, dim // self.heads).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # CLIP's text is causal
        return self.out_proj(a.transpose(1, 2).reshape(b, n, dim))


class _EncoderLayer(nn.Module):
    def __init__(self, dim: int, hidden: int, heads: int, eps: float):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(dim, eps=eps)
        self.self_attn = _SelfAttention(dim, heads)
        self.layer_norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = _Holder(fc1=nn.Linear(dim, hidden), fc2=nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        h = self.mlp.fc1(self.layer_norm2(x))
        return x + self.mlp.fc2(h * torch.sigmoid(1.702 * h))  # quick_gelu


class TextEncoder(nn.Module):
    """CLIP's text tower: text_encoder(input_ids (b, n)) -> (last_hidden_state (b, n, dim),)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = Config(config)
        dim, eps = int(config["hidden_size"]), float(config["layer_norm_eps"])
        # uninitialised tables (the weights file fills them): nn.Embedding's own random init
        # on the meta device goes through torch's reference ops, which import torch._dynamo
        vocab, ctx = int(config["vocab_size"]), int(config["max_position_embeddings"])
        self.embeddings = _Holder(
            token_embedding=nn.Embedding.from_pretrained(torch.empty(vocab, dim)),
            position_embedding=nn.Embedding.from_pretrained(torch.empty(ctx, dim)),
        )
        layer = (dim, int(config["intermediate_size"]), int(config["num_attention_heads"]), eps)
        n = int(config["num_hidden_layers"])
        self.encoder = _Holder(layers=nn.ModuleList(_EncoderLayer(*layer) for _ in range(n)))
        self.final_layer_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor]:
        pos = torch.arange(input_ids.shape[-1], device=input_ids.device)
        x = self.embeddings.token_embedding(input_ids) + self.embeddings.position_embedding(pos)
        for layer in self.encoder.layers:
            x = layer(x)
        return (self.final_layer_norm(x),)


# -- autoencoder and tokenizer ------------------------------------------------------------------

AE_FREE = (
    "latent_channels",
    "encoder_channels",
    "encoder_blocks",
    "decoder_channels",
    "decoder_blocks",
    "guide_channels",
    "scaling_factor",
)


class Autoencoder(AutoencoderLayers):
    """Kagura's autoencoder (kagura_model.AutoencoderLayers) with its config, without diffusers."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = Config(config)
        self._build(**{k: config[k] for k in AE_FREE})


class Tokenizer:
    """The folder's tokenizer.json (the `tokenizers` package), called as the stage calls
    transformers' CLIPTokenizer: tok(text, padding="max_length", max_length=n,
    truncation=True, return_tensors="pt").input_ids -> int64 (1, n)."""

    def __init__(self, folder: Path):
        file, cfg_file = folder / "tokenizer.json", folder / "tokenizer_config.json"
        if not file.is_file() or not cfg_file.is_file():
            raise UnsupportedConfig(
                folder, "has no tokenizer.json + tokenizer_config.json (the plain-torch loader)"
            )
        try:
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(cfg_file, f"unreadable tokenizer config: {_one_line(exc)}") from exc
        if cfg.get("tokenizer_class") != "CLIPTokenizer":
            raise UnsupportedConfig(
                cfg_file,
                f"tokenizer_class = {cfg.get('tokenizer_class')!r}: expected CLIPTokenizer",
            )
        from tokenizers import Tokenizer as Backend

        try:
            self._tok = Backend.from_file(str(file))
        except Exception as exc:
            raise ModelError(file, f"could not load the tokenizer: {_one_line(exc)}") from exc
        pad = cfg.get("pad_token")
        self.pad_token_id = self._tok.token_to_id(pad) if isinstance(pad, str) else None
        if self.pad_token_id is None:
            raise UnsupportedConfig(cfg_file, f"pad_token {pad!r} is not in tokenizer.json")
        self._pad = pad
        n = cfg.get("model_max_length")
        # no limit recorded: CLIP's context is 77 tokens (as load_tokenizer decides)
        self.model_max_length = int(n) if isinstance(n, int) and n <= 4096 else 77

    def __call__(
        self,
        text: str | list[str],
        padding: str = "max_length",
        max_length: int | None = None,
        truncation: bool = True,
        return_tensors: str = "pt",
    ) -> SimpleNamespace:
        if (padding, truncation, return_tensors) != ("max_length", True, "pt"):
            raise ValueError(
                "kagura tokenizer: only padding='max_length', truncation=True, "
                "return_tensors='pt' are implemented"
            )
        n = int(max_length or self.model_max_length)
        self._tok.enable_truncation(n)
        self._tok.enable_padding(length=n, pad_id=self.pad_token_id, pad_token=self._pad)
        texts = [text] if isinstance(text, str) else list(text)
        ids = [e.ids for e in self._tok.encode_batch(texts)]
        return SimpleNamespace(input_ids=torch.tensor(ids, dtype=torch.long))


# -- loading ------------------------------------------------------------------------------------


def _weights(module: nn.Module, file: Path, what: str, dtype, device) -> nn.Module:
    """`file`'s tensors into `module` (built on the meta device: nothing initialised twice);
    a missing, truncated or foreign file is a one-line ModelError naming it."""
    from safetensors.torch import load_file

    try:
        state = load_file(str(file))
        prefix = "text_model."  # transformers before 5 saved CLIP's text tower under it
        if state and all(k.startswith(prefix) for k in state):
            state = {k[len(prefix) :]: v for k, v in state.items()}
        module.load_state_dict(state, strict=True, assign=True)
    except Exception as exc:
        raise ModelError(file, f"could not load the {what}: {_one_line(exc)}") from exc
    return module.to(device, dtype).eval().requires_grad_(False)


def _config(folder: Path, what: str, weights: str) -> tuple[dict, Path]:
    cfg = _read_config(folder, what)
    if not (folder / weights).is_file():  # .bin, fp16 variants, shards: the diffusers loader's
        raise UnsupportedConfig(folder, f"has no {weights} (the plain-torch loader reads only it)")
    return cfg, folder / "config.json"


def load_kagura_torch(
    folder: str | Path, dtype: str | torch.dtype = "float16", device: str | torch.device = "cpu"
) -> DiffusionModels:
    """Kagura's model in `folder` as the plain-torch modules (see the module doc); raises
    UnsupportedConfig before reading any weight when a config is not the one implemented,
    ModelError (one line naming the file) when a file is missing, unreadable or foreign."""
    dev = torch.device(device)
    dt = _dtype(dtype, dev)
    root = Path(folder)
    if not root.is_dir():
        raise ModelError(
            root, "not found (expected a diffusers checkpoint folder with unet/, vae/, ...)"
        )
    diffusers_weights, model_weights = "diffusion_pytorch_model.safetensors", "model.safetensors"
    # every config first: an unsupported one costs no weight reading
    ucfg, ufile = _config(root / "unet", "UNet", diffusers_weights)
    if ucfg.get("_class_name") != "UNet2DConditionModel":
        raise UnsupportedConfig(ufile, f"_class_name {ucfg.get('_class_name')!r}")
    check_unet_config(ufile, ucfg)
    vcfg, vfile = _config(root / "vae", "autoencoder", diffusers_weights)
    _check(vfile, vcfg, {"_class_name": "KaguraAutoencoder"}, AE_FREE)
    tcfg, tfile = _config(root / "text_encoder", "text encoder", model_weights)
    _check(tfile, tcfg, TEXT_FIXED, TEXT_FREE, TEXT_IGNORED)
    _ints(tfile, tcfg, tuple(k for k in TEXT_FREE if k != "layer_norm_eps"))
    if tcfg["hidden_size"] % tcfg["num_attention_heads"]:
        raise UnsupportedConfig(tfile, "hidden_size is not a multiple of num_attention_heads")
    check_text_width(root / "text_encoder", tcfg["hidden_size"], ucfg["cross_attention_dim"])
    tok = Tokenizer(root / "tokenizer")
    sched, sched_class = _scheduler_config(root)
    parts = []
    with torch.device("meta"):  # shapes only: the weights file fills them
        for cls, cfg, file in (
            (UNet, ucfg, ufile),
            (Autoencoder, vcfg, vfile),
            (TextEncoder, tcfg, tfile),
        ):
            try:
                parts.append(cls(cfg))
            except Exception as exc:  # numbers that build no module: diffusers says why
                raise UnsupportedConfig(
                    file, f"builds no plain-torch model: {_one_line(exc)}"
                ) from exc
    unet = _weights(parts[0], root / "unet" / diffusers_weights, "UNet", dt, dev)
    vae = _weights(parts[1], root / "vae" / diffusers_weights, "autoencoder", dt, dev)
    te = _weights(parts[2], root / "text_encoder" / model_weights, "text encoder", dt, dev)
    sampler = "lcm" if sched_class == "LCMScheduler" else "turbo"
    return _assemble(
        unet,
        vae,
        te,
        tok,
        sched,
        sampler,
        None,
        dt,
        dev,
        random=False,
        label=f"{root} ({sampler}, plain torch)",
    )
