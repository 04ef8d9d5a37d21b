"""How good Kagura's own model is, measured the way it runs: through the real DiffusionStage.

paint(models, input_u8, preset, device) -> uint8 (n, 3, H, W)
    each picture painted independently by a DiffusionStage with the preset's settings
    (strength, steps, seed: the fixed per-stream noise), stream batch off — the offline path
heldout_targets(size, device, n) / paint_targets(models, targets, device)
    the held-out (fast, model input, reference) pictures, made once; then (fast, model,
    reference): the model paints its input (the fast look without screen effects); "fast"
    is the look shown without a model, the baseline of every comparison
heldout_metrics(models, size, device, n_per_preset, pictures=None) -> dict
    PSNR / SSIM of the model and of the procedural input against the reference painter, per
    preset, on held-out poses (training/poses.heldout_specs), and the sharpness (Laplacian RMS,
    pipeline/temporal.laplacian_rms) of fast look, model and reference
design_metrics(models, size, device, n_per_design) -> dict
    the same on designs training never drew (training/designs.HELDOUT_DESIGNS), all pooled
clip_flicker(models, size, device, frames, clip=None) -> dict
    the temporal stage's flicker metric (pipeline/temporal/stage.flicker) on a held-out
    audio-driven clip: fast look, reference painter, model, model + temporal stage; and the
    ghosting measure (pipeline/temporal.ghosting) and Laplacian RMS of the model with and
    without the stage (clip_frames / temporal_figures: the same per preset, from parts)
image_grid(pictures, path, poses=2) -> Path
    rows = held-out poses x presets; columns = fast render | model | reference
export(models, folder) -> Path
    float16 safetensors in diffusers layout (what load_models reads), old files replaced
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from training.data import PairMaker, render_specs
from training.poses import PRESETS, heldout_specs, load_heldout_clip


def _stage(models, preset_name: str, size: tuple[int, int], device: str):
    from pipeline.diffusion import DiffusionStage
    from presets.loader import load_preset

    preset = load_preset(preset_name)
    st = DiffusionStage(
        models, preset, *size, device=device, dtype=models.dtype, stream_batch=False
    )
    st.setup()
    return st


@torch.no_grad()
def paint(models, input_u8: torch.Tensor, preset: str, device: str) -> torch.Tensor:
    n, _, h, w = input_u8.shape
    st = _stage(models, preset, (w, h), device)
    out = torch.empty(n, 3, h, w, dtype=torch.uint8, device=device)
    alpha = torch.full((h, w, 1), 255, dtype=torch.uint8, device=device)
    for i in range(n):
        img = torch.cat([input_u8[i].to(device).permute(1, 2, 0), alpha], dim=2)
        out[i] = st.apply(img)[..., :3].permute(2, 0, 1)
    st.close()
    return out


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x.float().div(255.0)


def psnr_ssim(a_u8: torch.Tensor, b_u8: torch.Tensor) -> tuple[float, float]:
    """Mean PSNR (dB, data range 1) and SSIM (11x11 Gaussian, sigma 1.5) over the batch."""
    from torchmetrics.functional.image import (
        peak_signal_noise_ratio,
        structural_similarity_index_measure,
    )

    a, b = _unit(a_u8).cpu(), _unit(b_u8).cpu()
    psnr = peak_signal_noise_ratio(a, b, data_range=1.0, reduction="none", dim=(1, 2, 3))
    ssim = structural_similarity_index_measure(a, b, data_range=1.0, reduction="none")
    return float(psnr.mean()), float(ssim.mean())


@torch.no_grad()
def heldout_targets(size, device, n_per_preset: int, designs: tuple[int, ...] = (0,)) -> dict:
    """{preset: (fast, model input, reference)} uint8 (n, 3, H, W) on the held-out poses, of
    each design."""
    specs = [s for d in designs for s in heldout_specs(n_per_preset, d)]
    maker = PairMaker(size, device)
    raw = torch.from_numpy(render_specs(specs, *size))
    fast, inp, ref = maker.looks(raw, specs, which=("fast", "input", "ref"))
    out = {}
    for preset in PRESETS:
        rows = [i for i, s in enumerate(specs) if s.preset == preset]
        out[preset] = (fast[rows], inp[rows], ref[rows])
    return out


def paint_targets(models, targets: dict, device) -> dict:
    """{preset: (fast, model, reference)}: the model paints every held-out input."""
    return {p: (f, paint(models, i, p, device), r) for p, (f, i, r) in targets.items()}


def heldout_pictures(models, size, device, n_per_preset: int) -> dict:
    return paint_targets(models, heldout_targets(size, device, n_per_preset), device)


def lap_rms(x_u8: torch.Tensor) -> float:
    """Laplacian RMS of uint8 (n, 3, H, W) pictures (pipeline/temporal.laplacian_rms)."""
    from pipeline.temporal import laplacian_rms

    return laplacian_rms(x_u8.permute(0, 2, 3, 1).cpu())


def heldout_metrics(models, size, device, n_per_preset: int = 12, pictures=None) -> dict:
    pics = pictures or heldout_pictures(models, size, device, n_per_preset)
    res: dict[str, dict] = {"psnr": {}, "ssim": {}, "fast_psnr": {}, "fast_ssim": {}, "lap": {}}
    for preset, (f, m, r) in pics.items():
        res["psnr"][preset], res["ssim"][preset] = psnr_ssim(m, r)
        res["fast_psnr"][preset], res["fast_ssim"][preset] = psnr_ssim(f, r)
        res["lap"][preset] = {"fast": lap_rms(f), "model": lap_rms(m), "reference": lap_rms(r)}
    res["poses_per_preset"] = int(next(iter(pics.values()))[0].shape[0])
    return res


def design_metrics(models, size, device, n_per_design: int = 4) -> dict:
    """heldout_metrics on the held-out designs (every one, n_per_design poses each, pooled)."""
    from training.designs import HELDOUT_DESIGNS

    targets = heldout_targets(size, device, n_per_design, tuple(HELDOUT_DESIGNS))
    res = heldout_metrics(None, size, device, pictures=paint_targets(models, targets, device))
    res["designs"] = list(HELDOUT_DESIGNS)
    return res


@torch.no_grad()
def clip_renders(preset, size, n: int, track=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The idol's raw renders (n, H, W, 4) and motion vectors (n, H, W, 2) over the first n
    frames of the held-out clip, in `preset`'s palette (CPU tensors)."""
    from render.idol import IdolRenderer

    track = track if track is not None else load_heldout_clip()
    r = IdolRenderer(*size, preset.palette, preset.line)
    raws, motions = [], []
    for i in range(n):
        fr = r.render(track[i])
        raws.append(torch.from_numpy(fr.rgba.copy()))
        motions.append(torch.from_numpy(fr.motion.copy()))
    return torch.stack(raws), torch.stack(motions)


def in_batches(effect, raw: torch.Tensor, idx: torch.Tensor, n: int = 8) -> torch.Tensor:
    """effect(raw, idx) over the frames, n at a time (a look or a painter on a whole clip)."""
    return torch.cat([effect(raw[i : i + n], idx[i : i + n]) for i in range(0, len(raw), n)])


def clip_frames(models, preset, size, device, n: int, track) -> dict[str, torch.Tensor]:
    """The first n frames of `track` in `preset`: the fast look, the reference painter's, the
    model's input and painting (opaque uint8 (n, H, W, 4) on `device`) and the motion vectors."""
    from pipeline.reference import make_reference
    from pipeline.stylize import make_effect, model_input

    w, h = size
    raw, motion = clip_renders(preset, size, n, track)
    raw, motion = raw.to(device), motion.to(device)
    idx = torch.arange(n, dtype=torch.int64, device=device)
    fast, ref, inp = (
        in_batches(effect.to(device), raw, idx)
        for effect in (
            make_effect(preset, w, h),
            make_reference(preset, w, h),
            make_effect(model_input(preset), w, h),
        )
    )
    painted = paint(models, inp[..., :3].permute(0, 3, 1, 2), preset.name, device)
    alpha = torch.full((n, h, w, 1), 255, dtype=torch.uint8, device=device)
    model = torch.cat([painted.permute(0, 2, 3, 1), alpha], dim=3)
    return {"fast": fast, "reference": ref, "input": inp, "model": model, "motion": motion}


def temporal_figures(frames: dict[str, torch.Tensor], preset, device) -> dict:
    """Flicker of fast look, reference, model and model + the preset's temporal stage; ghosting
    and Laplacian RMS of the model with and without the stage (`frames` from clip_frames)."""
    from pipeline.temporal.stage import TemporalStage, flicker, ghosting, laplacian_rms

    model, ref, motion = frames["model"], frames["reference"], frames["motion"]
    temporal = TemporalStage.for_preset(preset, device=device)
    temporal.reset()
    smoothed = torch.stack(
        [temporal.apply(model[i], motion[i], i) for i in range(model.shape[0])]
    ).to(device)
    return {
        "fast": flicker(frames["fast"], motion),
        "reference": flicker(ref, motion),
        "model": flicker(model, motion),
        "model_temporal": flicker(smoothed, motion),
        # beside moving edges, against the reference painter: echo lines raise it
        "ghost_model": ghosting(model, ref, motion),
        "ghost_model_temporal": ghosting(smoothed, ref, motion),
        # the stage must not cost the model its detail
        "lap_model": laplacian_rms(model),
        "lap_model_temporal": laplacian_rms(smoothed),
        "lap_reference": laplacian_rms(ref),
        "lap_fast": laplacian_rms(frames["fast"]),
    }


def clip_flicker(models, size, device, frames: int = 240, clip: Path | None = None) -> dict:
    """Flicker (mean |frame - warped previous|, 0..255, covered pixels), ghosting and sharpness
    with and without the temporal stage on a held-out clip (training/heldout_clip.npz unless
    `clip` names another, e.g. training/poses.SPEECH_CLIP_FILE)."""
    from presets.loader import load_preset

    track = load_heldout_clip() if clip is None else load_heldout_clip(clip)
    n = min(frames, len(track))
    res: dict[str, dict] = {}
    for name in PRESETS:
        p = load_preset(name)
        res[name] = temporal_figures(clip_frames(models, p, size, device, n, track), p, device)
    res["frames"] = n
    return res


def image_grid(pictures: dict, path: Path, poses: int = 2, scale: float = 0.5) -> Path:
    """fast | model | reference for the first `poses` held-out poses of every preset, as a
    JPEG (a photo-like grid: a quarter of the PNG's bytes, and the repository travels to the
    GPU machine within a size limit) or a PNG, by `path`'s suffix."""
    from PIL import Image, ImageDraw

    rows = []
    for preset in PRESETS:
        f, m, r = pictures[preset]
        for i in range(min(poses, f.shape[0])):
            rows.append(torch.cat([f[i], m[i], r[i]], dim=2))
    grid = torch.cat(rows, dim=1).permute(1, 2, 0).cpu().numpy()
    img = Image.fromarray(np.ascontiguousarray(grid))
    if scale != 1.0:
        img = img.resize((round(img.width * scale), round(img.height * scale)), Image.LANCZOS)
    head = Image.new("RGB", (img.width, 22), (24, 24, 28))
    d = ImageDraw.Draw(head)
    for j, label in enumerate(("fast render (input)", "Kagura model", "reference painter")):
        d.text((j * img.width // 3 + 8, 5), label, fill=(235, 235, 235))
    out = Image.new("RGB", (img.width, img.height + head.height))
    out.paste(head, (0, 0))
    out.paste(img, (0, head.height))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".jpg", ".jpeg"):
        out.save(path, quality=92, optimize=True)
    else:
        out.save(path, optimize=True)
    return path


def export(models, folder: Path, train_state: dict | None = None) -> Path:
    """float16 weights in diffusers layout; writes into a fresh temp folder, then swaps.
    `train_state` ({"steps_total", "samples_made"}) goes beside them as train_state.json:
    what a later `kagura train --init FOLDER` continues from."""
    import copy

    from pipeline.diffusion import save_models

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    m = copy.copy(models)
    m.unet = copy.deepcopy(models.unet).to("cpu", torch.float16)
    m.vae = copy.deepcopy(models.vae).to("cpu", torch.float16)
    m.text_encoder = copy.deepcopy(models.text_encoder).to("cpu", torch.float16)
    save_models(m, tmp)
    if train_state is not None:
        write_json(tmp / "train_state.json", train_state)
    keep = [p for p in folder.glob("*") if p.is_file() and not (tmp / p.name).exists()]
    for p in keep:  # the model card, metrics and the like travel with the weights
        shutil.copy2(p, tmp / p.name)
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*.safetensors"))


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
