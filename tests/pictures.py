"""Test pictures shared by the upscaler's CPU and GPU test modules (imported from here, not
from one another)."""

from __future__ import annotations

import numpy as np
import torch


def anime_like(w: int = 64, h: int = 48, seed: int = 0) -> np.ndarray:
    """float32 (3, h, w) in 0..1 on the 8-bit grid: a sky gradient, a flat-shaded disc with a
    dark outline, hard stripes and a little noise - edges and gradients, like cel art."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([0.55 + 0.3 * y / h, 0.7 + 0.2 * x / w, 0.95 - 0.2 * y / h])
    r = np.hypot(x - 0.6 * w, y - 0.5 * h)
    disc = r < 0.3 * h
    img[:, disc] = np.array([0.98, 0.8, 0.7], np.float32)[:, None]
    img[:, (r >= 0.3 * h) & (r < 0.3 * h + 1.5)] = 0.12
    stripes = (x < 0.3 * w) & ((x + y) % 8 < 3)
    img[:, stripes] = np.array([0.9, 0.3, 0.5], np.float32)[:, None]
    img += rng.normal(0, 0.01, img.shape).astype(np.float32)
    return (np.round(np.clip(img, 0, 1) * 255) / 255).astype(np.float32)


def rgba_u8(img: np.ndarray) -> torch.Tensor:
    rgb = torch.from_numpy(np.round(img * 255).astype(np.uint8)).permute(1, 2, 0)
    return torch.cat([rgb, torch.full((*rgb.shape[:2], 1), 255, dtype=torch.uint8)], -1)
