"""The live app's settings file, `live_app.json`, that heals instead of blocking the start.

The file carries `version` (SETTINGS_VERSION; none: a file from before versions). One from a
newer Kagura is read for the fields this one knows, with a notice, and kept as `.bad` before
it is written back in this version's schema. Every field is validated by the pydantic schema
`LiveSettingsModel` on its own: a field with a
wrong type, a value out of range, NaN or infinity falls back to its default, and the notice
says which field and why (shown in the window's banner). The file as it was found is kept as
`live_app.json.bad` (`.bad-2`, …) next to it, and the healed settings are written back, so the
next start is clean. A file that is not JSON at all is treated the same way.

Secrets: the obs-websocket password is never written to `live_app.json` (and never logged).
It goes to the system keyring when one is usable (the `keyring` package with a real backend),
otherwise to `obs_password` in the same folder, created with mode 0600. A password found in an
older `live_app.json` is moved there on the first start.

Writes are atomic (`core.atomic_write.atomic_write_text`): a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.atomic_write import atomic_write_text

log = logging.getLogger(__name__)

SETTINGS_FILE = "live_app.json"  # = core.paths.SETTINGS_FILE
SECRET_FILE = "obs_password"
KEYRING_SERVICE = "kagura-obs-websocket"
MAX_TEXT = 4096  # a name, a path or a host longer than this is damage, not a setting
# the schema's version, written into the file; a file without one is from before versions (1)
SETTINGS_VERSION = 1


class LiveSettingsModel(BaseModel):
    """The fields of live_app.json, their types, ranges and defaults."""

    model_config = ConfigDict(validate_assignment=True, extra="ignore", allow_inf_nan=False)

    version: Literal[1] = SETTINGS_VERSION  # which schema wrote the file (see Settings._load)
    preset: str = Field("studio", min_length=1, max_length=256)
    device: str | int | None = None  # input device name (or index), None = the default input
    gain_db: float = Field(0.0, ge=-20.0, le=30.0)  # the Gain slider's range
    gate_db: float = Field(12.0, ge=4.0, le=30.0)  # the Noise gate slider's range
    smoothing: float = Field(0.0, ge=0.0, le=1.0)
    transparent: bool = False
    record_format: Literal["mp4", "webm"] = "mp4"
    record_dir: str | None = Field(None, max_length=MAX_TEXT)  # None = <videos>/Kagura
    audio_file: str | None = Field(None, max_length=MAX_TEXT)  # last file played
    avatar: str | None = Field(None, max_length=MAX_TEXT)  # layered avatar; None = the idol
    play_out: bool = True
    geometry: list[int] | None = None  # [x, y, w, h]
    obs_host: str = Field("localhost", min_length=1, max_length=253)
    obs_port: int = Field(4455, ge=1, le=65535)
    obs_input: str | None = Field(None, max_length=MAX_TEXT)  # the OBS audio input to delay

    @field_validator("geometry")
    @classmethod
    def _geometry(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if len(v) != 4:
            raise ValueError("expected [x, y, width, height]")
        x, y, w, h = v
        if not (
            abs(x) <= 100_000 and abs(y) <= 100_000 and 100 <= w <= 16_384 and 100 <= h <= 16_384
        ):
            raise ValueError("expected a window on a screen (width and height 100..16384)")
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str | int | None) -> str | int | None:
        if isinstance(v, str) and len(v) > MAX_TEXT:
            raise ValueError(f"expected a device name of at most {MAX_TEXT} characters")
        return v


DEFAULTS: dict[str, Any] = {**LiveSettingsModel().model_dump(), "obs_password": None}


def config_dir() -> Path:
    from core.paths import config_dir as folder  # the one directory rule

    return folder()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "…"


def _backup_name(path: Path) -> Path:
    candidate = path.with_name(path.name + ".bad")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bad-{n}")
        n += 1
    return candidate


class SecretStore:
    """The OBS password: the system keyring where one works, else a 0600 file.

    The keyring is looked up at the first get or set, not at start-up: importing it costs a
    few tenths of a second, and a desktop keyring may ask the user to unlock it.
    """

    _UNSET = object()

    def __init__(self, folder: Path):
        self.file = folder / SECRET_FILE
        self._keyring_module: Any = self._UNSET

    @property
    def _keyring(self) -> Any:
        if self._keyring_module is self._UNSET:
            self._keyring_module = _usable_keyring()
        return self._keyring_module

    def _keyring_failed(self, what: str, exc: Exception) -> None:
        # the message only: a backend's error never carries the password, but say no more
        log.warning("settings: the keyring cannot be %s (%s); using %s", what, exc, self.file)
        self._keyring_module = None

    @property
    def where(self) -> str:
        return "the system keyring" if self._keyring is not None else f"{self.file} (mode 0600)"

    def get(self) -> str | None:
        ring = self._keyring
        if ring is not None:
            try:
                password = ring.get_password(KEYRING_SERVICE, "password")
            except Exception as exc:  # a locked or broken keyring: fall back to the file
                self._keyring_failed("read", exc)
            else:
                if password:
                    return password
                # a file kept before a keyring was usable: move it into the keyring
                password = self._read_file()
                if password:
                    self.set(password)
                return password
        return self._read_file()

    def _read_file(self) -> str | None:
        try:
            return self.file.read_text(encoding="utf-8") or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("settings: cannot read %s: %s", self.file, exc.strerror)
            return None

    def set(self, password: str | None) -> None:
        ring = self._keyring
        if ring is not None:
            try:
                if password:
                    ring.set_password(KEYRING_SERVICE, "password", password)
                else:
                    with contextlib.suppress(Exception):  # nothing stored: nothing to delete
                        ring.delete_password(KEYRING_SERVICE, "password")
                self.file.unlink(missing_ok=True)
                return
            except Exception as exc:
                self._keyring_failed("written", exc)
        if not password:
            self.file.unlink(missing_ok=True)
            return
        self.file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.file, password, mode=0o600)


def _usable_keyring():
    """The keyring module when a real backend is configured (not the 'fail' or 'null' one)."""
    if os.environ.get("KAGURA_NO_KEYRING"):
        return None
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return keyring


class Settings:
    """live_app.json as a dict with defaults; see the module notes. `notices` lists what was
    healed at load (one line each); `save()` writes atomically."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_dir() / SETTINGS_FILE
        self.notices: list[str] = []
        self.model = LiveSettingsModel()
        self.secrets = SecretStore(self.path.parent)
        self._password: str | None = None
        self._password_loaded = False
        self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.notices.append(
                f"settings: cannot read {self.path} ({exc.strerror}); using defaults"
            )
            return
        try:
            data = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            self._heal(raw, [f"{self.path} is not valid JSON ({_short(str(exc))})"])
            return
        if not isinstance(data, dict):
            self._heal(raw, [f"{self.path} holds {type(data).__name__}, expected an object"])
            return
        bad: list[str] = []
        version = data.get("version", SETTINGS_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            bad.append(f"version={_short(version)} (expected a whole number >= 1; using 1)")
        elif version > SETTINGS_VERSION:  # kept as .bad, so the newer Kagura's file is not lost
            bad.append(
                f"{self.path.name} was written by a newer Kagura (settings version {version}; "
                f"this one reads version {SETTINGS_VERSION}): the fields it knows are used"
            )
        for key in LiveSettingsModel.model_fields:
            if key not in data or key == "version":
                continue
            try:
                setattr(self.model, key, data[key])
            except ValidationError as exc:
                why = exc.errors()[0].get("msg", "invalid")
                bad.append(f"{key}={_short(data[key])} ({why}; using {DEFAULTS[key]!r})")
        password = data.get("obs_password")
        if password is not None:  # an older file kept it in plain text: move it to the store
            if isinstance(password, str) and password:
                self.secrets.set(password)
            bad.append(f"obs_password moved out of {self.path.name} into {self.secrets.where}")
        if bad:
            self._heal(raw, bad)

    def _heal(self, raw: bytes, problems: list[str]) -> None:
        backup = _backup_name(self.path)
        try:
            backup.write_bytes(raw)
            os.chmod(backup, 0o600)  # it may hold the old plain-text password
            kept = f"; the file as it was is kept as {backup.name}"
        except OSError as exc:
            kept = f"; could not keep a backup ({exc.strerror})"
        for p in problems:
            self.notices.append(f"settings: {p}")
        self.notices[-1] += kept
        for line in self.notices:
            log.warning("%s", line)
        self.save()

    def __getitem__(self, key: str) -> Any:
        if key == "obs_password":
            if not self._password_loaded:
                self._password = self.secrets.get()
                self._password_loaded = True
            return self._password
        return getattr(self.model, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "obs_password":
            self._password, self._password_loaded = value or None, True
            try:
                self.secrets.set(self._password)
            except OSError as exc:
                log.warning("settings: cannot store the OBS password: %s", exc.strerror)
            return
        try:
            setattr(self.model, key, value)
        except ValidationError as exc:  # a bad value from the UI: keep the last good one
            log.warning("settings: %s=%s refused: %s", key, _short(value), exc.errors()[0]["msg"])

    @property
    def values(self) -> dict[str, Any]:
        return self.model.model_dump()

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(self.model.model_dump(), indent=2, sort_keys=True, allow_nan=False)
            atomic_write_text(self.path, text, mode=0o600)
        except OSError as exc:
            log.warning("settings: cannot write %s: %s", self.path, exc.strerror)


def _no_constant(name: str) -> float:
    """json's NaN / Infinity / -Infinity: kept as NaN so the field check refuses them."""
    return math.nan
