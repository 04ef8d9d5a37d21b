"""`kagura farm` on a local Ray (one per module: Ray takes seconds to start): jobs run as Ray
tasks and write valid files, a split job is joined, a worker killed mid-render is retried, a
job that fails twice is reported while the others finish."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import av
import pytest
import ray

from app.cli import main
from pipeline.sinks.output import partial_path
from tests.hostile import write_wav_s16


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    yield
    ray.shutdown()


def _holder_of(path: Path) -> int | None:
    """The process that has `path` open (the render writing its partial file)."""
    target = str(path)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
            except OSError:
                continue
    return None


def _kill_the_writer_of(output: Path, killed: list, stop: threading.Event) -> None:
    """SIGKILL the Ray worker writing `output` as soon as its partial file is open."""
    partial = partial_path(output)
    while not stop.is_set():
        if partial.exists():
            pid = _holder_of(partial)
            if pid is not None and pid != os.getpid():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.005)


def _video(path: Path) -> tuple[int, int, str, str]:
    with av.open(str(path)) as c:
        v, a = c.streams.video[0], c.streams.audio[0]
        names = v.codec_context.name, a.codec_context.name
        frames = sum(1 for _ in c.decode(video=0))
    with av.open(str(path)) as c:
        samples = sum(f.samples for f in c.decode(audio=0))
    return frames, samples, *names


def test_jobs_run_as_ray_tasks_retry_once_and_are_reported(local_ray, tmp_path, capsys):
    write_wav_s16(tmp_path / "song.wav", 3.0)
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot audio at all" * 8)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        """
[defaults]
audio = "song.wav"
size = "96x64"
fps = 12

[[job]]
name = "killed once"
output = "out/victim.mp4"
size = "160x90"

[[job]]
output = "out/b.webm"
seconds = 1.0

[[job]]
output = "out/split.mp4"
seconds = 2.0
segments = 2

[[job]]
audio = "broken.wav"
output = "out/broken.mp4"
"""
    )
    victim = tmp_path / "out/victim.mp4"
    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_kill_the_writer_of, args=(victim, killed, stop))
    watcher.start()
    try:
        rc = main(["farm", str(jobs), "--report", str(tmp_path / "report.json")])
    finally:
        stop.set()
        watcher.join()
    out, err = capsys.readouterr()
    assert rc == 1  # one job failed
    assert killed, "the victim's worker was never seen writing"

    report = json.loads((tmp_path / "report.json").read_text())
    by_job = {r["job"]: r for r in report["jobs"]}
    assert [by_job[i]["status"] for i in (1, 2, 3, 4)] == ["done", "done", "done", "failed"]

    # the killed worker: retried once, its death reported, the file complete
    assert by_job[1]["attempts"] == 2
    assert by_job[1]["errors"] == ["attempt 1: the worker process died (killed, or out of memory)"]
    assert _video(victim)[:1] == (36,)
    assert not partial_path(victim).exists()
    # frames the killed attempt had written are kept (render's rule 4) and the report says so
    kept = sorted(str(p) for p in victim.parent.glob("victim.interrupted*.mp4"))
    assert by_job[1]["kept"] == kept

    # the broken audio: two attempts, each failure one line naming the file; nothing written
    assert by_job[4]["attempts"] == 2 and len(by_job[4]["errors"]) == 2
    assert all("broken.wav" in e for e in by_job[4]["errors"])
    assert not (tmp_path / "out/broken.mp4").exists()
    assert not partial_path(tmp_path / "out/broken.mp4").exists()

    # the others: valid files of the right length, with their audio
    frames, samples, vcodec, acodec = _video(tmp_path / "out/b.webm")
    assert (frames, vcodec, acodec) == (12, "vp9", "opus") and samples > 0.9 * 48_000
    frames, samples, vcodec, acodec = _video(tmp_path / "out/split.mp4")
    assert (frames, vcodec, acodec) == (24, "h264", "aac") and samples > 1.9 * 16_000
    assert by_job[3]["segments"] == 2 and by_job[3]["attempts"] == 1
    for i in (1, 2, 3):
        assert by_job[i]["fps"] > 0 and by_job[i]["frames"] > 0

    # the terminal: progress lines with frames/s, the summary table with every output
    assert "fps" in err and "job   1 killed once" in err
    for name in ("victim.mp4", "b.webm", "split.mp4", "broken.mp4"):
        assert name in out
    assert "failed" in out and "the worker process died" in out


def test_an_auto_job_renders_on_the_cpu_where_no_gpu_is_free(local_ray, tmp_path, capsys):
    assert ray.cluster_resources().get("GPU", 0) == 0  # the premise: a GPU-less cluster
    write_wav_s16(tmp_path / "song.wav", 0.5)
    head = '[defaults]\naudio = "song.wav"\nsize = "96x64"\nfps = 12\n'
    auto = '[[job]]\noutput = "auto.mp4"\ndevice = "auto"\n'
    jobs = tmp_path / "jobs.toml"

    # an explicit cuda job is refused whole, one line, before anything renders
    jobs.write_text(head + auto + '[[job]]\noutput = "gpu.mp4"\ndevice = "cuda"\n')
    assert main(["farm", str(jobs), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{jobs}: job 2: device cuda needs 1 GPU" in lines[0]
    assert 'device = "auto"' in lines[0]
    assert not (tmp_path / "auto.mp4").exists() and not (tmp_path / "gpu.mp4").exists()

    # after a CPU job that holds both CPUs, the auto job waits for them and renders on the CPU:
    # the view, the table and the report say so
    jobs.write_text(head + '[[job]]\noutput = "first.mp4"\n' + auto)
    report = tmp_path / "report.json"
    rc = main(["farm", str(jobs), "--cpus-per-job", "2", "--report", str(report)])
    out, err = capsys.readouterr()
    assert rc == 0
    first, record = json.loads(report.read_text())["jobs"]
    assert (record["status"], record["device"], record["device_asked"]) == ("done", "cpu", "auto")
    assert (first["device"], first["device_asked"]) == ("cpu", "cpu")
    assert record["wall_s"] - record["run_s"] >= first["wall_s"] - 0.05  # started after it
    assert _video(tmp_path / "auto.mp4")[0] == 6
    assert "(cpu)" in err
    assert " done    cpu " in out
