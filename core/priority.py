"""Thread priority for the real-time path (no torch: the live session's threads ask for it).

request_realtime_priority(policy="fifo", priority=10, nice=-10) -> str
    Asks the OS to schedule the *calling thread* (Linux applies both calls below to the
    thread, not the whole process) with SCHED_FIFO (or "rr": SCHED_RR) at `priority`;
    where that is not permitted (no CAP_SYS_NICE / RLIMIT_RTPRIO, another OS), lowers its
    nice value to `nice` instead; where that is refused too, leaves it as it is. Returns one
    plain sentence saying what happened; never raises for a refusal. Threads and processes
    the caller starts afterwards are not real-time (SCHED_RESET_ON_FORK).
"""

from __future__ import annotations

import os

_POLICIES = {"fifo": "SCHED_FIFO", "rr": "SCHED_RR"}


def _lower_nice(nice: int) -> str:
    if not hasattr(os, "setpriority"):
        return "lowering the nice value is not available on this OS either; priority unchanged"
    try:
        before = os.getpriority(os.PRIO_PROCESS, 0)
        if before <= nice:
            return f"the nice value is already {before}; priority unchanged"
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        return f"the nice value was lowered from {before} to {nice} instead"
    except PermissionError:
        return f"lowering the nice value to {nice} is not permitted either; priority unchanged"
    except OSError as exc:
        return f"lowering the nice value failed ({exc.strerror}); priority unchanged"


def request_realtime_priority(policy: str = "fifo", priority: int = 10, nice: int = -10) -> str:
    if policy not in _POLICIES:
        raise ValueError(f"policy must be one of {sorted(_POLICIES)}, got {policy!r}")
    name = _POLICIES[policy]
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, name):
        return (
            f"Real-time scheduling ({name}) is not available on this OS; " + _lower_nice(nice) + "."
        )
    const = getattr(os, name)
    lo, hi = os.sched_get_priority_min(const), os.sched_get_priority_max(const)
    prio = max(lo, min(hi, int(priority)))
    # threads and processes this one starts do not inherit it (a thread pool created from
    # here would otherwise spin at real-time priority)
    flags = const | getattr(os, "SCHED_RESET_ON_FORK", 0)
    try:
        os.sched_setscheduler(0, flags, os.sched_param(prio))
    except PermissionError:
        return f"Real-time scheduling ({name}) is not permitted; " + _lower_nice(nice) + "."
    except OSError as exc:
        return f"Real-time scheduling ({name}) failed ({exc.strerror}); " + _lower_nice(nice) + "."
    return f"This thread now runs with {name} at priority {prio}."
