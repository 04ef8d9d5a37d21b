"""Loading the latent-diffusion models from diffusers-format folders on disk (never downloaded).

    load_models(path=None, *, unet=None, vae=None, text_encoder=None, tokenizer=None,
                lora=None, sampler=None, prediction_type=None,
                dtype="float16", device="cpu") -> DiffusionModels
        path: a diffusers checkpoint folder with unet/, vae/, text_encoder/, tokenizer/ and
              (optional) scheduler/scheduler_config.json. Each component can be given (or
              overridden) by its own folder: e.g. vae=<TAESD folder> (AutoencoderTiny),
              unet=<an LCM-distilled UNet folder>. lora=<LCM-LoRA .safetensors file or folder>
              is fused into the UNet weights (no peft needed).
        Every path is checked before loading: a missing folder/file or one holding something
        else raises `ModelError` (a ValueError) with ONE line naming the path and what was
        expected. Everything is read with local_files_only=True.
    random_weights(kind="sd-turbo"|"sd15"|"tiny", dtype="float16", device="cpu")
        the real architectures (configs below) with RANDOM weights, for timing without a
        checkpoint; `DiffusionModels.random` is True and `label` says "random weights".
    save_models(models, folder): writes unet/, vae/, text_encoder/, tokenizer/ (+ scheduler/)
        in diffusers format, so `load_models(folder)` reads it back.
    write_tiny_tokenizer(folder): a tiny CLIP BPE vocabulary (letters, digits, a little
        punctuation, the two CLIP special tokens) written as vocab.json + merges.txt.

`sampler`: "lcm" (LCM boundary-condition scalings c_skip/c_out; chosen automatically with a
LoRA, an LCMScheduler config, or a UNet with `time_cond_proj_dim`) or "turbo" (plain x0
prediction, SD-Turbo / ADD). `prediction_type` "epsilon" | "v_prediction" | "sample" (the
UNet predicts the clean latent, as Kagura's own model does) defaults to the scheduler config's
(else epsilon). Kagura's own model (pipeline/diffusion/kagura_model.py) also loads through
load_models() — its autoencoder class "KaguraAutoencoder" is accepted beside TAESD and the KL
VAE — but load_kagura() reads it as plain torch modules (kagura_torch.py) and comes here only
for a configuration those do not implement.

Imports: diffusers / transformers / safetensors are imported inside functions, so the package
imports on machines without them.

Config sources (architecture numbers only): the `unet/config.json` and
`text_encoder/config.json` published with stabilityai/sd-turbo (an SD 2.1-base UNet,
~866 M parameters, OpenCLIP ViT-H text tower stored as a 23-layer CLIPTextModel) and with
runwayml/stable-diffusion-v1-5 (~860 M, CLIP ViT-L/14 text); TAESD = diffusers'
AutoencoderTiny defaults (madebyollin/taesd). The schedule both were trained with:
scaled_linear betas 0.00085 .. 0.012 over 1000 steps.
"""

from __future__ import annotations

import json
import string
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "DTYPES",
    "DiffusionModels",
    "ModelError",
    "load_models",
    "random_weights",
    "save_models",
    "write_tiny_tokenizer",
]

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

UNET_CLASSES = ("UNet2DConditionModel",)
VAE_CLASSES = ("AutoencoderTiny", "AutoencoderKL", "KaguraAutoencoder")
TEXT_ARCHS = ("CLIPTextModel", "CLIPTextModelWithProjection")
WEIGHT_FILES = (
    "diffusion_pytorch_model.safetensors",
    "diffusion_pytorch_model.bin",
    "diffusion_pytorch_model.safetensors.index.json",
    "model.safetensors",
    "pytorch_model.bin",
    "model.safetensors.index.json",
)
FP16_WEIGHT_FILES = tuple(
    f.replace(".safetensors", ".fp16.safetensors").replace(".bin", ".fp16.bin")
    for f in WEIGHT_FILES
)

# -- published architecture numbers -------------------------------------------------------------

_SD_UNET_COMMON: dict[str, Any] = {
    "act_fn": "silu",
    "block_out_channels": [320, 640, 1280, 1280],
    "center_input_sample": False,
    "down_block_types": [
        "CrossAttnDownBlock2D",
        "CrossAttnDownBlock2D",
        "CrossAttnDownBlock2D",
        "DownBlock2D",
    ],
    "up_block_types": [
        "UpBlock2D",
        "CrossAttnUpBlock2D",
        "CrossAttnUpBlock2D",
        "CrossAttnUpBlock2D",
    ],
    "downsample_padding": 1,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "out_channels": 4,
    "layers_per_block": 2,
    "mid_block_scale_factor": 1,
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "sample_size": 64,
}
UNET_CONFIGS: dict[str, dict[str, Any]] = {
    # stabilityai/sd-turbo unet/config.json (SD 2.1 base)
    "sd-turbo": {
        **_SD_UNET_COMMON,
        "attention_head_dim": [5, 10, 20, 20],
        "cross_attention_dim": 1024,
        "use_linear_projection": True,
    },
    # runwayml/stable-diffusion-v1-5 unet/config.json
    "sd15": {
        **_SD_UNET_COMMON,
        "attention_head_dim": 8,
        "cross_attention_dim": 768,
        "use_linear_projection": False,
    },
    # test-sized
    "tiny": {
        "block_out_channels": [32, 64],
        "layers_per_block": 1,
        "sample_size": 8,
        "in_channels": 4,
        "out_channels": 4,
        "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
        "cross_attention_dim": 32,
        "attention_head_dim": 4,
        "norm_num_groups": 32,
    },
}
TEXT_CONFIGS: dict[str, dict[str, Any]] = {
    # stabilityai/sd-turbo text_encoder/config.json (OpenCLIP ViT-H text tower, 23 layers kept)
    "sd-turbo": {
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_attention_heads": 16,
        "num_hidden_layers": 23,
        "hidden_act": "gelu",
        "projection_dim": 512,
        "max_position_embeddings": 77,
        "vocab_size": 49408,
    },
    # runwayml/stable-diffusion-v1-5 text_encoder/config.json (CLIP ViT-L/14)
    "sd15": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_attention_heads": 12,
        "num_hidden_layers": 12,
        "hidden_act": "quick_gelu",
        "projection_dim": 768,
        "max_position_embeddings": 77,
        "vocab_size": 49408,
    },
    "tiny": {
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 77,
        "vocab_size": 1000,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "pad_token_id": 1,
    },
}
# TAESD (madebyollin/taesd) is AutoencoderTiny's default configuration.
VAE_CONFIGS: dict[str, dict[str, Any]] = {
    "sd-turbo": {},
    "sd15": {},
    "tiny": {
        "encoder_block_out_channels": [16, 16, 16, 16],
        "decoder_block_out_channels": [16, 16, 16, 16],
        "num_encoder_blocks": [1, 1, 1, 1],
        "num_decoder_blocks": [1, 1, 1, 1],
    },
}
DEFAULT_SCHEDULE = {
    "num_train_timesteps": 1000,
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "prediction_type": "epsilon",
}


class ModelError(ValueError):
    """A model folder/file is missing, foreign or unreadable. The message is one line."""

    def __init__(self, path: Path | str, what: str):
        super().__init__(" ".join(f"{path}: {what}".split())[:400])


@dataclass
class DiffusionModels:
    unet: Any
    vae: Any
    text_encoder: Any
    tokenizer: Any
    alphas_cumprod: torch.Tensor  # float64 (num_train_timesteps,), on the CPU
    prediction_type: str = "epsilon"  # "epsilon" | "v_prediction" | "sample"
    sampler: str = "turbo"  # "turbo" | "lcm"
    vae_kind: str = "tiny"  # "tiny" (TAESD) | "kl"
    vae_scale: float = 1.0  # latent scaling factor (TAESD 1.0, SD's KL 0.18215)
    random: bool = False
    label: str = ""
    dtype: torch.dtype = torch.float32
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    scheduler_config: dict = field(default_factory=lambda: dict(DEFAULT_SCHEDULE))

    @property
    def image_residual(self) -> bool:
        """An image-conditioned "sample" UNet that predicts the clean latent as the input
        image's latent plus its output (scheduler config "image_residual": true)."""
        return bool(self.scheduler_config.get("image_residual", False))

    @property
    def cross_attention_dim(self) -> int:
        return int(self.unet.config.cross_attention_dim)


# -- schedule -----------------------------------------------------------------------------------


def alphas_cumprod_from(config: dict) -> torch.Tensor:
    n = int(config.get("num_train_timesteps", 1000))
    b0, b1 = float(config.get("beta_start", 0.00085)), float(config.get("beta_end", 0.012))
    kind = config.get("beta_schedule", "scaled_linear")
    if kind == "scaled_linear":
        betas = torch.linspace(b0**0.5, b1**0.5, n, dtype=torch.float64) ** 2
    elif kind == "linear":
        betas = torch.linspace(b0, b1, n, dtype=torch.float64)
    else:
        raise ModelError("scheduler_config.json", f"unsupported beta_schedule {kind!r}")
    return torch.cumprod(1.0 - betas, dim=0)


# -- checks ---------------------------------------------------------------------------------------


def _read_config(folder: Path, what: str) -> dict:
    if not folder.exists():
        raise ModelError(folder, f"not found (expected the {what} folder, diffusers format)")
    if not folder.is_dir():
        raise ModelError(folder, f"is a file, expected the {what} folder (diffusers format)")
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise ModelError(folder, f"has no config.json, expected the {what} (diffusers format)")
    try:
        return json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(cfg, f"unreadable config of the {what}: {exc}") from exc


def _weights_variant(folder: Path, what: str) -> str | None:
    if any((folder / f).is_file() for f in WEIGHT_FILES):
        return None
    if any((folder / f).is_file() for f in FP16_WEIGHT_FILES):
        return "fp16"
    raise ModelError(
        folder, f"has no weights file (expected {WEIGHT_FILES[0]} or similar) for the {what}"
    )


def _check_class(folder: Path, config: dict, what: str, classes: tuple[str, ...]) -> str:
    name = config.get("_class_name") or (config.get("architectures") or [None])[0]
    if name not in classes:
        raise ModelError(
            folder,
            f"holds {name or 'an unknown model'}, expected the {what} ({' or '.join(classes)})",
        )
    return name


def check_text_width(te_dir: Path, hidden_size, cross_attention_dim) -> None:
    """The text encoder's width must be what the UNet attends to: a ModelError naming the
    text encoder's folder otherwise (parts of different models)."""
    if int(hidden_size) != int(cross_attention_dim):
        raise ModelError(
            te_dir,
            f"text encoder width {hidden_size} does not match the UNet's "
            f"cross_attention_dim {cross_attention_dim} (parts of different models?)",
        )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


# -- loading --------------------------------------------------------------------------------------


def _dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"diffusion: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    # half precision is slow or unsupported on the CPU: work in float32 there
    return dtype if device.type == "cuda" else torch.float32


def _from_pretrained(cls, folder: Path, what: str, dtype, device, variant: str | None):
    """A diffusers model class's weights from `folder`, frozen for inference on `device`; any
    failure is a one-line ModelError naming the folder."""
    try:
        model = cls.from_pretrained(
            folder, torch_dtype=dtype, local_files_only=True, variant=variant
        )
    except Exception as exc:
        raise ModelError(folder, f"could not load the {what}: {_one_line(exc)}") from exc
    return model.to(device, dtype).eval().requires_grad_(False)


def load_unet(folder: str | Path, dtype: torch.dtype, device: torch.device):
    folder = Path(folder)
    cfg = _read_config(folder, "UNet")
    _check_class(folder, cfg, "UNet", UNET_CLASSES)
    variant = _weights_variant(folder, "UNet")
    from diffusers import UNet2DConditionModel

    return _from_pretrained(UNet2DConditionModel, folder, "UNet", dtype, device, variant)


def load_vae(folder: str | Path, dtype: torch.dtype, device: torch.device):
    folder = Path(folder)
    cfg = _read_config(folder, "autoencoder")
    name = _check_class(folder, cfg, "autoencoder", VAE_CLASSES)
    variant = _weights_variant(folder, "autoencoder")
    import diffusers

    if name == "KaguraAutoencoder":
        from pipeline.diffusion.kagura_model import autoencoder_class

        cls = autoencoder_class()
    else:
        cls = getattr(diffusers, name)
    return _from_pretrained(cls, folder, "autoencoder", dtype, device, variant)


def load_text_encoder(folder: str | Path, dtype: torch.dtype, device: torch.device):
    folder = Path(folder)
    cfg = _read_config(folder, "text encoder")
    _check_class(folder, cfg, "text encoder", TEXT_ARCHS)
    _weights_variant(folder, "text encoder")
    from transformers import CLIPTextModel

    try:
        te = CLIPTextModel.from_pretrained(folder, dtype=dtype, local_files_only=True)
    except Exception as exc:
        raise ModelError(folder, f"could not load the text encoder: {_one_line(exc)}") from exc
    return te.to(device, dtype).eval().requires_grad_(False)


def load_tokenizer(folder: str | Path):
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(folder, "not found (expected the CLIP tokenizer folder)")
    has_bpe = (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    if not (has_bpe or (folder / "tokenizer.json").is_file()):
        raise ModelError(
            folder, "has no vocab.json + merges.txt (or tokenizer.json), expected a CLIP tokenizer"
        )
    from transformers import CLIPTokenizer

    try:
        tok = CLIPTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:
        raise ModelError(folder, f"could not load the CLIP tokenizer: {_one_line(exc)}") from exc
    if tok.model_max_length > 4096:  # no limit recorded: CLIP's context is 77 tokens
        tok.model_max_length = 77
    return tok


def _scheduler_config(root: Path | None) -> tuple[dict, str | None]:
    cfg = dict(DEFAULT_SCHEDULE)
    if root is None:
        return cfg, None
    file = root / "scheduler" / "scheduler_config.json"
    if not file.is_file():
        return cfg, None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(file, f"unreadable scheduler config: {exc}") from exc
    cfg.update({k: data[k] for k in (*DEFAULT_SCHEDULE, "image_residual") if k in data})
    return cfg, data.get("_class_name")


def fuse_lora(unet, path: str | Path, scale: float = 1.0) -> int:
    """Add a LoRA's low-rank updates into the UNet's weights (W += scale * alpha/r * up @ down).

    Reads `.safetensors` with either kohya-style keys (`lora_unet_<module_path>.lora_down.weight`,
    `.lora_up.weight`, `.alpha`) or diffusers/peft keys (`unet.<module.path>.lora.down.weight` /
    `.lora_A.weight` and the matching up/B). A folder means its `pytorch_lora_weights.safetensors`.
    Returns how many layers were changed."""
    path = Path(path)
    if path.is_dir():
        path = path / "pytorch_lora_weights.safetensors"
    if not path.is_file():
        raise ModelError(path, "not found (expected a LoRA .safetensors file, e.g. LCM-LoRA)")
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path))
    except Exception as exc:
        raise ModelError(path, f"could not read the LoRA: {_one_line(exc)}") from exc
    modules = dict(unet.named_modules())
    by_kohya = {name.replace(".", "_"): name for name in modules}
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in sd.items():
        if key.startswith("lora_unet_"):
            stem, _, rest = key[len("lora_unet_") :].partition(".")
            target = by_kohya.get(stem)
            part = {"lora_down.weight": "down", "lora_up.weight": "up", "alpha": "alpha"}.get(rest)
        else:
            k = key.removeprefix("unet.")
            part = None
            for suffix, p in (
                (".lora.down.weight", "down"),
                (".lora.up.weight", "up"),
                (".lora_A.weight", "down"),
                (".lora_B.weight", "up"),
                (".alpha", "alpha"),
            ):
                if k.endswith(suffix):
                    part, k = p, k[: -len(suffix)]
                    break
            target = k if k in modules else None
        if target is None or part is None:
            raise ModelError(path, f"key {key!r} matches no UNet layer (a LoRA for another model?)")
        pairs.setdefault(target, {})[part] = value
    n = 0
    with torch.no_grad():
        for target, p in pairs.items():
            if "down" not in p or "up" not in p:
                raise ModelError(path, f"{target}: LoRA has no down/up pair")
            weight = modules[target].weight
            down, up = p["down"].float(), p["up"].float()
            rank = down.shape[0]
            alpha = float(p["alpha"]) if "alpha" in p else float(rank)
            delta = up.flatten(1) @ down.flatten(1)
            if weight.ndim == 4 and down.ndim == 4 and down.shape[-1] != 1:
                # a k x k down conv followed by a 1x1 up conv
                delta = torch.einsum("or,rikl->oikl", up.flatten(1), down)
            weight.add_((scale * alpha / rank * delta).reshape(weight.shape).to(weight))
            n += 1
    return n


def load_models(
    path: str | Path | None = None,
    *,
    unet: str | Path | None = None,
    vae: str | Path | None = None,
    text_encoder: str | Path | None = None,
    tokenizer: str | Path | None = None,
    lora: str | Path | None = None,
    sampler: str | None = None,
    prediction_type: str | None = None,
    dtype: str | torch.dtype = "float16",
    device: str | torch.device = "cpu",
) -> DiffusionModels:
    dev = torch.device(device)
    dt = _dtype(dtype, dev)
    root = Path(path) if path is not None else None
    if root is not None and not root.is_dir():
        raise ModelError(
            root, "not found (expected a diffusers checkpoint folder with unet/, vae/, ...)"
        )

    def part(given, sub: str, what: str) -> Path:
        if given is not None:
            return Path(given)
        if root is None:
            raise ModelError("<none>", f"no checkpoint folder and no {what} folder given")
        return root / sub

    unet_dir = part(unet, "unet", "UNet")
    vae_dir = part(vae, "vae", "autoencoder")
    te_dir = part(text_encoder, "text_encoder", "text encoder")
    tok_dir = part(tokenizer, "tokenizer", "tokenizer")
    # check every folder before the slow loads
    for folder, what, classes in (
        (unet_dir, "UNet", UNET_CLASSES),
        (vae_dir, "autoencoder", VAE_CLASSES),
        (te_dir, "text encoder", TEXT_ARCHS),
    ):
        _check_class(folder, _read_config(folder, what), what, classes)
        _weights_variant(folder, what)
    sched, sched_class = _scheduler_config(root)

    u = load_unet(unet_dir, dt, dev)
    if lora is not None:
        fuse_lora(u, lora)
    v = load_vae(vae_dir, dt, dev)
    te = load_text_encoder(te_dir, dt, dev)
    tok = load_tokenizer(tok_dir)
    check_text_width(te_dir, te.config.hidden_size, u.config.cross_attention_dim)
    if sampler is None:
        lcm = (
            lora is not None
            or sched_class == "LCMScheduler"
            or u.config.get("time_cond_proj_dim") is not None
        )
        sampler = "lcm" if lcm else "turbo"
    return _assemble(
        u,
        v,
        te,
        tok,
        sched,
        sampler,
        prediction_type,
        dt,
        dev,
        random=False,
        label=f"{root or unet_dir} ({sampler})",
    )


def _assemble(u, v, te, tok, sched, sampler, prediction_type, dt, dev, *, random, label):
    if sampler not in ("turbo", "lcm"):
        raise ValueError(f"diffusion: sampler must be 'turbo' or 'lcm', got {sampler!r}")
    pred = prediction_type or sched.get("prediction_type", "epsilon")
    if pred not in ("epsilon", "v_prediction", "sample"):
        raise ValueError(f"diffusion: unsupported prediction_type {pred!r}")
    vae_kind = "kl" if type(v).__name__ == "AutoencoderKL" else "tiny"  # tiny: latents direct
    scale = float(v.config.get("scaling_factor", 1.0 if vae_kind == "tiny" else 0.18215))
    return DiffusionModels(
        unet=u,
        vae=v,
        text_encoder=te,
        tokenizer=tok,
        alphas_cumprod=alphas_cumprod_from(sched),
        prediction_type=pred,
        sampler=sampler,
        vae_kind=vae_kind,
        vae_scale=scale,
        random=random,
        label=label,
        dtype=dt,
        device=dev,
        scheduler_config=sched,
    )


# -- random weights and saving ---------------------------------------------------------------


def write_tiny_tokenizer(folder: str | Path) -> Path:
    """A tiny CLIP BPE tokenizer (single characters only, no merges) in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chars = list(string.ascii_lowercase + string.digits + ",.-!'")
    vocab: dict[str, int] = {}
    for c in chars:
        vocab[c] = len(vocab)
    for c in chars:
        vocab[c + "</w>"] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    special = {
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
    }
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "CLIPTokenizer", "model_max_length": 77, **special}),
        encoding="utf-8",
    )
    (folder / "special_tokens_map.json").write_text(json.dumps(special), encoding="utf-8")
    return folder


def build_unet(kind: str):
    """The UNet architecture of `kind` with freshly initialised weights (float32, current
    default device: use `with torch.device("meta"):` to count parameters without memory)."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(**UNET_CONFIGS[kind])


def random_weights(
    kind: str = "sd-turbo",
    dtype: str | torch.dtype = "float16",
    device: str | torch.device = "cpu",
) -> DiffusionModels:
    """RANDOM-weight models of the real architectures: for timing and tests only (the pictures
    they paint are noise). `label` and `random` say so."""
    if kind not in UNET_CONFIGS:
        raise ValueError(f"diffusion: kind must be one of {sorted(UNET_CONFIGS)}, got {kind!r}")
    from diffusers import AutoencoderTiny
    from transformers import CLIPTextConfig, CLIPTextModel

    dev = torch.device(device)
    dt = _dtype(dtype, dev)
    with torch.device(dev):  # initialise where it will run (fast on a GPU)
        u = build_unet(kind)
        v = AutoencoderTiny(**VAE_CONFIGS[kind])
        te = CLIPTextModel(CLIPTextConfig(**TEXT_CONFIGS[kind]))
    u = u.to(dev, dt).eval().requires_grad_(False)
    v = v.to(dev, dt).eval().requires_grad_(False)
    te = te.to(dev, dt).eval().requires_grad_(False)
    from transformers import CLIPTokenizer

    tok_dir = write_tiny_tokenizer(Path(tempfile.mkdtemp(prefix="kagura-tok-")))
    tok = CLIPTokenizer.from_pretrained(tok_dir, local_files_only=True)
    return _assemble(
        u,
        v,
        te,
        tok,
        dict(DEFAULT_SCHEDULE),
        "turbo",
        None,
        dt,
        dev,
        random=True,
        label=f"{kind} architecture, RANDOM weights (timing only)",
    )


def save_models(models: DiffusionModels, folder: str | Path) -> Path:
    folder = Path(folder)
    models.unet.save_pretrained(folder / "unet")
    models.vae.save_pretrained(folder / "vae")
    models.text_encoder.save_pretrained(folder / "text_encoder")
    models.tokenizer.save_pretrained(folder / "tokenizer")
    sched = folder / "scheduler"
    sched.mkdir(parents=True, exist_ok=True)
    cls = "LCMScheduler" if models.sampler == "lcm" else "EulerDiscreteScheduler"
    cfg = {"_class_name": cls, **models.scheduler_config, "prediction_type": models.prediction_type}
    (sched / "scheduler_config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    return folder
