"""`avatar.toml`: what the automatic rig of a layered avatar may be told (pydantic-checked).

    [avatar]
    source = "mika.psd"          # only in a manifest given as --avatar: the PSD it is about
    order = ["body", "head"]     # PNG folder: layer names back to front (default: by role)
    pivot = [512, 700]           # neck pivot (head roll, turns), canvas pixels
    hip = [512, 2400]            # body sway pivot, canvas pixels
    scale = 1.0                  # zoom on top of fitting the canvas into the frame
    offset = [0, 0]              # shift of the fitted canvas, canvas pixels
    turn = 1.0                   # head-turn parallax strength
    bounce = 1.0                 # beat bounce strength
    mouth_stretch = true         # mouths also open in height with the voice's loudness

    [layers.hair_front]          # by layer name (PSD) or file stem (PNG folder)
    role = "hair_front"          # which layer is which (docs/AVATARS.md)
    depth = 0.45                 # parallax depth, head radii towards the viewer
    spring = 3.0                 # hair spring frequency, Hz (stiffness)
    damping = 0.3                # hair spring damping ratio
    file = "front.png"           # PNG folder: the file (default NAME.png)
    x = 0                        # PNG folder: where the PNG's top-left lies on the canvas
    y = 0
    visible = true               # false: not drawn

Unknown keys and wrong types end in one line naming the file, the key and what was expected.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import UsageError
from render.avatar_roles import ROLES

Role = Literal[ROLES]  # type: ignore[valid-type]
Pair = Annotated[list[float], Field(min_length=2, max_length=2)]


class AvatarError(UsageError):
    """A bad avatar file, folder or manifest (one line, exit 2)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LayerSettings(_Strict):
    role: Role | None = None
    depth: float | None = None
    spring: float | None = Field(None, gt=0, le=20)
    damping: float | None = Field(None, ge=0, le=2)
    file: str | None = None
    x: int = 0
    y: int = 0
    visible: bool = True


class AvatarSettings(_Strict):
    source: str | None = None
    order: list[str] | None = None
    pivot: Pair | None = None
    hip: Pair | None = None
    scale: float = Field(1.0, gt=0, le=10)
    offset: Pair = [0.0, 0.0]
    turn: float = Field(1.0, ge=0, le=5)
    bounce: float = Field(1.0, ge=0, le=5)
    mouth_stretch: bool = True


class Manifest(_Strict):
    avatar: AvatarSettings = AvatarSettings()
    layers: dict[str, LayerSettings] = {}

    def layer(self, name: str) -> LayerSettings | None:
        """Settings of a layer by name, case-insensitively."""
        low = name.strip().lower()
        for key, value in self.layers.items():
            if key.strip().lower() == low:
                return value
        return None


def read_manifest(path: Path) -> Manifest:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise AvatarError(f"{path}: cannot read the manifest ({err})") from err
    except tomllib.TOMLDecodeError as err:
        raise AvatarError(f"{path}: TOML syntax error: {err}") from err
    try:
        return Manifest.model_validate(data)
    except ValidationError as err:
        raise AvatarError(_explain(path, err)) from err


def _explain(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-")) or "?"
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{path}: {key}: unknown key"
    if kind == "literal_error":
        expected = "one of " + ", ".join(ROLES)
    elif kind in ("float_type", "float_parsing"):
        expected = "a number"
    elif kind in ("int_type", "int_parsing"):
        expected = "a whole number"
    elif kind == "bool_type":
        expected = "true or false"
    elif kind in ("string_type",):
        expected = "a string"
    elif kind in ("tuple_type", "too_short", "too_long"):
        expected = "a pair of numbers [x, y]"
    elif kind in ("model_type", "dict_type"):
        expected = "a table"
    else:
        expected = first["msg"][:1].lower() + first["msg"][1:]
    got = first.get("input")
    shown = "" if isinstance(got, dict) else f", got {got!r}"
    return f"{path}: {key}: expected {expected}{shown}"
