"""`kagura bench model` — speed of Kagura's own model against its reference painters.

    kagura bench model [--device cuda|cpu] [--weights DIR] [--size 640x360] [--frames N]
                       [--out docs/BENCHMARKS.md]

CUDA: the shipped weights (float16) in a DiffusionStage with CUDA graphs at the given size;
each replay of `step()` (encode, UNet, decode, output conversion: one frame) is timed with CUDA
events, for 1 step and for the presets' 2 steps, both ways: one after another (what `kagura
live` and `render` run: the frame's own picture) and stream batch (one UNet call of batch 2 per
frame, the picture a frame late). The reference painters are timed per frame at batch 1 and at batch 16 (CUDA events).
CPU: frames/s of the eager stage (float32, torch's threads) and the reference painters' seconds
per frame. Median and P99 for every figure; the ratio reference / model is per frame, measured
in the same run. Writes the "kagura-model-speed" section of docs/BENCHMARKS.md and the Speed
section of the model card.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

from app.errors import UsageError
from core.stats import median, median_p99
from pipeline.diffusion.kagura_model import STYLE_PRESETS as PRESETS


def add_parser(bench_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    b = bench_subparsers.add_parser(
        "model", help="Kagura's own diffusion model: ms/frame (CUDA graphs) or frames/s (CPU)"
    )
    b.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    b.add_argument("--weights", type=Path, default=None, help="default: the shipped weights")
    b.add_argument("--size", default="640x360")
    b.add_argument("--frames", type=int, default=None, help="timed frames (default 300 / 20)")
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    return b


def _frames(device: str, size: tuple[int, int], n: int):
    """n frames of the model's input (uint8 (H, W, 4), opaque) of held-out poses, per preset."""
    import torch

    from training.data import PairMaker, render_specs
    from training.poses import heldout_specs

    specs = [s for s in heldout_specs(max(1, n)) if s.preset in PRESETS]
    raw = torch.from_numpy(render_specs(specs, *size))
    fast = PairMaker(size, device).inputs(raw, specs)
    out: dict[str, list] = {p: [] for p in PRESETS}
    alpha = torch.full((size[1], size[0], 1), 255, dtype=torch.uint8, device=device)
    for s, f in zip(specs, fast, strict=True):
        out[s.preset].append(torch.cat([f.permute(1, 2, 0), alpha], dim=2))
    return out, raw.to(device), specs


def run(args: argparse.Namespace) -> int:
    import torch

    from app.config import parse_size
    from core.benchdoc import machine_line, today, write_section
    from core.paths import weights_dir
    from pipeline.accel.timing import cuda_times
    from pipeline.diffusion import DiffusionStage
    from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS, load_kagura
    from pipeline.reference import make_reference
    from presets.loader import load_preset

    w, h = parse_size(args.size)  # the one size rule of every command
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device")
    folder = args.weights or weights_dir(KAGURA_WEIGHTS)
    n = args.frames or (300 if cuda else 20)
    # the loader the product runs (plain torch for Kagura's own layers)
    models = load_kagura(dtype="float16", device=args.device, folder=folder)
    frames, raw, specs = _frames(args.device, (w, h), 4)
    lines: list[str] = []
    rows: list[str] = []
    model_ms: dict[tuple[int, bool], float] = {}
    for steps, stream_batch in ((1, False), (2, False), (2, True)):
        preset = load_preset("cyberpunk")
        d = preset.diffusion.model_copy(update={"steps": steps})
        st = DiffusionStage(
            models,
            d,
            w,
            h,
            device=args.device,
            dtype="float16",
            stream_batch=stream_batch,
            cuda_graph=cuda,
        )
        st.setup()
        img = frames["cyberpunk"][0]
        st.apply(img)
        if cuda:
            ms = cuda_times(st.step, n)
        else:
            ms = []
            for i in range(n):
                t0 = time.perf_counter()
                st.apply(frames["cyberpunk"][i % len(frames["cyberpunk"])])
                ms.append((time.perf_counter() - t0) * 1e3)
        med, p99 = median_p99(ms)
        model_ms[steps, stream_batch] = med
        label = "CUDA graph replay" if cuda else "eager, float32"
        rows.append(
            f"| model, {steps} step{'s' if steps > 1 else ''}"
            f"{' (stream batch)' if stream_batch else ''} | {label} | {med:.2f} | {p99:.2f} | "
            f"{1000.0 / med:.1f} |"
        )
        st.close()
    for name in PRESETS:
        p = load_preset(name)
        ref = make_reference(p, w, h).to(args.device)
        sel = [i for i, s in enumerate(specs) if s.preset == name]
        x1 = raw[sel[:1]]
        idx1 = torch.zeros(1, dtype=torch.int64, device=args.device)
        with torch.no_grad():
            if cuda:
                one = cuda_times(functools.partial(ref, x1, idx1), 20, warmup=2)
                xb = x1.expand(16, -1, -1, -1).contiguous()
                idxb = torch.zeros(16, dtype=torch.int64, device=args.device)
                batch = [t / 16 for t in cuda_times(functools.partial(ref, xb, idxb), 5, warmup=1)]
            else:
                one = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    ref(x1, idx1)
                    one.append((time.perf_counter() - t0) * 1e3)
                batch = []
        med, p99 = median_p99(one)
        rows.append(
            f"| reference painter {name}, batch 1 | {'CUDA events' if cuda else 'eager'} | "
            f"{med:.2f} | {p99:.2f} | {1000.0 / med:.1f} |"
        )
        ratio = med / model_ms[2, False]
        lines.append(
            f"reference {name}: {med:.1f} ms/frame at batch 1 = {ratio:.1f}x the model's 2-step "
            f"frame ({model_ms[2, False]:.2f} ms)"
            + (f"; {median(batch):.2f} ms/frame at batch 16" if batch else "")
        )
    where = torch.cuda.get_device_name() if cuda else "CPU"
    cmd = f"kagura bench model --device {args.device} --size {w}x{h}"
    body = "\n".join(
        [
            f"## Kagura's own model: speed, {args.device} ({where})",
            "",
            f"- date: {today()}",
            f"- machine: {machine_line()}",
            f"- command: `{cmd}`",
            f"- weights: {_shown(folder)} (float16 on cuda, float32 on the CPU); {w}x{h}; "
            f"{n} timed frames",
            "",
            "| what | how | median ms/frame | P99 ms/frame | frames/s (median) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            *[f"- {line}" for line in lines],
        ]
    )
    # One section per working size: the live size keeps the plain key (and the model card).
    live_size = (w, h) == (640, 360)
    key = f"kagura-model-speed-{args.device}" + ("" if live_size else f"-{w}x{h}")
    write_section(args.out, key, body)
    card = folder / "MODEL_CARD.md"
    if card.is_file() and live_size:
        update_card_speed(card, args.device, rows, lines, cmd)
    print(body)
    return 0


def _shown(folder: Path) -> str:
    """The weights folder relative to the working directory when inside it."""
    try:
        return Path(folder).resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(folder)


def update_card_speed(card: Path, device: str, rows: list[str], lines: list[str], cmd: str):
    begin, end = f"<!-- speed:{device} -->", f"<!-- /speed:{device} -->"
    block = "\n".join(
        [
            begin,
            f"`{cmd}`:",
            "",
            "| what | how | median ms/frame | P99 ms/frame | frames/s (median) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            *[f"- {line}" for line in lines],
            end,
        ]
    )
    text = card.read_text(encoding="utf-8")
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:  # after the section's intro line, before the next section
        text = text.replace(
            "\n## Known failure modes", "\n" + block + "\n\n## Known failure modes", 1
        )
    card.write_text(text, encoding="utf-8")


if __name__ == "__main__":  # `python -m app.bench_model ...` without the rest of the CLI
    import sys

    _parser = argparse.ArgumentParser(prog="kagura bench")
    add_parser(_parser.add_subparsers(dest="bench", required=True))
    raise SystemExit(run(_parser.parse_args(["model", *sys.argv[1:]])))
