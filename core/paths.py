"""Where Kagura keeps the user's files: the one rule every package locates them by.

    config_dir()        $KAGURA_CONFIG_DIR, else platformdirs.user_config_dir("kagura")
        settings_file()     config_dir()/live_app.json        the live app's settings
        render_settings_file() config_dir()/render.toml    `kagura render`/`demo`'s settings
        profile_file()      config_dir()/lipsync-profile.json  `kagura calibrate`'s profile
        presets_dir()       $KAGURA_PRESETS_DIR, else config_dir()/presets   user presets
    cache_dir(kind)     ($KAGURA_CACHE_DIR, else platformdirs.user_cache_dir("kagura"))/kind
                        numba, inductor, looks, the lip-sync corpus, ...: safe to delete
    weights_dir(shipped) $KAGURA_WEIGHTS_DIR, else the shipped weights folder (Kagura's model)
    recordings_dir()    platformdirs.user_videos_dir()/Kagura (the live app's default; the
                        window's record_dir setting overrides it)

Each variable names the folder itself (not a parent), so a test or a portable install moves
one kind of file with one variable; KAGURA_CONFIG_DIR moves the settings, the profile and the
user presets together. platformdirs follows the platform (XDG_CONFIG_HOME / XDG_CACHE_HOME on
Linux), so an empty XDG_CACHE_HOME still gives a cold start (`kagura bench e2e`).

Nothing here creates a folder: the writer does, when it writes.
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "kagura"
CONFIG_ENV = "KAGURA_CONFIG_DIR"
CACHE_ENV = "KAGURA_CACHE_DIR"
PRESETS_ENV = "KAGURA_PRESETS_DIR"
WEIGHTS_ENV = "KAGURA_WEIGHTS_DIR"
SETTINGS_FILE = "live_app.json"
RENDER_SETTINGS_FILE = "render.toml"
PROFILE_FILE = "lipsync-profile.json"


def _env(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    """The user's Kagura settings folder (it need not exist)."""
    env = _env(CONFIG_ENV)
    if env is not None:
        return env
    import platformdirs  # on use: `kagura --help` need not import it

    return Path(platformdirs.user_config_dir(APP))


def settings_file() -> Path:
    return config_dir() / SETTINGS_FILE


def render_settings_file() -> Path:
    return config_dir() / RENDER_SETTINGS_FILE


def profile_file() -> Path:
    return config_dir() / PROFILE_FILE


def presets_dir() -> Path:
    """The folder of user presets (it need not exist)."""
    return _env(PRESETS_ENV) or config_dir() / "presets"


def cache_root() -> Path:
    env = _env(CACHE_ENV)
    if env is not None:
        return env
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP))


def cache_dir(kind: str) -> Path:
    """A cache folder for one kind of file (it need not exist)."""
    return cache_root() / kind


def weights_dir(shipped: Path) -> Path:
    """Kagura's model weights: $KAGURA_WEIGHTS_DIR (e.g. `kagura train --export`), else
    `shipped`, the folder that comes with the code."""
    return _env(WEIGHTS_ENV) or shipped


def recordings_dir() -> Path:
    """Where the live app records to unless its settings name a folder."""
    import platformdirs

    return Path(platformdirs.user_videos_dir()) / "Kagura"
