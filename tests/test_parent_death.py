"""Worker processes die with the process that started them, even one killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av
import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for init to reap it counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not _gone(p)]
        time.sleep(0.01)
    return alive


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
        return b""


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:  # a thread may end between the listing and the read (the render's hand-off thread)
            out += [int(x) for x in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return 0


def _song(path: Path, seconds: float = 12.0) -> Path:
    rate = 22050
    t = np.arange(int(rate * seconds)) / rate
    pcm = 0.3 * np.sin(2 * np.pi * 220 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 2 * t))
    pcm = (pcm * 32767).astype(np.int16)[None]
    with av.open(str(path), "w") as c:
        s = c.add_stream("pcm_s16le", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = rate
        for p in [*s.encode(frame), *s.encode(None)]:
            c.mux(p)
    return path


def test_render_workers_die_with_a_sigkilled_render(tmp_path):
    """A real render with encoder and render workers, killed with SIGKILL. The workers are
    stopped (SIGSTOP) first: a worker that only notices its parent's death by reading a
    closed pipe would then live on for ever; the kernel's parent-death signal still ends it."""
    song = _song(tmp_path / "song.wav", seconds=12.0)  # still rendering when killed
    cmd = [sys.executable, "-m", "app.cli", "render", str(song), "-o", str(tmp_path / "o.mp4")]
    cmd += ["--size", "192x108", "--encoders", "2", "--render-workers", "2"]
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        # a worker has armed its guards before it starts its second thread (the parent watch)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            workers = [c for c in _children(proc.pid) if b"spawn_main" in _cmdline(c)]
            if len(workers) == 4 and all(_threads(w) >= 2 for w in workers):
                break
            time.sleep(0.02)
        assert len(workers) == 4, workers  # two encoders, two renderers
        for w in workers:
            os.kill(w, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        left = _wait_gone(workers, within_s=5.0)
        assert left == [], f"workers {left} outlived the killed render"
    finally:
        for w in workers:
            if not _gone(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


PARENT = textwrap.dedent(
    """
    import os, sys, threading, time
    from core.workers import spawn_context, start_worker

    def hang(tasks, out):
        out.send(os.getpid())
        time.sleep(120)  # busy elsewhere: never reads the task pipe

    if __name__ == "__main__":
        got = []
        def start():  # from a thread that then ends: no kernel signal, the sentinel guards
            proc, tasks, out = start_worker(spawn_context(), hang, (), "hang")
            got.append((proc, tasks, out, out.recv()))
        t = threading.Thread(target=start)
        t.start()
        t.join()
        time.sleep(0.3)
        alive = got[0][0].is_alive()  # the starting thread's end did not take the worker
        print(got[0][3], alive, flush=True)
        time.sleep(120)
    """
)


def test_a_worker_started_from_a_thread_outlives_the_thread_but_not_the_process(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, text=True, env=env
    )
    pid = None
    try:
        pid_text, alive = proc.stdout.readline().split()
        pid = int(pid_text)
        assert alive == "True"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_gone([pid], within_s=5.0) == [], "the worker outlived its killed parent"
    finally:
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
