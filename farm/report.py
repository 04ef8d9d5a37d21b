"""The end of a farm run: one record per job, the summary table, the JSON report."""

from __future__ import annotations

import json
from pathlib import Path


def job_record(st) -> dict:
    """What became of one job. `run_s`: from the start of its (last) attempt on a worker — of
    its audio analysis, for a split job — to its output written; `fps` = frames / run_s."""
    job = st.job
    done = st.status == "done"
    frames = sum(r.get("frames", 0) for r in st.results.values()) if done else 0
    starts = [r["t_start"] for r in st.results.values() if "t_start" in r]
    if st.t_start is not None:
        starts.append(st.t_start)
    run_s = (st.end - min(starts)) if done and starts and st.end else 0.0
    new_kept = sorted(str(p) for p in _kept(job.output) - st.kept_before)
    return {
        "job": job.index,
        "name": job.name,
        "output": str(job.output),
        "status": st.status,
        "attempts": max(st.attempts.values(), default=0),
        "errors": list(st.errors),
        "frames": frames,
        "segments": len(st.plan) if st.split else 1,
        # where it rendered: a `device = "auto"` job's GPU or CPU, as placed
        "device": st.device or job.request.device,
        "device_asked": "auto" if job.auto else job.request.device,
        "hosts": sorted({r["host"] for r in st.results.values() if "host" in r}),
        "wall_s": round(st.wall_s, 3),
        "run_s": round(run_s, 3),
        "fps": round(frames / run_s, 2) if run_s > 0 else 0.0,
        "join_s": round(st.join_s, 3),
        "kept": new_kept,
    }


def _kept(output: Path) -> set[Path]:
    return set(output.parent.glob(f"{output.stem}.interrupted*{output.suffix}"))


def summary_table(records: list[dict]) -> str:
    head = (
        f"{'job':>4}  {'name':<24} {'status':<7} {'device':<6} {'tries':>5} {'wall s':>8} "
        f"{'frames/s':>9}  output"
    )
    lines = [head, "-" * len(head)]
    for r in records:
        lines.append(
            f"{r['job']:>4}  {r['name'][:24]:<24} {r['status']:<7} {r['device']:<6} "
            f"{r['attempts']:>5} "
            f"{r['wall_s']:>8.1f} {r['fps']:>9.1f}  {r['output']}"
        )
        for e in r["errors"]:
            lines.append(f"{'':>6}{e}")
    return "\n".join(lines)


def write_report(path: Path, header: dict, records: list[dict]) -> Path:
    from core.atomic_write import atomic_write_text

    return atomic_write_text(path, json.dumps({**header, "jobs": records}, indent=2) + "\n")
