"""A layered avatar as loaded from disk: canvas size, layers back to front, their roles.

`load_avatar(path)` reads a PSD (render/psd_import.py), a folder of PNGs (with an optional
`avatar.toml`), or an `avatar.toml` whose `source` names a PSD, and checks what the rig needs:
the mouth shapes (the missing ones are named), some visible pixels, a sane canvas size (huge
canvases are downscaled, with a notice). Anything wrong is one `AvatarError` line; nothing on
disk is written. Notices (conversions, downscaling, missing optional layers) are kept in
`AvatarDoc.notices` for the caller to print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from render.avatar_manifest import AvatarError, LayerSettings, Manifest, read_manifest
from render.avatar_roles import EYES, MOUTHS, ROLES, role_of

MAX_SIDE = 4096  # canvases larger than this are downscaled on load (memory, load time)
MANIFEST = "avatar.toml"


@dataclass
class Layer:
    name: str
    role: str  # one of avatar_roles.ROLES ("other": drawn where it lies, moves with its part)
    rgba: np.ndarray  # uint8 (h, w, 4), straight (not premultiplied) alpha, cropped
    x: int  # top-left corner on the canvas, pixels
    y: int
    opacity: float = 1.0
    settings: LayerSettings | None = None

    @property
    def bounds(self) -> tuple[int, int, int, int]:
        """(left, top, right, bottom) of the layer's opaque pixels on the canvas."""
        ys, xs = np.nonzero(self.rgba[..., 3])
        return (
            self.x + int(xs.min()),
            self.y + int(ys.min()),
            self.x + int(xs.max()) + 1,
            self.y + int(ys.max()) + 1,
        )


@dataclass
class AvatarDoc:
    path: Path
    width: int  # canvas
    height: int
    layers: list[Layer]
    manifest: Manifest = field(default_factory=Manifest)
    notices: list[str] = field(default_factory=list)

    def by_role(self, role: str) -> list[int]:
        return [i for i, layer in enumerate(self.layers) if layer.role == role]

    def roles(self) -> set[str]:
        return {layer.role for layer in self.layers}


def load_avatar(path: Path | str) -> AvatarDoc:
    """The avatar at `path` (a .psd, a PNG folder, or an avatar.toml), checked."""
    path = Path(path)
    if not path.exists():
        raise AvatarError(f"{path}: no such file or folder (expected a .psd or a folder of PNGs)")
    manifest_path = _manifest_for(path)
    manifest = read_manifest(manifest_path) if manifest_path else Manifest()
    source = path
    if path.is_dir() or path.suffix.lower() == ".toml":
        folder = path if path.is_dir() else path.parent
        if manifest.avatar.source:
            source = folder / manifest.avatar.source
            if not source.is_file():
                raise AvatarError(f"{manifest_path}: avatar.source: no such file {source}")
        else:
            source = folder
    if source.is_dir():
        from render.png_folder import read_png_folder

        width, height, raw, notices = read_png_folder(source, manifest)
    else:
        from render.psd_import import read_psd

        width, height, raw, notices = read_psd(source)
    doc = AvatarDoc(source, width, height, [], manifest, list(notices))
    _assign(doc, raw, manifest_path)
    _check(doc)
    return doc


def _manifest_for(path: Path) -> Path | None:
    if path.is_dir():
        m = path / MANIFEST
        return m if m.is_file() else None
    if path.suffix.lower() == ".toml":
        return path
    for m in (path.with_suffix(".toml"), path.parent / MANIFEST):
        if m.is_file():
            return m
    return None


def _assign(doc: AvatarDoc, raw: list, manifest_path: Path | None) -> None:
    """Roles from names (or the manifest), invisible extras dropped, empty layers noted."""
    m = doc.manifest
    names = {r[0].strip().lower() for r in raw}
    for key in m.layers:
        if key.strip().lower() not in names:
            raise AvatarError(
                f"{manifest_path}: layers.{key}: no layer named {key!r} in {doc.path.name}"
            )
    empty = []
    for name, prefix, rgba, x, y, opacity, visible in raw:
        settings = m.layer(name)
        role = (settings.role if settings and settings.role else None) or role_of(name, prefix)
        if settings is not None and not settings.visible:
            continue
        if role is None:
            if not visible:  # hidden extras stay hidden; hidden role layers are alternates
                continue
            role = "other"
        if not rgba[..., 3].any():
            empty.append(name)
            continue
        doc.layers.append(Layer(name, role, rgba, x, y, opacity, settings))
    if empty:
        doc.notices.append(f"skipped fully transparent layers: {', '.join(empty)}")


def _check(doc: AvatarDoc) -> None:
    where = doc.path
    if not doc.layers:
        raise AvatarError(f"{where}: no layer has any visible pixel (empty or all transparent)")
    roles = doc.roles()
    opens = [r for r in MOUTHS[:-1] if r in roles]
    missing = [r for r in MOUTHS if r not in roles]
    if not opens or "mouth_closed" not in roles:
        found = ", ".join(layer.name for layer in doc.layers[:12])
        raise AvatarError(
            f"{where}: no mouth layers for lip sync: missing {', '.join(missing)} "
            f"(need mouth_closed and at least one of mouth_a/i/u/e/o; layers found: {found})"
        )
    if missing:
        doc.notices.append(
            f"no {', '.join(missing)}: the nearest mouth shape stands in (docs/AVATARS.md)"
        )
    if "eyes_open" in roles and "eyes_closed" not in roles:
        doc.notices.append("no eyes_closed layer: blinks squash eyes_open")
    if not any(e in roles for e in EYES):
        doc.notices.append("no eyes layers: the avatar does not blink")
    if "head" not in roles:
        doc.notices.append("no head layer: the head pivot comes from the eyes and mouth")
    assert set(roles) <= set(ROLES)


def downscale_notice(width: int, height: int) -> tuple[float, str] | None:
    """(factor, notice) for a canvas over MAX_SIDE, else None."""
    side = max(width, height)
    if side <= MAX_SIDE:
        return None
    k = MAX_SIDE / side
    w, h = max(1, round(width * k)), max(1, round(height * k))
    return k, f"canvas {width}x{height} is over {MAX_SIDE} px: downscaled to {w}x{h} on load"


def fit_canvas(width: int, height: int, raw: list, notices: list[str]):
    """(width, height, raw, notices) with a canvas over MAX_SIDE and all its layers scaled
    down to fit, the notice saying so added; unchanged otherwise. `raw`: the importers'
    (name, parent, rgba, x, y, opacity, visible) tuples."""
    down = downscale_notice(width, height)
    if down is None:
        return width, height, raw, notices
    k, text = down
    raw = [(n, p, *scale_layer(a, x, y, k), o, v) for n, p, a, x, y, o, v in raw]
    return max(1, round(width * k)), max(1, round(height * k)), raw, [*notices, text]


def scale_layer(rgba: np.ndarray, x: int, y: int, k: float) -> tuple[np.ndarray, int, int]:
    """A straight-alpha layer scaled by k (premultiplied while resampled, so edges stay clean)."""
    from PIL import Image

    h, w = rgba.shape[:2]
    x0, y0 = x * k, y * k
    nx, ny = int(np.floor(x0)), int(np.floor(y0))
    nw = max(1, int(np.ceil((x + w) * k)) - nx)
    nh = max(1, int(np.ceil((y + h) * k)) - ny)
    im = Image.fromarray(rgba, "RGBA").convert("RGBa")
    im = im.resize((nw, nh), Image.Resampling.LANCZOS)
    return np.asarray(im.convert("RGBA")).copy(), nx, ny
