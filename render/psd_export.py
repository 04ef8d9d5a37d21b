"""The built-in idol as a layered PSD in the avatar convention (docs/AVATARS.md).

Each layer is the idol's own parts drawn alone at the neutral pose (render/idol.py's drawing,
its rig's neutral matrices) on a canvas that is exactly the idol's bust-shot framing box, so
importing the file and drawing it at the neutral pose gives the idol back up to resampling
(tests/test_avatar_roundtrip.py). The alternates (open mouths, half and closed eyes) are saved
hidden, as PNGTuber files keep them; the importer shows them by role.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import skia

from core.avatar import VOWELS, AvatarParams
from render.idol import BOX_H, BOX_W, IdolRenderer
from render.rig import INDEX

SCALE = 2.0  # canvas pixels per design unit: 1080x1160
MOUTH_OPEN = 0.75  # how wide the exported vowel mouths are

# layer name -> idol parts drawn into it, back to front
_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("hair_back", ("tail_l", "tail_r", "back_hair")),
    ("body", ("body", "collar", "bow")),
    ("head", ("face",)),
    ("cheeks", ("cheek_l", "cheek_r")),
    ("eyes_open", ("eye_l", "eye_r")),
    ("eyes_half", ("eye_l", "eye_r")),
    ("eyes_closed", ("eye_l", "eye_r")),
    ("nose", ("nose",)),
    *[(f"mouth_{v.lower()}", ("mouth",)) for v in "AIUEO"],
    ("mouth_closed", ("mouth",)),
    ("hair_side", ("side_l", "side_r")),
    ("hair_front", ("bangs",)),
    ("ahoge", ("ahoge",)),
    ("brows", ("brow_l", "brow_r")),
]
HIDDEN = {"eyes_half", "eyes_closed", *(f"mouth_{v.lower()}" for v in "aiueo")}


def _params(layer: str) -> AvatarParams:
    if layer == "eyes_half":
        return AvatarParams(eye_open_l=0.5, eye_open_r=0.5)
    if layer == "eyes_closed":
        return AvatarParams(eye_open_l=0.0, eye_open_r=0.0)
    if layer.startswith("mouth_") and layer != "mouth_closed":
        v = np.zeros(len(VOWELS), np.float32)
        v[VOWELS.index(layer[-1].upper())] = 1.0
        return AvatarParams(mouth_open=MOUTH_OPEN, vowels=v)
    return AvatarParams()


def builtin_layers(
    palette, line, height: int | None = None
) -> tuple[int, int, list[tuple[str, np.ndarray]]]:
    """(canvas width, height, [(layer name, straight-alpha RGBA uint8, canvas-sized)]);
    `height`: the canvas height in pixels (default BOX_H x SCALE)."""
    scale = SCALE if height is None else height / BOX_H
    w, h = round(BOX_W * scale), round(BOX_H * scale)
    r = IdolRenderer(w, h, palette, line)
    neutral = AvatarParams().clamped()
    mats = r.view[None] @ r.rig.matrices(neutral)
    skm = [
        skia.Matrix.MakeAll(m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], 0, 0, 1)
        for m in mats
    ]
    out = []
    for name, parts in _GROUPS:
        p = _params(name).clamped()
        look, vowels, mouth_open = r._face_look(p)
        rgba = np.zeros((h, w, 4), np.uint8)
        surface = skia.Surface(
            rgba, colorType=skia.kRGBA_8888_ColorType, alphaType=skia.kPremul_AlphaType
        )
        c = surface.getCanvas()
        for part in parts:
            r._draw_at(c, skm, INDEX[part], p, look, vowels, mouth_open)
        del surface
        ys, xs = np.nonzero(rgba[..., 3])
        if len(ys):
            y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
            rgba[y0:y1, x0:x1] = _unpremultiply(rgba[y0:y1, x0:x1])
        out.append((name, rgba))
    return w, h, out


def _unpremultiply(rgba: np.ndarray) -> np.ndarray:
    a = rgba[..., 3:4].astype(np.float32)
    rgb = np.where(a > 0, rgba[..., :3] * 255.0 / np.maximum(a, 1.0), 0.0)
    out = np.empty_like(rgba)
    out[..., :3] = np.clip(rgb + 0.5, 0, 255).astype(np.uint8)
    out[..., 3] = rgba[..., 3]
    return out


def export_builtin(path: Path, palette, line, height: int | None = None) -> int:
    """Writes the PSD (to a temporary name first: a failed export leaves nothing). Returns the
    number of layers."""
    from PIL import Image
    from psd_tools import PSDImage

    w, h, layers = builtin_layers(palette, line, height)
    psd = PSDImage.new("RGBA", (w, h))
    for name, rgba in layers:
        im = Image.fromarray(rgba, "RGBA")
        box = im.getchannel("A").getbbox()
        if box is None:
            continue
        layer = psd.create_pixel_layer(im.crop(box), name=name, top=box[1], left=box[0])
        layer.visible = name not in HIDDEN
    tmp = path.with_name(f".{path.name}.part")
    try:
        psd.save(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(layers)
