"""The live session headless, frozen a few times, watched for memory that stays behind.

    PYTHONPATH=. python scripts/soak_stalls.py [--minutes 3] [--stalls 3] [--stall-s 8]

A starved machine (docs/BENCHMARKS.md, soak-cpu) is reproduced without burning the cores: a
child `kill -STOP`s this process for `--stall-s` seconds, `--stalls` times, 38 s apart from
50 s on — every thread stops, the file pacer then writes the stall's audio at once, and the
analysis thread finds seconds of backlog. Every `--sample-s` it prints one JSON line: the
resident set (VmRSS), glibc's heap as mallinfo2 sees it (`arena`: taken from the system,
`inuse`: live allocations, `free`: freed but kept), open files, latency of the window, the
audio the analysis skipped. RSS rising with `free` while `inuse` stays flat is the allocator
keeping a burst's memory, not live objects growing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--stalls", type=int, default=3)
    ap.add_argument("--stall-s", type=float, default=8.0)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--size", default="480x270")
    args = ap.parse_args()

    from app.bench_soak import FrameConsumer, _pct, open_files, rss_bytes
    from app.config import parse_size
    from audio.demo_song import demo_song_path
    from pipeline.live import FilePlayback, LiveSession

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    mb = 2**20
    src = FilePlayback(demo_song_path(), loop=True, play_out=False, start=False)
    session = LiveSession(src, "studio", size=parse_size(args.size), fps=30, gpu=None)
    sys.setswitchinterval(0.0005)  # as `kagura live` does
    session.start()
    consumer = FrameConsumer(session)
    pid = os.getpid()
    plan = "; ".join(
        f"sleep {50 if i == 0 else 30}; kill -STOP {pid}; sleep {args.stall_s:g}; kill -CONT {pid}"
        for i in range(args.stalls)
    )
    freezer = subprocess.Popen(["sh", "-c", plan or "true"])
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(args.sample_s)
            _, window = consumer.take()
            st, mi = session.stats(), libc.mallinfo2()
            row = {
                "t_s": round(time.monotonic() - t0),
                "rss_mb": round(rss_bytes() / mb, 1),
                "arena_mb": round(mi.arena / mb, 1),
                "inuse_mb": round(mi.uordblks / mb, 1),
                "free_mb": round(mi.fordblks / mb, 1),
                "open_files": open_files(),
                "latency_p50_ms": _pct(window, 50),
                "analysis_skips": st.get("analysis_skips"),
                "audio_skipped_s": st.get("audio_skipped_s"),
            }
            print(json.dumps(row), flush=True)
    finally:
        freezer.kill()
        freezer.wait()
        session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
