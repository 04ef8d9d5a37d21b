"""The render server's socket: where it is, what crosses it, and `kagura render`'s hand-over.

    kagura serve --device cuda --size 1920x1080 --upscale 3     # one terminal: stays up
    kagura render song.flac -o mv.mp4 --device cuda ...          # another: rendered by it

A `kagura serve` (app/cmd_serve.py) listens on a Unix socket that only its user can open:
$KAGURA_SERVE_SOCKET, else kagura-serve.sock in $XDG_RUNTIME_DIR, else in a folder of the
user's own under the temporary folder (made 0700; one that is not the user's, or that others
may open, is never used). `kagura render` and `kagura demo` look for it first (one `stat`; the
client imports nothing heavy) and, when a server answers, send it their whole configuration
(the settings file already layered in, every path made absolute) and show its progress; with
`--no-server`, or no server, or one that declines, they render in their own process as before.

The messages are JSON objects, one per line. Client → server: the job
`{"protocol", "code", "env", "trace", "config"}`, then perhaps `{"cancel": "interrupted" |
"terminated"}` (Ctrl+C or SIGTERM; a closed socket cancels too). Server → client:
`{"accepted": true}` or `{"declined": reason}`; then `{"notice": line}` (what the render would
have printed), `{"total": frames}`, `{"frames": n}` (at most four a second, and the first
frame at once), and last `{"end": exit status, "line": the one line to print}`.

A server declines a client of other code (another version or checkout) or another environment
(the `KAGURA_*` variables, HOME, the XDG folders, CUDA_VISIBLE_DEVICES: what decides which
profile, presets, weights and GPU a render reads), so a served render is the render the client
would have made itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

SOCKET_ENV = "KAGURA_SERVE_SOCKET"
SOCKET_NAME = "kagura-serve.sock"
PROTOCOL = 1
# the client waits this long for the server's answer before saying it is busy
BUSY_NOTICE_S = 2.0
# KAGURA_* variables that do not change what a render makes
_PRIVATE_ENV = {"KAGURA_TRACE", "KAGURA_DEBUG", SOCKET_ENV}
_SHARED_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "CUDA_VISIBLE_DEVICES")


class ServeError(OSError):
    """The server's socket cannot be made or used (one line, exit 2)."""


def socket_path(make_folder: bool = False) -> Path:
    """Where the server listens (see the module's docstring). `make_folder`: the server makes
    the private folder under the temporary folder when it is the one used."""
    env = os.environ.get(SOCKET_ENV)
    if env:
        return Path(env).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / SOCKET_NAME
    folder = Path(tempfile.gettempdir()) / f"kagura-{os.getuid()}"
    if make_folder:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    if folder.exists():
        st = folder.lstat()
        if not folder.is_dir() or folder.is_symlink() or st.st_uid != os.getuid():
            raise ServeError(f"{folder}: not a folder of this user's; set {SOCKET_ENV}")
        if st.st_mode & 0o077:
            raise ServeError(f"{folder}: others may open it (mode {st.st_mode & 0o777:o})")
    return folder / SOCKET_NAME


def code_id() -> str:
    """Which Kagura this is: its version and where its code lives."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("kagura")
    except PackageNotFoundError:
        v = "?"
    return f"{v} {Path(__file__).resolve().parent.parent}"


def shared_env() -> dict[str, str]:
    """The environment a served render must share with its client."""
    names = [k for k in os.environ if k.startswith("KAGURA_") and k not in _PRIVATE_ENV]
    names += [k for k in _SHARED_ENV if k in os.environ]
    return {k: os.environ[k] for k in sorted(names)}


class Link:
    """One connection: JSON objects, one per line, both ways."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._in = sock.makefile("rb")

    def send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def recv(self) -> dict[str, Any] | None:
        """The next message; None when the other side closed (or sent something broken)."""
        try:
            line = self._in.readline()
        except ConnectionError:
            return None
        if not line:
            return None
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def close(self) -> None:
        # shut down first: a thread blocked reading this link (the server's watch on its
        # client) returns at once, so closing the reader does not wait for the other side
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._in.close()
            self.sock.close()


def connect() -> Link | None:
    """A link to the running server; None when there is none (no socket, or a stale one)."""
    try:
        path = socket_path()
    except ServeError:
        return None
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:  # a server that died left its socket: render here
        sock.close()
        return None
    return Link(sock)


def absolute(cfg):
    """`cfg` (app.config.RenderConfig) with every path it names made absolute: the server
    runs in another folder. (So a served render's error lines name absolute paths.)"""
    from pipeline.model_factory import KAGURA
    from presets.loader import names_a_file

    here = Path.cwd()

    def path(p):
        return None if p is None else here / Path(p).expanduser()

    preset = cfg.preset  # a name, or a path where presets.loader takes it for one
    if names_a_file(preset):
        preset = str(path(preset))
    diffusion = cfg.gpu.diffusion  # "kagura", or a checkpoint folder
    if diffusion is not None and str(diffusion) != KAGURA:
        diffusion = path(diffusion)
    return cfg.model_copy(
        update={
            "audio": path(cfg.audio),
            "output": path(cfg.output),
            "avatar": path(cfg.avatar),
            "preset": preset,
            "gpu": cfg.gpu.model_copy(update={"diffusion": diffusion}),
        }
    )


def hand_over(cfg, notices: list[str] | None = None) -> int | None:
    """Render `cfg` on the running server: its exit status, or None when no server takes it
    (the caller renders it itself). A server that declines says why into `notices` (printed
    here when None): the caller prints it once its own checks pass, so a refused request
    still gets its one line."""
    link = connect()
    if link is None:
        return None
    try:
        return _served(link, cfg, notices)
    finally:
        link.close()


def _served(link: Link, cfg, notices: list[str] | None) -> int | None:
    from app.errors import error_line
    from core.trace import mark
    from pipeline.sinks.output import OutputError, PartialFile

    config = absolute(cfg)
    try:  # a job queued behind the one writing its output would replace that output after it
        PartialFile(config.output).check_free()
    except OutputError as exc:
        line, code = error_line(exc)
        print(line, file=sys.stderr)
        return code

    job = {
        "protocol": PROTOCOL,
        "code": code_id(),
        "env": shared_env(),
        "trace": os.environ.get("KAGURA_TRACE"),
        "config": config.model_dump(mode="json"),
    }
    try:
        link.send(job)
        answered, _, _ = select.select([link.sock], [], [], BUSY_NOTICE_S)
        if not answered:  # it serves one render at a time
            print("kagura: the render server is busy; waiting for it", file=sys.stderr)
        reply = link.recv()
    except OSError:
        return None
    if reply is None:
        return None
    if "declined" in reply:
        line = f"kagura: the render server declined ({reply['declined']}); rendering here"
        if notices is None:
            print(line, file=sys.stderr)
        else:
            notices.append(line)
        return None
    mark("handed over")
    logging.getLogger("kagura.serve").info("rendered by the render server at %s", socket_path())
    return _follow(link, cfg)


def _follow(link: Link, cfg) -> int:
    """Show the server's progress until its end message; Ctrl+C or SIGTERM cancels the job
    there (the server keeps the frames written, as a render here would)."""
    from app.errors import EXIT_BUG, Terminated
    from pipeline.progress import RenderProgress

    progress: RenderProgress | None = None
    cancelled = False
    while True:
        try:
            msg = link.recv()
        except KeyboardInterrupt as exc:
            if cancelled:
                raise  # a second Ctrl+C: leave now (the closed socket cancels the job)
            cancelled = True
            reason = "terminated" if isinstance(exc, Terminated) else "interrupted"
            with contextlib.suppress(OSError):
                link.send({"cancel": reason})
            continue
        if msg is None:
            if progress is not None:
                progress.close(ok=False)
            print(
                "kagura: error: the render server stopped during the render (its own output "
                "says why)",
                file=sys.stderr,
            )
            return EXIT_BUG
        if "notice" in msg:
            print(msg["notice"], file=sys.stderr)
        elif "total" in msg:
            progress = RenderProgress(int(msg["total"]), quiet=cfg.quiet, label=cfg.output.name)
            progress.start()
        elif "frames" in msg and progress is not None:
            while progress.frames < int(msg["frames"]):
                progress.on_frame()
        elif "end" in msg:
            code = int(msg["end"])
            if progress is not None:
                progress.close(ok=code == 0)
            line = msg.get("line")
            if code == 0:  # the output as the user named it, as a render here says it
                line = f"kagura: wrote {cfg.output}"
            if line:
                print(line, file=sys.stderr)
            return code
