"""The model card (MODEL_CARD.md beside the weights) and the docs/BENCHMARKS.md section, both
written from the measured metrics (metrics.json) — never typed by hand."""

from __future__ import annotations

from pathlib import Path

from training.poses import N_BACKGROUNDS, PRESETS


def _motion_presets(cfg: dict) -> str:
    """The per-preset factors on the motion loss, when a run set any."""
    factors = cfg.get("motion_presets") or {}
    return f" (motion loss x{factors} by preset)" if factors else ""


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
        "| preset | fast look | reference painter | model | model + temporal stage "
        "| ghosting: model | ghosting: model + temporal |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in PRESETS:
        f = fl[p]
        ghost = (
            f"{f['ghost_model']:.3f} | {f['ghost_model_temporal']:.3f}"
            if "ghost_model" in f
            else "- | -"
        )
        rows.append(
            f"| {p} | {f['fast']:.3f} | {f['reference']:.3f} | {f['model']:.3f} | "
            f"{f['model_temporal']:.3f} | {ghost} |"
        )
    return "\n".join(rows)


def _sharp_table(metrics: dict) -> str:
    """Laplacian RMS of the model against the fast look and the reference, poses and designs."""
    rows = [
        "| preset | model / fast look | model / reference | held-out designs: model / fast "
        "| designs: model / reference |",
        "|---|---|---|---|---|",
    ]
    des = metrics.get("designs", {}).get("lap", {})
    for p in PRESETS:
        lap = metrics["lap"][p]
        d = des.get(p)
        dtxt = f"{d['model'] / d['fast']:.2f} | {d['model'] / d['reference']:.2f}" if d else "- | -"
        rows.append(
            f"| {p} | {lap['model'] / lap['fast']:.2f} | {lap['model'] / lap['reference']:.2f} "
            f"| {dtxt} |"
        )
    return "\n".join(rows)


def _design_table(metrics: dict) -> str:
    d = metrics.get("designs")
    if not d:
        return "(not measured)"
    return _table(d)


def write_card(path: Path, metrics: dict) -> Path:
    t = metrics["train"]
    cfg = t["config"]
    w, h = cfg["size"]
    minutes = (t["train_seconds"] or 0) / 60.0
    text = f"""# Kagura model card

Kagura's own latent-diffusion model: paints the built-in idol's fast render in the preset's
style, live. Trained by `kagura train` on Kagura's own renders only — no downloaded weights, no
outside images. Architecture and interface: `pipeline/diffusion/kagura_model.py`; training:
`training/`. Loaded by plain torch modules of the same layers (`pipeline/diffusion/kagura_torch.py`: no
diffusers or transformers at run time), or by diffusers like any checkpoint (this folder).

## Model
- Denoiser: diffusers UNet2DConditionModel, 3 levels (64/128/192 channels), convolutional (no
  attention: its mid block is UNetMidBlock2D without it), input = noisy latent + clean latent of the fast render (8 channels), preset
  conditioning through a tiny frozen CLIP text tower (the preset prompt) pooled into the time
  embedding; predicts the clean latent ("sample"), DDPM schedule (SD's), 1-2 steps.
- Autoencoder: KaguraAutoencoder, 8x down, 4 latent channels, no full-resolution convolution;
  its decoder is *guided*: it adds a residual to the full-size fast render, computed from the
  latent and the render's own features at 1/2 and 1/4 size, so the fast render's lines, eyes,
  highlights and mouth reach the picture exactly and the model paints the style on top.
- Weights: {metrics["weights_bytes"] / 1e6:.1f} MB of float16 safetensors.

## Data
- Pairs (fast look -> reference look) made during training: the idol rendered by Skia in worker
  processes at random poses, visemes, expressions, gaze, blinks; random framings (zoom 0.7-1.4,
  offsets, mirror) and {N_BACKGROUNDS} background variants per preset applied on the GPU; the preset's
  procedural look (`pipeline/stylize`, the model's input) and its reference painter
  (`pipeline/reference`, the target) computed on the GPU.
- Designs: 60 % of the samples show one of 192 recoloured idols (`training/designs.py`: hair,
  eye, outfit and accent hues, lightness and saturation; a third flat cel-shaded like layered
  PSD art; outline widths 0.5-1.8x); 4 more designs are never drawn and are evaluated apart.
- {t["samples_made"]} pairs were made over the run; a bank of {cfg["bank"]} is refreshed by
  {cfg["fresh"]} per step.
- Held out: {metrics["poses_per_preset"]} poses per preset from a separate random stream
  (default framing, background 0), and 8 s of the demo song's audio-driven motion.

## Training
- {t["steps"]} steps in the last run, {t.get("steps_before") or 0} before it (`--init`: each run
  starts from the last exported weights) (first {cfg["ae_steps"]} decoder only{"; " + t["note"] if t.get("note") else ""}), batch {cfg["batch"]},
  AdamW lr {cfg["lr"]} with warm-up and cosine decay, EMA {cfg["ema"]}, bf16 autocast,
  seed {cfg["seed"]}, {w}x{h}; {minutes:.1f} min on {t["device"]}.
- Loss weights: {cfg["loss_weights"]}{_motion_presets(cfg)}; curves: `docs/img/kagura_training.png`.
- Command: `{t.get("command", "kagura train")}`

## Metrics (held-out poses, against the reference painter, through the real diffusion stage)
{_table(metrics)}

The "fast look" columns are the procedural post-process the model starts from: the gap between
the two is what the model learned.

Held-out designs (colourings training never drew: {len(metrics.get("designs", {}).get("designs", []))} designs, {metrics.get("designs", {}).get("poses_per_preset", 0)} pictures per preset, pooled):

{_design_table(metrics)}

Sharpness: Laplacian RMS of the luminance (`pipeline/temporal.laplacian_rms`), ratios:

{_sharp_table(metrics)}

## Temporal stability (held-out clip, {metrics["flicker"]["frames"]} frames)
Flicker = mean |frame - previous frame warped by the renderer's motion vectors| (0-255, covered
pixels; `pipeline/temporal/stage.flicker`); ghosting = mean |frame - reference painter| in the
band beside moving edges (`pipeline/temporal.ghosting`; echo lines raise it). The temporal
stage runs with each preset's own `[temporal]` settings, as render and live run it:

{_flicker_table(metrics)}

## Speed
Measured by `kagura bench model` (GPU: CUDA graph replay; CPU: eager), which writes its
figures below for the weights beside this card:

## Known failure modes
- It learned three styles from three prompts: a preset with another prompt gets an untrained
  style embedding (the picture follows the fast render's colours, the style is a blend).
- It learned recoloured versions of Kagura's idol: other shapes (Live2D/VRM renders, imported
  PSD avatars with other proportions) are outside its data.
- Ink wash's reference has more paper grain and dry-brush texture than the model paints (its
  Laplacian RMS stays below the reference's: the sharpness table above): the grain is fixed
  to the paper, which the model cannot see; the fast look's own grain comes through
  unchanged. In the hair, where the reference draws dry-brush strands, the model paints
  smeared grey patches instead (seen at 100 % on held-out frames): the strands' places are
  not in its input, so it averages them.
- Time-varying effects in the reference (none by design) could not be learned: the painters are
  deterministic per frame.
"""
    path.write_text(text, encoding="utf-8")
    return path


def write_bench_section(path: Path, metrics: dict, command: str) -> None:
    from core.benchdoc import today, write_section

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

Held-out designs:

{_design_table(metrics)}

Sharpness (Laplacian RMS ratios):

{_sharp_table(metrics)}
"""
    write_section(path, "kagura-model", body)
