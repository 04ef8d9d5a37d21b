"""Temporal stage variants on the shipped model's painting of the held-out clip, on the CPU:
flicker, ghosting and Laplacian RMS (the stage's own measures) per variant, per preset.

    python scripts/temporal_variants.py [FRAMES=24] [PRESETS=studio,cyberpunk]
"""

import sys

import torch

from pipeline.diffusion import load_models
from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS
from pipeline.reference import make_reference
from pipeline.stylize import make_effect, model_input
from pipeline.temporal.stage import TemporalStage, flicker, ghosting, laplacian_rms
from presets.loader import load_preset
from training.evaluate import clip_renders, in_batches, paint
from training.poses import load_heldout_clip

torch.set_num_threads(2)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 24
presets = sys.argv[2].split(",") if len(sys.argv) > 2 else ["studio", "cyberpunk"]
variants = {
    "shipped": {},
    "blend 0.8": {"blend": 0.8},
    "blend 0.85": {"blend": 0.85},
    "blend 0.8 smooth 1": {"blend": 0.8, "smooth": 1},
    "color_tol 0.25": {"color_tol": 0.25},
    "guard 6": {"guard": 6},
}
m = load_models(KAGURA_WEIGHTS, dtype="float32", device="cpu")
track = load_heldout_clip()
w, h = 640, 360
for name in presets:
    p = load_preset(name)
    raw, motion = clip_renders(p, (w, h), N, track)
    idx = torch.arange(N)
    fast = in_batches(make_effect(model_input(p), w, h), raw, idx)
    ref = in_batches(make_reference(p, w, h), raw, idx)
    painted = torch.cat(
        [
            paint(m, fast[i : i + 8, ..., :3].permute(0, 3, 1, 2), name, "cpu")
            for i in range(0, N, 8)
        ]
    )
    model = torch.cat(
        [painted.permute(0, 2, 3, 1), torch.full((N, h, w, 1), 255, dtype=torch.uint8)], 3
    )
    lap0 = laplacian_rms(model)
    print(
        f"{name}: off flicker {flicker(model, motion):.3f} ghost {ghosting(model, ref, motion):.3f}; reference flicker {flicker(ref, motion):.3f}",
        flush=True,
    )
    for label, kw in variants.items():
        t = TemporalStage(**kw)
        t.reset()
        out = torch.stack([t.apply(model[i], motion[i], i) for i in range(N)])
        print(
            f"  {label}: flicker {flicker(out, motion):.3f} ghost {ghosting(out, ref, motion):.3f} lap {laplacian_rms(out) / lap0:.3f}",
            flush=True,
        )
