"""Reading a folder of PNGs (one per layer, usually all canvas-sized) as a layered avatar.

Each PNG is a layer named by its file stem; the manifest's `[layers.NAME]` may name another
file and place a smaller PNG on the canvas (`x`, `y`). Order, back to front: the manifest's
`avatar.order` when given, else by role (background, hair_back, body, head, eyes, mouths,
brows, hair_front, …; docs/AVATARS.md) and then by name. The canvas is the union of the layers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from render.avatar_doc import MANIFEST, fit_canvas
from render.avatar_manifest import AvatarError, Manifest
from render.avatar_roles import ROLES, role_of
from render.psd_import import Raw


def read_png_folder(folder: Path, manifest: Manifest) -> tuple[int, int, list[Raw], list[str]]:
    files: dict[str, Path] = {p.stem: p for p in sorted(folder.iterdir()) if _is_png(p)}
    for key, s in manifest.layers.items():
        if s.file:
            f = folder / s.file
            if not f.is_file():
                raise AvatarError(f"{folder / MANIFEST}: layers.{key}.file: no such file {f}")
            files.pop(f.stem, None)
            files[key] = f
    if not files:
        raise AvatarError(f"{folder}: no .png layers in this folder (expected a PSD or PNGs)")
    names = list(files)
    order = manifest.avatar.order
    if order:
        low = {n.lower(): n for n in names}
        unknown = [o for o in order if o.lower() not in low]
        if unknown:
            raise AvatarError(
                f"{folder / MANIFEST}: avatar.order: no layer named {unknown[0]!r} in {folder}"
            )
        listed = [low[o.lower()] for o in order]
        names = listed + [n for n in names if n not in listed]
    else:
        names.sort(key=lambda n: (_rank(n, manifest), n.lower()))
    raw: list[Raw] = []
    for name in names:
        s = manifest.layer(name)
        rgba = _read_png(files[name])
        raw.append((name, None, rgba, s.x if s else 0, s.y if s else 0, 1.0, True))
    width = max(x + a.shape[1] for _, _, a, x, _, _, _ in raw)
    height = max(y + a.shape[0] for _, _, a, _, y, _, _ in raw)
    return fit_canvas(width, height, raw, [])


def _is_png(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() == ".png"


def _rank(name: str, manifest: Manifest) -> int:
    s = manifest.layer(name)
    role = (s.role if s and s.role else None) or role_of(name) or "other"
    return ROLES.index(role)


def _read_png(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            if im.format != "PNG":
                raise AvatarError(f"{path}: not a PNG file ({im.format})")
            return np.asarray(im.convert("RGBA")).copy()
    except (UnidentifiedImageError, OSError) as err:
        raise AvatarError(f"{path}: not a readable PNG file") from err
