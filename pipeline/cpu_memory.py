"""Keep large freed CPU buffers in the process heap instead of returning them to the OS.

glibc serves allocations above its mmap threshold (at most 32 MiB, often far less) with
fresh mmap'd pages and unmaps them on free, so every new 720p float tensor pays page faults:
measured here, an elementwise multiply of a 4×720×1280×4 float tensor took 22 ms with a fresh
output and 3.4 ms into a reused one. Raising the mmap and trim thresholds lets freed blocks be
reused (the same multiply then took 4.6 ms). Process-wide, idempotent, a no-op off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_done = False
_gc_paused = False


def keep_freed_memory(threshold_bytes: int = 1 << 30) -> bool:
    """Returns True when the allocator accepted the settings."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, threshold_bytes) == 1
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold_bytes) == 1
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok


@functools.cache  # find_library runs ldconfig: once per process, not once per job
def _glibc():
    """glibc's malloc controls, or None (another OS or C library: musl has no malloc_trim)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def share_one_arena() -> bool:
    """Every thread allocates from the one main arena (glibc's M_ARENA_MAX = 1); call it before
    the process starts threads. Returns True when the allocator accepted it.

    Why, for a long-lived process that renders job after job (`kagura serve`): each job's new
    threads take whichever arena an ended thread left, and under `keep_freed_memory`'s trim
    threshold an arena keeps what it once held, so arena after arena grew to the largest
    buffers any of a job's threads made, job after job; `malloc_trim` alone does not shrink a
    thread arena's top. With one arena and the trim after each job (`return_freed_memory`)
    every job reuses the same blocks (docs/BENCHMARKS.md, "A server's memory")."""
    libc = _glibc()
    return libc is not None and libc.mallopt(_M_ARENA_MAX, 1) == 1


def return_freed_memory() -> bool:
    """Give the pages of freed heap blocks back to the OS now (glibc's malloc_trim(0)), in
    spite of `keep_freed_memory`. Returns False off glibc.

    Why: between two jobs of `kagura serve`, a finished render's freed buffers would wait,
    resident, for the next job; given back, an idle server holds only what it keeps."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def freeze_setup_objects() -> None:
    """Collect the garbage setup left behind, then move every object alive now into the
    garbage collector's permanent generation (gc.freeze, Python >= 3.7).

    Why: model loading, graph capture and above all torch.compile leave millions of
    long-lived objects; the first frames' allocations then trigger a full collection that
    walks all of them — a pause of tens of ms in the hot path (measured: the compiled chain's
    first frame took 1.96x the steady wall time). Frozen objects are never scanned again;
    call this at the end of a setup, before the first frame.

    The collection walks every object not frozen before (a server freezes what it keeps
    between jobs: app/cmd_serve.py `forget_job_objects`). A one-shot process that paused its
    collector for the set-up (`pause_gc_for_setup`) skips it: its set-up's garbage, a few
    thousand objects, stays until the process ends, rather than a walk of the whole heap,
    torch's included, before the first frame (docs/BENCHMARKS.md)."""
    import gc

    if not _gc_paused:
        gc.collect()
    gc.freeze()
    resume_gc()


def pause_gc_for_setup() -> None:
    """Turn the cyclic garbage collector off until `freeze_setup_objects` (or `resume_gc`).

    Why: importing torch and building the stages make hundreds of thousands of long-lived
    objects, and every so many of them the collector walks all of them again — about 0.2 s
    of CPU of a short render's start on the 2-core machine (docs/BENCHMARKS.md). The setup's
    garbage is collected once by `freeze_setup_objects`, before the first frame. Only what
    this call turned off is turned on again."""
    global _gc_paused
    import gc

    if gc.isenabled():
        gc.disable()
        _gc_paused = True


def resume_gc() -> None:
    """The collector back on, if `pause_gc_for_setup` turned it off."""
    global _gc_paused
    if _gc_paused:
        import gc

        gc.enable()
        _gc_paused = False
