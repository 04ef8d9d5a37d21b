"""Shared memory and worker processes for the parallel encoder and the parallel idol render.

`SharedArena` is one block of memory that a process and the worker processes it starts map at
the same time, so big frames (a 1080p RGBA frame is 8 MB) cross the process boundary with one
memcpy into a slot instead of being pickled through a pipe.

On Linux it is an anonymous `memfd` passed to each worker as a file descriptor when the worker
is spawned (`multiprocessing.reduction.DupFd`). Unlike `multiprocessing.shared_memory` it does
not live in `/dev/shm` — container images often mount that with 64 MiB, which a 1080p slot ring
overflows (and a tmpfs that runs out of pages answers with SIGBUS, not an error) — and it
disappears with the last process that maps it, so a killed render leaks nothing. Where
`os.memfd_create` is missing, `multiprocessing.shared_memory` is used instead.

Workers are started with the `spawn` method: a render's main process has CUDA, torch's thread
pools and the graph's threads running, and forking such a process is unsafe. The worker
modules import only numpy, av and skia, so a spawn costs well under a second.
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing as mp
import os
import signal
import threading
import time
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait

import numpy as np

from core.parent_death import ArmedTarget

PAGE = 4096


class WorkerProcessError(RuntimeError):
    """A worker process (encoder or renderer) failed or died; the message is one line."""


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers narrow), ≥ 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# "spawn" unless a long-lived process asked for a fork server (`use_forkserver`)
_start_method = "spawn"


def spawn_context():
    return mp.get_context(_start_method)


def use_forkserver(preload: list[str]) -> None:
    """Start this process's workers from a fork server that has imported `preload`: a
    long-lived process (`kagura serve`) starts render and encoder workers for every job, and a
    fork of the server starts them with their modules imported instead of a fresh interpreter
    importing them. The server is a new interpreter, not a fork of this process (which has
    CUDA and threads running), so forking it is as safe as `spawn`."""
    global _start_method
    from multiprocessing import forkserver

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    forkserver.ensure_running()
    _start_method = "forkserver"


def page_round(nbytes: int) -> int:
    """`nbytes` rounded up to whole pages (a slot in a `SharedArena` starts on a page)."""
    return -(-nbytes // PAGE) * PAGE


def ignore_sigint() -> None:
    """In a worker: Ctrl+C reaches the whole process group; the main process decides."""
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class _FdHandle:
    """Pickles into the memfd's descriptor for a process being spawned."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size

    def __reduce__(self):
        return (_attach_fd, (reduction.DupFd(self.fd), self.size))


class _ShmHandle:
    def __init__(self, name: str, size: int) -> None:
        self.name, self.size = name, size

    def __reduce__(self):
        return (_attach_shm, (self.name, self.size))


class _Mapping:
    """What a worker holds: a buffer of `size` bytes (and what keeps it alive)."""

    def __init__(self, buf, size: int, keep=None) -> None:
        self.buf, self.size, self._keep = buf, size, keep

    def array(self, offset: int, shape: tuple[int, ...], dtype) -> np.ndarray:
        return np.ndarray(shape, dtype=dtype, buffer=self.buf, offset=offset)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if isinstance(self.buf, mmap.mmap):
                self.buf.close()
            elif self._keep is not None:
                self._keep.close()


def _attach_fd(dup, size: int) -> _Mapping:
    fd = dup.detach()
    try:
        return _Mapping(mmap.mmap(fd, size), size)
    finally:
        os.close(fd)


def _attach_shm(name: str, size: int) -> _Mapping:
    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(name=name, create=False)
    with contextlib.suppress(Exception):  # the creator owns it; workers must not unlink it
        from multiprocessing import resource_tracker

        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    return _Mapping(shm.buf, size, keep=shm)


class SharedArena:
    """`nbytes` of memory shared with spawned workers; `handle` goes into a Process's args."""

    def __init__(self, nbytes: int, name: str = "kagura") -> None:
        self.size = max(1, int(nbytes))
        self._fd: int | None = None
        self._shm = None
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create(name, getattr(os, "MFD_CLOEXEC", 0))
            try:
                os.ftruncate(fd, self.size)
                buf = mmap.mmap(fd, self.size)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self.handle = _FdHandle(fd, self.size)
            self._mapping = _Mapping(buf, self.size)
        else:  # pragma: no cover - not Linux
            from multiprocessing import shared_memory

            self._shm = shared_memory.SharedMemory(create=True, size=self.size)
            self.handle = _ShmHandle(self._shm.name, self.size)
            self._mapping = _Mapping(self._shm.buf, self.size, keep=None)

    def array(self, offset: int, shape: tuple[int, ...], dtype) -> np.ndarray:
        return self._mapping.array(offset, shape, dtype)

    def close(self) -> None:
        """Unmap (views made by `array` must be gone) and free once no worker maps it."""
        with contextlib.suppress(BufferError):  # a view still alive: freed with the process
            self._mapping.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._shm is not None:  # pragma: no cover - not Linux
            with contextlib.suppress(Exception):
                self._shm.close()
                self._shm.unlink()
            self._shm = None


def start_worker(ctx, target, args: tuple, name: str) -> tuple:
    """Spawn a daemon process running `target(*args, tasks, out)` with one pipe each way.

    Returns (process, the end to send tasks on, the end to receive its messages from). The
    worker dies with this process, even one killed with SIGKILL (`parent_death`).
    """
    tasks_r, tasks_w = ctx.Pipe(duplex=False)
    out_r, out_w = ctx.Pipe(duplex=False)
    armed = ArmedTarget(
        kernel_signal=threading.current_thread() is threading.main_thread(),
        forked_by_server=ctx.get_start_method() == "forkserver",
    )
    args = (target, *args, tasks_r, out_w)
    proc = ctx.Process(target=armed, args=args, name=name, daemon=True)
    proc.start()
    tasks_r.close()
    out_w.close()
    return proc, tasks_w, out_r


def ready_workers(procs, conns: list[Connection], live, timeout: float, read_exited: bool = True):
    """Wait up to `timeout` s on the workers `live` (indices into `procs` and `conns`).

    Yields (k, conn) for each worker k with a message to read from `conns[k]`, and (k, None)
    for one that has exited with nothing left to read. A worker that has exited with a
    message still unread yields (k, conn) if `read_exited`, else nothing (its connection is
    reported ready too, now or at the next wait).
    """
    by_conn = {conns[k]: k for k in live}
    sentinels = {procs[k].sentinel: k for k in live}
    for ready in wait(list(by_conn) + list(sentinels), timeout=timeout):
        if ready in sentinels:
            k = sentinels[ready]
            if not conns[k].poll():
                yield k, None
            elif read_exited:
                yield k, conns[k]
        else:
            yield by_conn[ready], ready


def wait_started(waiting: set[int], timeout_s: float, collect, late: WorkerProcessError) -> None:
    """Call `collect(waiting)` — which discards each worker that reports ready — until
    `waiting` is empty; raise `late` if that takes more than `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while waiting:
        if time.monotonic() > deadline:
            raise late
        collect(waiting)


def stop_processes(procs, conns: list[Connection] | None = None, grace_s: float = 2.0) -> None:
    """End worker processes: wait `grace_s` for those told to stop, then kill the rest."""
    deadline = time.monotonic() + grace_s
    for p in procs:
        if p is None:
            continue
        with contextlib.suppress(Exception):
            p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            with contextlib.suppress(Exception):
                p.kill()
            with contextlib.suppress(Exception):
                p.join(1.0)
    for c in conns or []:
        with contextlib.suppress(Exception):
            c.close()


def exit_text(proc, settle_s: float = 1.0) -> str:
    """How `proc` ended, for an error message. Waits up to `settle_s` for its exit code: when
    two threads poll the same Process (the joiner's sentinel wait and a failed send), the one
    that reaps the child sets the code an instant after the other has seen "no child"."""
    code = proc.exitcode
    deadline = time.monotonic() + settle_s
    while code is None and time.monotonic() < deadline:
        time.sleep(0.01)
        code = proc.exitcode
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
