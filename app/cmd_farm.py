"""`kagura farm JOBS.toml`: many renders, and long renders cut by time, as Ray tasks.

    kagura farm JOBS.toml [--ray local|auto|ADDRESS] [--gpus-per-job N] [--cpus-per-job N]
                          [--report OUT.json [-y]] [--quiet]

The jobs file is described in farm/jobs.py (and the README). Every job is checked first, with
`kagura render`'s checks; any problem: one line per problem, exit 2, nothing started. Then
each job runs as a Ray task (farm/schedule.py), the progress of all of them on stderr, a failed
task retried once; at the end a summary table (stdout) and, with --report, a JSON report.
Exit 0 when every job wrote its output, 1 when one or more failed.

Imports nothing heavy at parse time: `kagura --help` does not load Ray.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("farm", help="render the jobs of a jobs file as Ray tasks")
    p.add_argument("jobs", type=Path, help="jobs file: TOML with one [[job]] table per render")
    p.add_argument(
        "--ray",
        default="local",
        metavar="local|auto|ADDRESS",
        help="local: start Ray for this machine's GPUs and CPUs (default); auto: join the "
        "cluster `ray start` made here; HOST:6379 or ray://HOST:10001: join that cluster",
    )
    p.add_argument(
        "--gpus-per-job", type=float, default=1.0, metavar="N", help="GPUs per cuda job (1)"
    )
    p.add_argument(
        "--cpus-per-job", type=float, default=1.0, metavar="N", help="CPUs per cpu job (1)"
    )
    p.add_argument(
        "--num-cpus",
        type=int,
        default=None,
        metavar="N",
        help="--ray local: the CPUs Ray may hand out (default: all)",
    )
    p.add_argument("--report", type=Path, default=None, metavar="OUT.json", help="JSON report")
    p.add_argument(
        "-y", "--overwrite", action="store_true", help="replace an existing --report file"
    )
    p.add_argument("--quiet", action="store_true", help="no progress view")
    return p


def run(args: argparse.Namespace) -> int:
    import datetime

    from app.errors import UsageError
    from farm.jobs import JobsFileError, load_jobs
    from pipeline.sinks.output import check_output

    for option, value in (
        ("--gpus-per-job", args.gpus_per_job),
        ("--cpus-per-job", args.cpus_per_job),
    ):
        if not value > 0:
            raise UsageError(f"{option} {value:g}: expected a number > 0")
    if args.num_cpus is not None and args.num_cpus < 1:
        raise UsageError(f"--num-cpus {args.num_cpus}: expected a whole number >= 1")
    try:
        jobs = load_jobs(args.jobs)
        if args.report is not None:
            inputs = [args.jobs, *(j.request.audio for j in jobs), *(j.output for j in jobs)]
            check_output(args.report, inputs, overwrite=args.overwrite, option="--report")
    except JobsFileError as exc:
        return _refuse(exc.lines)

    from farm.progress import View
    from farm.report import job_record, summary_table, write_report
    from farm.schedule import check_fits, connect, run_farm

    started = connect(args.ray, args.num_cpus)
    import ray

    try:
        try:
            check_fits(args.jobs, jobs, args.gpus_per_job, args.cpus_per_job)
        except JobsFileError as exc:
            return _refuse(exc.lines)
        cluster = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        t0 = datetime.datetime.now(datetime.UTC)
        print(
            f"kagura: farm: {len(jobs)} job(s) on Ray ({nodes} host(s), "
            + ", ".join(f"{v:g} {k}" for k, v in sorted(cluster.items()))
            + ")",
            file=sys.stderr,
        )
        states = run_farm(
            jobs,
            gpus_per_job=args.gpus_per_job,
            cpus_per_job=args.cpus_per_job,
            view=View(jobs, quiet=args.quiet),
        )
    finally:
        if started:
            ray.shutdown()
    records = [job_record(st) for st in states]
    print(summary_table(records))
    if args.report is not None:
        header = {
            "jobs_file": str(args.jobs),
            "ray": args.ray,
            "cluster": cluster,
            "hosts": nodes,
            "started": t0.isoformat(timespec="seconds"),
            "wall_s": round(max((r["wall_s"] for r in records), default=0.0), 3),
        }
        write_report(args.report, header, records)
        print(f"kagura: wrote {args.report}", file=sys.stderr)
    failed = [r for r in records if r["status"] != "done"]
    if failed:
        print(f"kagura: farm: {len(failed)} of {len(records)} job(s) failed", file=sys.stderr)
        return 1
    return 0


def _refuse(lines: list[str]) -> int:
    for line in lines:
        print(f"kagura: error: {line}", file=sys.stderr)
    return 2
