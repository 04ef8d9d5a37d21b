"""The live session: microphone (or an audio file at real-time pace) → lip-synced, stylized frames.

    src = FilePlayback("song.ogg")          # or audio.capture.Capture("usb")
    with LiveSession(src, "studio", size=(960, 540), fps=30) as live:
        frame = live.output.get()           # Frame, pts_ns on the audio clock
        live.set_preset("cyberpunk")        # built off-thread, swapped atomically
        live.trigger("happy")               # blends in/out over ~150 ms
        live.start_recording("take.mp4")    # or .webm (alpha when transparent)
        print(live.stats())

No Qt here: the desktop app (app/ui/main_window.py) only consumes `output` and calls the
control methods; everything below runs on plain threads (docs/ARCHITECTURE.md, "Threads").

The session is a `pipeline.graph.Graph` (the runtime `kagura render` runs through too): the
analysis is its source node, the frame loop (and with a GPU the publisher) its nodes, the
outputs' tee (`pipeline.live_chain.LiveOutput`) its sink; this class builds the parts, starts
and stops the graph, and passes the controls on. Threads, the part that owns each, and the
edges between them (docs/ARCHITECTURE.md, "Real-time rules", rule 2):

    audio device / file pacer ──► RingBuffer (lock-free, audio-sample clock = master clock)
    kagura-live-analysis   LiveAnalysis (pipeline/live_analysis.py): every 10 ms of audio →
                           AvatarParams; a backlog is skipped, not worked through
                           ──► params edge, BoundedQueue(1, LATEST): latest wins; superseded
                               params are dropped and counted (expected: 100 Hz → fps)
    kagura-live-frames     FrameLoop (pipeline/live_frames.py): at each display tick —
                           free-running or phase-locked to the display (`set_display_timing`,
                           PhaseLock in pipeline/phase_lock.py) — newest params + expressions
                           (pipeline/expressions.py) → the look's render → stylize; ticks are
                           shed for a starved analysis (pipeline/shedding.py)
                           ──► (GPU: issued edge, BLOCK ──► kagura-live-publish)
                           ──► the tee, inline on this thread (or the publisher's):
                               `output` BoundedQueue(2, LATEST) for the presenter: a frame the
                               presenter did not take in time is dropped and counted;
                               RecordingSlot (pipeline/live_recorder.py) when recording
    kagura-live-recorder   LiveRecorder: frames + the captured audio → VideoFileSink
    kagura-live-look       LookSwitcher (pipeline/live_looks.py): builds the next preset's
                           stages off the frame thread and swaps them in with one store
    kagura-live-publish    GPU sessions (`gpu=LiveGpu(...)`, pipeline/live_gpu.py): waits for
                           each frame the frame thread issued to the GPU and hands it to the tee
    kagura-live-ladder     GPU sessions, for their first second or so: sets up the quality
                           ladder's lower rungs beside the first frames (pipeline/ladder/prepare.py)

`stats()`: every part's counters and timings (pipeline/live_stats.py). With GPU stages, frames
have the output size (render size × upscale): `size` is the output size, `render_size` the
idol's; the quality ladder's rung is in `stats()["quality"]`.

Clock: every `pts_ns` is the time of the newest source sample when the frame was started
(samples counted by the ring buffer; never reset). A file played through `FilePlayback` writes
into the same kind of ring buffer on the same clock, so the session cannot tell it from a mic.
When the source clock stops (microphone lost) no new frames are made: the presenter repeats the
last one, and `state` / `on_state` report the loss; Capture reopens the device by itself and the
frames continue when its clock moves again.

Images are uint8 (H, W, 4) RGBA, premultiplied alpha (core/frame.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.clock import NS_PER_S
from core.frame import Frame
from core.priority import request_realtime_priority
from core.stats import Timings
from core.trace import step
from pipeline.cpu_threads import share_cores_with_other_stages
from pipeline.expressions import EXPRESSIONS, Expressions
from pipeline.graph import INLINE, Edge, Graph
from pipeline.live_analysis import LiveAnalysis
from pipeline.live_chain import LIVE_GIVES, LiveOutput, check_live
from pipeline.live_frames import AUDIO_AGE, FrameLoop, WallClock
from pipeline.live_looks import LookSwitcher
from pipeline.live_recorder import LiveRecorder, RecordingSlot
from pipeline.live_source import AudioSource, FilePlayback, MasterClock, SourceWatch
from pipeline.live_stats import GpuFigures, snapshot
from pipeline.look import Look, build_look, launch_render_process
from pipeline.queues import BoundedQueue, Policy

__all__ = [
    "AUDIO_AGE",
    "EXPRESSIONS",
    "FilePlayback",
    "LiveSession",
    "Look",
    "MasterClock",
    "build_look",
]

log = logging.getLogger(__name__)

_THREAD_PREFIX = "kagura-live"


def _part_attr(part: str, name: str, doc: str | None = None, settable: bool = False) -> Any:
    """A LiveSession attribute that belongs to one of its parts (`session.<part>.<name>`)."""

    def get(self: Any) -> Any:
        return getattr(getattr(self, part), name)

    def put(self: Any, value: Any) -> None:
        setattr(getattr(self, part), name, value)

    return property(get, put if settable else None, doc=doc)


def _fits(render: Any, preset: Any, size: tuple[int, int], gpu: Any) -> bool:
    """Whether a render process the caller launched (pipeline.look.launch_render_process) is
    the one this session's first look would start: the same preset's colours at its size."""
    if not getattr(gpu, "render_process", False) or not isinstance(preset, str):
        return False
    from presets.loader import load_preset

    p = load_preset(preset)
    same = (render.width, render.height) == tuple(size)
    return same and (render.palette, render.line) == (p.palette, p.line)


class LiveSession:
    """Audio source → params → frames, on threads; see the module docstring.

    `source`: a Capture or FilePlayback (anything with the AudioSource surface); closed by
    `stop()` when `close_source`. `preset`: a preset name or Preset. `size`: (w, h), even.
    `transparent`: stylize without a background (alpha in the frames).
    `on_state(state, message)` is called from a session thread when the source's state
    changes ("starting", "running", "lost", "ended", "closed") and on recorder errors ("error").
    `profile`: lip-sync profile (default: the user's calibrated one, else the shipped default).
    `gpu`: a LiveGpu (pipeline/live_gpu.py): the GPU stages and the quality ladder; None: the
    CPU chain. With it, `size` is the output size (render size × upscale; the LiveGpu's
    render_size wins when it has one) and the constructor builds, sets up and warms the
    chain at its first rung (seconds: model loading, CUDA-graph capture; the other rungs are
    set up beside the first frames). `first_render`: the first look's render process, started
    by the caller (pipeline.look.launch_render_process) for `preset` at the render size — the
    session adopts it, or closes it when it is not the one its first look needs.
    """

    # the threads that ask for real-time scheduling in a GPU session (rule 7)
    REALTIME_PARTS = ("frames", "publish")

    def __init__(
        self,
        source: AudioSource,
        preset: Any = "studio",
        size: tuple[int, int] = (960, 540),
        fps: int = 30,
        *,
        transparent: bool = False,
        profile: Any = None,
        seed: int = 0,
        gain_db: float = 0.0,
        gate_db: float = 12.0,
        smoothing: float = 0.0,
        close_source: bool = True,
        on_state: Callable[[str, str], None] | None = None,
        output_capacity: int = 2,
        gpu: Any = None,
        first_render: Any = None,
    ) -> None:
        w, h = int(size[0]), int(size[1])
        if w <= 0 or h <= 0 or w % 2 or h % 2:
            raise ValueError(f"live size {w}x{h} must be positive and even")
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.gpu_spec = gpu
        render_size = (w, h)
        if gpu is not None:
            render_size, (w, h) = gpu.sizes((w, h))
        self.source = source
        self.size = (w, h)
        self.render_size = render_size
        self.fps = int(fps)
        self.seed = seed
        self.profile = profile
        self.close_source = close_source
        self.on_state = on_state
        self.clock = MasterClock(source)
        self.output: BoundedQueue[Frame] = BoundedQueue(output_capacity, Policy.LATEST)
        self._stop = threading.Event()
        self.timings = Timings()  # the session's own stage times (ms); GPU ones: the ladder's
        self.analysis = LiveAnalysis(
            source,
            self._stop,
            self.timings,
            self._analysis_failed,
            profile=profile,
            seed=seed,
            gain_db=gain_db,
            gate_db=gate_db,
            smoothing=smoothing,
        )
        render_process = bool(getattr(gpu, "render_process", False))
        # GPU sessions draw the idol in a process of their own (render/process.py): started
        # first, it gets ready while the engines below are built and the models load; a caller
        # may have started it sooner still (`first_render`: before torch's import)
        if first_render is not None and not _fits(first_render, preset, render_size, gpu):
            first_render.close()
            first_render = None
        # with a GPU chain the frame and publishing threads ask the OS for real-time scheduling
        # when they start, and so does the render process (core.priority: SCHED_FIFO where
        # permitted, else a lower nice value, else nothing): they mostly wait for work, the
        # GPU or each other, so they can preempt others without starving them; a CPU
        # session's frame thread draws and paints all the time, and does not ask. What each
        # got, one sentence per part, in `stats()["priority"]`
        self.realtime_priority = gpu is not None and bool(getattr(gpu, "realtime_priority", True))
        self.priority: dict[str, str] = {}
        if render_process and first_render is None:
            first_render = launch_render_process(
                preset, render_size, realtime=self.realtime_priority
            )
        launched = [first_render] if first_render is not None else []
        self._gpu: Any = None  # the GpuChain, once set up (below)
        try:
            self.analysis.prepare()  # not in `start`: the first frames would wait for it
            step("live analysis prepared")
            self.state = "stopped"
            self.error: str | None = None
            share_cores_with_other_stages()
            device = gpu.device if gpu is not None else "cpu"
            # a chain with a model paints from the look without its screen effects
            for_model = gpu is not None and gpu.load_models() is not None

            def fits(look: Look) -> None:
                # each look is checked against the chain it joins before its stages are set
                # up; a GPU session's first look is checked by GpuChain.setup, with the
                # ladder stages, which do not exist yet here (and a chain closed by stop()
                # runs nothing more: there is nothing to fit)
                if gpu is None:
                    check_live(look, None, (w, h))
                elif self._gpu is not None and not self._gpu.closed:
                    check_live(look, self._gpu, (w, h))

            def build(preset: Any, transparent: bool) -> Look:
                render = launched.pop() if launched else None  # the first look's, started above
                return build_look(
                    preset,
                    render_size,
                    self.fps,
                    transparent,
                    device,
                    render_process,
                    for_model,
                    render=render,
                    fits=fits,
                    realtime=self.realtime_priority,
                )

            self.looks = LookSwitcher(
                build,
                preset,
                transparent,
                self.timings,
                lambda msg: self._notify("error", msg),
                thread_name=f"{_THREAD_PREFIX}-look",
            )
        finally:  # not used: the first look was never built (a bad preset, a broken model)
            for unused in launched:
                unused.close()
        step("first look built")
        if gpu is not None:
            chain = gpu.build(self.looks.current.preset, render_size, (w, h), self.fps)
            try:
                chain.setup(self.looks.current)  # checks the chain with the first look
            except BaseException:
                self.looks.current.close()  # its render process must not outlive the session
                raise
            self._gpu = chain
        self.gpu_figures = GpuFigures(self._gpu)
        self._expr = Expressions()
        self._recording = RecordingSlot(
            source, (w, h), self.fps, lambda msg: self._notify("error", msg)
        )
        self._source_watch = SourceWatch(source, self._notify)
        self.frames = FrameLoop(
            self.fps,
            source,
            self.analysis,
            self.looks,
            self._expr,
            self.timings,
            clock=WallClock(self._stop),
            on_tick=self._source_watch.poll,
            failed=lambda: self.error is not None,
            on_error=self._frames_failed,
            gpu=self._gpu,
        )
        # the outputs, one tee on the publishing thread: the display's queue and the recording
        self.tee = LiveOutput((w, h), self.output, self._recording)
        self.graph: Graph | None = None
        # the frame thread's scheduler (display timing, lead, learning; tested on simulated
        # time: tests/test_live_phase_lock.py) and its shedding (pipeline/shedding.py)
        self.phase_lock = self.frames.phase_lock
        self.shedder = self.frames.shedder
        self.started_at: float | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def preset_name(self) -> str:
        return self.looks.current.name

    @property
    def transparent(self) -> bool:
        return self.looks.current.transparent

    @property
    def recording(self) -> bool:
        return self._recording.active

    # a part's attributes, read (and where the app or a bench sets them, set) through it
    level_db = _part_attr("analysis", "level_db", "Input level of the last hop (dBFS, after gain).")
    params = _part_attr(
        "analysis",
        "out",
        "The params edge: the newest AvatarParams (replaceable before start).",
        True,
    )
    hops = _part_attr("analysis", "hops")
    latch_mouth = _part_attr(
        "analysis", "latch_mouth", "False: the mouth moves at hops only.", True
    )
    frames_produced = _part_attr("frames", "frames_produced")
    last_frame = _part_attr("frames", "last_frame")
    late_mouth = _part_attr(
        "frames", "late_mouth", "False: the idol drawn whole at the start.", True
    )
    relearn_after_setup = _part_attr(
        "frames", "relearn_after_setup", "False: keep what was learnt during set-up.", True
    )
    lead_ms = _part_attr("phase_lock", "lead_ms", "The last phase-locked frame's lead (ms).")
    frame_margin_ns = _part_attr("phase_lock", "frame_margin_ns", "Added to the lead.", True)

    @property
    def source_state(self) -> str:
        return self._source_watch.state

    @property
    def recorder(self) -> LiveRecorder | None:
        """The recording in progress (None before its first frame)."""
        return self._recording.recorder

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> LiveSession:
        """Start the session's graph (pipeline/graph.py): analysis ─► params ─► frames
        [─► issued ─► publish] ─► the output tee; see `_graph`."""
        if self.graph is not None and self.graph.running:
            return self
        self._stop.clear()
        self.started_at = self.phase_lock.start()
        start_source = getattr(self.source, "start", None)
        # a source made with start=False (a file played at real-time pace) begins at the
        # analysis's first read, so the file's first words do not pass unheard (the engines
        # are built in the constructor: when that failed, they are built first, then read)
        self.analysis.start_source = (
            start_source
            if start_source is not None and getattr(self.source, "state", "") == "closed"
            else None
        )
        if self._gpu is not None and self._gpu.closed:
            raise RuntimeError("this session's GPU chain was closed by stop(); make a new one")
        render_priority = getattr(self.looks.current.render, "priority", None)
        if render_priority is not None:
            self.priority["render"] = render_priority
        self.graph = self._graph()
        self.graph.start()  # checks the chain first (GraphError: nothing started)
        self.state = "running"
        return self

    def _graph(self) -> Graph:
        """The live graph: the analysis as its source, the frame loop (and, with frames left
        on the GPU, the publisher) as its nodes, the tee as its sink, called on the publishing
        thread. The params edge keeps only the newest (the frame loop takes what is there at
        its tick); the issued edge blocks (the frame loop issues at most `max_in_flight`, so it
        never waits on it)."""
        nodes: list[Any] = [self.frames]
        # the analysis's own queue while it is open (a caller may have replaced it to watch
        # it: `params`), a new one after a stop closed it
        params = self.analysis.out
        edges: list[Any] = [Edge(1, Policy.LATEST) if params.closed else params]
        if self.frames.publishes_later:
            nodes.append(self.frames.publisher())
            edges.append(Edge(self._gpu.max_in_flight + 1, Policy.BLOCK))
        edges.append(INLINE)
        return Graph(
            self.analysis,
            LIVE_GIVES,
            nodes,
            self.tee,
            edges=edges,
            stop=self._stop,
            thread_prefix=f"{_THREAD_PREFIX}-",
            on_thread_start=self._on_thread_start if self.realtime_priority else None,
            on_error=lambda name, exc: self._frames_failed(f"{name} failed: {exc}"),
        )

    def stop(self) -> dict[str, Any] | None:
        """Stop every thread, finish a recording in progress (returns its summary), close the
        source (when `close_source`). Idempotent."""
        summary = None
        if self.recording:
            with contextlib.suppress(Exception):
                summary = self.stop_recording()
        if self.graph is not None:
            self.graph.stop(timeout=10)  # sets `_stop`: every node ends
        self._stop.set()
        self.looks.wait(30)
        if self._gpu is not None:
            self.gpu_figures.keep()
            self._gpu.close()
        self.output.close()
        if self.close_source:
            with contextlib.suppress(Exception):
                self.source.close()
        self.state = "stopped"
        return summary

    close = stop

    def __enter__(self) -> LiveSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- controls (any thread) ----------------------------------------------------------------

    def set_gain(self, db: float) -> None:
        """Input gain before analysis, dB (the recording keeps the raw audio)."""
        self.analysis.set_control("gain_db", float(db))

    def set_noise_gate(self, db: float) -> None:
        """Lip-sync gate: opens `db` above the tracked noise floor (closes 6 dB lower)."""
        self.analysis.set_control("gate_db", float(db))

    def set_smoothing(self, amount: float) -> None:
        """0 = the lip-sync engine's own predictive filter; up to 1 = much steadier (slower)."""
        self.analysis.set_control("smoothing", float(min(max(amount, 0.0), 1.0)))

    def controls(self) -> dict[str, float]:
        return dict(self.analysis.controls)

    def trigger(self, name: str, hold_s: float | None = 0.8) -> None:
        """Show expression `name` (see EXPRESSIONS): blend in over ~150 ms, hold `hold_s`
        (None: until `release(name)`), blend out over ~150 ms."""
        if name not in EXPRESSIONS:
            raise ValueError(f"unknown expression {name!r}; known: {', '.join(EXPRESSIONS)}")
        hold = None if hold_s is None else int(hold_s * NS_PER_S)
        self._expr.press(name, self.clock.now_ns(), hold)

    def release(self, name: str) -> None:
        self._expr.release(name, self.clock.now_ns())

    def expression_weight(self, name: str) -> float:
        return self._expr.weight(name, self.clock.now_ns())

    def set_preset(self, preset: Any, transparent: bool | None = None) -> None:
        """Switch look without a stall: the new stages are built on a helper thread while the
        current look keeps rendering, then swapped in between two frames. The latest request
        wins when several arrive during one build."""
        self.looks.set_preset(preset, transparent)

    def set_transparent(self, on: bool) -> None:
        """Switch between the composited background and a transparent one (alpha frames)."""
        self.looks.set_transparent(on)

    def wait_look(self, timeout: float = 30.0) -> bool:
        """Block until no look build is pending (tests, CLI). True if idle."""
        return self.looks.wait(timeout)

    # -- recording ----------------------------------------------------------------------------

    def start_recording(self, path: str | os.PathLike, alpha: bool | None = None) -> None:
        """Record frames + the source audio to `path` (.mp4, or .webm — VP9 with alpha when the
        look is transparent). `alpha=True` switches to the transparent look first (the
        recording starts with the first transparent frame); `alpha=False` the opaque one."""
        want_t = self.transparent if alpha is None else bool(alpha)

        def switch_look() -> None:
            if want_t != self.transparent:
                self.set_transparent(want_t)

        self._recording.request(Path(path), want_t, switch_look)

    def stop_recording(self) -> dict[str, Any]:
        """Finish the file; returns {"path", "frames", "seconds", "repeated", ...}."""
        return self._recording.stop()

    # -- display timing -----------------------------------------------------------------------

    def set_display_timing(
        self,
        tick_ns: int | None,
        refresh_ns: int = 0,
        release_delay_ns: Callable[[], int] | None = None,
    ) -> None:
        """Lock frame starts to the display's ticks (time.monotonic_ns() instants);
        `tick_ns=None`: the free-running timer. See PhaseLock.set_display_timing."""
        self.phase_lock.set_display_timing(tick_ns, refresh_ns, release_delay_ns)

    def release_delay_ns(self) -> int:
        """For a presenter that follows this session (JitterBuffer.follow): see
        PhaseLock.release_delay_ns."""
        return self.phase_lock.release_delay_ns()

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Every part's counters and timings (pipeline/live_stats.py lists the keys)."""
        return snapshot(self)

    @property
    def gpu_setting_up(self) -> bool:
        """The GPU chain's set-up beside the first frames (the diffusion, the ladder's lower
        rungs) is still running: start-up frames, not the steady state (benchmarks)."""
        return self._gpu is not None and self._gpu.ladder_pending

    def hold_ladder(self, on: bool) -> None:
        """Hold the quality ladder (measure, decide nothing) or release it (GPU sessions; the
        session holds it while the lower rungs are set up: QualityControl.hold)."""
        if self._gpu is not None:
            self._gpu.qc.hold(on)

    def quality_events(self) -> list[dict[str, Any]]:
        """Every rung change so far (GPU sessions; [] otherwise): time, rungs, reason."""
        return [] if self._gpu is None else [dict(c) for c in self._gpu.qc.changes]

    # -- threads ------------------------------------------------------------------------------

    def _on_thread_start(self, name: str) -> None:
        """A node's thread, before its body: the real-time parts ask for real-time scheduling
        (core.priority)."""
        if name in self.REALTIME_PARTS:
            self.priority[name] = request_realtime_priority()

    def _frames_failed(self, message: str) -> None:
        self.error = message
        self.state = "error"
        self._notify("error", message)

    def _analysis_failed(self, message: str) -> None:
        self.error = message
        self._notify("error", message)

    def _notify(self, state: str, message: str) -> None:
        if self.on_state is not None:
            try:
                self.on_state(state, message)
            except Exception:
                log.exception("live: on_state callback failed")
