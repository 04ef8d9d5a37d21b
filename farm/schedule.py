"""Ray: start a local instance or join a cluster, run every job as tasks, retry a failed task
once, join the segments of split jobs, and keep the progress view up to date.

Resources: a job on `device = "cuda"` asks `gpus_per_job` GPUs (Ray gives the task those
GPUs through CUDA_VISIBLE_DEVICES, so the render's "cuda" is its own GPU); a CPU job asks
`cpus_per_job` CPUs. Ray queues what does not fit and starts it when a slot frees, so a batch
larger than the cluster simply flows through it. Each segment of a split job is a task with
the job's resources; the driver joins them when all are back (farm/segments.py).

`device = "auto"` jobs are placed by the driver, not queued in Ray: when one can start, it
takes `gpus_per_job` GPUs (and one CPU) if that many are free (the cluster's free resources,
less what this farm's own tasks already asked), else `cpus_per_job` CPUs if free; else it
waits for either. Its segments
all run on the device it got (the cuda and the CPU render may differ in look and size). A
CPU render is many times slower than a GPU one: `device = "cuda"` waits for a GPU instead.

Failures: a task that raises or whose worker dies (killed, out of memory, host lost) is
submitted again once; a second failure marks the job failed (for a split job: its other
segments are cancelled) and the others go on. Every failure's one line goes to the report.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from app.errors import UsageError, one_line
from farm.jobs import FarmJob, JobsFileError
from farm.progress import ProgressBoard, View

MAX_ATTEMPTS = 2  # the first run and one retry
WHOLE = -1  # the segment number of a job that is not split
ANALYSIS = -2  # ... and of a split job's audio analysis, before its segments


def connect(mode: str, num_cpus: int | None = None, keep_workers: int = 0) -> bool:
    """Start (`local`) or join (`auto`: the cluster `ray start` made on this host; else an
    address, `HOST:6379` or `ray://HOST:10001`) a Ray cluster. True when this call started
    Ray in this process (the caller shuts it down); a Ray already up here is used as it is.
    `keep_workers` (local only): idle worker processes Ray keeps instead of ending them after
    a second (its default keeps about one per CPU, actors included); the benchmark keeps its
    warmed workers this way."""
    import ray

    if ray.is_initialized():
        return False
    # the workers' own output stays in Ray's logs: the progress view owns the terminal
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if mode == "local":
            keep = {"num_workers_soft_limit": keep_workers} if keep_workers else None
            # "local": a new instance even where `ray start` left a cluster (or its address file)
            ray.init(address="local", num_cpus=num_cpus, _system_config=keep, **quiet)
        else:
            ray.init(address=mode, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "a cluster on this host" if mode == "auto" else mode
        # a cluster `ray start` made has token authentication on (Ray's default): the driver
        # sends the token only in that mode
        token = (
            ""
            if os.environ.get("RAY_AUTH_MODE")
            else (
                "; a cluster with token authentication (Ray's default) needs RAY_AUTH_MODE=token "
                "and its ~/.ray/auth_token here"
            )
        )
        raise UsageError(
            f"--ray {mode}: cannot join {where} ({one_line(exc)[:200]}); start one with "
            f"`ray start --head` or use --ray local{token}"
        ) from None
    return True


def check_fits(jobs_file: Path, jobs: list[FarmJob], gpus_per_job: float, cpus_per_job: float):
    """Refuse (exit 2, nothing started) jobs the cluster can never run."""
    import ray

    have = ray.cluster_resources()
    lines = []
    for job in jobs:
        if job.needs_gpu and have.get("GPU", 0) < gpus_per_job:
            lines.append(
                f"{jobs_file}: job {job.index}: device cuda needs {gpus_per_job:g} GPU, the Ray "
                f'cluster has {have.get("GPU", 0):g}; use device = "auto" (the CPU where no GPU '
                'is free) or "cpu", or join a GPU cluster'
            )
        elif not job.needs_gpu and have.get("CPU", 0) < cpus_per_job:
            lines.append(
                f"{jobs_file}: job {job.index}: needs {cpus_per_job:g} CPUs (--cpus-per-job), the "
                f"Ray cluster has {have.get('CPU', 0):g}"
            )
    if lines:
        raise JobsFileError(lines)


def failure_line(exc: BaseException) -> str:
    """One line for what a task raised (the cause, not Ray's wrapping and traceback)."""
    import ray.exceptions as rex

    from app.errors import kept_suffix

    if isinstance(exc, rex.RayTaskError):
        cause = getattr(exc, "cause", None)
        if cause is not None:
            return f"{type(cause).__name__}: {one_line(cause)[:300]}{kept_suffix(cause)}"
        return one_line(str(exc).strip().splitlines()[-1])[:300]
    if isinstance(exc, rex.WorkerCrashedError):
        return "the worker process died (killed, or out of memory)"
    if isinstance(exc, rex.NodeDiedError):
        return "the host running it left the cluster"
    return f"{type(exc).__name__}: {one_line(exc)[:300]}"


def place(
    free_gpus: float, free_cpus: float, gpus_per_job: float, cpus_per_job: float
) -> str | None:
    """Where a `device = "auto"` job starts now: "cuda", "cpu", or None (wait). `free_*`: what
    the cluster has free beyond this farm's own asks. (No CPU is kept back for GPU jobs: each
    GPU task holds a CPU, so a GPU that frees frees a CPU with it.)"""
    if free_gpus >= gpus_per_job and free_cpus >= 1:
        return "cuda"
    if free_cpus >= cpus_per_job:
        return "cpu"
    return None


@dataclass
class JobState:
    job: FarmJob
    device: str | None = None  # where it renders ("cuda" | "cpu"); None: auto, not placed yet
    status: str = "queued"  # queued → running → (joining →) done | failed
    attempts: dict[int, int] = field(default_factory=dict)  # segment → attempts so far
    errors: list[str] = field(default_factory=list)
    results: dict[int, dict] = field(default_factory=dict)  # segment → what the task returned
    plan: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    track: object = None  # a Ray object reference to the AvatarTrack (split jobs)
    end: float | None = None  # time.time() when its output was written (or it failed)
    wall_s: float = 0.0  # from the farm's start to `end`
    t_start: float | None = None  # a split job: when its analysis started on a worker
    join_s: float = 0.0
    kept_before: set = field(default_factory=set)

    @property
    def split(self) -> bool:
        return self.job.segments > 1


def _kept_files(output: Path) -> set[Path]:
    """NAME.interrupted*.EXT next to an output: a stopped attempt's frames (output rule 4)."""
    return set(output.parent.glob(f"{output.stem}.interrupted*{output.suffix}"))


def run_farm(
    jobs: list[FarmJob],
    *,
    gpus_per_job: float = 1,
    cpus_per_job: float = 1,
    crf: int | None = None,
    view: View | None = None,
    poll_s: float = 0.25,
) -> list[JobState]:
    """Run every job on the Ray cluster this process is connected to; the state of each at
    the end. `crf`: the segments' x264 CRF (None: render's own; 0: lossless, for identity checks)."""
    import ray

    from farm import segments as seg
    from farm.tasks import analyse_job, run_job, run_segment

    t0 = time.time()
    board = ray.remote(num_cpus=0)(ProgressBoard).remote()
    job_task = ray.remote(max_retries=0)(run_job)
    seg_task = ray.remote(max_retries=0)(run_segment)
    analyse_task = ray.remote(max_retries=0)(analyse_job)
    crf = seg.DEFAULT_CRF if crf is None else crf
    states = {
        job.index: JobState(
            job, None if job.auto else job.request.device, kept_before=_kept_files(job.output)
        )
        for job in jobs
    }
    pending: dict = {}  # object ref → (job index, segment)

    def resources(st: JobState, s: int) -> dict:
        if s == ANALYSIS:
            return {"num_cpus": 1}
        if st.device == "cuda":
            return {"num_gpus": gpus_per_job, "num_cpus": 1}
        return {"num_cpus": cpus_per_job}

    def submit(st: JobState, s: int) -> None:
        attempt = st.attempts.get(s, 0) + 1
        st.attempts[s] = attempt
        job, key = st.job, (st.job.index, s)
        req = job.request_on(st.device)
        opts = resources(st, s)
        if s == WHOLE:
            ref = job_task.options(**opts).remote(req, key, board, attempt)
        elif s == ANALYSIS:
            st.track, ref = analyse_task.options(**opts, num_returns=2).remote(
                req, key, board, attempt
            )
        else:
            a, b = st.plan[s]
            ref = seg_task.options(**opts).remote(req, st.track, a, b, key, board, attempt, crf)
        pending[ref] = (job.index, s)

    def start(st: JobState) -> None:
        # a split job's audio is analysed once, by a task, for all its segments
        submit(st, ANALYSIS if st.split else WHOLE)

    def place_waiting() -> None:
        """Start the auto jobs that can start now (in file order)."""
        waiting = [st for st in states.values() if st.device is None]
        if not waiting:
            return
        free = ray.available_resources()
        asked = {"num_gpus": 0.0, "num_cpus": 0.0}
        for j, s in pending.values():
            for k, v in resources(states[j], s).items():
                asked[k] += v
        have = ray.cluster_resources()
        free_gpus = min(free.get("GPU", 0), have.get("GPU", 0) - asked["num_gpus"])
        free_cpus = min(free.get("CPU", 0), have.get("CPU", 0) - asked["num_cpus"])
        for st in waiting:
            device = place(free_gpus, free_cpus, gpus_per_job, cpus_per_job)
            if device is None:
                return
            st.device = device
            ask = resources(st, WHOLE)  # a split job's segments follow its analysis
            free_gpus -= ask.get("num_gpus", 0)
            free_cpus -= ask.get("num_cpus", 0)
            start(st)

    def fail(st: JobState, line: str) -> None:
        st.status, st.end = "failed", time.time()
        st.errors.append(line)
        for ref, (j, _) in list(pending.items()):
            if j == st.job.index:
                del pending[ref]
                ray.cancel(ref, force=True)

    for st in states.values():
        if st.device is not None:
            start(st)
    place_waiting()

    while pending or any(st.device is None for st in states.values()):
        refs = list(pending)
        if refs:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=poll_s)
        else:  # only auto jobs waiting for a slot others hold
            ready = []
            time.sleep(poll_s)
        for ref in ready:
            if ref not in pending:
                continue
            j, s = pending.pop(ref)
            st = states[j]
            try:
                value = ray.get(ref)
            except Exception as exc:
                line = failure_line(exc)
                what = {WHOLE: "", ANALYSIS: "analysis: "}.get(s, f"segment {s + 1}: ")
                if st.attempts[s] < MAX_ATTEMPTS:
                    st.errors.append(f"attempt {st.attempts[s]}: {what}{line}")
                    st.status = "retrying"
                    submit(st, s)
                else:
                    fail(st, f"attempt {st.attempts[s]}: {what}{line}")
                continue
            if s == ANALYSIS:  # the segments get the track from the object store, by ref
                st.t_start = value["t_start"]
                st.plan = seg.plan(value["frames"], st.job.request.fps, st.job.segments)
                for k in range(len(st.plan)):
                    submit(st, k)
                continue
            st.results[s] = value
            if not st.split:
                st.status, st.end = "done", time.time()
            elif len(st.results) == len(st.plan):
                _join(st)
        place_waiting()
        snapshot = ray.get(board.snapshot.remote())
        for st in states.values():
            if st.status == "queued" and any(k[0] == st.job.index for k in snapshot):
                st.status = "running"
        if view is not None:
            view.show(snapshot, _view_statuses(states))
    if view is not None:
        view.show(ray.get(board.snapshot.remote()), _view_statuses(states))
    for st in states.values():
        st.wall_s = (st.end or time.time()) - t0
    ray.kill(board)
    return list(states.values())


def _view_statuses(states: dict[int, JobState]) -> dict[int, str]:
    return {
        i: st.status
        for i, st in states.items()
        if st.status in ("retrying", "joining", "done", "failed")
    }


def _join(st: JobState) -> None:
    """All segments are back: write the output (on the driver, which reads the audio)."""
    from farm import segments as seg

    st.status = "joining"
    try:
        from app.render_job import check_output_safety

        check_output_safety(st.job.request)  # a file that appeared meanwhile is not replaced
        parts = [st.results[s].pop("packets") for s in range(len(st.plan))]
        st.join_s = seg.join(st.job.request, seg.decode(st.job.request), parts)["join_s"]
    except Exception as exc:
        from app.errors import os_error_in, os_error_line

        os_exc = os_error_in(exc)
        line = os_error_line(os_exc) if os_exc is not None else one_line(exc)
        st.status, st.end = "failed", time.time()
        st.errors.append(f"join: {type(exc).__name__}: {line[:300]}")
        return
    st.status, st.end = "done", time.time()
