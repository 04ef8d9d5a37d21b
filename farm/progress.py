"""Progress of every job: a board the workers write to (a Ray actor, made in farm/schedule.py)
and the view of it printed on the terminal.

Workers send (job, segment) → {state, done, total, fps, host, pid, attempt, device}; rates are
measured on the worker (its own clock), so hosts whose clocks differ still show true frames/s.
"""

from __future__ import annotations

import os
import socket
import sys
import time


class ProgressBoard:
    """What every task last said. Plain class: farm/schedule.py runs it as a Ray actor."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int], dict] = {}

    def update(self, key: tuple[int, int], fields: dict) -> None:
        self.entries.setdefault(tuple(key), {}).update(fields)

    def snapshot(self) -> dict[tuple[int, int], dict]:
        return self.entries


class Ticker:
    """The graph's `on_frame` in a task: counts frames, tells the board at most twice a second."""

    def __init__(self, board, key: tuple[int, int], total: int, attempt: int, every_s=0.5):
        self.board, self.key, self.total, self.attempt = board, key, total, attempt
        self.every_s = every_s
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        self.send(state="running")

    def send(self, **fields) -> None:
        if self.board is None:
            return
        elapsed = time.perf_counter() - self.t0
        fps = self.done / elapsed if elapsed > 0 and self.done else 0.0
        fields = {
            "done": self.done,
            "total": self.total,
            "fps": fps,
            "attempt": self.attempt,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **fields,
        }
        self.board.update.remote(self.key, fields)

    def __call__(self, frame=None) -> None:
        self.done += 1
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            self.send()


def job_status(entries: list[dict], status: str | None = None) -> str:
    if status is not None:
        return status
    states = {e.get("state", "queued") for e in entries} or {"queued"}
    return "running" if "running" in states else sorted(states)[0]


def job_line(job, entries: list[dict], status: str | None = None) -> str:
    """One line of the view: frames done, frames/s, ETA, where."""
    status = job_status(entries, status)
    done = sum(e.get("done", 0) for e in entries)
    total = sum(e.get("total", 0) for e in entries)
    running = [e.get("fps", 0.0) for e in entries if e.get("state") == "running"]
    # while running: the rate of all its segments together; after: the mean rate of its tasks
    fps = (
        sum(running) if running else sum(e.get("fps", 0.0) for e in entries) / max(1, len(entries))
    )
    hosts = sorted({e["host"] for e in entries if "host" in e})
    devices = sorted({e["device"] for e in entries if "device" in e})
    eta = f"ETA {max(0.0, (total - done) / fps):5.0f} s" if running and fps > 0 else " " * 10
    count = f"{done}/{total}" if total else "-"
    seg = f" ({job.segments} segments)" if job.segments > 1 else ""
    where = f"  on {', '.join(hosts)}" if hosts else ""
    where += f" ({', '.join(devices)})" if devices else ""
    return (
        f"  job {job.index:>3} {job.name[:28]:<28} {status:<10} {count:>11} frames "
        f"{fps:7.1f} fps  {eta}{seg}{where}"
    )


class View:
    """Redraws the job lines in place on a terminal; elsewhere prints a job's line when its
    status changes and all lines every `every_s` seconds."""

    def __init__(self, jobs, stream=None, quiet: bool = False, every_s: float = 10.0):
        self.jobs = jobs
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s
        self._drawn = 0
        self._last_status: dict[int, str] = {}
        self._last_all = 0.0

    def show(self, snapshot: dict, statuses: dict[int, str]) -> None:
        if self.quiet:
            return
        lines = []
        changed = []
        for job in self.jobs:
            entries = [v for (j, _), v in sorted(snapshot.items()) if j == job.index]
            status = job_status(entries, statuses.get(job.index))
            line = job_line(job, entries, status)
            lines.append(line)
            if self._last_status.get(job.index) != status:
                self._last_status[job.index] = status
                changed.append(line)
        if self.tty:
            up = f"\x1b[{self._drawn}F" if self._drawn else ""
            self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self._drawn = len(lines)
        else:
            now = time.monotonic()
            if now - self._last_all >= self.every_s:
                self._last_all = now
                changed = lines
            for line in changed:
                self.stream.write(line + "\n")
        self.stream.flush()
