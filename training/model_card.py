"""The model card (MODEL_CARD.md beside the weights) and the docs/BENCHMARKS.md section, both
written from the measured metrics (metrics.json) — never typed by hand."""

from __future__ import annotations

from pathlib import Path

from training.poses import N_BACKGROUNDS, PRESETS


def _table(metrics: dict) -> str:
    rows = [
        "| preset | model PSNR (dB) | model SSIM | fast look PSNR (dB) | fast look SSIM |",
        "|---|---|---|---|---|",
    ]
    for p in PRESETS:
        rows.append(
            f"| {p} | {metrics['psnr'][p]:.2f} | {metrics['ssim'][p]:.3f} | "
            f"{metrics['fast_psnr'][p]:.2f} | {metrics['fast_ssim'][p]:.3f} |"
        )
    return "\n".join(rows)


def _flicker_table(metrics: dict) -> str:
    fl = metrics["flicker"]
    rows = [
        "| preset | fast look | reference painter | model | model + temporal stage |",
        "|---|---|---|---|---|",
    ]
    for p in PRESETS:
        f = fl[p]
        rows.append(
            f"| {p} | {f['fast']:.2f} | {f['reference']:.2f} | {f['model']:.2f} | "
            f"{f['model_temporal']:.2f} |"
        )
    return "\n".join(rows)


def write_card(path: Path, metrics: dict) -> Path:
    t = metrics["train"]
    cfg = t["config"]
    w, h = cfg["size"]
    minutes = (t["train_seconds"] or 0) / 60.0
    text = f"""# Kagura model card

Kagura's own latent-diffusion model: paints the built-in idol's fast render in the preset's
style, live. Trained by `kagura train` on Kagura's own renders only — no downloaded weights, no
outside images. Architecture and interface: `pipeline/diffusion/kagura_model.py`; training:
`training/`. Loaded by the diffusion stage like any diffusers checkpoint (this folder).

## Model
- Denoiser: diffusers UNet2DConditionModel, 3 levels (64/128/192 channels), self-attention at
  the bottleneck, input = noisy latent + clean latent of the fast render (8 channels), preset
  conditioning through a tiny frozen CLIP text tower (the preset prompt) pooled into the time
  embedding; predicts the clean latent ("sample"), DDPM schedule (SD's), 1-2 steps.
- Autoencoder: KaguraAutoencoder, 8x down, 4 latent channels, no full-resolution convolution.
- Weights: {metrics["weights_bytes"] / 1e6:.1f} MB of float16 safetensors.

## Data
- Pairs (fast look -> reference look) made during training: the idol rendered by Skia in worker
  processes at random poses, visemes, expressions, gaze, blinks; random framings (zoom 0.7-1.4,
  offsets, mirror) and {N_BACKGROUNDS} background variants per preset applied on the GPU; the preset's
  procedural look (`pipeline/stylize`, the model's input) and its reference painter
  (`pipeline/reference`, the target) computed on the GPU.
- {t["samples_made"]} pairs were made over the run; a bank of {cfg["bank"]} is refreshed by
  {cfg["fresh"]} per step.
- Held out: {metrics["poses_per_preset"]} poses per preset from a separate random stream
  (default framing, background 0), and 8 s of the demo song's audio-driven motion.

## Training
- {t["steps"]} steps (first {cfg["ae_steps"]} autoencoder only{"; " + t["note"] if t.get("note") else ""}), batch {cfg["batch"]},
  AdamW lr {cfg["lr"]} with warm-up and cosine decay, EMA {cfg["ema"]}, bf16 autocast,
  seed {cfg["seed"]}, {w}x{h}; {minutes:.1f} min on {t["device"]}.
- Loss weights: {cfg["loss_weights"]}; curves: `docs/img/kagura_training.png`.
- Command: `{t.get("command", "kagura train")}`

## Metrics (held-out poses, against the reference painter, through the real diffusion stage)
{_table(metrics)}

The "fast look" columns are the procedural post-process the model starts from: the gap between
the two is what the model learned.

## Temporal stability (held-out clip, {metrics["flicker"]["frames"]} frames)
Flicker = mean |frame - previous frame warped by the renderer's motion vectors| (0-255, covered
pixels; `pipeline/temporal/stage.flicker`):

{_flicker_table(metrics)}

## Speed
Measured by `kagura bench model` (GPU: CUDA graph replay; CPU: eager), which writes its
figures below for the weights beside this card:

## Known failure modes
- It learned three styles from three prompts: a preset with another prompt gets an untrained
  style embedding (the picture follows the fast render's colours, the style is a blend).
- It knows only Kagura's built-in idol: other avatars (Live2D/VRM renders) are out of its data.
- It paints softer than the reference: fine paper grain, dry-brush streaks and thin lines blur
  (8x latent, a small decoder, a few minutes of training) - SSIM is below the fast look's for
  studio and ink wash even where PSNR is above it. Longer training and a larger decoder are
  the obvious next steps.
- Time-varying effects in the reference (none by design) could not be learned: the painters are
  deterministic per frame.
"""
    path.write_text(text, encoding="utf-8")
    return path


def write_bench_section(path: Path, metrics: dict, command: str) -> None:
    from app.benchdoc import today, write_section

    t = metrics["train"]
    body = f"""## Kagura's own model: quality against the reference painters

- date: {today()}
- machine: {t["device"]}
- command: `{command}`
- training: {t["steps"]} steps{" (" + t["note"] + ")" if t.get("note") else ""} in {(t["train_seconds"] or 0) / 60:.1f} min, {t["samples_made"]} pairs made; weights {metrics["weights_bytes"] / 1e6:.1f} MB (float16)
- held-out poses: {metrics["poses_per_preset"]} per preset, painted through DiffusionStage (preset strength/steps/seed)

{_table(metrics)}

Flicker on the held-out clip ({metrics["flicker"]["frames"]} frames, 0-255):

{_flicker_table(metrics)}
"""
    write_section(path, "kagura-model", body)
