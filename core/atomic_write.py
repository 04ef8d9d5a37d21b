"""A file written whole or not at all: written under a temporary name beside it, then renamed.

A reader, a crash or a second process filling the same cache entry sees the old file or the new
one, never half of one (a rename within one folder is atomic on POSIX file systems).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_write_text", "replacing"]


@contextmanager
def replacing(path: str | os.PathLike, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path beside `path` to write to; when the block ends it replaces `path` (with
    permissions `mode`), and where the block raises it is removed and `path` left as it was.
    The temporary name is unique to the call and ends in `path`'s suffix (numpy's savers add
    their suffix to a name without it). An OSError names `path`, not the temporary file."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                   dir=path.parent)  # fmt: skip
        os.fchmod(fd, mode)
        os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, mode: int = 0o644) -> Path:
    """Write `text` to `path` through a temp file in the same folder, fsynced, then renamed:
    a reader (or a crash) sees the old file or the new one, never half of one."""
    path = Path(path)
    with replacing(path, mode) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return path
