"""A private Xvfb server for tests that need a real X display (not a pytest conftest).

    with xvfb_display() as display:      # ":93"
        subprocess.run(..., env={**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"})

Xvfb picks a free display number itself (-displayfd), so parallel runs never collide.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from collections.abc import Iterator


class XvfbUnavailable(RuntimeError):
    pass


@contextlib.contextmanager
def xvfb_display(
    width: int = 1280, height: int = 800, depth: int = 24, timeout_s: float = 10.0
) -> Iterator[str]:
    exe = shutil.which("Xvfb")
    if exe is None:
        raise XvfbUnavailable("Xvfb is not installed")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [
            exe,
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{width}x{height}x{depth}",
            "-nolisten",
            "tcp",
        ],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(write_fd)
    try:
        ready, _, _ = select.select([read_fd], [], [], timeout_s)
        number = os.read(read_fd, 64).decode().strip() if ready else ""
        if not number:
            proc.kill()
            err = proc.communicate(timeout=5)[1].decode(errors="replace")[-500:]
            raise XvfbUnavailable(f"Xvfb did not start: {err}")
        yield f":{number}"
    finally:
        os.close(read_fd)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
