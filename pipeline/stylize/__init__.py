"""The procedural post-process stage: background + per-preset look, in torch.

    StylizeStage(preset, width, height, transparent=False, compile=False, cuda_graph=None,
                 for_model=False)
        name "stylize", needs spec("image"), gives spec("image")
        for_model=True: the look Kagura's model paints from (`model_input`), for chains
        where diffusion follows.
        process_batch(frames): stacks the images, runs the preset's effect once, unstacks.
        give_i420(): on the CPU, where the look makes them itself (toon, opaque), hand on
        `Frame.i420` planes instead of RGBA images (the CPU chain's video file, app/render_job).
        On cuda (the setup context's extras["device"]) the effect of one frame is captured at
        setup as one CUDA graph per grain variant and replayed per frame: the effect is a few
        hundred small kernels, so eagerly it costs the Python thread more than the GPU.

    make_effect(preset, width, height, transparent=False) -> torch.nn.Module
        effect(x_u8 (B, H, W, 4) premultiplied, idx int64 (B,)) -> uint8 (B, H, W, 4)

    model_input(preset) -> Preset
        the preset with its screen effects off (film grain, CRT scanlines, RGB split): what
        Kagura's model is trained on and fed. The reference painters it learns to paint have
        none of them, so in its input they were noise to remove: the per-frame grain
        flickered through the model, the scanlines and the channel split blurred the lines
        the guided decoder copies. The picture without a model keeps them.

Kinds (`preset.post.kind`): "toon" (pipeline/stylize/toon.py), "ink-wash" (ink_wash.py),
"cyberpunk" (cyberpunk.py). Frames stay on their device: the effect's constants (background,
maps, textures) are moved to the input's device on first use and kept there.

Opaque mode composites over render/backgrounds.make_background(preset.background, w, h) and
returns alpha 255 everywhere. Transparent mode draws no background; the output is still
premultiplied (rgb <= alpha); glows (bloom, ink bleed) may add soft alpha near the idol.

Only torch/numpy/stdlib and presets/ + render/ are imported here.
"""

from __future__ import annotations

import time

import torch

from core.frame import Frame
from core.stage import BaseStage, Context, spec
from core.trace import step
from pipeline.cpu_memory import keep_freed_memory
from pipeline.stylize.base import Effect
from pipeline.stylize.cyberpunk import Cyberpunk
from pipeline.stylize.ink_wash import InkWash
from pipeline.stylize.toon import Toon
from presets.schema import Preset

KINDS: dict[str, type[Effect]] = {"toon": Toon, "ink-wash": InkWash, "cyberpunk": Cyberpunk}

__all__ = ["KINDS", "SCREEN_EFFECTS", "StylizeStage", "make_effect", "model_input"]

# post-process fields that act on the finished frame like a screen, not on the painting
SCREEN_EFFECTS = {"grain": 0.0, "scanlines": 0.0, "chromatic": 0.0}


def model_input(preset: Preset) -> Preset:
    return preset.model_copy(update={"post": preset.post.model_copy(update=SCREEN_EFFECTS)})


def make_effect(preset: Preset, width: int, height: int, transparent: bool = False) -> Effect:
    return KINDS[preset.post.kind](preset, width, height, transparent)


class StylizeStage(BaseStage):
    name = "stylize"
    needs = spec("image")
    gives = spec("image")
    max_batch = 4

    def __init__(
        self,
        preset: Preset,
        width: int,
        height: int,
        transparent: bool = False,
        compile: bool = False,
        cuda_graph: bool | None = None,
        for_model: bool = False,
    ):
        """`for_model`: the look Kagura's model paints from (`model_input(preset)`; `preset`
        stays the one the stage reports). `compile=True` runs the effect through torch.compile
        at `setup()` (fuses the per-pixel math; ~5x faster on CPU, needs a C++ compiler /
        Triton). A compile that fails raises: it is never silently replaced by the eager path.
        `cuda_graph`: None = on when the stage is set up on cuda; a capture that fails (or
        whose replay differs from eager) raises GraphCaptureError at setup."""
        self.preset, self.width, self.height = preset, width, height
        self.transparent = transparent
        self.needs = spec("image", size=(width, height))
        self.gives = spec("image", size=(width, height))
        look = model_input(preset) if for_model else preset
        self.effect = make_effect(look, width, height, transparent).eval()
        self._device = torch.device("cpu")
        self._compile = compile
        self._fn = self.effect
        self._cuda_graph = cuda_graph
        self._graphs: list | None = None  # one GraphCache per grain variant
        self._i420 = False

    def give_i420(self) -> bool:
        """Hand on I420 planes (`Frame.i420`, what an opaque video file encodes) instead of
        RGBA where the effect makes them itself on the CPU (toon: neither the RGBA frame nor
        the encoder's colour conversion is made). Returns whether the stage now does."""
        if not getattr(self.effect, "gives_i420", False):
            return False
        self._i420 = True
        self.gives = spec("i420", size=(self.width, self.height), device="cpu")
        return True

    def setup(self, ctx: Context) -> None:
        keep_freed_memory()  # reuse freed large buffers instead of page-faulting fresh ones
        device = torch.device(ctx.extras.get("device", "cpu"))
        if self._i420 and device.type != "cpu":
            raise ValueError("stylize: I420 frames are made on the CPU only")
        if self._compile:
            self._fn = torch.compile(self.effect, dynamic=False)
        # warm up (and compile) with a full batch so the first real frame pays nothing
        x = torch.zeros(self.max_batch, self.height, self.width, 4, dtype=torch.uint8)
        self._run(x.to(device), torch.arange(self.max_batch))
        step(f"stylize {self.width}x{self.height} warmed")
        if device.type == "cpu" and hasattr(self.effect, "warm_cpu"):
            with torch.inference_mode():
                self.effect.warm_cpu(self._i420)  # the toon's compiled pass
        if device.type == "cuda" and self._cuda_graph is not False and not self._compile:
            self._capture(device)
            step(f"stylize {self.width}x{self.height} captured")

    def _capture(self, device: torch.device) -> None:
        from pipeline.accel.graphs import GraphCache

        example = _example_idol(self.height, self.width, device)
        graphs = []
        for g in range(self.effect.variants):
            cache = GraphCache(
                lambda x, g=g: self.effect.variant(x, g),
                device,
                atol=1.0,  # uint8: replay and eager may differ by one level, never more
                rtol=0.0,
                clone_output=False,
                name=f"stylize {self.preset.post.kind} (grain {g})",
            )
            cache.capture(example)
            graphs.append(cache)
        self._graphs = graphs

    def _run(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        if x.device != self._device:
            self.effect.to(x.device)
            self._device = x.device
        n = x.shape[0]
        if self._graphs is not None and x.device.type == "cuda":
            out = torch.empty_like(x)
            with torch.inference_mode():
                for b, g in enumerate((idx.cpu() % len(self._graphs)).tolist()):
                    out[b].copy_(self._graphs[g](x[b : b + 1])[0])
            return out
        if self._compile and n < self.max_batch:  # keep one static shape for the compiled graph
            pad = x.new_zeros((self.max_batch - n, *x.shape[1:]))
            x = torch.cat([x, pad])
            idx = torch.cat([idx, idx.new_zeros(self.max_batch - n)])
        with torch.inference_mode():
            return self._fn(x, idx.cpu())[:n]

    def apply(self, images: torch.Tensor, indices: torch.Tensor | None = None) -> torch.Tensor:
        """uint8 (B, H, W, 4) premultiplied -> uint8 (B, H, W, 4); `indices` = frame numbers."""
        if indices is None:
            indices = torch.arange(images.shape[0])
        out = []
        for i in range(0, images.shape[0], self.max_batch):
            out.append(self._run(images[i : i + self.max_batch], indices[i : i + self.max_batch]))
        return torch.cat(out) if len(out) > 1 else out[0]

    def close(self) -> None:
        self._graphs = None  # the graphs' memory pools go with them

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        t0 = time.perf_counter()
        for f in frames:
            if f.image is None or tuple(f.image.shape) != (self.height, self.width, 4):
                raise ValueError(
                    f"stylize: frame {f.index} image is "
                    f"{None if f.image is None else tuple(f.image.shape)}, "
                    f"expected ({self.height}, {self.width}, 4) uint8"
                )
        if self._i420:
            with torch.inference_mode():
                pics = [self.effect.i420(f.image, f.index % self.effect.variants) for f in frames]
            ms = (time.perf_counter() - t0) * 1000.0 / len(frames)
            return [
                f.with_(image=None, i420=p).timed(self.name, ms)
                for f, p in zip(frames, pics, strict=True)
            ]
        x = torch.stack([f.image for f in frames])
        idx = torch.tensor([f.index for f in frames], dtype=torch.int64)
        y = self.apply(x, idx)
        ms = (time.perf_counter() - t0) * 1000.0 / len(frames)
        return [f.with_(image=y[i]).timed(self.name, ms) for i, f in enumerate(frames)]


def _example_idol(height: int, width: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A deterministic (1, H, W, 4) premultiplied frame with an opaque, textured disc in the
    middle and a soft edge: what the graph capture is checked on (an empty frame would only
    exercise the background). Made on `device`: on the CPU these few full-frame operations
    cost a part of the stylizer's set-up (docs/BENCHMARKS.md, the start-up profile)."""
    g = torch.Generator(device=device).manual_seed(1)
    yy, xx = torch.meshgrid(
        torch.arange(height, device=device), torch.arange(width, device=device), indexing="ij"
    )
    r = ((yy - height / 2) ** 2 + (xx - width / 2) ** 2).sqrt()
    alpha = (1.0 - (r - height / 4).clamp(0, 8) / 8).clamp(0, 1)
    rgb = torch.rand(height, width, 3, generator=g, device=device) * alpha[..., None]
    img = torch.cat([rgb, alpha[..., None]], -1).mul(255).round().to(torch.uint8)
    return img[None]
