"""Render progress on the terminal: frames done/total, fps and ETA, then a one-line summary.

    with RenderProgress(total, label="song.mp4") as progress:
        graph.run(ctx, on_frame=progress.on_frame)

The bar is tqdm on stderr (stdout stays clean for scripts). `quiet=True` prints nothing; the
counters (`frames`, `seconds`, `fps`) are kept either way. Leaving the `with` block by an
exception prints a "stopped" summary instead of the "done" one.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the served render's client shows progress: it imports no numpy
    from tqdm import tqdm

    from core.frame import Frame


class RenderProgress:
    def __init__(
        self,
        total: int,
        quiet: bool = False,
        label: str | None = None,
        file: TextIO | None = None,
        min_interval_s: float = 0.25,
    ):
        self.total = total
        self.quiet = quiet
        self.label = label or "render"
        self.file = file if file is not None else sys.stderr
        self.min_interval_s = min_interval_s
        self.frames = 0
        self._t0: float | None = None
        self._t_end: float | None = None
        self._bar: tqdm | None = None
        self._closed = False

    # ----------------------------------------------------------------- counters

    @property
    def seconds(self) -> float:
        if self._t0 is None:
            return 0.0
        end = self._t_end if self._t_end is not None else time.perf_counter()
        return end - self._t0

    @property
    def fps(self) -> float:
        s = self.seconds
        return self.frames / s if s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        fps = self.fps
        if fps <= 0 or self.total <= 0:
            return None
        return max(0, self.total - self.frames) / fps

    # ----------------------------------------------------------------- life cycle

    def start(self) -> RenderProgress:
        if self._t0 is None:
            self._t0 = time.perf_counter()
            if not self.quiet:
                from tqdm import tqdm  # imported only where a bar is shown

                self._bar = tqdm(
                    total=self.total,
                    desc=self.label,
                    unit="frame",
                    file=self.file,
                    dynamic_ncols=True,
                    mininterval=self.min_interval_s,
                    smoothing=0.1,
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                    "[{elapsed}<{remaining}, {rate_fmt}]",
                )
        return self

    def on_frame(self, frame: Frame | None = None) -> None:
        """Count one frame; matches `Graph.run(ctx, on_frame=...)`."""
        if self._t0 is None:
            self.start()
        self.frames += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self, ok: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        if self._t0 is None:
            self._t0 = time.perf_counter()
        self._t_end = time.perf_counter()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if not self.quiet:
            print(self.summary(ok), file=self.file, flush=True)

    def summary(self, ok: bool = True) -> str:
        state = "done" if ok else "stopped"
        of = f"{self.frames}" if ok and self.frames == self.total else f"{self.frames}/{self.total}"
        return f"{self.label}: {state}, {of} frames in {self.seconds:.1f} s ({self.fps:.1f} fps)"

    def __enter__(self) -> RenderProgress:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(ok=exc_type is None)
