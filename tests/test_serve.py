"""`kagura serve` and the renders handed to it (app/cmd_serve.py, app/serve_link.py,
pipeline/resident.py): a real server process, real clients from the shell, real files.

The server renders with Kagura's own model on the CPU (`--diffusion kagura`), so its GPU chain
(stylize → diffusion → temporal) is one it keeps set up between renders, as on a GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from tests.cli import REPO, kagura, signal_when

SONG = REPO / "audio" / "assets" / "demo_song.ogg"
LOOK = ["--size", "320x184", "--diffusion", "kagura", "--preset", "ink-wash"]


class Server:
    """`kagura serve` in its own process, listening on `socket`."""

    def __init__(self, socket: Path, *options: str, env: dict | None = None) -> None:
        self.socket = socket
        self.log = socket.with_suffix(".log")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--socket", str(socket), *options],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            text=True,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 240
        for line in self.proc.stdout:
            if "listening on" in line:
                break
            assert time.monotonic() < deadline, "the server did not start listening"
        else:
            pytest.fail(f"kagura serve exited {self.proc.wait()}: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve") / "kagura.sock", *LOOK)
    yield s
    assert s.stop() == 143, s.log.read_text()  # SIGTERM: "terminated", as every command
    assert not s.socket.exists()


def client(server: Server, *args: str, **env: str) -> subprocess.CompletedProcess:
    return kagura(*args, env={"KAGURA_SERVE_SOCKET": str(server.socket), **env})


def frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def events(trace: Path) -> list[str]:
    return [json.loads(line)["event"] for line in trace.read_text().splitlines()]


def test_served_renders_are_the_renders_of_a_process_of_their_own(server, tmp_path):
    render = ["render", str(SONG), "--seconds", "1", *LOOK, "--quiet"]
    traces = []
    for name in ("a", "b"):
        trace = tmp_path / f"{name}.jsonl"
        done = client(server, *render, "-o", str(tmp_path / f"{name}.mp4"), KAGURA_TRACE=str(trace))
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip() == f"kagura: wrote {tmp_path / f'{name}.mp4'}"
        traces.append(events(trace))
    local = kagura(*render, "-o", str(tmp_path / "local.mp4"), "--no-server")
    assert local.returncode == 0, local.stderr
    # both handed over; the chain the warm-up set up reused by each; the second render's
    # analysis the first one's
    for seen in traces:
        assert "handed over" in seen and "setup: gpu chain reused" in seen
        assert "first frame" in seen and seen[-1] == "finished"
    assert "setup: analysis of this audio kept from an earlier render" in traces[1]
    assert "setup: analysis of this audio kept from an earlier render" not in traces[0]
    expected = frames(tmp_path / "local.mp4")
    assert len(expected) == 30
    for name in ("a", "b"):
        got = frames(tmp_path / f"{name}.mp4")
        assert len(got) == 30
        assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True)), name


@pytest.mark.parametrize(
    "case",
    [
        "missing audio",
        "output exists",
        "unknown preset",
        "bad fps",
        "output is the song",
        "output being written",
    ],
)
def test_bad_input_gets_the_line_a_render_of_its_own_gives(server, tmp_path, case):
    from pipeline.sinks.output import PartialFile

    out = tmp_path / "out.mp4"
    audio, extra = str(SONG), []
    writing = None
    if case == "missing audio":
        audio = str(tmp_path / "no-such-song.flac")
    elif case == "output exists":
        out.write_bytes(b"the user's own file")
    elif case == "unknown preset":
        extra = ["--preset", "no-such-look"]
    elif case == "bad fps":
        extra = ["--fps", "0"]
    elif case == "output is the song":
        song = tmp_path / "song.ogg"
        song.write_bytes(SONG.read_bytes())
        audio, out = str(song), song
    elif case == "output being written":  # another job holds its claim, even with -y
        writing = PartialFile(out)
        writing.acquire()
        extra = ["-y", "--quiet"]  # the progress bar a render of its own starts first
    argv = ["render", audio, "-o", str(out), "--seconds", "1", "--size", "320x184", *extra]
    try:
        served = client(server, *argv)
        local = kagura(*argv, "--no-server")
    finally:
        if writing is not None:
            writing.discard()
    assert local.returncode == 2 and "Traceback" not in local.stderr, local.stderr
    assert served.returncode == 2, served.stderr
    assert served.stderr.strip() == local.stderr.strip()
    if case == "output exists":
        assert out.read_bytes() == b"the user's own file"
    if case == "output is the song":
        assert out.read_bytes() == SONG.read_bytes()
    if case == "output being written":
        assert "is locked" in served.stderr and not out.exists()


def test_a_job_for_the_output_the_server_is_writing_is_refused_not_queued(server, tmp_path):
    """Queued behind the job writing its output, a second job (even with -y) would replace
    that job's file once it was done: it is refused at once, with a render's own line."""
    out = tmp_path / "shared.mp4"
    argv = ["render", str(SONG), "-o", str(out), "--seconds", "5", *LOOK, "--quiet"]
    env = {**os.environ, "KAGURA_SERVE_SOCKET": str(server.socket)}
    first = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *argv], cwd=REPO, env=env, stderr=subprocess.PIPE
    )
    partial = tmp_path / "shared.partial.mp4"
    deadline = time.monotonic() + 120
    while not (partial.exists() and partial.stat().st_size > 4096):
        assert first.poll() is None and time.monotonic() < deadline, "the first job ended"
        time.sleep(0.05)
    second = client(server, *argv, "-y")
    running = first.poll() is None
    _, err = first.communicate(timeout=300)
    assert running, "the second job did not meet the first at work"
    assert second.returncode == 2, second.stderr
    assert second.stderr.strip().endswith("is locked); wait for it or choose another name")
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert first.returncode == 0, err
    assert len(frames(out)) == 150  # the first job's whole file, not replaced


def test_a_client_of_another_environment_renders_in_its_own_process(server, tmp_path):
    out = tmp_path / "own.mp4"
    done = client(
        server,
        *("render", str(SONG), "-o", str(out), "--seconds", "1", "--size", "160x96", "--quiet"),
        KAGURA_CONFIG_DIR=str(tmp_path / "other-config"),
    )
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert "the render server declined" in first and "KAGURA_CONFIG_DIR" in first, done.stderr
    assert len(frames(out)) == 30


@pytest.mark.parametrize(
    ("sig", "status", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_ctrl_c_at_the_client_stops_the_served_render_and_keeps_its_frames(
    server, tmp_path, sig, status, word
):
    out, trace = tmp_path / "long.mp4", tmp_path / "long.jsonl"
    cmd = [sys.executable, "-m", "app.cli", "render", str(SONG), "-o", str(out), "--quiet"]
    env = {**os.environ, "KAGURA_SERVE_SOCKET": str(server.socket), "KAGURA_TRACE": str(trace)}
    proc = subprocess.Popen([*cmd, *LOOK], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    # a fragment or two written after the first frame
    stderr = signal_when(proc, lambda: trace.exists() and "first frame" in events(trace), sig, 1.0)
    assert proc.returncode == status, stderr
    kept = tmp_path / "long.interrupted.mp4"
    assert (
        stderr.strip().splitlines()[-1] == f"kagura: {word}; the frames written are kept in {kept}"
    )
    assert not out.exists() and len(frames(kept)) >= 1
    # the server goes on serving
    again = client(server, "render", str(SONG), "-o", str(out), "--seconds", "1", *LOOK)
    assert again.returncode == 0, again.stderr


def test_a_killed_client_cancels_its_served_render_and_the_server_goes_on(server, tmp_path):
    """SIGKILL leaves the client no time to say anything: its closed link cancels the job,
    whose frames the server keeps, as a render of its own that is stopped keeps them."""
    out, trace = tmp_path / "long.mp4", tmp_path / "long.jsonl"
    cmd = [sys.executable, "-m", "app.cli", "render", str(SONG), "-o", str(out), "--quiet"]
    env = {**os.environ, "KAGURA_SERVE_SOCKET": str(server.socket), "KAGURA_TRACE": str(trace)}
    proc = subprocess.Popen([*cmd, *LOOK], cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    signal_when(proc, lambda: trace.exists() and "first frame" in events(trace), signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    kept = tmp_path / "long.interrupted.mp4"
    deadline = time.monotonic() + 60  # the whole song would take longer to render
    while not kept.exists():
        assert time.monotonic() < deadline, "the served render went on without its client"
        time.sleep(0.1)
    assert not out.exists() and len(frames(kept)) >= 1
    again = client(server, "render", str(SONG), "-o", str(out), "--seconds", "1", *LOOK)
    assert again.returncode == 0, again.stderr


def test_a_second_server_on_the_same_socket_is_refused(server):
    done = kagura("serve", "--socket", str(server.socket), "--no-warm-up")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"kagura: error: {server.socket}: a render server already listens there"
    )


def test_a_killed_servers_socket_is_passed_by_and_then_replaced(tmp_path):
    socket = tmp_path / "dead.sock"
    dead = Server(socket, "--no-warm-up")
    assert dead.stop(signal.SIGKILL) == -signal.SIGKILL
    assert socket.exists()  # left behind
    out = tmp_path / "here.mp4"
    done = kagura(
        *("render", str(SONG), "-o", str(out), "--seconds", "1", "--size", "160x96", "--quiet"),
        env={"KAGURA_SERVE_SOCKET": str(socket)},
    )
    assert done.returncode == 0 and done.stderr.strip() == f"kagura: wrote {out}", done.stderr
    again = Server(socket, "--no-warm-up")
    assert again.stop() == 143 and not socket.exists()


def test_served_renders_start_their_worker_processes_from_the_fork_server(server, tmp_path):
    """Render and encoder processes of a served render come from the server's fork server
    (core.workers.use_forkserver), not from the server itself: same pictures."""
    render = ["render", str(SONG), "--seconds", "2", "--size", "320x184", "--quiet"]
    render += ["--render-workers", "2", "--encoders", "2"]
    served = client(server, *render, "-o", str(tmp_path / "served.mp4"))
    assert served.returncode == 0, served.stderr
    local = kagura(*render, "-o", str(tmp_path / "local.mp4"), "--no-server")
    assert local.returncode == 0, local.stderr
    got, expected = frames(tmp_path / "served.mp4"), frames(tmp_path / "local.mp4")
    assert len(got) == len(expected) == 60
    assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))


def test_a_client_elsewhere_names_its_files_relative_to_its_own_folder(server, tmp_path):
    (tmp_path / "song.ogg").write_bytes(SONG.read_bytes())
    (tmp_path / "looks").mkdir()
    (tmp_path / "looks" / "mine.toml").write_text((REPO / "presets" / "ink-wash.toml").read_text())
    cmd = [sys.executable, "-m", "app.cli", "render", "song.ogg", "-o", "out/video.mp4"]
    cmd += ["--seconds", "1", "--size", "320x184", "--preset", "looks/mine.toml", "--quiet"]
    env = {**os.environ, "KAGURA_SERVE_SOCKET": str(server.socket), "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "kagura: wrote out/video.mp4"  # as a render here says it
    assert len(frames(tmp_path / "out" / "video.mp4")) == 30


def test_a_client_that_connects_and_says_nothing_does_not_hold_up_the_next(server, tmp_path):
    import socket

    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(server.socket))
    try:
        out = tmp_path / "next.mp4"
        done = client(server, "render", str(SONG), "-o", str(out), "--seconds", "1", *LOOK)
        assert done.returncode == 0, done.stderr
        assert len(frames(out)) == 30
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("hello", "declined"),
    [
        (b"not json\n", None),  # not a message: the connection closed, no answer
        (b'["a list"]\n', None),
        (b'{"protocol": 999}\n', "it speaks protocol 1, the client another"),
        (
            b'{"protocol": 1, "config": {"audio": 5}, "code": null, "env": {}}\n',
            "its configuration is not a render configuration this Kagura reads",
        ),
    ],
)
def test_a_message_that_is_not_a_job_is_declined_and_the_server_goes_on(
    server, tmp_path, hello, declined
):
    import socket

    from app.serve_link import code_id, shared_env

    if b'"config": {"audio": 5}' in hello:  # this Kagura, this environment, a broken config
        job = json.loads(hello)
        job.update(code=code_id(), env=shared_env())
        hello = json.dumps(job).encode() + b"\n"
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(server.socket))
    try:
        raw.sendall(hello)
        answer = raw.makefile("rb").readline()
    finally:
        raw.close()
    if declined is None:
        assert answer == b""
    else:
        assert json.loads(answer) == {"declined": declined}
    out = tmp_path / "next.mp4"
    done = client(server, "render", str(SONG), "-o", str(out), "--seconds", "1", *LOOK)
    assert done.returncode == 0, done.stderr


def test_the_socket_lives_where_only_its_user_may_open_it(tmp_path, monkeypatch):
    import tempfile

    from app.serve_link import SOCKET_NAME, ServeError, socket_path

    monkeypatch.delenv("KAGURA_SERVE_SOCKET")
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert socket_path() == runtime / SOCKET_NAME
    # no runtime folder: a folder of this user's under the temporary folder, made 0700
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / f"kagura-{os.getuid()}"
    assert socket_path(make_folder=True) == mine / SOCKET_NAME
    assert mine.is_dir() and mine.stat().st_mode & 0o777 == 0o700
    mine.chmod(0o755)  # others may open it: not used
    with pytest.raises(ServeError, match="others may open it"):
        socket_path()
    mine.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    mine.symlink_to(tmp_path / "elsewhere")  # someone's link in its place: not followed
    with pytest.raises(ServeError, match="not a folder of this user's"):
        socket_path()


def test_after_a_job_the_server_collects_it_and_freezes_what_it_keeps():
    # a job's set-up froze its objects (Graph.run); after the job they are collected, and what
    # is left is frozen so the next job's set-up walks only its own objects
    import gc
    import weakref

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    from app.cmd_serve import forget_job_objects

    job = Cycle()
    ref = weakref.ref(job)
    gc.freeze()
    del job
    try:
        forget_job_objects()
        assert ref() is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


# a server's set-up (`kagura serve`'s run: the render's heap settings, then one arena), then
# jobs of three threads that each allocate and free 128 MB, each job followed by what the
# server does after a job; the RSS after each job, in MB above the RSS before the first
JOBS_IN_THREADS = """
import threading
import numpy as np
from app.cmd_serve import forget_job_objects
from pipeline.cpu_memory import keep_freed_memory, share_one_arena

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))

def work():
    blocks = [np.ones(2 << 20, np.uint8) for _ in range(64)]
    del blocks

keep_freed_memory()
if not share_one_arena():
    raise SystemExit(3)
before = rss_mb()
for _ in range(4):
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    forget_job_objects()
    print(rss_mb() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_what_a_jobs_threads_freed_goes_back_to_the_os_after_the_job():
    # what a job's ended threads freed is neither kept in arenas of their own nor in the shared
    # one: 384 MB allocated per job, the same RSS after each job (measured: 0 MB above; with
    # the threads' own arenas, 186 to 248 MB kept; trimmed but in their own arenas, up to 62)
    done = subprocess.run(
        [sys.executable, "-c", JOBS_IN_THREADS],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    if done.returncode == 3:
        pytest.skip("not glibc: no M_ARENA_MAX")
    assert done.returncode == 0, done.stderr
    kept = [int(mb) for mb in done.stdout.split()]
    assert len(kept) == 4 and max(kept) < 32, kept


BLAS_AFTER_SERVE_STARTS = """
import sys
from app import cmd_serve
from app.cli import build_parser
from app.errors import UsageError
args = build_parser().parse_args(['serve', '--keep', '0'])
assert 'numpy' not in sys.modules, 'the parser loaded numpy'
try:
    cmd_serve.run(args)  # refused after its imports: --keep 0
except UsageError:
    pass
from threadpoolctl import threadpool_info
print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}))
"""


def test_the_server_starts_numpy_with_few_blas_threads():
    """`kagura serve` analyses the songs: its numpy's BLAS takes a quarter of the cores
    (pipeline/cpu_threads.py), which only holds when it is set before numpy loads."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    proc = subprocess.run(
        [sys.executable, "-c", BLAS_AFTER_SERVE_STARTS],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    want = max(1, len(os.sched_getaffinity(0)) // 4)
    assert proc.stdout.strip() == f"[{want}]", proc.stdout
