"""Look at and time the offline reference painters (pipeline/reference).

.venv/bin/python scripts/reference_grid.py OUT.png [preset ...] [--size 640x360] [--raw]
    [--crop] [--mouth 0.6]
    one pose per preset (default: studio, ink-wash, cyberpunk), one row each:
    procedural look | reference look (--raw: the raw render over the background first;
    --crop: the centre of each image only, for details). Don't commit the PNG.

.venv/bin/python scripts/reference_grid.py --bench [preset ...] [--size 640x360]
    [--batches 1,4] [--device cpu] [--repeat 3] [--threads N]
    time per frame of the reference and of the procedural pipeline.stylize effect on the
    same frames (median of --repeat runs after a warm-up), per preset and batch size.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.avatar import AvatarParams
from pipeline.reference import make_reference
from pipeline.stylize import make_effect
from presets.loader import load_preset
from render.backgrounds import make_background
from render.idol import IdolRenderer

BUILTINS = ["studio", "ink-wash", "cyberpunk"]
POSE = {"head_yaw": 12.0, "head_roll": -6.0, "body_yaw": 4.0, "eye_smile": 0.2, "cheek": 0.5}


def render(preset, w: int, h: int, n: int = 1, mouth: float = 0.6) -> torch.Tensor:
    """n frames of the idol (the first in POSE, then moving): uint8 (n, h, w, 4)."""
    r = IdolRenderer(w, h, preset.palette, preset.line)
    out = []
    for i in range(n):
        t = i / 30
        p = AvatarParams(
            mouth_open=mouth if i == 0 else 0.5 + 0.5 * math.sin(t * 9),
            head_yaw=POSE["head_yaw"] + 15 * math.sin(t * 2.1),
            head_roll=POSE["head_roll"] + 10 * math.sin(t * 1.7),
            body_yaw=POSE["body_yaw"],
            eye_smile=POSE["eye_smile"],
            cheek=POSE["cheek"],
        )
        out.append(torch.from_numpy(r.render(p).rgba.copy()))
    return torch.stack(out)


def grid(args, w: int, h: int) -> None:
    from PIL import Image

    rows = []
    for name in args.presets:
        preset = load_preset(name)
        x = render(preset, w, h, 1, args.mouth)
        idx = torch.zeros(1, dtype=torch.int64)
        with torch.inference_mode():
            proc = make_effect(preset, w, h)(x, idx)[0, ..., :3]
        painter = make_reference(preset, w, h)
        t = time.perf_counter()
        ref = painter(x, idx)[0, ..., :3]
        print(f"{name:10s} reference {time.perf_counter() - t:.2f} s/frame at {w}x{h}")
        cols = [proc, ref]
        if args.raw:
            bg = make_background(preset.background, w, h).float()
            a = x[0, ..., 3:].float() / 255.0
            cols.insert(0, (x[0, ..., :3].float() + bg * (1 - a)).round().clamp(0, 255).byte())
        if args.crop:
            cols = [c[h // 8 : h // 8 + h // 2, w // 4 : 3 * w // 4] for c in cols]
        rows.append(torch.cat(cols, 1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(torch.cat(rows, 0).numpy()).save(args.out)
    print(f"wrote {args.out}")


def _time(fn, x, idx, repeat: int, cuda: bool) -> float:
    """Median seconds per frame of fn(x, idx) after one warm-up call."""
    fn(x, idx)
    ts = []
    for _ in range(repeat):
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn(x, idx)
        if cuda:
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) / x.shape[0])
    return statistics.median(ts)


def bench(args, w: int, h: int) -> None:
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    batches = [int(b) for b in args.batches.split(",")]
    print(f"{w}x{h} on {dev}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print("preset      batch  reference ms/frame  procedural ms/frame  ratio")
    for name in args.presets:
        preset = load_preset(name)
        frames = render(preset, w, h, max(batches)).to(dev)
        painter = make_reference(preset, w, h).to(dev)
        effect = make_effect(preset, w, h).to(dev)
        for b in batches:
            x, idx = frames[:b], torch.arange(b)
            tr = _time(painter, x, idx, args.repeat, cuda)
            with torch.inference_mode():
                tp = _time(effect, x, idx, max(args.repeat, 5), cuda)
            print(
                f"{name:10s} {b:6d}  {tr * 1e3:18.1f}  {tp * 1e3:19.2f}  {tr / tp:6.0f}x",
                flush=True,
            )


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("presets", nargs="*")
    ap.add_argument("--size", default="640x360")
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--crop", action="store_true")
    ap.add_argument("--mouth", type=float, default=0.6)
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    args = ap.parse_intermixed_args(argv)
    if args.out is not None and args.out.suffix.lower() != ".png":  # a preset, not a path
        args.presets.insert(0, str(args.out))
        args.out = None
    args.presets = args.presets or BUILTINS
    w, h = (int(v) for v in args.size.split("x"))
    if args.bench:
        bench(args, w, h)
    elif args.out is None:
        ap.error("give OUT.png (or --bench)")
    else:
        grid(args, w, h)


if __name__ == "__main__":
    main(sys.argv[1:])
