"""Temporal stage variants on the shipped model's painting of a held-out clip: flicker, ghosting
and Laplacian RMS (the stage's own measures) per variant, per preset, and the stage's time.

    python scripts/temporal_variants.py [--frames 24] [--presets studio,cyberpunk]
        [--clip song|speech] [--device cpu|cuda] [--variants JSON] [--weights DIR]

--clip: training/heldout_clip.npz (song, the clip settings are chosen on) or
training/heldout_clip_speech.npz (speech, the clip that confirms them). --variants: a JSON
object {label: TemporalStage keyword arguments}, or a .json file holding one; "preset" as a value (or the label "preset"
with {}) is the preset's own [temporal] section. Without it, a built-in list.
"""

import argparse
import json
import time

import torch

from pipeline.diffusion import load_models
from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS
from pipeline.temporal.stage import TemporalStage, flicker, ghosting, laplacian_rms
from presets.loader import load_preset
from training.evaluate import clip_frames
from training.poses import CLIP_FILE, SPEECH_CLIP_FILE, load_heldout_clip

VARIANTS = {
    "preset": {},
    "tolerance 8": {"tolerance": 8.0},
    "tolerance 12": {"tolerance": 12.0},
    "tolerance 12 guard 2": {"tolerance": 12.0, "guard": 2},
    "tolerance 16": {"tolerance": 16.0},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--presets", default="studio,cyberpunk")
    ap.add_argument("--clip", choices=("song", "speech"), default="song")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--variants", default=None)
    ap.add_argument("--weights", default=str(KAGURA_WEIGHTS), help="model folder (the shipped)")
    a = ap.parse_args()
    if a.variants and a.variants.endswith(".json"):
        with open(a.variants) as f:
            variants = json.load(f)
    else:
        variants = json.loads(a.variants) if a.variants else VARIANTS
    if a.device == "cpu":
        torch.set_num_threads(2)
    m = load_models(a.weights, dtype="float32", device=a.device)
    track = load_heldout_clip(CLIP_FILE if a.clip == "song" else SPEECH_CLIP_FILE)
    n = min(a.frames, len(track))
    for name in a.presets.split(","):
        p = load_preset(name)
        fr = clip_frames(m, p, (640, 360), a.device, n, track)
        model, ref, motion = fr["model"], fr["reference"], fr["motion"]
        lap0, lap_ref, lap_fast = (laplacian_rms(fr[k]) for k in ("model", "reference", "fast"))
        print(
            f"{a.clip} {name} ({n} frames): off flicker {flicker(model, motion):.3f} ghost "
            f"{ghosting(model, ref, motion):.3f}; reference flicker {flicker(ref, motion):.3f}; "
            f"Laplacian RMS model {lap0:.2f} reference {lap_ref:.2f} fast {lap_fast:.2f}",
            flush=True,
        )
        for label, kw in variants.items():
            if label == "preset" or kw == "preset":
                t = TemporalStage.for_preset(p, device=a.device)
            else:
                t = TemporalStage(device=a.device, **kw)
            t.reset()
            if a.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = torch.stack([t.apply(model[i], motion[i], i) for i in range(n)])
            if a.device == "cuda":
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1000.0 / n
            lap = laplacian_rms(out)
            print(
                f"  {label}: flicker {flicker(out, motion):.3f} ghost "
                f"{ghosting(out, ref, motion):.3f} lap {lap / lap0:.3f} (÷ref {lap / lap_ref:.3f}"
                f", ÷fast {lap / lap_fast:.3f}) {ms:.2f} ms/frame",
                flush=True,
            )


if __name__ == "__main__":
    main()
