"""Avatar sources: what the render stages draw — the built-in idol or a layered avatar.

Every source's renderer gives what the pipeline needs (render/stage.py, render/pool.py,
render/process.py use nothing else):

    render(params) -> frame          .rgba uint8 (H, W, 4) premultiplied, .motion float32
                                     (H, W, 2) pixels since the previous frame
    render_base(params) -> frame     the same frame, keeping what the late mouth needs
    redraw_mouth(rgba, params) -> box   the newest mouth over render_base's frame; only the
                                     box (x0, y0, x1, y1) changes; bit-identical to render()
    reset()                          springs and motion history start afresh
    rig.matrices(params) -> (n,3,3)  one matrix per part, stepping the springs (the render
                                     pool steps one rig in its main process, in order)
    view (3, 3), prev                design/canvas units -> pixels; the previous frame's
                                     pixel matrices (the pool sets it in its workers)

`AvatarSpec` names a source in a form that pickles (a path, or None for the idol), so a
render worker process rebuilds the same renderer from it: the same file gives the same
layers, bit for bit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class AvatarRenderer(Protocol):
    w: int
    h: int
    rig: Any
    view: np.ndarray
    prev: np.ndarray | None

    def render(self, params) -> Any: ...
    def render_base(self, params) -> Any: ...
    def redraw_mouth(self, rgba: np.ndarray, params) -> tuple[int, int, int, int]: ...
    def reset(self) -> None: ...


@dataclass(frozen=True)
class AvatarSpec:
    """An avatar source by name: `path` None is the built-in idol."""

    path: str | None = None

    @property
    def builtin(self) -> bool:
        return self.path is None

    def label(self) -> str:
        return "built-in idol" if self.path is None else Path(self.path).name

    def make_renderer(self, width: int, height: int, palette, line) -> AvatarRenderer:
        """A fresh renderer of this avatar at this size (palette and line style: the idol's)."""
        if self.path is None:
            from render.idol import IdolRenderer

            return IdolRenderer(width, height, palette, line)
        from render.layered import LayeredRenderer

        return LayeredRenderer(self.doc(), width, height)

    def make_rig(self):
        """A fresh rig of this avatar (what its renderer's `rig` is)."""
        if self.path is None:
            from render.rig import Rig

            return Rig()
        from render.layered_rig import LayeredRig

        return LayeredRig(self.doc())

    def doc(self):
        """The loaded layered avatar (read once per process and file version)."""
        p = Path(self.path)
        return _load(str(p.resolve()), _stamp(p))


BUILTIN = AvatarSpec()
_default = BUILTIN  # what a stage built without `avatar=` draws (`kagura live --avatar`)


def set_default_avatar(spec: AvatarSpec) -> None:
    """The avatar that stages built without an `avatar` argument draw: how `kagura live
    --avatar` reaches the live sessions the app builds."""
    global _default
    _default = spec


def _stamp(path: Path) -> int:
    """The newest modification time of what the avatar is read from: a PNG saved over in a
    folder changes the file's time, not the folder's; a manifest beside a PSD counts too."""
    candidates = [path, path.with_suffix(".toml"), path.parent / "avatar.toml"]
    if path.is_dir() or path.suffix.lower() == ".toml":
        folder = path if path.is_dir() else path.parent
        with contextlib.suppress(OSError):
            candidates = [path, *folder.iterdir()]
    stamp = 0
    for c in candidates:
        with contextlib.suppress(OSError):
            stamp = max(stamp, os.stat(c).st_mtime_ns)
    return stamp


@functools.lru_cache(maxsize=4)
def _load(path: str, _stamp: int):
    from render.avatar_doc import load_avatar

    return load_avatar(path)


def avatar_spec(path: Path | str | None, notices: bool = True) -> AvatarSpec:
    """The spec for `--avatar PATH` (None: the built-in idol), loaded and checked now, so a bad
    file fails before any work starts (AvatarError: one line). Notices go to stderr."""
    if path is None:
        return BUILTIN
    spec = AvatarSpec(str(Path(path).resolve()))
    doc = spec.doc()
    if notices:
        for text in doc.notices:
            print(f"kagura: avatar {Path(path).name}: {text}", file=sys.stderr)
    return spec


def as_spec(avatar) -> AvatarSpec:
    """None (the default avatar: the built-in idol unless set), a path or a spec -> a spec."""
    if avatar is None:
        return _default
    if isinstance(avatar, AvatarSpec):
        return avatar
    return AvatarSpec(str(Path(avatar).resolve()))
