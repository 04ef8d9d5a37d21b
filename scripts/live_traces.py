"""Summarise `kagura bench live --headless --trace FILE [--stall-watch MS]` runs.

    python3 scripts/live_traces.py TRACE.jsonl ... [--goal-ms 35] [--worst 3]

Per run (counted frames): audio-to-photon median / P99, the frame thread's issuing of a frame
(`frame.issue` wall, `frame.issue_cpu` its own CPU: wall far above CPU is waiting to run), the
collector's time, and the worst frames with their parts. Then every run's frames pooled: what
a user would see over all of them. With a `TRACE.stalls.jsonl` beside a trace (`--stall-watch`),
its stalls: how many, how late, whether the process ran meanwhile (CPU / late), and the
innermost frame of our code most often found in each thread at those moments (threads that
were only waiting — a sleep, a queue, an event — are left out). Percentiles are
core.stats.summary's, as the bench's own.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from pathlib import Path

from core.stall_watch import STALLS_SUFFIX
from core.stats import summary

# where a thread waits without holding the GIL: not a suspect
WAITING = ("threading.py", "queues.py", "selectors.py")


def counted(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("counted") and r.get("audio_to_photon_ms") is not None]


def fmt(values: list[float]) -> str:
    s = summary(values, digits=2)
    return f"{s['median']:.2f} / {s['p99']:.2f}" if s else "–"


def run_line(path: Path, rows: list[dict], worst: int) -> list[str]:
    a2p = [r["audio_to_photon_ms"] for r in rows]
    issue = [r["frame.issue"] for r in rows if "frame.issue" in r]
    cpu = [r["frame.issue_cpu"] for r in rows if "frame.issue_cpu" in r]
    gc_ms = sum(r.get("gc_ms", 0.0) for r in rows)
    out = [
        f"{path.name}: {len(rows)} frames, audio-to-photon {fmt(a2p)} ms; issuing wall "
        f"{fmt(issue)}, CPU {fmt(cpu)} ms; collector {gc_ms:.1f} ms in all"
    ]
    for r in sorted(rows, key=lambda r: -r["audio_to_photon_ms"])[:worst]:
        parts = ", ".join(
            f"{k} {r[k]:.1f}"
            for k in ("frame.lead", "frame", "frame.issue", "frame.issue_cpu", "mouth", "render")
            if k in r
        )
        out.append(f"    at {r['start_s']:.2f} s: {r['audio_to_photon_ms']:.1f} ms ({parts})")
    return out


def stall_lines(path: Path) -> list[str]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not events:
        return [f"{path.name}: no stalls"]
    late = [e["late_ms"] for e in events]
    ran = sum(e["cpu_ms"] >= 0.5 * e["late_ms"] for e in events)
    out = [
        f"{path.name}: {len(events)} stalls, late {fmt(late)} ms (max {max(late):.1f}); the "
        f"process ran through {ran} of them; collector {sum(e['gc_ms'] for e in events):.1f} ms"
    ]
    tops: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        for thread, stack in e["threads"].items():
            if stack and not any(w in stack[0] for w in WAITING):
                tops[thread][stack[0]] += 1
    for thread, counter in sorted(tops.items()):
        line, n = counter.most_common(1)[0]
        out.append(f"    {thread}: {line} ({n} of {len(events)})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--goal-ms", type=float, default=35.0, help="a run's P99 goal (35)")
    ap.add_argument("--worst", type=int, default=3, help="worst frames listed per run (3)")
    a = ap.parse_args(argv)
    pooled: list[float] = []
    p99s: list[float] = []
    for path in a.traces:
        # a stall file is read beside its trace (a `*.jsonl` glob names it too)
        if path.name.endswith(STALLS_SUFFIX):
            continue
        rows = counted(path)
        if not rows:
            print(f"{path.name}: no counted frames")
            continue
        print("\n".join(run_line(path, rows, a.worst)))
        values = [r["audio_to_photon_ms"] for r in rows]
        pooled += values
        p99s.append(summary(values, digits=2)["p99"])
        stalls = path.with_name(path.name + STALLS_SUFFIX)
        if stalls.exists():
            print("\n".join(stall_lines(stalls)))
    if pooled:
        ok = sum(p <= a.goal_ms for p in p99s)
        print(
            f"all {len(p99s)} runs pooled: {len(pooled)} frames, audio-to-photon {fmt(pooled)} "
            f"ms; runs with P99 <= {a.goal_ms:g} ms: {ok} of {len(p99s)}; median of the runs' "
            f"P99s {statistics.median(p99s):.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
