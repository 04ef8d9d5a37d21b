"""Who was running when the process stalled: a watch thread that notices its own late wake-ups.

    watch = StallWatch(threshold_ms=5.0, period_ms=2.0)
    watch.start()
    ...                                # the live session runs
    watch.stop()
    watch.events                       # one dict per stall, oldest first (at most `keep`)

A thread that sleeps `period_ms` and wakes `threshold_ms` or more late could not run: either the
GIL was held all that time by code that does not let go of it (C code that never reaches a
bytecode boundary: a sort, a big allocation, a library call that keeps the GIL), or the whole
process was not scheduled (the machine busy), or the collector ran. Which one, each event says:

    at_s      the wake-up, s on time.monotonic()
    late_ms   how much later than asked the thread woke
    cpu_ms    the process's CPU time over the same span (every thread): about `late_ms` or
              more when some thread of ours was running (the GIL's holder, or threads in C code
              without it), near 0 when the process was not running at all
    gc_ms     the collector's time within the span
    threads   {thread name: its innermost frames, "file:line function", innermost first}, read
              right after the wake-up: the thread that held the GIL has just let go of it, so
              it is still in (or just past) the call that kept it

Live sessions on the H200 stall in short bursts (docs/BENCHMARKS.md, "The temporal stage as a
CUDA graph"): `kagura bench live --headless --trace FILE --stall-watch MS` writes these events
next to the trace, to find the code that holds the GIL, if any. The watch itself takes the GIL
once per period (a few microseconds), so it is a diagnostic, not always on.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import traceback
from typing import Any

__all__ = ["STALLS_SUFFIX", "CollectorTime", "StallWatch"]

# where a run's events go: beside its trace, TRACE + STALLS_SUFFIX (`kagura bench live
# --trace TRACE --stall-watch MS` writes them, scripts/live_traces.py reads them)
STALLS_SUFFIX = ".stalls.jsonl"


class CollectorTime:
    """The cyclic garbage collector's time in this process (any thread), as running totals:
    `ns` spent collecting and `full` collections of the oldest generation since `start()`.
    A reader keeps the totals it saw last and takes the difference."""

    def __init__(self) -> None:
        self.ns = 0
        self.full = 0
        self._began = 0

    def start(self) -> CollectorTime:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)
        return self

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter_ns()
        else:
            self.ns += time.perf_counter_ns() - self._began
            self.full += info.get("generation") == 2


class StallWatch:
    def __init__(
        self,
        threshold_ms: float = 5.0,
        period_ms: float = 2.0,
        depth: int = 6,
        keep: int = 500,
    ) -> None:
        if not 0 < period_ms <= threshold_ms:
            raise ValueError(
                f"stall watch: period {period_ms:g} ms must be positive and at most the "
                f"threshold ({threshold_ms:g} ms)"
            )
        self.threshold_s = threshold_ms / 1000.0
        self.period_s = period_ms / 1000.0
        self.depth = int(depth)
        self.keep = int(keep)
        self.events: list[dict[str, Any]] = []
        self.dropped = 0  # stalls past `keep`
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gc = CollectorTime()

    def start(self) -> StallWatch:
        if self._thread is None:
            self._stop.clear()
            self._gc.start()
            self._thread = threading.Thread(
                target=self._run, name="kagura-stall-watch", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        t, self._thread = self._thread, None
        if t is not None:
            self._stop.set()
            t.join()
            self._gc.stop()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.is_set():
            gc0, cpu0 = self._gc.ns, time.process_time()
            t0 = time.monotonic()
            time.sleep(self.period_s)
            woke = time.monotonic()
            late = woke - t0 - self.period_s
            if late < self.threshold_s:
                continue
            cpu = time.process_time() - cpu0
            frames = sys._current_frames()  # read at once: what each thread is in right now
            if len(self.events) >= self.keep:
                self.dropped += 1
                continue
            names = {t.ident: t.name for t in threading.enumerate()}
            threads = {
                names.get(ident, str(ident)): self._stack(frame)
                for ident, frame in frames.items()
                if ident != me
            }
            self.events.append(
                {
                    "at_s": woke,
                    "late_ms": round(late * 1000.0, 3),
                    "cpu_ms": round(cpu * 1000.0, 3),
                    "gc_ms": round((self._gc.ns - gc0) / 1e6, 3),
                    "threads": threads,
                }
            )

    def _stack(self, frame: Any) -> list[str]:
        """The `depth` innermost frames, innermost first, as "folder/file.py:line function"."""
        inner = reversed(traceback.extract_stack(frame, limit=self.depth))
        return [f"{'/'.join(fs.filename.split('/')[-2:])}:{fs.lineno} {fs.name}" for fs in inner]
