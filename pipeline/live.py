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

Threads and the queues between them (docs/ARCHITECTURE.md, "Real-time rules", rule 2):

    audio device / file pacer ──► RingBuffer (lock-free, audio-sample clock = master clock)
    kagura-live-analysis   polls every 1 ms (finding itself over ANALYSIS_MAX_BEHIND_S behind,
                           it skips to the newest audio, counted); every 10 ms of audio:
                           gain → low-delay resample
                           to the profile rate (audio/live_resample.py) →
                           LiveLipSync + LivePitch → LiveMotion (100 Hz) → AvatarParams;
                           between hops, after every block, the mouth latched from the
                           newest audio (LiveLipSync.latch) with the last hop's motion
                           ──► `params` BoundedQueue(1, LATEST): latest wins; superseded
                               params are dropped and counted (expected: 100 Hz → fps)
    kagura-live-frames     at the display fps — on a free-running timer, or, once the display
                           says when it ticks (`set_display_timing`), phase-locked: each frame
                           starts at the tick that will show it minus the predicted frame time
                           (so it is due and arrived just before that tick; the app's QTimer
                           tick and the headless bench's simulated one both tell it);
                           pts = audio clock now (newest sample); a tick finding the
                           analysis lastingly behind starts no frame (pipeline/shedding.py);
                           newest params + expression blend → RenderStage → StylizeStage,
                           the idol in two steps (`late_mouth`, default): the next frame's
                           idol is drawn ahead — right after a frame is handed on, from the
                           newest pose (RenderStage.prepare), or, by a render process, beside
                           this thread, asked for behind the frame before's mouth with its
                           pose; when that frame starts, only its mouth is redrawn from the
                           newest audio (finish: the cheap part) — the whole-idol render is off the
                           path from audio to photon
                           ──► `output` BoundedQueue(2, LATEST) for the presenter: a frame the
                               presenter did not take in time is dropped and counted
                           ──► recorder queue BoundedQueue(8, LATEST) when recording
    kagura-live-recorder   frames + the captured audio (a RingReader from the first
                           recorded sample) → VideoFileSink (its own encoder thread)
    kagura-live-look       builds the next preset's render + stylize stages (setup/warm-up
                           included) and swaps them in with one attribute store: the frame
                           thread never waits for a build and never shows a half-built look

GPU stages (`gpu=LiveGpu(...)`, pipeline/live_gpu.py; default: none, the CPU chain above,
unchanged): the frame thread renders the idol on the CPU and issues upload → stylize →
diffusion → temporal → upscale → readback on one high-priority CUDA stream without waiting;
    kagura-live-publish    waits for each issued frame's "done" event and puts it on
                           `output` / the recorder (at most `max_in_flight` frames on the
                           GPU: a tick finding the GPU that busy starts no frame and counts
                           it in `gpu_busy_ticks`)
The quality ladder (pipeline/ladder/) measures the ladder stages with CUDA events
and changes the rung between frames on the frame thread; `stats()["quality"]` has the rung
and the last change. Frames then have the output size (render size × upscale): `size` is the
output size, `render_size` the idol's.

Every frame carries `timings["audio_age"]`: ms from the audio its mouth was analysed from
(the centre of the 12 ms level window that sets the openness, i.e. the newest analysed sample
minus 6 ms — of the last hop, or of the mouth latched after it: LiveLipSync.latch) to the
frame's pts — through the diffusion stream batch, of the frame whose
picture it shows. Audio-to-photon = present time − pts + audio_age.

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

from core.avatar import AvatarParams
from core.clock import NS_PER_S
from core.frame import Frame
from core.stats import Timings
from pipeline.cpu_threads import share_cores_with_other_stages
from pipeline.expressions import EXPRESSIONS, Expressions
from pipeline.live_analysis import LiveAnalysis
from pipeline.live_frames import AUDIO_AGE, FrameLoop, WallClock
from pipeline.live_looks import LookSwitcher
from pipeline.live_recorder import LiveRecorder, RecordingSlot
from pipeline.live_source import AudioSource, FilePlayback, MasterClock
from pipeline.live_stats import GpuFigures, snapshot
from pipeline.look import Look, build_look
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
# The analysis thread and its backlog skipping: pipeline/live_analysis.py (LiveAnalysis).
# The frame thread, its waits and the frame's timing keys: pipeline/live_frames.py (FrameLoop).
# Shedding frame ticks for a starved analysis: pipeline/shedding.py (Shedder, its constants).
# Phase-locked frame starts: pipeline/phase_lock.py (PhaseLock, its constants).

# ---------------------------------------------------------------------------------------------
# the session


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
    render_size wins when it has one) and the constructor builds, sets up and warms the whole
    chain (seconds to minutes: model loading, CUDA-graph capture).
    """

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
        self.state = "stopped"
        self.error: str | None = None
        share_cores_with_other_stages()
        device = gpu.device if gpu is not None else "cpu"
        # GPU sessions draw the idol in a process of their own (render/process.py)
        render_process = bool(getattr(gpu, "render_process", False))
        # a chain with a model paints from the look without its screen effects
        for_model = gpu is not None and gpu.load_models() is not None

        def build(preset: Any, transparent: bool) -> Look:
            return build_look(
                preset, render_size, self.fps, transparent, device, render_process, for_model
            )

        self.looks = LookSwitcher(
            build,
            preset,
            transparent,
            self.timings,
            lambda msg: self._notify("error", msg),
            thread_name=f"{_THREAD_PREFIX}-look",
        )
        self._gpu: Any = None
        if gpu is not None:
            chain = gpu.build(self.looks.current.preset, render_size, (w, h), self.fps)
            chain.setup(self.looks.current.stylize)
            self._gpu = chain
        self.gpu_figures = GpuFigures(self._gpu)
        self._expr = Expressions()
        self._recording = RecordingSlot(
            source, (w, h), self.fps, lambda msg: self._notify("error", msg)
        )
        self._threads: list[threading.Thread] = []
        self._source_state = getattr(source, "state", "unknown")
        self.frames = FrameLoop(
            self.fps,
            source,
            self.analysis,
            self.looks,
            self._expr,
            self.output,
            self.timings,
            clock=WallClock(self._stop),
            on_frame=lambda frame, look: self._recording.push(frame, look.transparent),
            on_tick=self._poll_source_state,
            failed=lambda: self.error is not None,
            on_error=self._frames_failed,
            gpu=self._gpu,
            max_in_flight=getattr(gpu, "max_in_flight", 1),
        )
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

    @property
    def level_db(self) -> float:
        """Input level of the last analysis hop (dBFS, after gain), for a level meter."""
        return self.analysis.level_db

    @property
    def params(self) -> BoundedQueue[AvatarParams]:
        """The analysis's newest AvatarParams (LATEST queue; may be replaced before start)."""
        return self.analysis.out

    @params.setter
    def params(self, queue: BoundedQueue[AvatarParams]) -> None:
        self.analysis.out = queue

    @property
    def frames_produced(self) -> int:
        return self.frames.frames_produced

    @property
    def last_frame(self) -> Frame | None:
        return self.frames.last_frame

    @property
    def late_mouth(self) -> bool:
        """False: each frame's idol is drawn whole at its start (for comparison)."""
        return self.frames.late_mouth

    @late_mouth.setter
    def late_mouth(self, on: bool) -> None:
        self.frames.late_mouth = bool(on)

    @property
    def hops(self) -> int:
        return self.analysis.hops

    @property
    def latch_mouth(self) -> bool:
        """False: the mouth only moves at analysis hops (for comparison)."""
        return self.analysis.latch_mouth

    @latch_mouth.setter
    def latch_mouth(self, on: bool) -> None:
        self.analysis.latch_mouth = bool(on)

    @property
    def source_state(self) -> str:
        return self._source_state

    @property
    def recorder(self) -> LiveRecorder | None:
        """The recording in progress (None before its first frame)."""
        return self._recording.recorder

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> LiveSession:
        if self._threads:
            return self
        self._stop.clear()
        self.started_at = self.phase_lock.start()
        start_source = getattr(self.source, "start", None)
        # a source made with start=False (a file played at real-time pace) begins when the
        # analysis is ready to hear it: building the lip-sync engines takes a good part of a
        # second, and the file's first words must not pass unheard
        self.analysis.start_source = (
            start_source
            if start_source is not None and getattr(self.source, "state", "") == "closed"
            else None
        )
        if self._gpu is not None and self._gpu.closed:
            raise RuntimeError("this session's GPU chain was closed by stop(); make a new one")
        parts = [(self.analysis.run, "analysis"), (self.frames.run, "frames")]
        if self._gpu is not None and self._gpu.cuda:
            self.frames.open_inflight(self._gpu.max_in_flight)
            parts.append((self.frames.publish_loop, "publish"))
        for target, name in parts:
            t = threading.Thread(target=target, name=f"{_THREAD_PREFIX}-{name}", daemon=True)
            self._threads.append(t)
            t.start()
        self.state = "running"
        return self

    def stop(self) -> dict[str, Any] | None:
        """Stop every thread, finish a recording in progress (returns its summary), close the
        source (when `close_source`). Idempotent."""
        summary = None
        if self.recording:
            with contextlib.suppress(Exception):
                summary = self.stop_recording()
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self._threads.clear()
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
        self._set_control("gain_db", float(db))

    def set_noise_gate(self, db: float) -> None:
        """Lip-sync gate: opens `db` above the tracked noise floor (closes 6 dB lower)."""
        self._set_control("gate_db", float(db))

    def set_smoothing(self, amount: float) -> None:
        """0 = the lip-sync engine's own predictive filter; up to 1 = much steadier (slower)."""
        self._set_control("smoothing", float(min(max(amount, 0.0), 1.0)))

    def controls(self) -> dict[str, float]:
        return dict(self.analysis.controls)

    def _set_control(self, key: str, value: float) -> None:
        self.analysis.set_control(key, value)

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

    @property
    def lead_ms(self) -> float | None:
        """The last lead a phase-locked frame started with (ms)."""
        return self.phase_lock.lead_ms

    @property
    def frame_margin_ns(self) -> int:
        """Added to the predicted frame time (the lead)."""
        return self.phase_lock.frame_margin_ns

    @frame_margin_ns.setter
    def frame_margin_ns(self, ns: int) -> None:
        self.phase_lock.frame_margin_ns = ns

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Every part's counters and timings (pipeline/live_stats.py lists the keys)."""
        return snapshot(self)

    def quality_events(self) -> list[dict[str, Any]]:
        """Every rung change so far (GPU sessions; [] otherwise): time, rungs, reason."""
        return [] if self._gpu is None else [dict(c) for c in self._gpu.qc.changes]

    # -- threads ------------------------------------------------------------------------------

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

    def _poll_source_state(self) -> None:
        st = getattr(self.source, "state", "unknown")
        if st != self._source_state:
            self._source_state = st
            err = getattr(self.source, "last_error", None)
            name = getattr(self.source, "device_name", "input")
            msg = f"{name}: {st}" + (f" ({err})" if err and st == "lost" else "")
            self._notify(st, msg)
