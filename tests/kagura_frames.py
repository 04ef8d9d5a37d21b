"""What Kagura's model tests feed it, shared by the CPU and GPU test modules (imported from
here, not from one another): the presets, the trained size, a rendered idol frame, token ids."""

from __future__ import annotations

from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
W, H = 640, 360  # the trained size: a 80x45 latent, whose odd side halves to 23
PRESETS = sorted(p.stem for p in (ROOT / "presets").glob("*.toml"))


def rendered_frame(preset: str) -> torch.Tensor:
    """A held-out idol pose of `preset` through the fast look the model paints on (uint8
    (H, W, 4), opaque): what the diffusion stage receives in a render."""
    from training.data import PairMaker, render_specs
    from training.poses import heldout_specs

    spec = [s for s in heldout_specs(1) if s.preset == preset]
    fast = PairMaker((W, H)).inputs(torch.from_numpy(render_specs(spec, W, H)), spec)
    img = torch.full((H, W, 4), 255, dtype=torch.uint8)
    img[..., :3] = fast[0].permute(1, 2, 0)
    return img


def token_ids(models, text: str) -> torch.Tensor:
    return models.tokenizer(
        text, padding="max_length", max_length=77, truncation=True, return_tensors="pt"
    ).input_ids
