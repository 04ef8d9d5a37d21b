"""`kagura bench farm`: what `kagura farm` gains from its Ray slots.

    kagura bench farm [--ray local|auto|ADDRESS] [--device cpu|cuda] [--jobs N] [--size WxH]
                      [--fps F] [--seconds S] [--split-seconds S] [--repeats R]
                      [--out docs/BENCHMARKS.md] [--no-write]

Slots: the GPUs of the cluster for `--device cuda` (one job per GPU), else its CPUs (one job
per CPU). Two comparisons, each run through `farm.schedule.run_farm` — the code path of
`kagura farm` — on jobs of the demo song:

- batch: `--jobs` jobs with every slot free, against the same jobs one at a time (each job then
  asks for every slot, so Ray runs one at a time while the job itself may use the whole
  machine: on the CPU its threads use all cores, as a lone `kagura render` would). Throughput =
  all frames / wall time from the first submission to the last file written.
- split: one video of `--split-seconds` cut into one segment per slot, against the same video
  as one job. Wall time as above; the split's includes the driver's audio analysis and the
  join. The decoded frames of the two files are compared too: with render's lossy CRF they are
  equal up to the encoder's noise (max difference and PSNR reported; the pictures drawn are
  identical, tests/test_farm_segments.py).

Before timing, one worker process per slot renders a short job (all started together, so each
is its own process), so the workers' imports and JIT compiles (torch, librosa) are paid outside
the timed runs. Goals (issue 18, on N GPUs): batch ≥ 0.9·N× and split ≥ 0.8·N×.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

SONG = Path(__file__).resolve().parents[1] / "audio" / "assets" / "demo_song.ogg"


def add_parser(subparsers) -> argparse.ArgumentParser:
    b = subparsers.add_parser("farm", help="kagura farm: N slots vs 1, split vs unsplit")
    b.add_argument("--ray", default="local", metavar="local|auto|ADDRESS")
    b.add_argument("--num-cpus", type=int, default=None, help="--ray local: CPUs for Ray")
    b.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    b.add_argument("--jobs", type=int, default=4, help="jobs in the batch (default 4)")
    b.add_argument("--size", default="320x180")
    b.add_argument("--fps", type=int, default=24)
    b.add_argument("--seconds", type=float, default=4.0, help="seconds of song per batch job")
    b.add_argument("--split-seconds", type=float, default=8.0, help="the long video, seconds")
    b.add_argument("--repeats", type=int, default=2)
    b.add_argument("--out", type=Path, default=Path("docs/BENCHMARKS.md"))
    b.add_argument("--no-write", action="store_true", help="print only, do not update the file")
    return b


def _jobs(folder: Path, args, outputs: list[str], seconds: float, segments: int = 1):
    from farm.jobs import load_jobs

    lines = [
        "[defaults]",
        f'audio = "{SONG}"',
        f'size = "{args.size}"',
        f"fps = {args.fps}",
        f"seconds = {seconds}",
        f'device = "{args.device}"',
        "overwrite = true",
        "",
    ]
    for name in outputs:
        lines += ["[[job]]", f'output = "{folder / name}"', f"segments = {segments}", ""]
    path = folder / f"jobs-{len(list(folder.iterdir()))}.toml"
    path.write_text("\n".join(lines))
    return load_jobs(path)


def _warm_worker(board, k: int, n: int, req) -> int:
    """Hold until `n` of these run at once (so each is its own worker process), then render
    `req`: that worker has imported and JIT-compiled everything a job needs."""
    import os

    import ray

    from farm.tasks import run_job

    board.update.remote((0, k), {"pid": os.getpid()})
    deadline = time.monotonic() + 600
    while len(ray.get(board.snapshot.remote())) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    run_job(req, (0, k), None, 1)
    return os.getpid()


def _warm(folder: Path, args, slots: int) -> int:
    """Every slot's worker process warmed; the number of distinct processes."""
    import ray

    from farm.progress import ProgressBoard

    board = ray.remote(num_cpus=0)(ProgressBoard).remote()
    task = ray.remote(max_retries=0)(_warm_worker)
    jobs = _jobs(folder, args, [f"warm{i}.mp4" for i in range(slots)], 0.5)
    opts = {"num_gpus": 1} if args.device == "cuda" else {"num_cpus": 1}
    pids = ray.get(
        [task.options(**opts).remote(board, k, slots, j.request) for k, j in enumerate(jobs)]
    )
    ray.kill(board)
    return len(set(pids))


def _timed(jobs, slots: int, one_at_a_time: bool, args) -> tuple[float, int, list[float]]:
    """(wall s, frames, per-job frames/s) of one run_farm."""
    from farm.report import job_record
    from farm.schedule import run_farm

    per = slots if one_at_a_time else 1
    t0 = time.perf_counter()
    states = run_farm(jobs, gpus_per_job=per, cpus_per_job=per)
    wall = time.perf_counter() - t0
    records = [job_record(st) for st in states]
    bad = [r for r in records if r["status"] != "done"]
    if bad:
        raise RuntimeError(f"bench farm: job {bad[0]['job']} failed: {bad[0]['errors']}")
    return wall, sum(r["frames"] for r in records), [r["fps"] for r in records]


def _compare(a: Path, b: Path) -> tuple[int, float, int]:
    """(max abs difference, PSNR dB, frames) between the decoded frames of two videos."""
    import av
    import numpy as np

    with av.open(str(a)) as ca, av.open(str(b)) as cb:
        fa = [f.to_ndarray(format="yuv420p") for f in ca.decode(video=0)]
        fb = [f.to_ndarray(format="yuv420p") for f in cb.decode(video=0)]
    if len(fa) != len(fb):
        raise RuntimeError(f"bench farm: {a.name} has {len(fa)} frames, {b.name} {len(fb)}")
    diff = np.stack(fa).astype(np.int16) - np.stack(fb)
    mse = float(np.mean(diff.astype(np.float64) ** 2))
    psnr = float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)
    return int(np.abs(diff).max()), psnr, len(fa)


def run(args: argparse.Namespace) -> int:
    import os

    import ray

    from core.benchdoc import machine_line, today, write_section
    from farm.schedule import connect

    # the warmed workers must outlive the pauses between runs (and the progress actors)
    load0 = os.getloadavg()[0]
    started = connect(args.ray, args.num_cpus, keep_workers=(args.num_cpus or os.cpu_count()) + 8)
    try:
        have = ray.cluster_resources()
        kind = "GPU" if args.device == "cuda" else "CPU"
        slots = int(have.get(kind, 0))
        if slots < 1:
            print(f"kagura: bench farm: the Ray cluster has no {kind}", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="kagura-bench-farm-") as tmp:
            folder = Path(tmp)
            note = lambda text: print(f"bench farm: {text}", file=sys.stderr, flush=True)  # noqa: E731
            note(f"{slots} {kind} slot(s); warming every slot's worker")
            warmed = _warm(folder, args, slots)
            note(f"{warmed} worker process(es) warmed")
            batch = {"1": [], "N": []}
            split = {"1": [], "N": []}
            fps_n: list[float] = []
            for r in range(args.repeats):
                names = [f"b{r}-{i}.mp4" for i in range(args.jobs)]
                for key, one in (("1", True), ("N", False)):
                    jobs = _jobs(folder, args, names, args.seconds)
                    wall, frames, fps = _timed(jobs, slots, one, args)
                    batch[key].append(frames / wall)
                    if key == "N":
                        fps_n += fps
                    note(
                        f"batch of {args.jobs}, {'1 slot' if one else f'{slots} slots'}: "
                        f"{wall:.1f} s, {frames / wall:.1f} frames/s"
                    )
                for key, segments in (("1", 1), ("N", slots)):
                    jobs = _jobs(folder, args, [f"s{key}.mp4"], args.split_seconds, segments)
                    wall, _, _ = _timed(jobs, slots, False, args)
                    split[key].append(wall)
                    note(
                        f"one {args.split_seconds:g} s video in {segments} segment(s): {wall:.1f} s"
                    )
            diff, psnr, frames = _compare(folder / "s1.mp4", folder / "sN.mp4")
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
    finally:
        if started:
            ray.shutdown()
    from core.stats import median as med

    load1 = os.getloadavg()[0]
    b1, bn = med(batch["1"]), med(batch["N"])
    s1, sn = med(split["1"]), med(split["N"])
    body = "\n".join(
        [
            "## kagura farm (Ray): N slots against 1",
            "",
            f"- date: {today()}",
            f"- machine: {machine_line()}; Ray {ray.__version__}, {nodes} host(s), "
            f"{slots} {kind} slot(s) (`--device {args.device}`)",
            f"- command: `kagura bench farm --device {args.device} --jobs {args.jobs} --size "
            f"{args.size} --fps {args.fps} --seconds {args.seconds:g} --split-seconds "
            f"{args.split_seconds:g} --repeats {args.repeats}`",
            "- medians of the repeats (max in brackets); the workers are warmed first",
            "",
            "| measure | 1 slot | all slots | speed-up | goal (N GPUs) |",
            "|---|---|---|---|---|",
            f"| batch of {args.jobs} jobs, frames/s | {b1:.1f} ({max(batch['1']):.1f}) | "
            f"{bn:.1f} ({max(batch['N']):.1f}) | {bn / b1:.2f}× | ≥ {0.9 * slots:.1f}× |",
            f"| one {args.split_seconds:g} s video, wall s | {s1:.1f} ({max(split['1']):.1f}) | "
            f"{sn:.1f} ({max(split['N']):.1f}) | {s1 / sn:.2f}× | ≥ {0.8 * slots:.1f}× |",
            "",
            f"Per job in the batch on all slots: median {med(fps_n):.1f} frames/s, P99 (slowest) "
            f"{min(fps_n):.1f}. Split against unsplit, {frames} decoded frames: max difference "
            f"{diff}, PSNR {psnr:.1f} dB (lossy CRF; the drawn pictures are identical, "
            "tests/test_farm_segments.py checks a lossless encode bit for bit).",
            "",
            f"Load average of the machine at the start and end: {load0:.1f}, {load1:.1f} "
            f"(other work shares these {os.cpu_count()} cores). "
            + (
                "CPU slots only: the goals are for N GPUs and were not measured here; run "
                "`kagura bench farm --device cuda` on a multi-GPU host (or `--ray auto` on a "
                "cluster) for them."
                if args.device == "cpu"
                else ""
            ),
        ]
    )
    print(body)
    if not args.no_write:
        write_section(args.out, f"farm-{args.device}", body)
        print(f"kagura: wrote {args.out}", file=sys.stderr)
    return 0
