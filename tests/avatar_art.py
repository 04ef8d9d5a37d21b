"""A small layered avatar "drawn by someone else", written by the tests as a PSD or PNG folder.

Flat colours that the built-in idol never uses, so a test can tell what it is looking at:
MOUTH_RGB is the inside of every open mouth, HAIR_RGB the front hair, SKIN_RGB the face.
Layers are cropped to their pixels, as drawing programs store them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 512
MOUTH_RGB = (40, 200, 60)
HAIR_RGB = (230, 120, 20)
BACK_RGB = (150, 70, 10)
SKIN_RGB = (120, 160, 230)
BODY_RGB = (90, 90, 200)
EYE_RGB = (250, 250, 250)
LINE_RGB = (10, 10, 10)

# mouth shape -> (half width, half height) of its ellipse
MOUTH_SHAPES = {
    "mouth_a": (26, 22),
    "mouth_i": (32, 9),
    "mouth_u": (12, 13),
    "mouth_e": (28, 14),
    "mouth_o": (17, 20),
}
MOUTH_AT = (256, 300)


def _layer(draw_fn, size: int = SIZE) -> Image.Image:
    im = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw_fn(ImageDraw.Draw(im))
    return im


def layers(size: int = SIZE, mouths: tuple[str, ...] = (*MOUTH_SHAPES, "mouth_closed")):
    """[(name, full-canvas RGBA image)] back to front."""
    k = size / SIZE

    def e(d, cx, cy, rx, ry, fill):
        d.ellipse([(cx - rx) * k, (cy - ry) * k, (cx + rx) * k, (cy + ry) * k], fill=fill)

    out = [
        ("hair_back", _layer(lambda d: e(d, 256, 230, 150, 190, (*BACK_RGB, 255)), size)),
        (
            "body",
            _layer(
                lambda d: d.polygon(
                    [(150 * k, 400 * k), (362 * k, 400 * k), (440 * k, 512 * k), (72 * k, 512 * k)],
                    fill=(*BODY_RGB, 255),
                ),
                size,
            ),
        ),
        ("head", _layer(lambda d: e(d, 256, 250, 120, 140, (*SKIN_RGB, 255)), size)),
    ]

    def eyes_open(d):
        for x in (206, 306):
            e(d, x, 235, 22, 26, (*EYE_RGB, 255))
            e(d, x, 238, 9, 12, (*LINE_RGB, 255))

    def eyes_closed(d):
        for x in (206, 306):
            d.rectangle([(x - 22) * k, 236 * k, (x + 22) * k, 242 * k], fill=(*LINE_RGB, 255))

    out += [("Eyes Open", _layer(eyes_open, size)), ("eyes_closed", _layer(eyes_closed, size))]
    for name in mouths:
        if name == "mouth_closed":

            def closed(d):
                x, y = MOUTH_AT
                d.rectangle([(x - 20) * k, (y - 2) * k, (x + 20) * k, (y + 2) * k], fill=LINE_RGB)

            out.append(("mouth_closed", _layer(closed, size)))
        else:
            rx, ry = MOUTH_SHAPES[name]
            out.append(
                (name, _layer(lambda d, rx=rx, ry=ry: e(d, *MOUTH_AT, rx, ry, MOUTH_RGB), size))
            )

    def brows(d):
        for x in (206, 306):
            d.rectangle([(x - 24) * k, 196 * k, (x + 24) * k, 202 * k], fill=(*LINE_RGB, 255))

    def bangs(d):
        d.polygon(
            [(130 * k, 220 * k), (256 * k, 90 * k), (382 * k, 220 * k), (256 * k, 160 * k)],
            fill=(*HAIR_RGB, 255),
        )

    def lock(d):  # a lock of hair in front of the mouth's right corner (the late mouth's case)
        d.rectangle([276 * k, 250 * k, 292 * k, 340 * k], fill=(*HAIR_RGB, 255))

    out += [
        ("brows", _layer(brows, size)),
        ("hair_front", _layer(bangs, size)),
        ("Hair Lock", _layer(lock, size)),
    ]
    return out


def _crop(im: Image.Image) -> tuple[Image.Image, int, int]:
    box = im.getchannel("A").getbbox()
    return im.crop(box), box[0], box[1]


def write_psd(
    path: Path,
    size: int = SIZE,
    mouths=None,
    names=None,
    mode="RGB",
    depth=8,
    mouth_group: bool = False,
    canvas: int | None = None,
) -> Path:
    """The avatar as a layered PSD (psd-tools writes it). `names`: old name -> new name;
    `mouth_group`: the mouths in a group "Mouth" by short names (a, i, …, closed), hidden
    but for the closed one; `canvas`: a larger canvas the avatar sits in the corner of."""
    from psd_tools import PSDImage

    side = canvas or size
    psd = PSDImage.new("RGBA" if mode == "RGB" else mode, (side, side), depth=depth)
    group = None
    for name, im in layers(size, mouths) if mouths else layers(size):
        crop, x, y = _crop(im)
        name = (names or {}).get(name, name)
        if mouth_group and name.startswith("mouth_"):
            if group is None:
                group = psd.create_group(name="Mouth")
            layer = group.create_pixel_layer(crop, name=name[6:], top=y, left=x)
            layer.visible = name == "mouth_closed"
            continue
        if mode == "RGB" and depth == 8:
            psd.create_pixel_layer(crop, name=name, top=y, left=x)
        else:
            arr = np.asarray(crop, np.float32) / 255.0
            if mode == "CMYK":
                rgb, a = arr[..., :3], arr[..., 3:]
                kk = 1.0 - rgb.max(axis=2, keepdims=True)
                cmy = (1.0 - rgb - kk) / np.maximum(1.0 - kk, 1e-6)
                # Photoshop stores CMYK as 1 - ink (white = 1), which psd-tools reads back
                arr = np.concatenate([1.0 - cmy, 1.0 - kk, a], axis=2).astype(np.float32)
            psd.create_pixel_layer_from_array(arr, name=name, top=y, left=x)
    psd.save(path)
    return path


def write_png_folder(folder: Path, size: int = SIZE, manifest: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, im in layers(size):
        im.save(folder / f"{name}.png")
    if manifest is not None:
        (folder / "avatar.toml").write_text(manifest, "utf-8")
    return folder
