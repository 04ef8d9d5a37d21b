"""Where a command's wall time goes, thread by thread: a sampling profiler in the process.

    python3 scripts/sample_stacks.py REPORT.txt SECONDS -m app.cli render SONG -o out.mp4 ...

Runs the module in this interpreter while a thread reads every thread's stack each few
milliseconds for the first SECONDS (the command should run at least that long); REPORT.txt gets, per quarter second and thread, the most
frequent innermost frames. For start-up questions (`kagura bench e2e` says how long each phase
took; this says what ran in it) on machines where py-spy cannot attach. Child processes (the
analysis, render and encoder workers) are not sampled.
"""

from __future__ import annotations

import collections
import runpy
import sys
import threading
import time
from pathlib import Path

ROOT = str(Path.cwd())
PERIOD_S = 0.004
WINDOW_S = 0.25
DEPTH = 5  # frames kept per sample
# innermost functions of a thread that only waits (not news in the report)
WAITS = {"wait", "_wait", "sleep", "select", "get", "_worker", "poll", "acquire", "join", "recv"}


def _short(code, line: int) -> str:
    return f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}:{line}"


def _stack(frame) -> tuple[str, ...]:
    """The innermost frame, then the innermost frames of this repository (an import's line,
    the stage that waits), at most DEPTH in all."""
    out = [_short(frame.f_code, frame.f_lineno)]
    while frame is not None and len(out) < DEPTH:
        name = frame.f_code.co_filename
        if name.startswith(ROOT) and "/site-packages/" not in name and "/.venv/" not in name:
            out.append(_short(frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


def main() -> None:
    report, seconds, flag, module, *rest = sys.argv[1:]
    if flag != "-m":
        raise SystemExit("usage: sample_stacks.py REPORT SECONDS -m MODULE ARGS...")
    t0 = time.perf_counter()
    samples: list[tuple[float, str, tuple[str, ...]]] = []

    def sample() -> None:
        me = threading.get_ident()
        end = t0 + float(seconds)
        while time.perf_counter() < end:
            names = {t.ident: t.name for t in threading.enumerate()}
            now = time.perf_counter() - t0
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    samples.append((now, names.get(ident, str(ident)), _stack(frame)))
            time.sleep(PERIOD_S)
        _write(report, samples)  # here, not at exit: the CLI ends with os._exit

    sampler = threading.Thread(target=sample, daemon=True, name="sampler")
    sampler.start()
    sys.argv = [module, *rest]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sampler.join()


def _write(report: str, samples) -> None:
    windows: dict[tuple[int, str], collections.Counter] = collections.defaultdict(
        collections.Counter
    )
    for t, name, stack in samples:
        windows[(int(t / WINDOW_S), name)][stack] += 1
    with open(report, "w", encoding="utf-8") as f:
        for (w, name), stacks in sorted(windows.items()):
            total = sum(stacks.values())
            top = stacks.most_common(2)
            # a thread only waiting (its innermost frame a wait/sleep/select) is not news
            idle = all(s[0].split(":")[1] in WAITS for s, _ in top)
            if idle and top[0][1] > 0.8 * total:
                continue
            for stack, n in top:
                f.write(f"{w * WINDOW_S:6.2f}s {name[:22]:22s} {n:3d}/{total:<3d} ")
                f.write(" < ".join(stack) + "\n")


if __name__ == "__main__":
    main()
