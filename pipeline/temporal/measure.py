"""Flicker and sharpness of the temporal stage on a rendered clip with a simulated flickery
stylizer. `python -m pipeline.temporal.measure [--frames 60] [--size 640x360] [--blend 0.7]`

The clip: the built-in idol (render/idol.py) singing and moving its head and body, with motion
parameters (frequencies, phases) that were not used to choose the stage's defaults.
The stylizer stand-in: what diffusion does to a video frame by frame, independently per frame —
a global colour gain/offset jitter, smooth low-frequency colour noise (1/16 resolution,
bicubic) and a little pixel noise, all inside the silhouette (alpha is left as rendered).
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F

from pipeline.temporal.stage import TemporalStage, flicker, sharpness


def render_clip(n: int, w: int, h: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n frames of the idol: (uint8 (n, H, W, 4) premultiplied, float32 (n, H, W, 2) motion)."""
    from core.avatar import AvatarParams
    from presets.loader import load_preset
    from render.idol import IdolRenderer

    preset = load_preset("studio")
    r = IdolRenderer(w, h, preset.palette, preset.line)
    images, motions = [], []
    for i in range(n):
        t = i / 30
        ap = AvatarParams(
            pts_ns=int(t * 1e9),
            head_yaw=22 * math.sin(t * 1.9 + 0.4),
            head_pitch=10 * math.sin(t * 2.9 + 1.1),
            head_roll=15 * math.sin(t * 1.5 + 0.7),
            body_yaw=8 * math.sin(t * 1.1 + 0.2),
            body_roll=6 * math.sin(t * 2.3 + 0.9),
            mouth_open=0.5 + 0.5 * math.sin(t * 7.0),
            breath=0.5 + 0.5 * math.sin(t * 3.7),
            gaze_x=0.5 * math.sin(t * 1.3),
            cheek=0.4,
        )
        out = r.render(ap)
        images.append(torch.from_numpy(out.rgba.copy()))
        motions.append(torch.from_numpy(out.motion.copy()))
    return torch.stack(images), torch.stack(motions)


def flickery_stylizer(
    images: torch.Tensor,
    seed: int = 1,
    gain: float = 0.05,
    offset: float = 5.0,
    smooth: float = 8.0,
    pixel: float = 2.0,
) -> torch.Tensor:
    """Independent per-frame jitter on premultiplied uint8 (n, H, W, 4); amplitudes in 0..255
    units (gain relative). Returns uint8 with 0 <= rgb <= alpha."""
    g = torch.Generator().manual_seed(seed)
    n, h, w, _ = images.shape
    out = []
    for i in range(n):
        x = images[i].permute(2, 0, 1).float().div(255.0)[None]  # (1, 4, H, W)
        a = x[:, 3:]
        k = 1.0 + gain * torch.randn(1, 3, 1, 1, generator=g)
        off = offset / 255.0 * torch.randn(1, 3, 1, 1, generator=g)
        low = torch.randn(1, 3, max(2, h // 16), max(2, w // 16), generator=g)
        low = F.interpolate(low, size=(h, w), mode="bicubic", align_corners=False)
        noise = smooth / 255.0 * low + pixel / 255.0 * torch.randn(1, 3, h, w, generator=g)
        rgb = x[:, :3] * k + a * (off + noise)
        rgb = torch.minimum(rgb.clamp(min=0.0), a)
        y = torch.cat((rgb, a), 1).mul(255.0).add(0.5).clamp(0, 255).to(torch.uint8)
        out.append(y[0].permute(1, 2, 0))
    return torch.stack(out).contiguous()


def run_stage(stage: TemporalStage, images: torch.Tensor, motions: torch.Tensor) -> torch.Tensor:
    stage.reset()
    return torch.stack(
        [stage.apply(images[i], motions[i], i).cpu() for i in range(images.shape[0])]
    )


def measure(n: int = 60, w: int = 640, h: int = 360, blend: float = 0.7) -> dict[str, float]:
    clean, motions = render_clip(n, w, h)
    styl = flickery_stylizer(clean)
    stage = TemporalStage(blend=blend)
    out = run_stage(stage, styl, motions)
    clean_through = run_stage(stage, clean, motions)  # blur of the warp alone, without noise
    res = {
        "flicker_clean": flicker(clean, motions),
        "flicker_without": flicker(styl, motions),
        "flicker_with": flicker(out, motions),
        "sharpness_clean": sharpness(clean),
        "sharpness_without": sharpness(styl),
        "sharpness_with": sharpness(out),
        "sharpness_clean_through_stage": sharpness(clean_through),
    }
    res["flicker_reduction"] = 1.0 - res["flicker_with"] / res["flicker_without"]
    res["sharpness_change"] = res["sharpness_with"] / res["sharpness_without"] - 1.0
    res["sharpness_change_vs_clean"] = res["sharpness_with"] / res["sharpness_clean"] - 1.0
    res["warp_blur"] = res["sharpness_clean_through_stage"] / res["sharpness_clean"] - 1.0
    return res


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    n, w, h, blend = 60, 640, 360, 0.7
    if "--frames" in argv:
        n = int(argv[argv.index("--frames") + 1])
    if "--size" in argv:
        w, h = (int(v) for v in argv[argv.index("--size") + 1].split("x"))
    if "--blend" in argv:
        blend = float(argv[argv.index("--blend") + 1])
    res = measure(n, w, h, blend)
    print(f"{n} frames {w}x{h}, blend {blend}")
    for k, v in res.items():
        print(f"  {k:28s} {v:8.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
