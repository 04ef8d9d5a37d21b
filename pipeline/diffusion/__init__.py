"""Latent-diffusion img2img (StreamDiffusion-style). See stage.py and models.py.

Importing this package needs only torch: diffusers / transformers are imported when models are
loaded or built.
"""

from pipeline.diffusion.compile import CompileError, CompileReport, default_compile_cache
from pipeline.diffusion.models import (
    DiffusionModels,
    ModelError,
    load_models,
    random_weights,
    save_models,
    write_tiny_tokenizer,
)
from pipeline.diffusion.stage import DiffusionStage, GraphCaptureError

__all__ = [
    "CompileError",
    "CompileReport",
    "DiffusionModels",
    "DiffusionStage",
    "GraphCaptureError",
    "ModelError",
    "default_compile_cache",
    "load_models",
    "random_weights",
    "save_models",
    "write_tiny_tokenizer",
]
