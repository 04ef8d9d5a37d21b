"""The ladder stages: diffusion (steps, latent size), temporal (on/off), VSR (scale)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from core.frame import Frame
from core.stage import Context, spec
from pipeline.ladder.stage import AUDIO_AGE, LadderStage, PresetChange
from pipeline.quality import Rung

log = logging.getLogger("kagura.quality")


# ---------------------------------------------------------------------------------------------
# the ladder stages


def _with_steps(d: Any, k: int) -> Any:
    """A copy of a diffusion section with `steps` = k (pydantic model or dataclass)."""
    if getattr(d, "steps", None) == k:
        return d
    if hasattr(d, "model_copy"):
        return d.model_copy(update={"steps": k})
    import dataclasses

    return dataclasses.replace(d, steps=k)


def _diffusion_section(preset: Any) -> Any:
    return getattr(preset, "diffusion", preset)


class DiffusionLadder(LadderStage):
    """Diffusion at the rung's latent size and steps: one DiffusionStage per latent size (all
    built and set up before the first frame), switched by pointer between frames.

    `variants`: DiffusionStages with the same input size (the render size) and different work
    sizes, all with max_steps >= the top rung's steps. The output image has the active
    variant's work size. `timings[AUDIO_AGE]` of an output frame is moved to the frame whose
    picture it shows (the stream batch lags by `lag_frames`).

    `painting` False: frames pass through unpainted (the live chain's first frames while its
    start variant is set up beside them; pipeline/live_gpu.py). Set on the frame thread.
    """

    name = "diffusion"
    max_batch = 1

    def __init__(self, variants: Sequence[Any], preset: Any):
        super().__init__()
        if not variants:
            raise ValueError("diffusion ladder: needs at least one DiffusionStage")
        self.variants = {v.work_size: v for v in variants}
        if len(self.variants) != len(variants):
            raise ValueError("diffusion ladder: two variants with the same work size")
        ins = {tuple(v.in_size) for v in variants}
        if len(ins) != 1:
            raise ValueError(f"diffusion ladder: variants take different input sizes {ins}")
        self.in_size = ins.pop()
        dev = variants[0].device.type
        self.needs = spec("image", size=self.in_size)
        self.gives = spec("image", device=dev)  # size: the active rung's work size
        self._diffusion = _diffusion_section(preset)
        self.active = variants[0]
        self._current: dict[tuple[int, int], Any] = {}  # work size -> section applied there
        self._recent: collections.deque = collections.deque(maxlen=16)  # (index, pts, age)
        self._prime_next = True  # the next frame starts a stream (no lag before it)
        self._prime_index = 0
        self.switches = 0
        self.painting = True

    @property
    def lag_frames(self) -> int:
        return self.active.lag_frames

    @property
    def steps(self) -> int:
        return self.active.steps

    def stamps(self) -> dict[str, float]:
        return {"diffusion.steps": float(self.active.steps if self.painting else 0)}

    def setup(self, ctx: Context) -> None:
        for v in self.variants.values():
            if not getattr(v, "setup_done", False):
                v.setup(ctx)

    def prepare(self, rungs: Sequence[Rung], ctx: Context) -> None:
        """Set up the variants `rungs` paint at (those not set up yet); any thread (see
        pipeline/ladder/prepare.py)."""
        for size in dict.fromkeys(tuple(r.latent) for r in rungs):
            v = self.variants.get(size)
            if v is not None and not getattr(v, "setup_done", False):
                v.setup(ctx)

    def close(self) -> None:
        for v in self.variants.values():
            v.close()

    def _target_section(self, rung: Rung | None, stage: Any) -> Any:
        d = self._diffusion
        k = d.steps if rung is None or rung.steps <= 0 else min(rung.steps, d.steps)
        if k > stage.max_steps:
            log.warning(
                "diffusion: the preset wants %d steps, the stages were built for at most %d "
                "(max_steps); running %d",
                k,
                stage.max_steps,
                stage.max_steps,
            )
            k = stage.max_steps
        return _with_steps(d, max(1, k))

    def _activate(self, stage: Any, rung: Rung | None) -> None:
        want = self._target_section(rung, stage)
        had = self._current.get(stage.work_size)
        if stage is not self.active:
            self.switches += 1
            if had != want:
                stage.set_preset(want)
            stage.reset()  # its in-flight latents are from its last turn: prime afresh
            self._prime_next = True
        elif had != want:
            if had is None or (had.steps, had.strength, had.seed) != (
                want.steps,
                want.strength,
                want.seed,
            ):
                self._prime_next = True
            stage.set_preset(want)
        self._current[stage.work_size] = want
        self.active = stage

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        stage = self.variants.get(tuple(rung.latent))
        if stage is None:
            raise ValueError(
                f"diffusion ladder: no stage built for latent {rung.latent[0]}x{rung.latent[1]} "
                f"(built: {', '.join(f'{w}x{h}' for w, h in self.variants)})"
            )
        if not self.painting:  # it may be being set up on another thread: told when it paints
            self.active = stage
            return
        self._activate(stage, rung)

    def handle(self, message: Any) -> None:
        if isinstance(message, PresetChange):
            self._diffusion = _diffusion_section(message.diffusion)
            if self.painting:
                self._activate(self.active, self.rung)

    def start_painting(self) -> None:
        """Frame thread: the frames go through the active variant from the next one on (set up
        by then), with the latest preset's section."""
        self.painting = True
        self._activate(self.active, self.rung)

    def set_preset(self, preset: Any) -> None:
        """On the stage's thread: a new preset's diffusion section, from the next frame."""
        self.handle(PresetChange(preset))

    def run(self, frames: list[Frame]) -> list[Frame]:
        if not self.painting:
            return list(frames)
        out = []
        for f in frames:
            if self._prime_next:
                self._prime_index, self._prime_next = f.index, False
            self._recent.append((f.index, f.pts_ns, f.timings.get(AUDIO_AGE)))
            src = (int(f.image.shape[1]), int(f.image.shape[0])) if f.image is not None else None
            work = tuple(self.active.work_size)
            if f.motion is not None and src is not None and src != work:
                # resized here, not by DiffusionStage._motion: that builds its scale factors as
                # a new device tensor from a Python list — a blocking host-to-device copy that
                # would make the frame thread wait for the GPU on every smaller-latent frame
                g = self.active.process(f.with_(motion=None))
                g = g.with_(motion=resize_motion(f.motion, src, work))
            else:
                g = self.active.process(f)
            lag = self.active.lag_frames
            if lag and g.timings.get(AUDIO_AGE) is not None:
                src = max(f.index - lag, self._prime_index)
                for idx, pts, age in reversed(self._recent):
                    if idx == src and age is not None:
                        g = g.timed(AUDIO_AGE, (f.pts_ns - pts) / 1e6 + age)
                        break
            out.append(g)
        return out


class TemporalLadder(LadderStage):
    """Temporal refinement switched on/off by the rung (TemporalStage.set_enabled)."""

    name = "temporal"

    def __init__(self, stage: Any):
        super().__init__()
        self.stage = stage
        self.needs, self.gives = stage.needs, stage.gives
        self.max_batch = stage.max_batch
        self._set_up = False

    def setup(self, ctx: Context) -> None:
        self.stage.setup(ctx)
        self._set_up = True

    def prepare(self, rungs: Sequence[Rung], ctx: Context) -> None:
        """One stage for every rung: set up once; its CUDA graphs (when it uses them) for the
        picture sizes of `rungs` that refine (any thread, see pipeline/ladder/prepare.py)."""
        if not self._set_up:
            self.setup(ctx)
        self.stage.capture([tuple(r.latent) for r in rungs if r.temporal])

    def close(self) -> None:
        self.stage.close()

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        if bool(rung.temporal) != self.stage.enabled:
            self.stage.set_enabled(bool(rung.temporal))

    def stamps(self) -> dict[str, float]:
        return {"temporal.on": float(self.stage.enabled)}

    def run(self, frames: list[Frame]) -> list[Frame]:
        return self.stage.process_batch(frames)


def resize_motion(
    motion: torch.Tensor, src: tuple[int, int], size: tuple[int, int]
) -> torch.Tensor:
    """float (H, W, 2) motion in pixels of a `src` (w, h) picture -> (h', w', 2) for `size`:
    bilinear, the vectors scaled by the size ratio (as DiffusionStage does), no host sync."""
    w, h = size
    m = motion.permute(2, 0, 1)[None].float()
    m = F.interpolate(m, size=(h, w), mode="bilinear", align_corners=False)[0]
    m[0].mul_(w / src[0])
    m[1].mul_(h / src[1])
    return m.permute(1, 2, 0).contiguous()


def resize_rgba(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 (H, W, 4) premultiplied -> uint8 (h, w, 4) at `size` = (w, h), bilinear
    (antialiased when shrinking). Bilinear weights are non-negative, so 0 <= rgb <= alpha
    survives (and rounding is monotone)."""
    w, h = size
    if (image.shape[1], image.shape[0]) == (w, h):
        return image
    x = image.permute(2, 0, 1)[None].float()
    shrink = w < image.shape[1] or h < image.shape[0]
    y = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)
    return y[0].round_().clamp_(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()


@dataclass
class _Vsr:
    shrink_to: tuple[int, int] | None  # the network's input size, when smaller than the input
    net: Any  # an UpscaleStage (or None: resize only)
    out_size: tuple[int, int]

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        x = image
        if self.shrink_to is not None:
            x = resize_rgba(x, self.shrink_to)
        if self.net is not None:
            x = self.net.apply(x[None])[0]
        return resize_rgba(x, self.out_size)


class VsrLadder(LadderStage):
    """Super-resolution at the rung's scale to ONE output size (see the module doc).

    `variants`: (in width, in height, scale) -> _Vsr. Build with `VsrLadder.build`."""

    name = "upscale"
    max_batch = 1

    def __init__(self, variants: dict[tuple[int, int, int], _Vsr], out_size, device: str):
        super().__init__()
        self.variants = variants
        self.out_size = (int(out_size[0]), int(out_size[1]))
        self.scale = max(k[2] for k in variants)
        self.needs = spec("image")
        self.gives = spec("image", size=self.out_size, device=torch.device(device).type)
        self.nets = list(
            {id(v.net): v.net for v in variants.values() if v.net is not None}.values()
        )
        self._nets_set_up: set[int] = set()

    @classmethod
    def build(
        cls,
        make_net: Callable[[tuple[int, int], int], Any] | None,
        inputs: Iterable[tuple[int, int, int]],
        out_size: tuple[int, int],
        *,
        net_scale: int = 4,
        top_scale: int | None = None,
        device: str = "cpu",
    ) -> VsrLadder:
        """`make_net(in_size, scale)` -> an UpscaleStage for that input size and scale (None:
        no upscaler; every scale must then be 1). `inputs` = LadderPlan.vsr_inputs.

        The top scale (default: the largest in `inputs`, the chain's --upscale) runs exactly
        the upscaler the offline render uses, UpscaleStage(scale=top) on the whole picture.
        A lower scale s runs the network at its own scale `net_scale` on the picture shrunk to
        s / net_scale (cheaper: fewer pixels through the network). Stages are shared between
        keys with the same network input size and scale."""
        inputs = set(inputs)
        top = top_scale if top_scale is not None else max(k[2] for k in inputs)
        nets: dict[tuple[int, int, int], Any] = {}
        variants: dict[tuple[int, int, int], _Vsr] = {}
        for w, h, s in sorted(inputs, key=lambda k: (-k[2], -k[0])):
            if s <= 1:
                variants[(w, h, s)] = _Vsr(None, None, tuple(out_size))
                continue
            if make_net is None:
                raise ValueError(f"vsr ladder: scale {s} needs an upscaler (make_net is None)")
            if s >= top or s >= net_scale:
                net_in, k = (w, h), s
            else:
                net_in = (max(1, round(w * s / net_scale)), max(1, round(h * s / net_scale)))
                k = net_scale
            net = nets.get((*net_in, k))
            if net is None:
                net = nets[(*net_in, k)] = make_net(net_in, k)
            variants[(w, h, s)] = _Vsr(net_in if net_in != (w, h) else None, net, tuple(out_size))
        return cls(variants, out_size, device)

    def setup(self, ctx: Context) -> None:
        for net in self.nets:
            net.setup(ctx)
            self._nets_set_up.add(id(net))

    def prepare(self, rungs: Sequence[Rung], ctx: Context) -> None:
        """Set up the networks `rungs` need (those not set up yet): every picture size they
        paint at, at every scale they upscale by (as LadderPlan.vsr_inputs, for these rungs);
        any thread (see pipeline/ladder/prepare.py)."""
        sizes = {tuple(r.latent) for r in rungs}
        keys = {(w, h, int(r.vsr_scale)) for r in rungs for (w, h) in sizes}
        for key in sorted(keys & self.variants.keys()):
            net = self.variants[key].net
            if net is not None and id(net) not in self._nets_set_up:
                net.setup(ctx)
                self._nets_set_up.add(id(net))

    def close(self) -> None:
        for net in self.nets:
            net.close()

    def apply(self, level: int, rung: Rung) -> None:
        super().apply(level, rung)
        self.scale = int(rung.vsr_scale)

    def stamps(self) -> dict[str, float]:
        return {"upscale.scale": float(self.scale)}

    def run(self, frames: list[Frame]) -> list[Frame]:
        out = []
        for f in frames:
            img = f.image
            if img is None:
                raise ValueError(f"upscale: frame {f.index} has no image")
            key = (int(img.shape[1]), int(img.shape[0]), self.scale)
            v = self.variants.get(key)
            if v is None:  # never built on the hot path: a plan/chain mismatch is a bug
                raise ValueError(
                    f"upscale: nothing built for a {key[0]}x{key[1]} picture at x{key[2]} "
                    f"(built: {sorted(self.variants)})"
                )
            out.append(f.with_(image=v.apply(img), motion=None))
        return out
