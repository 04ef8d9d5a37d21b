"""Offline reference painters: the rich, slow target look of each preset kind.

    make_reference(preset, width, height, seed=0) -> ReferencePainter (a torch.nn.Module)
        painter(x: uint8 (B, H, W, 4) premultiplied RGBA of the raw idol render,
                idx: int64 (B,), ignored) -> uint8 (B, H, W, 4) opaque (alpha 255)

Kagura's own latent-diffusion model learns to paint these from the procedural look
(pipeline/stylize), so a reference is a deterministic function of the same render over the
same background (render.backgrounds.make_background(preset.background, w, h, seed)): no
per-frame noise, fixed textures come from the background's paper or fixed fields, and the
idol's influence ends `painter.reach` pixels from her silhouette (the background beyond is
bit-for-bit static). Batched, float32, constants are buffers (`.to(device)`), CPU or CUDA.

Looks, by `preset.post.kind`:
    "toon" (studio)  soft studio lighting on an inflated height field of the flat render:
                     ambient occlusion, key/fill/rim light, skin subsurface glow, hair sheen
                     bands, a soft drop shadow on the backdrop, bokeh depth of field, bloom.
    "ink-wash"       sumi-e from a wet-media simulation on the background's washi: graded
                     washes that feather along the paper fibres and pool at their drying
                     edges, granulation, dry-brush strokes along the strands, vermilion kept.
    "cyberpunk"      neon night: iridescent holographic film, coloured rims and light wrap
                     from the city, volumetric light shafts around her silhouette, a glossy
                     rippled stage-edge reflection, 7-level bloom, lens chromatic aberration.
Each module's docstring describes its steps.
"""

from __future__ import annotations

from pipeline.reference.base import ReferencePainter
from pipeline.reference.cyberpunk import CyberpunkReference
from pipeline.reference.ink_wash import InkWashReference
from pipeline.reference.toon import ToonReference
from presets.schema import Preset

KINDS: dict[str, type[ReferencePainter]] = {
    "toon": ToonReference,
    "ink-wash": InkWashReference,
    "cyberpunk": CyberpunkReference,
}

__all__ = ["KINDS", "ReferencePainter", "make_reference"]


def make_reference(preset: Preset, width: int, height: int, seed: int = 0) -> ReferencePainter:
    """The reference painter for `preset.post.kind` at width x height (background `seed`)."""
    kind = preset.post.kind
    if kind not in KINDS:
        raise ValueError(
            f"no reference painter for post-process kind {kind!r} (preset {preset.name!r}); "
            f"known kinds: {', '.join(sorted(KINDS))}"
        )
    return KINDS[kind](preset, width, height, seed)
