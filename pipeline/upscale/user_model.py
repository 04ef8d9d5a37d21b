"""User super-resolution models (`.pth`, `.safetensors`, ...) through `spandrel`.

    load_user_model(path) -> UserModel(module, scale, name, supports_half, supports_bf16,
                                       size_multiple)
    module: float RGB 0..1 (B, 3, H, W) -> (B, 3, H*scale, W*scale), eval mode, on the CPU.

Anything that is not a 3-channel-in, 3-channel-out super-resolution model (face restoration,
inpainting, denoisers at scale 1, broken or foreign files) raises `UserModelError` with one line
naming the file.

spandrel imports torchvision at import time (only for two architectures that are not SR:
LaMa inpainting and RestoreFormer face restoration). On a CPU-only torch from PyPI the
torchvision wheel that pip pulls in is built for CUDA and fails to import; in that case a
throw-away stand-in for `torchvision.transforms.functional` is put in `sys.modules` only while
spandrel is imported, then removed again, so nothing else sees it. Those two architectures are
refused here anyway (not SR).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

from torch import nn


class UserModelError(ValueError):
    """A user model file cannot be used as a super-resolution model (one-line message)."""


@dataclass(frozen=True)
class UserModel:
    module: nn.Module
    scale: int
    name: str
    supports_half: bool
    supports_bf16: bool
    size_multiple: int  # input height/width must be a multiple of this (pad, then crop)


def _torchvision_works() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("torchvision.transforms.functional")
        return True
    except Exception:  # ImportError, or RuntimeError/OSError from a CUDA-only build
        for key in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[key]
        return False


def _unavailable(*_args, **_kwargs):
    raise RuntimeError("torchvision is not usable in this environment")


def import_spandrel() -> types.ModuleType:
    """`import spandrel`, working around a torchvision that cannot be imported (see above)."""
    if "spandrel" in sys.modules:
        return sys.modules["spandrel"]
    if importlib.util.find_spec("spandrel") is None:
        raise UserModelError("user SR models need the package spandrel: pip install spandrel")
    if _torchvision_works():
        return importlib.import_module("spandrel")
    stand_in = {
        "torchvision": types.ModuleType("torchvision"),
        "torchvision.transforms": types.ModuleType("torchvision.transforms"),
        "torchvision.transforms.functional": types.ModuleType("torchvision.transforms.functional"),
    }
    fn = stand_in["torchvision.transforms.functional"]
    fn.InterpolationMode = types.SimpleNamespace(  # type: ignore[attr-defined]
        NEAREST="nearest", BILINEAR="bilinear", BICUBIC="bicubic"
    )
    fn.rotate = fn.normalize = _unavailable  # type: ignore[attr-defined]
    stand_in["torchvision"].transforms = stand_in["torchvision.transforms"]  # type: ignore[attr-defined]
    stand_in["torchvision.transforms"].functional = fn  # type: ignore[attr-defined]
    sys.modules.update(stand_in)
    try:
        return importlib.import_module("spandrel")
    finally:
        for key in stand_in:
            sys.modules.pop(key, None)


def load_user_model(path: str | Path) -> UserModel:
    """Load a user SR model with spandrel; raises `UserModelError` for anything unusable."""
    path = Path(path)
    if not path.is_file():
        raise UserModelError(f"{path}: no such file (expected a super-resolution model, .pth)")
    spandrel = import_spandrel()
    try:
        desc = spandrel.ModelLoader(device="cpu").load_from_file(str(path))
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserModelError(
            f"{path}: not a model spandrel can load ({type(exc).__name__}: {first[:200]})"
        ) from None
    arch = getattr(desc.architecture, "name", type(desc.model).__name__)
    if not isinstance(desc, spandrel.ImageModelDescriptor):
        raise UserModelError(f"{path}: {arch} is not an image-to-image model")
    if desc.purpose != "SR" or desc.scale < 2:
        raise UserModelError(
            f"{path}: {arch} is a {desc.purpose} model at scale {desc.scale}, "
            "expected a super-resolution model (scale >= 2)"
        )
    if desc.input_channels != 3 or desc.output_channels != 3:
        raise UserModelError(
            f"{path}: {arch} maps {desc.input_channels} -> {desc.output_channels} channels, "
            "expected RGB -> RGB (3 -> 3)"
        )
    req = desc.size_requirements
    multiple = max(1, int(getattr(req, "multiple_of", 1) or 1))
    module = desc.model.eval().requires_grad_(False)
    return UserModel(
        module=module,
        scale=int(desc.scale),
        name=arch,
        supports_half=bool(desc.supports_half),
        supports_bf16=bool(desc.supports_bfloat16),
        size_multiple=multiple,
    )
