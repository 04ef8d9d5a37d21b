"""Reading a layered PSD (or PSB) through psd-tools into plain RGBA layers.

Layers come back to front (psd-tools iterates a group bottom-up). A group named like a role
("hair_front", "body", …) becomes one layer (its composite); a group named "mouth"/"eyes"
(or 口/目) lends its children the prefix (a "mouth" group of "a", "i", …); other groups are
walked into. Hidden layers are kept (PNGTuber files hide the alternate mouths and eyes; the
role decides when they show). CMYK, grayscale and 16/32-bit documents are converted to 8-bit
RGB with a notice; canvases over MAX_SIDE are downscaled with a notice. Blend modes other than
normal, clipping masks and adjustment layers are drawn as normal layers (docs/AVATARS.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from render.avatar_doc import fit_canvas
from render.avatar_manifest import AvatarError
from render.avatar_roles import group_prefix, role_of

Raw = tuple[str, str | None, np.ndarray, int, int, float, bool]


def read_psd(path: Path) -> tuple[int, int, list[Raw], list[str]]:
    """(canvas width, height, raw layers back to front, notices)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as err:
        raise AvatarError(f"{path}: cannot read ({err.strerror})") from err
    if magic != b"8BPS":
        raise AvatarError(
            f"{path}: not a PSD file (expected a Photoshop .psd/.psb or a folder of PNGs)"
        )
    from psd_tools import PSDImage

    try:
        psd = PSDImage.open(path)
    except Exception as err:  # psd-tools raises many kinds on a damaged file
        raise AvatarError(f"{path}: cannot read this PSD ({type(err).__name__}: {err})") from err
    notices = []
    mode = getattr(psd.color_mode, "name", str(psd.color_mode))
    if mode != "RGB":
        notices.append(f"{mode} document converted to RGB (no colour profile applied)")
    if psd.depth != 8:
        notices.append(f"{psd.depth}-bit document converted to 8 bits per channel")
    raw: list[Raw] = []
    try:
        _walk(psd, None, True, raw)
    except AvatarError:
        raise
    except Exception as err:
        raise AvatarError(f"{path}: cannot read a layer ({type(err).__name__}: {err})") from err
    return fit_canvas(psd.width, psd.height, raw, notices)


def _walk(group, prefix: str | None, visible: bool, out: list[Raw]) -> None:
    for layer in group:
        shown = visible and layer.visible
        if layer.is_group():
            inner = group_prefix(layer.name)
            if inner is None and role_of(layer.name, prefix) is not None:
                image = layer.composite(force=True)  # one role drawn as a group
                _add(out, layer, prefix, image, shown, alpha=None)
            else:
                _walk(layer, inner or prefix, shown, out)
            continue
        if layer.kind == "pixel":
            image = layer.topil()
            arr = layer.numpy() if image is not None else None
            alpha = arr[..., -1] if arr is not None and arr.shape[-1] in (2, 4, 5) else None
        else:  # type, shape, smart object, fill: their rendered pixels
            image, alpha = layer.composite(force=True), None
        _add(out, layer, prefix, image, shown, alpha)


def _add(out: list[Raw], layer, prefix, image, shown: bool, alpha) -> None:
    if image is None or layer.width <= 0 or layer.height <= 0:
        return
    if image.mode == "RGBA" and alpha is None:
        rgba = np.asarray(image).copy()
    else:
        rgba = np.empty((image.height, image.width, 4), np.uint8)
        rgba[..., :3] = np.asarray(image.convert("RGB"))
        if alpha is not None:
            rgba[..., 3] = np.clip(np.asarray(alpha, np.float32) * 255.0 + 0.5, 0, 255)
        elif "A" in image.getbands():
            rgba[..., 3] = np.asarray(image.getchannel("A"))
        else:
            rgba[..., 3] = 255
    left, top = layer.bbox[0], layer.bbox[1]
    out.append((layer.name, prefix, rgba, int(left), int(top), layer.opacity / 255.0, shown))
