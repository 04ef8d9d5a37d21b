"""Fitting a quality ladder to the chain that will apply it: which rungs it can tell apart.

See pipeline/ladder/__init__.py for how each field of a Rung is applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.quality import DEFAULT_LADDER, Rung

# fitting the ladder to the chain


def rung_name(steps: int, latent: tuple[int, int], temporal: bool, vsr: int) -> str:
    size = f"{latent[0]}x{latent[1]}"
    parts = [f"{steps} step{'s' if steps != 1 else ''} {size}" if steps else f"render {size}"]
    if temporal:
        parts.append("temporal")
    if vsr > 1:
        parts.append(f"vsr x{vsr}")
    return " ".join(parts)


@dataclass(frozen=True)
class LadderPlan:
    """A ladder fitted to one chain.

    rungs           the fitted rungs (best first); `latent` is the actual diffusion work size
    latent_scales   work size -> latent_scale of the DiffusionStage that paints at that size
    vsr_inputs      every (width, height, scale) a VsrLadder may receive
    max_steps       what every DiffusionStage is built for (the top rung's steps, >= 1)
    merged          names of the original rungs that fitted onto the same settings as the rung
                    before them (nothing to apply, so no rung of their own)
    """

    rungs: tuple[Rung, ...]
    latent_scales: dict[tuple[int, int], float]
    vsr_inputs: frozenset[tuple[int, int, int]]
    max_steps: int
    merged: tuple[str, ...] = ()

    def describe(self) -> str:
        lines = [f"{i}: {r.name}" for i, r in enumerate(self.rungs)]
        if self.merged:
            lines.append("merged (nothing to change on this chain): " + "; ".join(self.merged))
        return "\n".join(lines)


def fit_ladder(
    ladder: Sequence[Rung] = DEFAULT_LADDER,
    *,
    render_size: tuple[int, int],
    diffusion: bool,
    steps: int = 8,
    temporal: bool,
    upscale: int,
    max_steps: int | None = None,
) -> LadderPlan:
    """Map `ladder` onto a chain (see the module doc for each field).

    render_size  the size the idol is rendered at (the diffusion input)
    steps        the preset's diffusion steps: a rung runs min(rung steps, steps)
    max_steps    what the DiffusionStages are built for (default: the fitted top rung's steps);
                 pass more to let a later preset with more steps run them
    upscale      the chain's top super-resolution factor (1: no upscaler)
    """
    from pipeline.diffusion.stage import work_size_for  # torch: only where a ladder is fitted

    if not ladder:
        raise ValueError("the ladder needs at least one rung")
    if upscale < 1:
        raise ValueError(f"upscale must be >= 1, got {upscale}")
    top = ladder[0]
    rungs: list[Rung] = []
    merged: list[str] = []
    scales: dict[tuple[int, int], float] = {}
    seen: set[tuple] = set()
    for r in ladder:
        if diffusion:
            k = max(1, min(r.steps, steps))
            s = r.latent[0] / top.latent[0]
            latent = work_size_for(render_size, s)
            scales.setdefault(latent, s)
        else:
            k, latent = 0, tuple(render_size)
        t = bool(r.temporal and temporal)
        v = max(1, min(r.vsr_scale, upscale))
        key = (k, latent, t, v)
        if key in seen:
            merged.append(r.name)
            continue
        seen.add(key)
        rungs.append(Rung(rung_name(k, latent, t, v), k, latent, t, v))
    work = {r.latent for r in rungs}
    vsr = frozenset((w, h, r.vsr_scale) for r in rungs for (w, h) in work)
    top_steps = max(r.steps for r in rungs)
    ms = max(1, top_steps if max_steps is None else max(max_steps, top_steps))
    return LadderPlan(tuple(rungs), scales, vsr, ms, tuple(merged))
