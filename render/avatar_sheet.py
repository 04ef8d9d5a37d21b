"""The preview sheet of a layered avatar: one labelled cell per pose an artist wants to see.

Cells: every mouth shape (closed, A, I, U, E, O), the blink (open, half, closed), head turns
left and right, a head tilt, the expressions F1-F4 and the live app's wink, each drawn by
`LayeredRenderer` on a checkerboard (so transparency shows) and cropped to the avatar.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from core.avatar import VOWELS, AvatarParams
from render.layered import LayeredRenderer


def _vowel(v: str) -> np.ndarray:
    w = np.zeros(len(VOWELS), np.float32)
    w[VOWELS.index(v)] = 1.0
    return w


def sheet_poses() -> list[tuple[str, AvatarParams]]:
    poses = [("mouth closed", AvatarParams())]
    poses += [(f"mouth {v}", AvatarParams(mouth_open=0.8, vowels=_vowel(v))) for v in "AIUEO"]
    poses += [
        ("eyes half", AvatarParams(eye_open_l=0.45, eye_open_r=0.45)),
        ("eyes closed", AvatarParams(eye_open_l=0.0, eye_open_r=0.0)),
        ("turn left", AvatarParams(head_yaw=-25.0, body_yaw=-6.0)),
        ("turn right", AvatarParams(head_yaw=25.0, body_yaw=6.0)),
        ("tilt", AvatarParams(head_roll=12.0)),
        ("nod (beat)", AvatarParams(head_pitch=-6.0)),
    ]
    for k, name in enumerate(("happy", "sad", "surprised", "angry")):
        poses.append((f"F{k + 1} {name}", AvatarParams(expressions={name: 1.0})))
    # the live app's F4 (pipeline/live.py closes the right eye and names the wink)
    poses.append(("F4 live: wink", AvatarParams(eye_open_r=0.0, expressions={"wink": 1.0})))
    return poses


def _checker(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    light = ((yy // 16 + xx // 16) % 2 == 0)[..., None]
    return np.where(light, 235, 200).astype(np.float32) * np.ones(3, np.float32)


def preview_sheet(doc, size: tuple[int, int], cell: int = 256) -> Image.Image:
    w, h = size
    r = LayeredRenderer(doc, w, h)
    frames = []
    for label, p in sheet_poses():
        r.reset()  # each pose alone: springs at rest, no motion history
        frames.append((label, r.render(p).rgba))
    alpha = np.max([f[..., 3] for _, f in frames], axis=0)
    ys, xs = np.nonzero(alpha)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    cols = 6
    rows = -(-len(frames) // cols)
    label_h = 18
    sheet = Image.new("RGB", (cols * cell, rows * (cell + label_h)), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for k, (label, rgba) in enumerate(frames):
        crop = rgba[y0:y1, x0:x1].astype(np.float32)
        bg = _checker(*crop.shape[:2])
        rgb = crop[..., :3] + bg * (1.0 - crop[..., 3:4] / 255.0)  # premultiplied over
        im = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
        im.thumbnail((cell, cell), Image.Resampling.LANCZOS)
        cx, cy = (k % cols) * cell, (k // cols) * (cell + label_h)
        sheet.paste(im, (cx + (cell - im.width) // 2, cy + label_h + (cell - im.height) // 2))
        draw.text((cx + 4, cy + 3), label, fill=(0, 0, 0))
    return sheet
