"""Arrays that are slow to draw and always the same for the same inputs, kept between runs.

    cached_array(kind, key, make, shape, dtype, keep=KEEP, sources=()) -> np.ndarray
        the array `make()` returns, read from core.paths.cache_dir(KIND) when
        an earlier run stored it under `key` (a string naming every input and the libraries
        that compute it) and the same `sources` (the files of the code that computes it, their
        contents part of the key), else drawn and stored there. Where a source cannot be read,
        `make()` alone: nothing is stored or read back.

Why: the procedural backgrounds and the paper texture take 0.3-1.6 s to draw at 1280x720 on
the 2-core machine (docs/BENCHMARKS.md), on the way to every render's first frame; the same
file reads back in milliseconds. The cache is only ever a shortcut: a file that is missing,
unreadable, truncated or of another shape is drawn again, and a folder that cannot be written
costs nothing but the drawing. Files are written whole (a temporary file renamed into place),
so two renders drawing the same array at once never read half a file. The folder keeps the
`keep` files used most recently (`KEEP` unless the caller's arrays are large).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

KEEP = 32  # files per kind


def cache_dir(kind: str) -> Path:
    from core import paths  # the one directory rule

    return paths.cache_dir(kind)


def cached_array(
    kind: str,
    key: str,
    make: Callable[[], np.ndarray],
    shape: tuple[int, ...],
    dtype,
    keep: int = KEEP,
    sources: tuple[str, ...] = (),
) -> np.ndarray:
    version = source_version(*sources)
    if version is None:
        return make()
    folder = cache_dir(kind)
    path = folder / (hashlib.sha256(f"{version}|{key}".encode()).hexdigest()[:40] + ".npy")
    arr = _load(path, shape, np.dtype(dtype))
    if arr is not None:
        return arr
    arr = make()
    _store(folder, path, arr, keep)
    return arr


@functools.cache
def source_version(*sources: str) -> str | None:
    """A digest of the files' contents; None where one cannot be read."""
    try:
        return hashlib.sha256(b"".join(Path(f).read_bytes() for f in sources)).hexdigest()[:16]
    except OSError:
        return None


def _load(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, EOFError) as exc:  # unreadable or cut short: draw it again
        log.debug("%s: not used (%s)", path, exc)
        return None
    if arr.shape != tuple(shape) or arr.dtype != dtype:
        log.debug("%s: not used (%s %s)", path, arr.shape, arr.dtype)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: the pruning keeps it
    return arr


def _store(folder: Path, path: Path, arr: np.ndarray, keep: int) -> None:
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.save(f, np.ascontiguousarray(arr), allow_pickle=False)
        os.replace(tmp, path)
        tmp = None
        _prune(folder, keep)
    except OSError as exc:  # a read-only or full disk: the array was drawn, that is enough
        log.debug("%s: not stored (%s)", path, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _prune(folder: Path, keep: int) -> None:
    files = []
    for p in folder.glob("*.npy"):
        with contextlib.suppress(OSError):
            files.append((p.stat().st_mtime, p))
    files.sort(reverse=True)
    for _, p in files[keep:]:
        with contextlib.suppress(OSError):
            p.unlink()
