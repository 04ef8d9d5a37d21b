"""`kagura serve`: a render server that keeps torch, the models and the set-up GPU chains warm.

    kagura serve [render options] [--socket PATH] [--idle-exit MINUTES] [--keep N] [--no-warm-up]

A fresh `kagura render --device cuda` spends its first seconds on work no song changes: torch's
import, the model load, the GPU parts' set-up and graph captures (docs/BENCHMARKS.md). This
process does that work once and then renders, one at a time, the jobs `kagura render` and
`kagura demo` hand it over its socket (app/serve_link.py: where the socket is, the messages,
when a client renders itself instead). The render options given here are the ones it warms up
for: it renders the first seconds of the demo song with them into a temporary file before it
listens, so the first job of that shape finds its chain set up (pipeline/resident.py). A job of
another shape sets its chain up on arrival, the `--keep` most recent shapes are kept.

It also keeps the analyses of the last songs it rendered (`AnalysisCache`): a song rendered
again with another look skips its analysis. A served render is the client's own render: the
same configuration (its settings file already applied), the same checks and one-line errors,
the same files (written by this process as the client's user), its progress, notices and last
line shown by the client, and Ctrl+C there stops it here, keeping the frames written. Ctrl+C
here (or SIGTERM) ends the job in progress the same way, tells its client, and stops the
server; so does `--idle-exit` after that many minutes without a job.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any

WARM_UP_SECONDS = 2.0
# the modules a render's worker processes run (render/pool.py, pipeline/sinks/segmented.py):
# the fork server imports them once, each worker starts with them
WORKER_MODULES = ["render.pool", "render.idol", "render.avatar_source", "pipeline.sinks.segmented"]
PROGRESS_EVERY_S = 0.25
ANALYSES_KEPT = 8
ACCEPT_WAKE_S = 0.25
HELLO_TIMEOUT_S = 10.0


def add_parser(subparsers) -> argparse.ArgumentParser:
    from app.cli import _add_render_options, _add_settings_option

    p = subparsers.add_parser("serve", help="keep the models warm and render others' jobs")
    _add_render_options(p)
    _add_settings_option(p)
    p.add_argument(
        "--socket", type=Path, default=None, metavar="PATH", help="listen here (see the docs)"
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        metavar="MINUTES",
        help="stop after this many minutes without a job (default: run until stopped)",
    )
    p.add_argument(
        "--keep", type=int, default=2, metavar="N", help="set-up GPU chains kept (default 2)"
    )
    p.add_argument(
        "--no-warm-up", action="store_true", help="listen at once, set up on the first job"
    )
    return p


def run(args: argparse.Namespace) -> int:
    from pipeline.cpu_threads import analysis_blas_env

    # first, before numpy loads (core.workers below imports it): this process analyses the
    # songs (pipeline/cpu_threads.py)
    os.environ.update(analysis_blas_env())
    from app.errors import UsageError
    from app.serve_link import ServeError, socket_path
    from core.workers import use_forkserver
    from pipeline.cpu_memory import share_one_arena
    from pipeline.resident import ResidentChains

    # before any thread: each job's threads would otherwise grow arenas of their own, job
    # after job (pipeline/cpu_memory.py)
    share_one_arena()
    if args.keep < 1:
        raise UsageError(f"--keep {args.keep}: expected a whole number >= 1")
    if args.idle_exit is not None and args.idle_exit <= 0:
        raise UsageError(f"--idle-exit {args.idle_exit}: expected minutes > 0")
    try:
        path = args.socket or socket_path(make_folder=True)
    except ServeError as exc:
        raise UsageError(str(exc)) from None
    listener = listen(path)
    st = path.lstat()
    bound = (st.st_dev, st.st_ino)
    resident = ResidentChains(keep=args.keep)
    try:
        t0 = time.perf_counter()
        use_forkserver(WORKER_MODULES)
        server = RenderServer(resident)
        if not args.no_warm_up:
            server.warm_up(warm_up_config(args))
            forget_job_objects()  # the warm-up's render is a job too
            print(f"kagura serve: warmed up in {time.perf_counter() - t0:.1f} s", flush=True)
        print(f"kagura serve: listening on {path} (Ctrl+C stops it)", flush=True)
        idle = None if args.idle_exit is None else args.idle_exit * 60
        server.serve(listener, idle)
    finally:
        listener.close()
        _remove_socket(path, bound)
        resident.close()
    return 0


def listen(path: Path) -> socket.socket:
    """The listening socket at `path`, only for this user. Another live server there: one line,
    exit 2; a socket a dead server left: replaced."""
    from app.errors import UsageError

    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            if not path.is_socket():
                raise UsageError(f"{path}: exists and is not a socket; not replaced") from None
            path.unlink()  # stale
        else:
            raise UsageError(f"{path}: a render server already listens there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is made 0600: only this user may connect
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise UsageError(f"{path}: cannot listen there: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    sock.listen(8)
    return sock


def _remove_socket(path: Path, bound: tuple[int, int]) -> None:
    """Remove the socket file this server made (`bound`: its device and inode), not one
    another server made there after a user removed ours."""
    with contextlib.suppress(OSError):
        st = path.lstat()
        if (st.st_dev, st.st_ino) == bound:
            path.unlink()


def warm_up_config(args: argparse.Namespace):
    """The render options given to `kagura serve`, on the demo song's first seconds, into a
    temporary file."""
    from app.cli import _layered_render_config
    from audio.demo_song import demo_song_path

    folder = Path(tempfile.mkdtemp(prefix="kagura-serve-"))
    args = argparse.Namespace(**{**vars(args), "seconds": WARM_UP_SECONDS, "start": 0.0})
    return _layered_render_config(
        args, audio=demo_song_path(), output=folder / "warm-up.mp4"
    ).model_copy(update={"quiet": True})


class _Cancel:
    """A job's client: reads it on a thread; a cancel message or a closed socket stops the
    render (the graph's `cancel`, or before the graph runs, at the next check)."""

    def __init__(self, link) -> None:
        self.link = link
        self.reason: str | None = None
        self._graph = None
        self._lock = threading.Lock()
        self.finished = False
        threading.Thread(target=self._watch, name="kagura-serve-client", daemon=True).start()

    def _watch(self) -> None:
        try:
            msg = self.link.recv()
        except (OSError, ValueError):  # the server closed the link: the job is over
            return
        reason = (msg or {}).get("cancel") or "interrupted"
        with self._lock:
            if self.finished:  # the client read its last line and left
                return
            self.reason = "terminated" if reason == "terminated" else "interrupted"
            graph = self._graph
        if graph is not None:
            graph.cancel(self.exception())

    def finish(self) -> None:
        with self._lock:
            self.finished = True

    def exception(self) -> BaseException:
        from app.errors import Terminated

        return Terminated() if self.reason == "terminated" else KeyboardInterrupt()

    def check(self) -> None:
        if self.reason is not None:
            raise self.exception()

    def attach(self, graph) -> None:
        with self._lock:
            self._graph = graph
        self.check()


class _NoticesTo:
    """The job's stderr: each line that starts with "kagura:" (a notice the render prints) goes
    to the client as well as to this process's stderr."""

    def __init__(self, link, stream) -> None:
        self.link, self.stream, self._part = link, stream, ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        self._part += text
        *lines, self._part = self._part.split("\n")
        for line in lines:
            if line.startswith("kagura:") and self.link is not None:
                with contextlib.suppress(OSError):
                    self.link.send({"notice": line})
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def _job_context(link, trace: str | None):
    """The job's trace file (`kagura bench e2e` reads the served render's steps there) and its
    notices to the client, for the job's time (this process runs one job at a time)."""
    from core.trace import ENV

    before = os.environ.get(ENV)
    if trace:
        os.environ[ENV] = trace
    else:
        os.environ.pop(ENV, None)
    stderr = sys.stderr
    sys.stderr = _NoticesTo(link, stderr)
    try:
        yield
    finally:
        sys.stderr = stderr
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


class AnalysisCache:
    """The AvatarTracks of the last songs rendered: a song rendered again (another preset,
    another size: how a music video is tried out) is not analysed again. A track depends on
    the samples (after the --start/--seconds cut), the frame rate, the seed, the lip-sync model
    and the lip-sync profile the user calibrated (its file's size and time: `kagura calibrate`
    rewrites it)."""

    def __init__(self, keep: int = ANALYSES_KEPT) -> None:
        self.keep = keep
        self._tracks: OrderedDict[tuple, Any] = OrderedDict()
        # a job that failed may leave its analysis running beside the next job's
        self._lock = threading.Lock()

    def analyze(self, clip, fps: int, seed: int = 0, lipsync_model: str = "default"):
        import hashlib

        from audio.analysis import analyze_clip
        from core.paths import profile_file
        from core.trace import step

        try:
            st = profile_file().stat()
            profile = (st.st_size, st.st_mtime_ns)
        except OSError:
            profile = None
        digest = hashlib.blake2b(clip.samples.tobytes(), digest_size=20).hexdigest()
        key = (digest, clip.sample_rate, fps, seed, lipsync_model, profile)
        with self._lock:
            track = self._tracks.pop(key, None)
        if track is not None:
            step("analysis of this audio kept from an earlier render")
        else:
            track = analyze_clip(clip, fps, seed=seed, lipsync_model=lipsync_model)
        with self._lock:
            self._tracks[key] = track  # the most recently used last
            while len(self._tracks) > self.keep:
                self._tracks.popitem(last=False)
        return track


class RenderServer:
    def __init__(self, resident) -> None:
        self.resident = resident
        self.analyses = AnalysisCache()
        self.jobs = 0

    def warm_up(self, cfg) -> None:
        try:
            self.render(cfg, None, None)
        finally:
            shutil.rmtree(cfg.output.parent, ignore_errors=True)

    def serve(self, listener: socket.socket, idle_s: float | None) -> None:
        from app.serve_link import Link

        # accept() wakes up every ACCEPT_WAKE_S: a signal another thread received (SIGTERM,
        # Ctrl+C) runs its handler on this thread only between two calls
        listener.settimeout(ACCEPT_WAKE_S)
        idle_since = time.monotonic()
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if idle_s is not None and time.monotonic() - idle_since > idle_s:
                    print("kagura serve: idle; stopped", flush=True)
                    return
                continue
            conn.settimeout(HELLO_TIMEOUT_S)  # a client that connects and says nothing
            link = Link(conn)
            try:
                self.job(link)
            finally:
                link.close()
                forget_job_objects()
            idle_since = time.monotonic()

    def job(self, link) -> None:
        """One client: its job, rendered, or declined with the reason."""
        from app.errors import error_line, is_expected

        try:
            hello = link.recv()
        except TimeoutError:
            return
        if hello is None:
            return
        link.sock.settimeout(None)
        reason = decline_reason(hello)
        cfg = None
        if reason is None:
            from pydantic import ValidationError

            from app.config import RenderConfig

            try:
                cfg = RenderConfig.model_validate(hello["config"])
            except ValidationError:
                reason = "its configuration is not a render configuration this Kagura reads"
        if cfg is None:
            with contextlib.suppress(OSError):
                link.send({"declined": reason})
            return
        with contextlib.suppress(OSError):
            link.send({"accepted": True})
        cancel = _Cancel(link)
        line, code, stop_server = None, 0, None
        with _job_context(link, hello.get("trace")):
            try:
                line = self.render(cfg, link, cancel)
            except _WorkerFailed as exc:
                line, code = str(exc), 1
            except BaseException as exc:
                line, code = error_line(exc)
                if isinstance(exc, KeyboardInterrupt) and cancel.reason is None:
                    stop_server = exc  # Ctrl+C or SIGTERM here: the job ends, then the server
                elif not is_expected(exc):
                    traceback.print_exception(exc)
                    self.resident.close()  # a chain that failed may be in any state
            cancel.finish()
            print(f"kagura serve: job {self.jobs}: {line}", file=sys.stderr, flush=True)
        self.jobs += 1
        with contextlib.suppress(OSError):
            link.send({"end": code, "line": line})
        if stop_server is not None:
            raise stop_server

    def render(self, cfg, link, cancel: _Cancel | None) -> str:
        """`kagura render`'s work (app/cli.py `_render`) with this process's warm models and
        chains; the line to print at the end."""
        from app import render_job
        from core.trace import mark

        req = cfg.request()
        render_job.check_output_safety(req)
        render_job.check_request(req, gpu=True)  # torch is imported: the GPU checks too
        mark("checked")
        # the song's analysis on a thread, the graph's source waits for it at the first frame
        early = render_job.TrackInProgress(req, self.analyses.analyze)
        graph, ctx, total = render_job.build_graph(req, early=early, resident=self.resident)
        mark("graph built")
        if cancel is not None:
            cancel.attach(graph)
        progress = _Progress(link, total)
        failed = render_job.run_graph(graph, ctx, progress.on_frame)
        if failed is not None:
            raise _WorkerFailed(failed)
        progress.done()
        mark("finished")
        return f"kagura: wrote {req.output}"


def forget_job_objects() -> None:
    """After a job: a render freezes what its set-up made (`Graph.run`, pipeline/cpu_memory.py
    `freeze_setup_objects`: frozen objects are never collected), which in this process includes
    the finished job's graph, track and stages; unfrozen and collected here, a server's memory
    does not grow with every render. The heap blocks the job freed are then given back to the
    OS (`keep_freed_memory` keeps them for a render's next frames, not for the next job).
    What is left, the server's own (torch, the models, the resident chains), is frozen again:
    the next job's `freeze_setup_objects` then walks that job's objects only, not the whole
    heap, before its first frame."""
    import gc

    from pipeline.cpu_memory import return_freed_memory

    gc.unfreeze()
    gc.collect()
    return_freed_memory()
    gc.freeze()


class _WorkerFailed(RuntimeError):
    """A render or encoder process died: exit 1 with this line (as `kagura render` does)."""


class _Progress:
    def __init__(self, link, total: int) -> None:
        self.link, self.frames, self._sent_at = link, 0, 0.0
        self._send({"total": total})

    def _send(self, msg: dict) -> None:
        if self.link is not None:
            self.link.send(msg)  # a client gone: the render's own error ends it

    def on_frame(self, frame=None) -> None:
        self.frames += 1
        now = time.perf_counter()
        if self.frames == 1 or now - self._sent_at >= PROGRESS_EVERY_S:
            self._sent_at = now
            self._send({"frames": self.frames})

    def done(self) -> None:
        self._send({"frames": self.frames})


def decline_reason(hello: dict) -> str | None:
    """Why this server will not render the client's job (None: it will)."""
    from app.serve_link import PROTOCOL, code_id, shared_env

    if hello.get("protocol") != PROTOCOL or not isinstance(hello.get("config"), dict):
        return f"it speaks protocol {PROTOCOL}, the client another"
    if hello.get("code") != code_id():
        return f"it runs Kagura {code_id()}, the client {hello.get('code')}"
    theirs, ours = hello.get("env"), shared_env()
    if not isinstance(theirs, dict):
        return "the client sent no environment"
    differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if differ:
        return f"it was started with other values of {', '.join(differ)}"
    return None
