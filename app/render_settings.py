"""`kagura render` / `kagura demo`'s settings file: the middle layer of app/config.py.

    defaults  ←  render.toml (or --config FILE)  ←  the command-line flags

The file is `core.paths.render_settings_file()` (render.toml in the user's config folder;
KAGURA_CONFIG_DIR moves it), or the one `--config FILE` names. It is TOML, read with tomllib,
and only read: render never writes it. Its keys are RenderConfig / GpuConfig field names, which
are the flags' names with `_` for `-` (the same words as a `kagura farm` job), at the top level:

    preset = "ink-wash"        # a preset name, or a .toml path
    size = "1920x1080"         # WIDTHxHEIGHT
    fps = 24
    seed = 7
    transparent = false
    quiet = false
    avatar = "mika.psd"        # a layered avatar (relative paths: from the file's folder)
    encoders = "auto"          # or 1..64
    render_workers = "auto"    # or 1..64
    x264_preset = "veryfast"
    lipsync_model = "japanese" # or "default"
    device = "cuda"            # cpu | cuda
    diffusion = "kagura"       # a checkpoint folder, "kagura", or false (= --no-diffusion)
    diffusion_random = "tiny"  # sd-turbo | tiny (random weights: timing only)
    diffusion_size = "640x360"
    upscale = 3                # 1..4
    temporal = true
    cuda_graphs = true

What one render is of — audio, output, start_s, seconds — and overwrite (a settings file must
not switch off the guard on existing outputs) are flags only: in the file they are ignored with
a notice, as is an unknown key. A bad value keeps its default with a one-line notice naming the
file and the key (app.config.layer). A file that cannot be read or is not TOML, or a --config
that names no file, is a one-line UsageError naming it (exit 2): the render does not start on
settings it could not read.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import expect_fps, expect_seed, expect_x264_preset, parse_size, parse_workers
from core.errors import UsageError

# the keys a render settings file may have (RenderConfig and GpuConfig field names)
RENDER_KEYS = (
    "preset",
    "size",
    "fps",
    "seed",
    "transparent",
    "quiet",
    "avatar",
    "encoders",
    "render_workers",
    "x264_preset",
    "lipsync_model",
)
GPU_KEYS = (
    "device",
    "diffusion",
    "diffusion_random",
    "diffusion_size",
    "upscale",
    "temporal",
    "cuda_graphs",
)
FLAGS_ONLY = ("audio", "output", "start_s", "seconds", "overwrite")


@dataclass(frozen=True)
class RenderSettings:
    """A render settings file as read: its path (None: there is none) and its keys' values as
    written; the notices about keys it may not have. `parse` / `checks`: app.config.layer()'s
    per-key rules for it (relative paths are taken from the file's folder)."""

    path: Path | None
    values: dict[str, Any] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"settings: {self.path}"

    @property
    def parse(self) -> dict[str, Callable[[Any], Any]]:
        folder = self.path.parent if self.path is not None else Path.cwd()
        return {
            "preset": lambda v: _preset(v, folder),
            "size": _size,
            "diffusion_size": _size,
            "avatar": lambda v: _existing(v, folder),
            "diffusion": lambda v: _diffusion(v, folder),
            "encoders": _workers,
            "render_workers": _workers,
        }

    @property
    def checks(self) -> dict[str, Callable[[Any], None]]:
        return {"fps": expect_fps, "seed": expect_seed, "x264_preset": expect_x264_preset}


def load(config: Path | None) -> RenderSettings:
    """The settings `kagura render` / `demo` layer under their flags: `--config FILE` (it must
    exist), else render.toml in the config folder when there is one, else none."""
    from core.paths import render_settings_file

    path = config if config is not None else render_settings_file()
    if config is None and not path.exists() and not path.is_symlink():
        return RenderSettings(None)
    option = "--config " if config is not None else ""
    if path.exists() and not path.is_dir() and not path.is_file():  # a FIFO would block
        raise UsageError(f"{option}{path}: not a regular file, expected a TOML settings file")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{option}{path}: no such settings file") from None
    except IsADirectoryError:
        raise UsageError(f"{option}{path}: is a folder, expected a TOML settings file") from None
    except OSError as exc:
        raise UsageError(f"{option}{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a TOML settings file (not UTF-8 text)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {' '.join(str(exc).split())}") from None
    settings = RenderSettings(path.absolute())
    for key, value in data.items():
        if key in RENDER_KEYS or key in GPU_KEYS:
            settings.values[key] = value
        elif key in FLAGS_ONLY:
            settings.notices.append(
                f"{settings.name}: {key}: given on the command line only, not in a settings "
                "file (ignored)"
            )
        else:
            settings.notices.append(f"{settings.name}: unknown key {key!r} (ignored)")
    return settings


def layered(args: Any, make: Callable[..., Any]) -> tuple[Any, RenderSettings]:
    """(make(args, settings=..., notices=...), settings) over the settings file `args.config`
    names (else render.toml in the config folder, if any): what `render`, `demo`, `still` and
    `bench offline` build their config with. Each notice about the file is one line on stderr,
    also when `make` refuses the request."""
    import sys

    settings = load(args.config)
    notices = list(settings.notices)
    try:
        return make(args, settings=settings, notices=notices), settings
    finally:
        for line in notices:
            print(f"kagura: {line}", file=sys.stderr)


# --- per-key rules: a ValueError refuses the value (its default is used, with a notice)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a string")
    return value


def _size(value: Any) -> tuple[int, int]:
    try:
        return parse_size(_text(value))
    except UsageError:
        raise ValueError("expected WIDTHxHEIGHT, even sides from 64 to 7680") from None


def _path(value: Any, folder: Path) -> Path:
    path = Path(_text(value)).expanduser()
    return path if path.is_absolute() else folder / path


def _existing(value: Any, folder: Path) -> Path:
    path = _path(value, folder)
    if not path.exists():
        raise ValueError(f"no such file or folder {str(path)!r}")
    return path


def _preset(value: Any, folder: Path) -> str:
    from presets.loader import available_names, names_a_file

    name = _text(value)
    if names_a_file(name):
        return str(_existing(name, folder))
    if name not in available_names():
        raise ValueError("no such preset")
    return name


def _diffusion(value: Any, folder: Path) -> Path | str:
    from app.config import _kagura

    if value == _kagura():
        return value
    if not isinstance(value, str) or not (path := _path(value, folder)).is_dir():
        raise ValueError("expected false, 'kagura' or a diffusers checkpoint folder")
    return path


def _workers(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("expected 'auto' or a whole number")
    try:
        return parse_workers(str(value), "")
    except UsageError:
        raise ValueError("expected 'auto' or a whole number from 1 to 64") from None
