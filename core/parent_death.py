"""Worker processes die with the process that started them, even one killed with SIGKILL.

A worker otherwise notices its parent is gone only when it next reads a closed pipe: one busy
drawing or encoding, or still importing its modules, lives on for a second or more after a
`kill -9` of the render, holding memory and cores.

Two guards, both set up by `start_worker` (`core.workers`):

- On Linux, `PR_SET_PDEATHSIG`: the kernel sends the worker SIGKILL the moment its parent
  exits. The kernel ties that to the parent *thread* that started the worker, so it is only
  armed for workers started from the main thread (a stage thread that ends would take its
  workers with it). It is armed while the worker unpickles its target — before the heavy
  modules its arguments need are imported — and a parent that died before that is caught by
  comparing `os.getppid()` with the pid it should be.
- Everywhere: a thread in the worker waits on multiprocessing's parent sentinel (a pipe only
  the parent holds open) and ends the worker when it closes.

Only the standard library here: this module is imported first in a fresh worker.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ArmedTarget:
    """Stands in for a Process target: unpickled in the worker, it arms the guards and becomes
    `run_guarded` (the real target and its arguments follow in the Process's args)."""

    def __init__(self, kernel_signal: bool, forked_by_server: bool = False) -> None:
        # a fork server's child has the fork server for its parent (core.workers
        # use_forkserver): it lives as long as this process and ends with it (its children
        # then get the kernel's signal), so its pid is not compared
        self.parent_pid = None if forked_by_server else os.getpid()
        self.kernel_signal = kernel_signal or forked_by_server

    def __reduce__(self):
        return (_arm, (self.parent_pid, self.kernel_signal))

    def __call__(self, target, *args):  # pragma: no cover - only the unpickled form runs
        return run_guarded(target, *args)


def _arm(parent_pid: int | None, kernel_signal: bool):
    if kernel_signal and sys.platform.startswith("linux"):
        _set_pdeathsig()
    if parent_pid is not None and os.getppid() != parent_pid:  # it died before the signal was armed
        os._exit(1)
    return run_guarded


def _set_pdeathsig() -> None:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the sentinel thread still guards
        pass


def run_guarded(target, *args):
    """In the worker: watch the parent, then run `target(*args)`."""
    import multiprocessing as mp

    parent = mp.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    if sentinel is not None:
        threading.Thread(
            target=_exit_when_closed, args=(sentinel,), name="kagura-parent-watch", daemon=True
        ).start()
    return target(*args)


def _exit_when_closed(sentinel) -> None:
    from multiprocessing.connection import wait

    wait([sentinel])
    os._exit(1)
