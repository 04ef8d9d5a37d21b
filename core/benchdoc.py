"""docs/BENCHMARKS.md: each benchmark owns one marked section, replaced when it runs again."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

HEADER = "# Kagura benchmarks\n\nWritten by `kagura bench …`; each section is replaced when its benchmark runs again.\n"


def machine_line() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {platform.system()} {platform.machine()}"
    )


def today() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def write_section(path: Path, key: str, body: str) -> None:
    """Replace (or append) the section marked with `key` in the benchmarks file."""
    begin, end = f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"
    text = path.read_text() if path.exists() else HEADER
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
