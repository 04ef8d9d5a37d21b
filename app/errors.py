"""The command line's one error path.

Bad input (a wrong argument, an unreadable file, an output that must not be written) and every
OS error (disk full, read-only file system, permission denied, name too long, a directory where
a file was expected) end with one line on stderr naming the path, and exit status 2. Anything
else is a bug in Kagura: one line saying so, with a hint to report it, and exit status 1 (the
traceback only with KAGURA_DEBUG=1).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import traceback

from core.errors import UsageError as UsageError  # defined in core/, re-exported for app/

EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

# how the common OS errors are worded (strerror where this table has nothing)
OS_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory, expected a file",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.ENOENT: "no such file or folder",
    errno.EIO: "input/output error (a failing disk or a lost network drive)",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl+C so that every job stops the same clean way."""


# the user-input error types beyond UsageError, by module: (module, class name)
USER_ERRORS = (
    ("audio.errors", "AudioError"),
    ("pipeline.sinks.output", "OutputError"),
    ("presets.loader", "PresetError"),
    ("core.stage", "GraphError"),
    ("pipeline.diffusion.models", "ModelError"),
)


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types that mean "the user's input is wrong" rather than "Kagura is broken".

    Only those of modules already imported: an exception of a type whose module was never
    imported cannot have been raised, and importing them to find out cost a refused render
    seconds (pipeline.diffusion.models imports torch)."""
    types: list[type[BaseException]] = [UsageError]
    for module, name in USER_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None:
            kind = getattr(loaded, name, None)  # None while that module is still importing
            if kind is not None:
                types.append(kind)
    return tuple(types)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def os_error_in(exc: BaseException | None) -> OSError | None:
    """The OSError that caused `exc` (itself, or one in its __cause__/__context__ chain)."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def os_error_line(exc: OSError) -> str:
    """'PATH: reason' for an OSError (the path it names, when it names one)."""
    reason = OS_REASONS.get(exc.errno or 0) or exc.strerror or one_line(exc)
    path = exc.filename if exc.filename is not None else None
    if path is None:
        return reason
    path = os.fsdecode(path) if isinstance(path, bytes) else str(path)
    if len(path) > 160:  # a name too long is not printed in full either
        path = path[:80] + "…" + path[-40:]
    if exc.filename2 is not None:
        return f"{path} → {exc.filename2}: {reason}"
    return f"{path}: {reason}"


def kept_suffix(exc: BaseException) -> str:
    kept = getattr(exc, "kagura_kept", None)
    return f"; the frames written are kept in {kept}" if kept else ""


def is_user_error(exc: BaseException) -> bool:
    """True for the errors that are the user's input (one line, exit 2), not Kagura's bugs."""
    if isinstance(exc, UsageError):  # needs nothing imported (the other types import torch)
        return True
    return isinstance(exc, user_error_types())


def report(exc: BaseException, prog: str = "kagura") -> int:
    """Print the one line for `exc` on stderr; the exit status it stands for."""
    if os.environ.get("KAGURA_DEBUG") and not is_expected(exc):
        traceback.print_exception(exc)
    line, code = error_line(exc, prog)
    print(line, file=sys.stderr)
    return code


def is_expected(exc: BaseException) -> bool:
    """Ctrl+C, SIGTERM, the user's input or an OS error: not a bug in Kagura (`error_line`
    gives it a status other than EXIT_BUG)."""
    return error_line(exc)[1] != EXIT_BUG


def error_line(exc: BaseException, prog: str = "kagura") -> tuple[str, int]:
    """The one line `report` prints for `exc`, and the exit status it stands for (the render
    server sends them to its client: app/cmd_serve.py)."""
    if isinstance(exc, Terminated):
        return f"{prog}: terminated{kept_suffix(exc)}", EXIT_TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return f"{prog}: interrupted{kept_suffix(exc)}", EXIT_INTERRUPTED
    if is_user_error(exc):
        return f"{prog}: error: {one_line(exc)}{kept_suffix(exc)}", EXIT_USAGE
    os_exc = os_error_in(exc)
    if os_exc is not None:
        return f"{prog}: error: {os_error_line(os_exc)}{kept_suffix(exc)}", EXIT_USAGE
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" at {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno}" if where else ""
    return (
        f"{prog}: internal error: {type(exc).__name__}: {one_line(exc)[:300]}{at}"
        f"{kept_suffix(exc)} — this is a bug in Kagura; please report it with the command you "
        "ran (KAGURA_DEBUG=1 prints the traceback)",
        EXIT_BUG,
    )


def raise_on_sigterm() -> None:
    """SIGTERM stops the job like Ctrl+C (a render keeps its frames, a recording is finalized)."""

    def handler(signum, frame):
        raise Terminated()

    with contextlib.suppress(ValueError):  # not the main thread (an embedder): leave it
        signal.signal(signal.SIGTERM, handler)
