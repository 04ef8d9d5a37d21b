"""The live session headless with its CPU cut for a while: where the latency goes, and how fast
it comes back.

    PYTHONPATH=. python scripts/soak_starved.py [--phases 30:0,60:0.3,45:0] [--size 480x270]

A starved session (docs/BENCHMARKS.md, soak-cpu: the first ten minutes of the 30-minute
re-soak) is reproduced without loading the machine: this process moves itself into a cgroup
(v1 `cpu` controller, needs root) whose CFS quota each phase sets — `SECONDS:CORES`, 0 for no
limit. Other sessions' work is not slowed; this one gets at most CORES of CPU, as it would
beside a busier machine. A third field `noshed` runs that phase with the frame thread's
shedding for the analysis off (the session's Shedder, pipeline/shedding.py, with age_s 0), so old and new behaviour
can alternate in one run. Every `--sample-s` it prints one JSON line: frames published, the
audio-to-publication latency's median and P99 (as `kagura bench soak` measures it) and its
parts' medians — `age`: the mouth's audio age at the frame's start (how far the analysis is
behind), `frame`: the frame's own time from its start to publication, `queue`: from
publication to the consumer — the CPU the process used (cores), the analysis skips and the
ticks the frame thread started late. The cgroup is left and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.bench_soak import FrameConsumer

CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


class _Parts(FrameConsumer):
    """Every published frame's latency and its parts, per window: (latency, mouth age, the
    frame's own time, the rest from its pts to publication), ms."""

    def row(self, frame, since_pts_ms: float, age_ms: float):
        took = frame.timings.get("frame", 0.0)
        return since_pts_ms + age_ms, age_ms, took, since_pts_ms - took


def _limit(group: Path, cores: float) -> None:
    quota = -1 if cores <= 0 else max(1000, round(cores * PERIOD_US))
    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(quota))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default="30:0,60:0.3,45:0", help="SECONDS:CORES,... (0: free)")
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--size", default="480x270")
    ap.add_argument("--shed-s", type=float, help="the Shedder's age_s where shedding is on")
    args = ap.parse_args()
    phases = [p.split(":") for p in args.phases.split(",")]

    from app.bench_soak import _pct
    from app.config import parse_size
    from audio.demo_song import demo_song_path
    from pipeline.live import FilePlayback, LiveSession

    group = CGROUP_ROOT / f"kagura-starved-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cgroup.procs").write_text(str(os.getpid()))  # every thread, and later ones
        src = FilePlayback(demo_song_path(), loop=True, play_out=False, start=False)
        session = LiveSession(src, "studio", size=parse_size(args.size), fps=30, gpu=None)
        sys.setswitchinterval(0.0005)  # as `kagura live` does
        session.start()
        parts = _Parts(session)
        t0 = time.monotonic()
        last = {"frames": 0, "cpu": sum(os.times()[:2]), "t": t0, "skips": 0, "late": 0,
                "shed": 0}  # fmt: skip
        try:
            shed_s = session.shedder.age_s if args.shed_s is None else args.shed_s
            for seconds, cores, *flags in ((float(p[0]), float(p[1]), *p[2:]) for p in phases):
                _limit(group, cores)
                session.shedder.age_s = 0.0 if "noshed" in flags else shed_s
                end = time.monotonic() + seconds
                while time.monotonic() < end - 1e-3:
                    time.sleep(min(args.sample_s, end - time.monotonic()))
                    now, cpu = time.monotonic(), sum(os.times()[:2])
                    frames, rows = parts.take()
                    st = session.stats()

                    def col(i, rows=rows):
                        return [r[i] for r in rows]

                    row = {
                        "t_s": round(now - t0, 1),
                        "cores_allowed": cores or None,
                        "shed": session.shedder.age_s,
                        "cpu_cores": round((cpu - last["cpu"]) / (now - last["t"]), 2),
                        "frames": frames - last["frames"],
                        "latency_p50_ms": _pct(col(0), 50),
                        "latency_p99_ms": _pct(col(0), 99),
                        "age_p50_ms": _pct(col(1), 50),
                        "frame_p50_ms": _pct(col(2), 50),
                        "queue_p50_ms": _pct(col(3), 50),
                        "analysis_skips": st["analysis_skips"] - last["skips"],
                        "late_ticks": st["late_ticks"] - last["late"],
                        "shed_ticks": st["shed_ticks"] - last["shed"],
                    }
                    last = {"frames": frames, "cpu": cpu, "t": now, "skips": st["analysis_skips"],
                            "late": st["late_ticks"], "shed": st["shed_ticks"]}  # fmt: skip
                    print(json.dumps(row), flush=True)
        finally:
            _limit(group, 0)
            session.stop()
    finally:
        (CGROUP_ROOT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
