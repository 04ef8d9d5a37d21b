"""The README's contact sheet: per preset at 1080p, fast look | Kagura's model | reference painter,
each whole (scaled to a third) and as a face crop at 100 %.

    python3 scripts/contact_sheet.py [--device cuda] [--out docs/img/contact_sheet.jpg]

One pose of the built-in idol (scripts/reference_grid.py's), drawn twice by the renderer: at the
model's working size 640x360 and natively at 1920x1080. The columns are what each user gets
at 1080p:
- fast look: the preset's procedural post-process on the native 1080p render (no GPU needed);
- Kagura's model: the cuda defaults of `kagura render --size 1920x1080` — the post-process at
  640x360 without its screen effects (pipeline.stylize.model_input), the DiffusionStage with
  the shipped weights, the x3 upscaler (realesr-animevideov3);
- reference painter: pipeline/reference on the native 1080p render (the look the model learns;
  far too slow to run live).
On the GPU machine the reference painters take a few seconds per preset; on a CPU minutes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_grid import render

from pipeline.diffusion import DiffusionStage
from pipeline.diffusion.kagura_model import load_kagura
from pipeline.reference import make_reference
from pipeline.stylize import make_effect, model_input
from pipeline.upscale.stage import UpscaleStage
from presets.loader import load_preset

PRESETS = ("studio", "ink-wash", "cyberpunk")
SMALL, BIG = (640, 360), (1920, 1080)
FACE = (660, 300, 600, 420)  # x, y, w, h of the face at 1080p in this pose


def _rgb(x: torch.Tensor) -> torch.Tensor:
    return x[..., :3].cpu()


def main(argv: list[str]) -> None:
    from PIL import Image, ImageDraw

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, default=Path("docs/img/contact_sheet.jpg"))
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    models = load_kagura(device=args.device)
    up = UpscaleStage(scale=3, dtype="float16", device=args.device, in_size=SMALL, max_batch=1)
    up.setup(None)
    idx = torch.zeros(1, dtype=torch.int64)
    fx, fy, fw, fh = FACE
    tw, th = BIG[0] // 3, BIG[1] // 3
    blocks = []
    for name in PRESETS:
        preset = load_preset(name)
        small, big = render(preset, *SMALL), render(preset, *BIG)
        with torch.inference_mode():
            fast_big = make_effect(preset, *BIG).to(dev)(big.to(dev), idx.to(dev))[0]
            fast_small = make_effect(model_input(preset), *SMALL).to(dev)
            fast_small = fast_small(small.to(dev), idx.to(dev))[0]
            st = DiffusionStage(models, preset, *SMALL, device=args.device)
            st.setup(None)
            painted = up.apply(st.apply(fast_small)[None])[0]
            ref = make_reference(preset, *BIG).to(dev)(big.to(dev), idx.to(dev))[0]
        cols = [_rgb(fast_big), _rgb(painted), _rgb(ref)]
        whole = [Image.fromarray(c.numpy()).resize((tw, th), Image.LANCZOS) for c in cols]
        crops = [Image.fromarray(c[fy : fy + fh, fx : fx + fw].numpy()) for c in cols]
        block = Image.new("RGB", (3 * max(tw, fw), th + fh + 28), "white")
        draw = ImageDraw.Draw(block)
        for i, label in enumerate(("fast look", "Kagura model (cuda defaults)", "reference")):
            x = i * max(tw, fw)
            draw.text((x + 6, 6), f"{name}: {label}", fill="black")
            block.paste(whole[i], (x + (max(tw, fw) - tw) // 2, 28))
            block.paste(crops[i], (x + (max(tw, fw) - fw) // 2, 28 + th))
        blocks.append(block)
        print(f"{name}: done", flush=True)
    sheet = Image.new("RGB", (blocks[0].width, sum(b.height for b in blocks)), "white")
    y = 0
    for b in blocks:
        sheet.paste(b, (0, y))
        y += b.height
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(args.out, quality=88)
    print(f"wrote {args.out} ({sheet.width}x{sheet.height})")


if __name__ == "__main__":
    main(sys.argv[1:])
