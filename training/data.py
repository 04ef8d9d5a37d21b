"""Training pairs from the renderer: (fast look -> reference look), made while training runs.

    RenderPool(size, workers)             raw idol renders (Skia, CPU) for sample indices, in
                                          `workers` processes (0: in this process)
        fetch(seed, start, n) -> (uint8 (n, H, W, 4) tensor, [SampleSpec])
        prefetch(seed, start, n)          start the next fetch in the background
        fetch_motion(seed, start, n) -> (raw0, raw1, motion (n, H, W, 2), [SampleSpec])
                                          temporal pairs: a pose and the frame after it
    PairMaker(size, device)               on `device`: framing (zoom/offset/mirror), the preset's
        make(raw, specs) -> (input, ref)  procedural look as the diffusion stage receives it
                                          (pipeline/stylize.model_input: no screen effects) and
                                          its reference look (pipeline/reference, what the model
                                          must paint); both uint8 (n, 3, H, W)
        inputs(raw, specs) -> input       the model's input alone (no reference painted)
        looks(raw, specs, which=...)      any of "fast" (the procedural look as shown without a
                                          model), "input", "ref"
    PairBank(capacity, size, device)      a ring of pairs on the device; training samples
        add(fast, ref, preset_ids), sample(n, generator)   batches from it while a few fresh
                                          pairs replace the oldest every step
    MotionBank(capacity, size, device)    the same for temporal pairs: two consecutive frames'
                                          input and reference, the motion between them and
                                          where the first frame covers the second

Why a bank: the reference painters are deliberately slow (at least 10x the model), so painting
every training batch fresh would starve the GPU; a bank refreshed by `fresh` pairs per step still
sees an unlimited stream of new poses over a run, at a fixed share of the step time.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from training.poses import PRESETS, Framing, SampleSpec, motion_spec, sample_spec

# -- raw renders (CPU workers) ---------------------------------------------------------------

_RENDERERS: dict[tuple[str, int, int, int], Any] = {}


def _renderer(preset: str, w: int, h: int, design: int = 0):
    key = (preset, w, h, design)
    r = _RENDERERS.get(key)
    if r is None:
        from presets.loader import load_preset
        from render.idol import IdolRenderer
        from training.designs import design_look

        p = load_preset(preset)
        r = _RENDERERS[key] = IdolRenderer(w, h, *design_look(p.palette, p.line, design))
        while len(_RENDERERS) > 64:  # designs come and go: keep the worker's memory bounded
            _RENDERERS.pop(next(iter(_RENDERERS)))
    return r


def render_spec(spec: SampleSpec, w: int, h: int) -> np.ndarray:
    """The raw idol (premultiplied RGBA, transparent around her) for one sample. The renderer
    is reset first: hair springs start at rest, so a sample depends on its spec alone."""
    r = _renderer(spec.preset, w, h, spec.design)
    r.reset()
    return r.render(spec.params).rgba


def render_specs(specs: list[SampleSpec], w: int, h: int) -> np.ndarray:
    return np.stack([render_spec(s, w, h) for s in specs])


def render_motion_spec(spec: SampleSpec, after, w: int, h: int) -> tuple[np.ndarray, ...]:
    """(rgba of `spec`, rgba of the pose `after` drawn next, the motion vectors between them):
    the renderer runs on from the first frame, so hair springs swing as they do live."""
    r = _renderer(spec.preset, w, h, spec.design)
    r.reset()
    first = r.render(spec.params).rgba.copy()
    nxt = r.render(after)
    return first, nxt.rgba, nxt.motion


def _render_motion_index(args: tuple[int, int, int, int]) -> tuple[SampleSpec, bytes, bytes, bytes]:
    seed, index, w, h = args
    spec, after = motion_spec(seed, index)
    a, b, m = render_motion_spec(spec, after, w, h)
    return spec, a.tobytes(), b.tobytes(), np.ascontiguousarray(m, np.float32).tobytes()


def _render_index(args: tuple[int, int, int, int]) -> tuple[SampleSpec, bytes]:
    seed, index, w, h = args
    spec = sample_spec(seed, index)
    return spec, render_spec(spec, w, h).tobytes()


class RenderPool:
    def __init__(self, size: tuple[int, int], workers: int = 0):
        self.w, self.h = size
        self.workers = max(0, int(workers))
        # spawn: the parent may already hold a CUDA context, which fork would copy broken
        self._pool = mp.get_context("spawn").Pool(self.workers) if self.workers else None
        self._pending: tuple[tuple[int, int, int], Any] | None = None

    def _args(self, seed: int, start: int, n: int) -> list[tuple[int, int, int, int]]:
        return [(seed, i, self.w, self.h) for i in range(start, start + n)]

    def prefetch(self, seed: int, start: int, n: int) -> None:
        if self._pool is not None and self._pending is None:
            chunk = max(1, n // (2 * self.workers))
            job = self._pool.map_async(_render_index, self._args(seed, start, n), chunk)
            self._pending = ((seed, start, n), job)

    def fetch(self, seed: int, start: int, n: int) -> tuple[torch.Tensor, list[SampleSpec]]:
        if self._pending is not None and self._pending[0] == (seed, start, n):
            results = self._pending[1].get()
            self._pending = None
        elif self._pool is not None:
            if self._pending is not None:  # a different request: drop the stale prefetch
                self._pending[1].wait()
                self._pending = None
            results = self._pool.map(_render_index, self._args(seed, start, n))
        else:
            results = [_render_index(a) for a in self._args(seed, start, n)]
        specs = [s for s, _ in results]
        raw = np.stack([np.frombuffer(b, np.uint8).reshape(self.h, self.w, 4) for _, b in results])
        return torch.from_numpy(raw), specs

    def fetch_motion(
        self, seed: int, start: int, n: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[SampleSpec]]:
        """Temporal pairs start..start+n (training.poses.motion_spec): uint8 (n, H, W, 4) of
        both frames and float32 (n, H, W, 2) motion from the first to the second."""
        args = self._args(seed, start, n)
        if self._pool is not None:
            results = self._pool.map(_render_motion_index, args, max(1, n // self.workers))
        else:
            results = [_render_motion_index(a) for a in args]
        shape = (self.h, self.w)
        frames = [
            torch.from_numpy(
                np.stack([np.frombuffer(r[k], np.uint8).reshape(*shape, 4) for r in results])
            )
            for k in (1, 2)
        ]
        motion = np.stack([np.frombuffer(r[3], np.float32).reshape(*shape, 2) for r in results])
        return frames[0], frames[1], torch.from_numpy(motion), [r[0] for r in results]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def default_workers() -> int:
    """Leave two cores for the training process itself."""
    return max(0, min(14, (os.cpu_count() or 2) - 2))


# -- pairs on the device ---------------------------------------------------------------------


def _framing_grid(framings: list[Framing], shape: list[int], device) -> torch.Tensor:
    """grid_sample's grid for each framing: output pixel -> where it is in the bust shot."""
    theta = torch.zeros(len(framings), 2, 3, dtype=torch.float32)
    for i, f in enumerate(framings):
        m = -1.0 if f.mirror else 1.0
        theta[i, 0, 0] = m / f.scale
        theta[i, 0, 2] = -m * 2.0 * f.dx / f.scale
        theta[i, 1, 1] = 1.0 / f.scale
        theta[i, 1, 2] = -2.0 * f.dy / f.scale
    return F.affine_grid(theta.to(device), shape, align_corners=False)


def frame_motion(motion: torch.Tensor, framings: list[Framing]) -> torch.Tensor:
    """The motion vectors float (n, H, W, 2) of framed renders: sampled where frame_raw samples
    the picture (nearest: vectors are per part, not blended across parts), scaled by the zoom,
    x negated when mirrored."""
    if all(f.identity for f in framings):
        return motion
    x = motion.permute(0, 3, 1, 2).float()
    grid = _framing_grid(framings, list(x.shape), x.device)
    y = F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)
    k = torch.tensor(
        [[(-1.0 if f.mirror else 1.0) * f.scale, f.scale] for f in framings], device=x.device
    )
    return (y * k.view(-1, 2, 1, 1)).permute(0, 2, 3, 1).contiguous()


def frame_raw(raw: torch.Tensor, framings: list[Framing]) -> torch.Tensor:
    """Zoom/offset/mirror uint8 (n, H, W, 4) premultiplied renders (bilinear, transparent
    outside); identity framings are passed through untouched."""
    if all(f.identity for f in framings):
        return raw
    x = raw.permute(0, 3, 1, 2).float()
    grid = _framing_grid(framings, list(x.shape), x.device)
    y = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    y = y.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    keep = torch.tensor([f.identity for f in framings], device=raw.device)
    return torch.where(keep.view(-1, 1, 1, 1), raw, y)


class PairMaker:
    """The preset's procedural look and its reference look for raw renders, on `device`."""

    def __init__(self, size: tuple[int, int], device: str | torch.device = "cpu"):
        from pipeline.reference import make_reference
        from pipeline.stylize import KINDS
        from presets.loader import load_preset

        self.w, self.h = size
        self.device = torch.device(device)
        self._cache: dict[tuple[str, str, int], torch.nn.Module] = {}
        self._presets = {name: load_preset(name) for name in PRESETS}
        self._kinds, self._make_reference = KINDS, make_reference

    def _effect(self, look: str, preset: str, bg: int) -> torch.nn.Module:
        """The procedural ("fast"), the model's input ("input") or the reference ("ref") look
        of `preset` over background `bg`, built on first use only (a reference painter
        precomputes its empty frame)."""
        from pipeline.stylize import model_input

        key = (look, preset, bg)
        if key not in self._cache:
            p = self._presets[preset]
            if look in ("fast", "input"):
                q = model_input(p) if look == "input" else p
                eff = self._kinds[p.post.kind](q, self.w, self.h, False, seed=bg)
            elif look == "ref":
                eff = self._make_reference(p, self.w, self.h, seed=bg)
            else:
                raise ValueError(f"pair maker: no look {look!r} (fast, input, ref)")
            self._cache[key] = eff.to(self.device)
        return self._cache[key]

    @torch.no_grad()
    def looks(
        self,
        raw: torch.Tensor,
        specs: list[SampleSpec],
        idx: torch.Tensor | None = None,
        which: tuple[str, ...] = ("input", "ref"),
    ) -> tuple[torch.Tensor, ...]:
        """uint8 (n, 3, H, W) per look in `which`, for framed raw renders."""
        raw = frame_raw(raw.to(self.device, non_blocking=True), [s.framing for s in specs])
        n = raw.shape[0]
        if idx is None:
            idx = torch.zeros(n, dtype=torch.int64)
        out = [
            torch.empty(n, 3, self.h, self.w, dtype=torch.uint8, device=self.device) for _ in which
        ]
        groups: dict[tuple[str, int], list[int]] = {}
        for i, s in enumerate(specs):
            groups.setdefault((s.preset, s.background), []).append(i)
        for (preset, bg), rows in groups.items():
            sel = torch.tensor(rows, device=self.device)
            x, ix = raw.index_select(0, sel), idx[rows].to(self.device)
            for look, dest in zip(which, out, strict=True):
                dest[sel] = self._effect(look, preset, bg)(x, ix)[..., :3].permute(0, 3, 1, 2)
        return tuple(out)

    def make(
        self, raw: torch.Tensor, specs: list[SampleSpec], idx: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(model input, reference) for the raw renders: a training pair each."""
        inp, ref = self.looks(raw, specs, idx)
        return inp, ref

    def inputs(self, raw: torch.Tensor, specs: list[SampleSpec]) -> torch.Tensor:
        """The model's input alone, no reference painted."""
        return self.looks(raw, specs, which=("input",))[0]


class _Ring:
    """The ring both banks keep: `capacity` rows on `device`, the oldest replaced first, and
    random rows drawn from those filled so far."""

    def __init__(self, capacity: int, device: str | torch.device):
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.count = 0  # rows ever added
        self.filled = 0

    def _slots(self, n: int) -> torch.Tensor:
        """Where the next n rows go (on the device); counts them as added."""
        pos = ((self.count + torch.arange(n)) % self.capacity).to(self.device)
        self.count += n
        self.filled = min(self.capacity, self.filled + n)
        return pos

    def _draw(self, n: int, generator: torch.Generator) -> torch.Tensor:
        if self.filled == 0:
            raise RuntimeError(f"{type(self).__name__}.sample: the bank is empty")
        return torch.randint(0, self.filled, (n,), generator=generator).to(self.device)


class PairBank(_Ring):
    def __init__(self, capacity: int, size: tuple[int, int], device: str | torch.device):
        super().__init__(capacity, device)
        w, h = size
        self.fast = torch.zeros(capacity, 3, h, w, dtype=torch.uint8, device=self.device)
        self.ref = torch.zeros_like(self.fast)
        self.preset = torch.zeros(capacity, dtype=torch.long, device=self.device)

    def add(self, fast: torch.Tensor, ref: torch.Tensor, preset: torch.Tensor) -> None:
        pos = self._slots(fast.shape[0])
        self.fast[pos], self.ref[pos], self.preset[pos] = fast, ref, preset.to(self.device)

    def sample(
        self, n: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = self._draw(n, generator)
        return self.fast[rows], self.ref[rows], self.preset[rows]


class MotionBank(_Ring):
    """Temporal pairs on the device: the model's input and the reference for two consecutive
    frames, the motion from the first to the second (float16: sub-pixel precision is plenty)
    and `cover`, 1 where the second frame's pixel was visible in the first (the flicker
    measure's covered pixels: pipeline/temporal.flicker)."""

    def __init__(self, capacity: int, size: tuple[int, int], device: str | torch.device):
        super().__init__(capacity, device)
        w, h = size
        u8 = dict(dtype=torch.uint8, device=self.device)
        self.inp = torch.zeros(capacity, 2, 3, h, w, **u8)
        self.ref = torch.zeros(capacity, 2, 3, h, w, **u8)
        self.motion = torch.zeros(capacity, h, w, 2, dtype=torch.float16, device=self.device)
        self.cover = torch.zeros(capacity, 1, h, w, **u8)
        self.preset = torch.zeros(capacity, dtype=torch.long, device=self.device)

    def add(self, inp, ref, motion, cover, preset) -> None:
        pos = self._slots(inp.shape[0])
        self.inp[pos], self.ref[pos] = inp, ref
        self.motion[pos], self.cover[pos] = motion.half(), cover
        self.preset[pos] = preset.to(self.device)

    def sample(self, n: int, generator: torch.Generator):
        """(inp (n, 2, 3, H, W), ref, motion float32 (n, H, W, 2), cover float (n, 1, H, W),
        preset ids)."""
        rows = self._draw(n, generator)
        return (
            self.inp[rows],
            self.ref[rows],
            self.motion[rows].float(),
            self.cover[rows].float(),
            self.preset[rows],
        )


def motion_pairs(maker: PairMaker, raw0, raw1, motion, specs, idx0: torch.Tensor):
    """(inp (n, 2, 3, H, W), ref (n, 2, 3, H, W), framed motion, cover uint8 (n, 1, H, W)) for
    rendered temporal pairs; the looks' per-frame grain runs on from idx0 to idx0 + 1."""
    from pipeline.temporal.stage import warp

    framings = [s.framing for s in specs]
    dev = maker.device
    inp0, ref0 = maker.looks(raw0, specs, idx0)
    inp1, ref1 = maker.looks(raw1, specs, idx0 + 1)
    m = frame_motion(motion.to(dev), framings)
    a0 = frame_raw(raw0.to(dev), framings)[..., 3:].permute(0, 3, 1, 2).float().div_(255.0)
    a1 = frame_raw(raw1.to(dev), framings)[..., 3:].permute(0, 3, 1, 2).float().div_(255.0)
    warped, inside = warp(a0, m)
    cover = ((inside > 0) & ((warped - a1).abs() <= 0.1)).to(torch.uint8)
    return torch.stack((inp0, inp1), 1), torch.stack((ref0, ref1), 1), m, cover


def preset_ids(specs: list[SampleSpec]) -> torch.Tensor:
    return torch.tensor([PRESETS.index(s.preset) for s in specs], dtype=torch.long)


def to_unit(x_u8: torch.Tensor) -> torch.Tensor:
    """uint8 (n, 3, H, W) -> float32 in [-1, 1], as the autoencoder takes images."""
    return x_u8.float().div_(127.5).sub_(1.0)
