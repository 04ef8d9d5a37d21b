"""Output safety: the rules every command that writes a file follows.

1. Never write over an input: the output (and its `.partial` / `.interrupted` siblings) is
   compared with every input by resolved path and by (device, inode), so a symlink or a hard
   link to the source is caught too.
2. An existing output is replaced only when the user said so (`--overwrite` / `-y`); a
   directory, FIFO or device at the output path is never replaced.
3. A render writes `NAME.partial.EXT` and holds an exclusive `flock` on it for as long as it
   writes. A second job on the same output finds the lock taken and stops before touching
   anything; only the job holding the lock ever deletes or renames its partial file. A partial
   left by a job that was killed (no lock held) is not thrown away: it is renamed
   `NAME.interrupted.EXT` before the new job starts.
4. A job that stops after writing frames (Ctrl+C, SIGTERM, an error) keeps them as
   `NAME.interrupted.EXT` (fragmented MP4 / WebM play up to their last fragment).
5. Small files (JSON, settings) go to a temp file in the target folder, are fsynced and renamed
   over the target atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterable
from pathlib import Path


class OutputError(ValueError):
    """An output path that must not be written; the message is one line and names the path."""


def partial_path(path: str | os.PathLike) -> Path:
    """The sibling a job writes until it is complete: `song.mp4` → `song.partial.mp4`."""
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def interrupted_path(path: str | os.PathLike) -> Path:
    """Where an unfinished job's frames are kept: `song.mp4` → `song.interrupted.mp4`
    (`song.interrupted-2.mp4`, … when that name is taken)."""
    path = Path(path)
    candidate = path.with_name(f"{path.stem}.interrupted{path.suffix}")
    n = 2
    while os.path.lexists(candidate):
        candidate = path.with_name(f"{path.stem}.interrupted-{n}{path.suffix}")
        n += 1
    return candidate


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True when `a` and `b` name one file: equal resolved paths, or equal (device, inode)."""
    a, b = Path(a), Path(b)
    with contextlib.suppress(OSError, RuntimeError):
        if a.resolve() == b.resolve():
            return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output(
    output: str | os.PathLike,
    inputs: Iterable[str | os.PathLike | None] = (),
    overwrite: bool = False,
    option: str = "-o",
) -> Path:
    """`output` if it may be written, else OutputError (one line naming the path and the fix).

    Called before any decoding or rendering, so a refused job costs nothing."""
    out = Path(output)
    siblings = (out, partial_path(out), out.with_name(f"{out.stem}.interrupted{out.suffix}"))
    for src in inputs:
        if src is None:
            continue
        for name in siblings:
            if same_file(name, src):
                raise OutputError(
                    f"{option} {out}: this is the input file {src}; refusing to write over "
                    "an input — choose another output name"
                )
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return out
    except NotADirectoryError:
        raise OutputError(f"{option} {out}: {out.parent} is not a folder") from None
    except OSError as exc:
        raise OutputError(f"{option} {out}: cannot check the output ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{option} {out}: is a directory; expected a file name inside it")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{option} {out}: exists and is not a regular file; refusing to replace")
    if not overwrite:
        raise OutputError(f"{option} {out}: already exists; pass --overwrite (or -y) to replace it")
    return out


class PartialFile:
    """The exclusive claim of one job on `NAME.partial.EXT` (see rule 3 of the module notes).

    `acquire()` takes the lock (OutputError when another job holds it), `publish()` renames the
    finished partial onto the output, `keep()` renames it `NAME.interrupted.EXT`, `discard()`
    deletes it; each of the last three releases the lock.
    """

    def __init__(self, output: str | os.PathLike, on_notice=None):
        self.output = Path(output)
        self.path = partial_path(self.output)
        self.on_notice = on_notice
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def check_free(self) -> None:
        """OutputError (acquire's) when another job holds the claim right now; touches nothing
        (no file made, none renamed). For a job that waits before it claims: the render
        server's client, whose job would otherwise run after the one writing its output and
        replace that output."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # no partial (or none this user can read): acquire() will tell
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._taken() from None
        finally:
            os.close(fd)  # the lock, if taken here, goes with it

    def _taken(self) -> OutputError:
        return OutputError(
            f"{self.output}: another Kagura job is writing this output right now "
            f"({self.path.name} is locked); wait for it or choose another name"
        )

    def acquire(self) -> Path:
        for _ in range(16):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._taken() from None
            except BaseException:
                os.close(fd)
                raise
            # the name may have been renamed or deleted by its owner between open and flock
            try:
                on_disk = os.stat(self.path)
            except FileNotFoundError:
                os.close(fd)
                continue
            mine = os.fstat(fd)
            if (on_disk.st_dev, on_disk.st_ino) != (mine.st_dev, mine.st_ino):
                os.close(fd)
                continue
            if mine.st_size > 0:  # left by a job that was killed: keep its frames
                kept = interrupted_path(self.output)
                os.rename(self.path, kept)
                os.close(fd)
                if self.on_notice is not None:
                    self.on_notice(f"an earlier unfinished render was kept as {kept}")
                continue
            self._fd = fd
            return self.path
        raise OutputError(f"{self.output}: cannot claim {self.path.name}; it keeps changing")

    def publish(self) -> Path:
        """fsync the partial and rename it onto the output; the lock goes with it."""
        self._require()
        with open(self.path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(self.path, self.output)
        self._release()
        return self.output

    def keep(self) -> Path | None:
        """Rename the partial `NAME.interrupted.EXT`; None (and deleted) when it is empty."""
        if self._fd is None:
            return None
        try:
            if os.fstat(self._fd).st_size == 0:
                self.path.unlink(missing_ok=True)
                return None
            kept = interrupted_path(self.output)
            os.rename(self.path, kept)
            return kept
        finally:
            self._release()

    def discard(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            self._release()

    def _require(self) -> None:
        if self._fd is None:
            raise RuntimeError(f"{self.path}: the partial file is not held by this job")

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
