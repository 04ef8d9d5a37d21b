"""Find, read and validate style presets.

Where presets come from, in order of precedence (**a user preset wins** over a built-in one
with the same name, so a user can tune `studio` by copying it into their folder):

1. user presets: ``<user config dir>/presets/*.toml``, where the user config dir is
   ``core.paths.config_dir()`` (``KAGURA_CONFIG_DIR``, else ``platformdirs.user_config_dir``)
   — or the folder named by the environment variable ``KAGURA_PRESETS_DIR`` (used instead of
   ``<user config dir>/presets`` when set; tests and portable installs use it);
2. built-in presets: ``presets/*.toml`` next to this module.

A user preset that is broken is refused, never quietly replaced: `load_preset` raises (a
render with it exits 2 naming the file, the key and what was expected) and `list_presets`
reports it instead of listing it. For one that shadows a built-in, the message says so and how
to get the built-in back — a user who copied `studio` to tune it expects their version or a
clear "your file is broken", not a video in a look they did not choose.

A preset's name is its file name without ``.toml``; the ``name`` key inside may be left out
(it then defaults to the file name) and, in a preset folder, must equal the file name.

Every problem is a `PresetError` with a one-line message that names the file, the dotted key
and what was expected, e.g.::

    /home/me/.config/kagura/presets/neon.toml: palette.hair: expected a colour as '#rrggbb', got 'pink'
"""

from __future__ import annotations

import os
import re
import tomllib
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from presets.schema import Preset

BUILTIN_DIR = Path(__file__).resolve().parent
ENV_USER_DIR = "KAGURA_PRESETS_DIR"

Source = Literal["built-in", "user", "file"]


class PresetError(ValueError):
    """A preset that cannot be used. `str(err)` is a single line: file, key, expectation."""

    def __init__(self, message: str, *, path: Path | None = None, key: str | None = None):
        super().__init__(" ".join(message.split("\n")))
        self.path = path
        self.key = key


class PresetWarning(UserWarning):
    """A user preset was skipped while listing (the message is the PresetError's)."""


@dataclass(frozen=True)
class PresetInfo:
    name: str
    title: str
    description: str
    source: Source
    path: Path
    preset: Preset


def user_presets_dir() -> Path:
    """The folder of user presets (it need not exist): core.paths.presets_dir()."""
    from core.paths import presets_dir

    return presets_dir()


def _scan(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.toml")) if p.is_file()}


def _catalogue() -> dict[str, tuple[Source, Path]]:
    """name -> (source, path); user presets override built-ins."""
    found: dict[str, tuple[Source, Path]] = {
        n: ("built-in", p) for n, p in _scan(BUILTIN_DIR).items()
    }
    found.update({n: ("user", p) for n, p in _scan(user_presets_dir()).items()})
    return found


def available_names() -> list[str]:
    return sorted(_catalogue())


def names_a_file(text: str) -> bool:
    """Whether `load_preset` takes `text` for a path to a .toml file (else a preset's name)."""
    return text.endswith(".toml") or os.sep in text or "/" in text


def load_preset(name_or_path: str | os.PathLike[str]) -> Preset:
    """Load a preset by name (user presets shadow built-ins) or from a path to a .toml file.

    A string containing a path separator or ending in ``.toml`` is taken as a path.
    Raises `PresetError` (a ValueError) with a one-line message.
    """
    text = os.fspath(name_or_path)
    if names_a_file(text):
        path = Path(text).expanduser()
        if not path.is_file():
            raise PresetError(f"{path}: no such preset file", path=path)
        return read_preset(path, require_name=False)
    cat = _catalogue()
    if text not in cat:
        names = ", ".join(sorted(cat)) or "(none)"
        raise PresetError(
            f"unknown preset {_short(text)}; available presets: {names} "
            f"(user presets go in {user_presets_dir()})"
        )
    source, path = cat[text]
    try:
        return read_preset(path, require_name=True)
    except PresetError as err:
        raise _shadowing(err, text, source) from err


def _shadowing(err: PresetError, name: str, source: Source) -> PresetError:
    """`err` of a user preset, saying that it replaces a built-in where it does."""
    if source != "user" or not (BUILTIN_DIR / f"{name}.toml").is_file():
        return err
    return PresetError(
        f"{err} (this user preset replaces the built-in {name!r}: fix it, or move it out of "
        f"{user_presets_dir()} to use the built-in)",
        path=err.path,
        key=err.key,
    )


def list_presets(errors: list[PresetError] | None = None) -> list[PresetInfo]:
    """All usable presets, sorted by name (a user preset replaces a built-in of its name).

    A preset that fails to load is left out — `load_preset` refuses it too, a user preset
    that shadows a built-in included — and its `PresetError` is appended to `errors` when a
    list is given, otherwise reported as a `PresetWarning`. It never hides the others.
    """
    out: list[PresetInfo] = []
    for name, (source, path) in sorted(_catalogue().items()):
        try:
            preset = read_preset(path, require_name=True)
        except PresetError as err:
            err = _shadowing(err, name, source)
            if errors is not None:
                errors.append(err)
            else:
                warnings.warn(PresetWarning(str(err)), stacklevel=2)
            continue
        out.append(PresetInfo(name, preset.title, preset.description, source, path, preset))
    return out


def read_preset(path: Path, require_name: bool = True) -> Preset:
    """Parse and validate one TOML file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise PresetError(f"{path}: cannot read: {err.strerror or err}", path=path) from err
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise PresetError(f"{path}: not UTF-8 text (byte {err.start})", path=path) from err
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends with "(at line N, column M)"; put the place first.
        msg = str(err)
        m = re.search(r"\s*\(at (line \d+, column \d+)\)$", msg)
        where = f" at {m.group(1)}" if m else ""
        what = msg[: m.start()] if m else msg
        raise PresetError(f"{path}: TOML syntax error{where}: {what}", path=path) from err
    data.setdefault("name", path.stem)
    if require_name and data["name"] != path.stem:
        raise PresetError(
            f"{path}: name: expected {path.stem!r} (the file's name), got {_short(data['name'])}",
            path=path,
            key="name",
        )
    try:
        return Preset.model_validate(data)
    except ValidationError as err:
        raise _explain(path, err) from err


# --- turning pydantic's errors into one readable line -------------------------------------


def _field_info(loc: tuple[Any, ...]):
    """The pydantic FieldInfo at a location (None where it cannot be found)."""
    model: Any = Preset
    info = None
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        info = model.model_fields.get(str(part))
        if info is None:
            return None
        model = _model_of(info.annotation)
    return info


def _model_of(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        m = _model_of(arg)
        if m is not None:
            return m
    return None


def _bounds(info: Any) -> tuple[Any, Any, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for m in getattr(info, "metadata", []):
        for attr, is_lo, is_open in (("ge", 1, 0), ("gt", 1, 1), ("le", 0, 0), ("lt", 0, 1)):
            v = getattr(m, attr, None)
            if v is None:
                continue
            if is_lo:
                lo, lo_open = v, bool(is_open)
            else:
                hi, hi_open = v, bool(is_open)
    return lo, hi, lo_open, hi_open


def _short(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters: a message stays one readable line even for a
    10 MB value."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _is_int(annotation: Any) -> bool:
    return annotation is int or int in typing.get_args(annotation)


def _expectation(err: dict[str, Any]) -> str:
    loc, kind, ctx = err["loc"], err["type"], err.get("ctx") or {}
    info = _field_info(loc)
    ann = getattr(info, "annotation", None)
    if kind == "missing":
        if _model_of(ann) is not None:
            return f"a [{'.'.join(map(str, loc))}] section (it is missing)"
        return "a value (the key is missing)"
    if kind == "extra_forbidden":
        parent = _field_info(loc[:-1]) if len(loc) > 1 else None
        model = _model_of(parent.annotation) if parent is not None else Preset
        allowed = ", ".join(model.model_fields) if model is not None else "?"
        return f"one of the keys {allowed}"
    if kind == "value_error":
        msg = str(ctx.get("error", err["msg"]))
        if len(msg) > 200:
            msg = msg[:199] + "…"
        return msg[len("expected ") :] if msg.startswith("expected ") else msg
    if kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"} or kind in {
        "int_parsing",
        "float_parsing",
        "int_type",
        "float_type",
        "int_from_float",
    }:
        lo, hi, lo_open, hi_open = _bounds(info)
        noun = "a whole number" if _is_int(ann) else "a number"
        if lo is not None and hi is not None:
            rng = f"between {_fmt(lo)} and {_fmt(hi)}"
            if lo_open or hi_open:
                rng += f" ({'above' if lo_open else 'from'} {_fmt(lo)}, {'below' if hi_open else 'up to'} {_fmt(hi)})"
            return f"{noun} {rng}"
        if lo is not None:
            return f"{noun} {'above' if lo_open else 'at least'} {_fmt(lo)}"
        if hi is not None:
            return f"{noun} {'below' if hi_open else 'at most'} {_fmt(hi)}"
        return noun
    if kind == "literal_error":
        return f"one of {ctx.get('expected', '?')}"
    if kind == "string_pattern_mismatch":
        if loc and loc[-1] == "name":
            return "a lowercase name of letters, digits and '-'"
        return f"text matching {ctx.get('pattern')}"
    if kind in {"too_short", "too_long"}:
        lo = getattr(info, "metadata", None)
        mn = next((m.min_length for m in lo or [] if getattr(m, "min_length", None)), None)
        mx = next((m.max_length for m in lo or [] if getattr(m, "max_length", None)), None)
        if ann is not None and "str" in str(ann) and "tuple" not in str(ann):
            return "non-empty text"
        return f"a list of {mn} to {mx} items" if mn and mx else err["msg"].lower()
    if kind in {"string_type", "str_type"}:
        return "text in quotes"
    if kind in {"tuple_type", "list_type"}:
        return 'a list, e.g. ["#ffffff", "#000000"]'
    if kind in {"model_type", "dict_type", "model_attributes_type"}:
        return "a table (a [section])"
    if kind == "bool_type":
        return "true or false"
    return err["msg"][:1].lower() + err["msg"][1:]


def _explain(path: Path, err: ValidationError) -> PresetError:
    errors = err.errors()
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    expect = _expectation(first)
    got = ""
    if first["type"] not in {"missing", "extra_forbidden", "value_error"} and not isinstance(
        first.get("input"), dict
    ):
        got = f", got {_short(first.get('input'))}"
    more = (
        f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    if first["type"] == "extra_forbidden":
        return PresetError(
            f"{path}: {key}: unknown key; expected {expect}{more}", path=path, key=key
        )
    return PresetError(f"{path}: {key}: expected {expect}{got}{more}", path=path, key=key)


__all__ = [
    "BUILTIN_DIR",
    "ENV_USER_DIR",
    "PresetError",
    "PresetInfo",
    "PresetWarning",
    "available_names",
    "list_presets",
    "load_preset",
    "read_preset",
    "user_presets_dir",
]
