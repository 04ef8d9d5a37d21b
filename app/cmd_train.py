"""`kagura train` — train Kagura's own latent-diffusion model on its own renders, on one GPU.

    kagura train [--device cuda] [--steps N] [--minutes M] [--out runs/kagura] [--no-resume]
                 [--export DIR] [--eval-only] [--bench-out docs/BENCHMARKS.md]

Runs (or resumes, from OUT/last.pt) training/train.py to --steps; with --minutes it stops in
time with a checkpoint and the same command carries on (--export-partial: export and evaluate
the weights reached so far instead; the model card then names the steps actually done). When the last step is done: the EMA
weights are exported as float16 safetensors to --export (default: the shipped weights folder,
pipeline/diffusion/kagura/), loaded back through the real loader and evaluated — PSNR/SSIM
against the reference painter on held-out poses, flicker on the held-out audio-driven clip with
and without the temporal stage, an image grid (docs/img/kagura_model_grid.jpg), the curves
(docs/img/kagura_training.png) — and the model card (MODEL_CARD.md beside the weights) and a
docs/BENCHMARKS.md section are written. --eval-only does that last part for the weights in
--export without training.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from app.errors import UsageError

DOCS_IMG = Path("docs/img")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train", help="train Kagura's own diffusion model on its renders (one GPU)"
    )
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (tests only: slow)")
    p.add_argument("--steps", type=int, default=None, help="total steps (default 6000)")
    p.add_argument("--minutes", type=float, default=None, help="stop with a checkpoint after M")
    p.add_argument("--out", type=Path, default=Path("runs/kagura"), help="checkpoints and logs")
    p.add_argument("--no-resume", action="store_true", help="start over even if OUT/last.pt")
    p.add_argument("--export", type=Path, default=None, help="weights folder to write")
    p.add_argument("--eval-only", action="store_true", help="evaluate the --export weights")
    p.add_argument(
        "--export-partial",
        action="store_true",
        help="when --minutes stops the run early, export and evaluate what it has anyway",
    )
    p.add_argument("--size", default="640x360", help="training/evaluation size WxH")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--bank", type=int, default=None, help="pairs kept on the device")
    p.add_argument("--fresh", type=int, default=None, help="new pairs per step")
    p.add_argument(
        "--motion-bank", type=int, default=None, help="temporal pairs kept (the motion loss)"
    )
    p.add_argument("--ae-steps", type=int, default=None)
    p.add_argument("--workers", type=int, default=None, help="render processes (default: auto)")
    p.add_argument("--eval-poses", type=int, default=12, help="held-out poses per preset")
    p.add_argument("--clip-frames", type=int, default=240, help="held-out clip frames")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--init",
        type=Path,
        default=None,
        help="start from this weights folder (its train_state.json continues the step count "
        "and the data stream): a fresh machine carries on from the last exported model",
    )
    p.add_argument("--gan-start", type=int, default=None, help="patch discriminator from step N")
    p.add_argument("--no-gan", action="store_true", help="no patch discriminator")
    p.add_argument(
        "--loss-weight",
        action="append",
        default=[],
        metavar="NAME=W",
        help="override one loss weight (pix, edge, lat, rec, gan, texture, line, shift, "
        "motion); "
        "repeatable",
    )
    p.add_argument(
        "--motion-preset",
        action="append",
        default=[],
        metavar="PRESET=F",
        help="scale the motion loss on one preset's pairs by F (1 for the others); repeatable",
    )
    p.add_argument("--design-poses", type=int, default=4, help="poses per held-out design")
    p.add_argument("--bench-out", type=Path, default=Path("docs/BENCHMARKS.md"))
    p.add_argument("--docs-img", type=Path, default=DOCS_IMG)
    p.set_defaults(func=run)
    return p


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r}: expected WIDTHxHEIGHT, e.g. 640x360") from None
    if w % 8 or h % 8 or w < 32 or h < 32:
        raise UsageError(f"--size {text!r}: both sides must be multiples of 8 and at least 32")
    return w, h


def _named_number(item: str, flag: str, form: str, names) -> tuple[str, float]:
    """'NAME=X' -> (NAME, X) with NAME one of `names` and X a number >= 0, else UsageError."""
    name, _, value = item.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if name not in names or not number >= 0:
        key, x = form.split("=")
        raise UsageError(
            f"{flag} {item}: expected {form} with {key} one of {', '.join(names)} and {x} a "
            "number >= 0"
        )
    return name, number


def config_from(args: argparse.Namespace):
    from training.poses import PRESETS
    from training.train import TrainConfig

    cfg = TrainConfig(out=str(args.out), device=args.device, seed=args.seed, size=_size(args.size))
    for key in ("steps", "batch", "bank", "fresh", "workers"):
        if getattr(args, key) is not None:
            if getattr(args, key) < 0 or (
                key in ("steps", "batch", "bank") and not getattr(args, key)
            ):
                raise UsageError(f"--{key} {getattr(args, key)}: expected a positive number")
            setattr(cfg, key, getattr(args, key))
    if args.motion_bank is not None:
        if args.motion_bank < 1:
            raise UsageError(f"--motion-bank {args.motion_bank}: expected a positive number")
        cfg.motion_bank = args.motion_bank
    if args.ae_steps is not None:
        cfg.ae_steps = args.ae_steps
    if args.init is not None:
        if not (args.init / "unet").is_dir():
            raise UsageError(f"--init {args.init}: not a Kagura weights folder (no unet/)")
        cfg.init = str(args.init)
    if args.gan_start is not None:
        cfg.gan_start = args.gan_start
    for item in args.loss_weight:
        name, weight = _named_number(item, "--loss-weight", "NAME=W", cfg.loss_weights)
        cfg.loss_weights = {**cfg.loss_weights, name: weight}
    for item in args.motion_preset:
        name, factor = _named_number(item, "--motion-preset", "PRESET=F", PRESETS)
        cfg.motion_presets = {**cfg.motion_presets, name: factor}
    if args.no_gan:
        cfg.loss_weights = {**cfg.loss_weights, "gan": 0.0}
    cfg.ae_steps = min(cfg.ae_steps, cfg.steps // 2)
    cfg.bank = max(cfg.bank, cfg.batch)
    cfg.motion_batch = min(cfg.motion_batch, cfg.motion_bank)
    cfg.motion_fresh = min(cfg.motion_fresh, cfg.motion_bank)
    cfg.refresh_every = max(1, min(cfg.refresh_every, cfg.steps))
    cfg.max_minutes = args.minutes
    cfg.eval_every = max(1, min(cfg.eval_every, cfg.steps))
    return cfg


def run(args: argparse.Namespace) -> int:
    import torch

    from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS

    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r}: expected cpu or cuda")
    cfg = config_from(args)  # every option checked before the machine is
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device (use a GPU machine)")
    export_dir = args.export or KAGURA_WEIGHTS
    if not args.eval_only:
        from training import evaluate
        from training.train import train

        cache: dict = {}

        def quick_eval(trainer) -> dict:
            t0 = time.monotonic()
            if not cache:  # the held-out inputs and targets never change: make them once
                cache.update(
                    evaluate.heldout_targets(cfg.size, cfg.device, max(1, min(4, args.eval_poses)))
                )
            pics = evaluate.paint_targets(trainer.ema_models(), cache, cfg.device)
            res = evaluate.heldout_metrics(None, cfg.size, cfg.device, pictures=pics)
            print(
                "  held-out PSNR "
                + ", ".join(f"{k} {v:.2f} dB" for k, v in res["psnr"].items())
                + f" ({time.monotonic() - t0:.1f} s)"
            )
            return res

        trainer = train(cfg, resume=not args.no_resume, on_eval=quick_eval)
        if getattr(trainer, "stopped_early", False) and not args.export_partial:
            print(f"stopped at step {trainer.step}/{cfg.steps}; run the same command to resume")
            return 0
        state = {
            "steps_total": cfg.step0 + trainer.step,
            "samples_made": trainer.samples_made,
        }
        evaluate.export(trainer.ema_models(), export_dir, state)
        print(f"exported {evaluate.weights_bytes(export_dir) / 1e6:.1f} MB to {export_dir}")
    finalize(args, cfg, export_dir)
    return 0


def finalize(args: argparse.Namespace, cfg, export_dir: Path) -> None:
    """Load the exported weights through the real loader, evaluate, write card, grid, docs."""
    from pipeline.diffusion.kagura_model import load_kagura
    from training import evaluate
    from training.model_card import write_bench_section, write_card
    from training.train import plot_curves, read_log

    dtype = "float16" if cfg.device == "cuda" else "float32"
    models = load_kagura(dtype=dtype, device=cfg.device, folder=export_dir)
    t0 = time.monotonic()
    pics = evaluate.heldout_pictures(models, cfg.size, cfg.device, args.eval_poses)
    metrics = evaluate.heldout_metrics(models, cfg.size, cfg.device, pictures=pics)
    metrics["designs"] = evaluate.design_metrics(models, cfg.size, cfg.device, args.design_poses)
    metrics["flicker"] = evaluate.clip_flicker(models, cfg.size, cfg.device, args.clip_frames)
    metrics["eval_seconds"] = round(time.monotonic() - t0, 1)
    metrics["weights_bytes"] = evaluate.weights_bytes(export_dir)
    log = Path(cfg.out) / "log.jsonl"
    steps, _ = read_log(log)
    command = " ".join(["kagura", "train", *_argv_tail(args)])
    before = export_dir / "metrics.json"
    if args.eval_only and before.is_file():
        # the training facts belong to the weights, not to this evaluation: keep them
        metrics["train"] = json.loads(before.read_text()).get("train")
        metrics["evaluated_by"] = command
    if not metrics.get("train"):
        metrics["train"] = _train_facts(args, cfg, steps, command)
    evaluate.write_json(export_dir / "metrics.json", metrics)
    args.docs_img.mkdir(parents=True, exist_ok=True)
    evaluate.image_grid(pics, args.docs_img / "kagura_model_grid.jpg")
    if log.is_file():
        curves = plot_curves(log, Path(cfg.out) / "curves.png")
        shutil.copy2(curves, args.docs_img / "kagura_training.png")
    write_card(export_dir / "MODEL_CARD.md", metrics)
    write_bench_section(args.bench_out, metrics, command)
    print(
        "held-out PSNR/SSIM: "
        + ", ".join(
            f"{k} {metrics['psnr'][k]:.2f} dB / {metrics['ssim'][k]:.3f}" for k in metrics["psnr"]
        )
    )


def _train_facts(args, cfg, steps: list, command: str) -> dict:
    """What the run that made these weights did (its log), for metrics.json and the card."""
    return {
        "steps": steps[-1]["step"] if steps else None,
        "steps_before": cfg.step0,
        "train_seconds": steps[-1]["elapsed_s"] if steps else None,
        "samples_made": steps[-1]["samples_made"] if steps else None,
        "final_loss": steps[-1]["loss"] if steps else None,
        "config": cfg.to_json(),
        "device": _device_name(cfg.device),
        "command": command,
    }


def _device_name(device: str) -> str:
    import torch

    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    from core.benchdoc import machine_line

    return machine_line()


def _argv_tail(args: argparse.Namespace) -> list[str]:
    """The options this run was given (same under `kagura train` and `python -m app.cmd_train`)."""
    import sys

    argv = sys.argv[1:]
    return argv[1:] if argv and argv[0] == "train" else argv


def main(argv: list[str] | None = None) -> int:
    """`python -m app.cmd_train ...` = `kagura train ...` without the rest of the CLI's imports
    (the GPU machine has no Qt, PortAudio or librosa)."""
    import sys

    parser = argparse.ArgumentParser(prog="kagura")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["train", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
