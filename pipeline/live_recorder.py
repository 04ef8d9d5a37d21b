"""Recording a live session: its frames and the captured audio into a crash-safe video file,
on a thread of its own (`LiveRecorder`); the session's slot for one recording (`RecordingSlot`)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from audio.ringbuffer import RingReader
from core.clock import NS_PER_S, ns_to_samples
from core.frame import Frame
from core.stage import Context
from pipeline.live_source import AudioSource
from pipeline.queues import BoundedQueue, Closed, Policy

log = logging.getLogger(__name__)


class LiveRecorder:
    """Frames + captured audio → VideoFileSink, on its own thread.

    Sync: the recording starts at the first recorded frame's pts (sample S0 of the source);
    frame k of the file is the newest frame whose pts is nearest to S0 + k / fps. A gap in
    the frames (the producer ran late) repeats the previous frame, so video and audio durations
    stay equal whatever happens upstream. The audio goes in whole from S0 (a RingReader), fed
    to the sink as the frames go, so a killed app leaves a file with its sound (the sink is
    crash-safe: fragmented MP4 / WebM clusters, `.partial` until finished).
    """

    def __init__(
        self,
        source: AudioSource,
        path: Path,
        size: tuple[int, int],
        fps: int,
        transparent: bool,
    ) -> None:
        from pipeline.sinks.video_file import VideoFileSink, check_output_path

        self.path = Path(path)
        alpha = transparent and self.path.suffix.lower() == ".webm"
        check_output_path(self.path, alpha)
        self.source = source
        self.fps = fps
        self.rate = source.sample_rate
        self.transparent = alpha
        w, h = size
        self._audio = np.zeros((source.channels, self.rate * 30), np.float32)
        self._filled = 0
        self.sink = VideoFileSink(
            self.path,
            w,
            h,
            fps,
            self._audio[:, :0],
            self.rate,
            transparent=alpha,
            threads=1,
            queue_frames=8,
        )
        self.sink.setup(Context(w, h, fps, self.rate, mode="live"))
        self.queue: BoundedQueue[Frame] = BoundedQueue(8, Policy.LATEST)
        self.reader: RingReader | None = None
        self.pts0: int | None = None
        self.sent = 0  # frames handed to the sink (its own counter lags behind its encoder)
        self.repeated = 0
        self.skipped = 0
        self.error: str | None = None
        self._last: Frame | None = None
        self._thread = threading.Thread(target=self._run, name="kagura-live-recorder")
        self._thread.start()

    def push(self, frame: Frame) -> None:
        with contextlib.suppress(Closed):
            self.queue.put(frame)

    def _pull_audio(self, upto: int | None = None) -> None:
        assert self.reader is not None
        x = self.reader.read()
        if x.shape[0] == 0:
            return
        need = self._filled + x.shape[0]
        if need > self._audio.shape[1]:  # grow (old views held by the sink stay valid)
            bigger = np.zeros(
                (self._audio.shape[0], max(need, 2 * self._audio.shape[1])), np.float32
            )
            bigger[:, : self._filled] = self._audio[:, : self._filled]
            self._audio = bigger
        self._audio[:, self._filled : need] = x.T
        self._filled = need
        # the sink encodes audio up to min(its due sample, len(audio)): hand it what exists
        self.sink.audio = self._audio[:, : self._filled]

    def _write(self, frame: Frame) -> None:
        if self.pts0 is None:
            self.pts0 = frame.pts_ns
            self.reader = self.source.reader(ns_to_samples(frame.pts_ns, self.rate))
        k = round((frame.pts_ns - self.pts0) * self.fps / NS_PER_S)
        if k < self.sent:  # two frames for one slot: the later one waits for the next slot
            self.skipped += 1
            return
        self._pull_audio()
        while self.sent < k and self._last is not None:
            self.sink.write(self._last)
            self.sent += 1
            self.repeated += 1
        self.sink.write(frame)
        self.sent += 1
        self._last = frame

    def _run(self) -> None:
        try:
            while True:
                try:
                    frame = self.queue.get()
                except Closed:
                    return
                if self.error is None:
                    self._write(frame)
        except BaseException as exc:  # keep the session alive; report the failure
            self.error = f"recording to {self.path} failed: {exc}"
            log.exception("recorder")
            with contextlib.suppress(Exception):
                while True:
                    self.queue.get()

    def finish(self) -> dict[str, Any]:
        """Stop, flush and close the file (audio trimmed/padded to the video's duration)."""
        self.queue.close()
        self._thread.join()
        frames = self.sent
        if self.error is not None or frames == 0:
            self.sink.abort()
            raise RuntimeError(self.error or f"{self.path}: no frames were recorded")
        self._pull_audio()
        n = -(-frames * self.rate // self.fps)
        audio = np.zeros((self._audio.shape[0], n), np.float32)
        m = min(n, self._filled)
        audio[:, :m] = self._audio[:, :m]
        self.sink.audio = audio
        self.sink.finish()
        return {
            "path": str(self.path),
            "frames": frames,
            "seconds": frames / self.fps,
            "repeated": self.repeated,
            "audio_lost_samples": self.reader.lost if self.reader else 0,
        }

    def abort(self) -> None:
        self.queue.close()
        self._thread.join(timeout=5)
        self.sink.abort()


class RecordingSlot:
    """A live session's one recording: asked for on any thread (`request`), opened on the
    frame thread with the first frame of the look it wants (transparent or not: a request may
    switch the look first), fed every frame after (`push`), finished by `stop`.
    `on_error(message)`: the file could not be opened, or its recorder failed (then dropped)."""

    def __init__(
        self,
        source: AudioSource,
        size: tuple[int, int],
        fps: int,
        on_error: Callable[[str], None],
    ) -> None:
        self.source, self.size, self.fps = source, size, fps
        self._on_error = on_error
        self.recorder: LiveRecorder | None = None
        self._pending: tuple[Path, bool] | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Recording, or asked to and waiting for the first frame of its look."""
        return self.recorder is not None or self._pending is not None

    def request(self, path: Path, transparent: bool, switch_look: Callable[[], None]) -> None:
        """Record to `path` from the first frame whose look's transparency is `transparent`;
        `switch_look()` (called under this slot's lock) asks for that look if need be."""
        from pipeline.sinks.video_file import check_output_path

        check_output_path(path, transparent and path.suffix.lower() == ".webm")
        if not path.parent.is_dir():
            raise FileNotFoundError(f"{path}: the folder {path.parent} does not exist")
        with self._lock:
            if self.active:
                raise RuntimeError("already recording")
            switch_look()
            self._pending = (path, transparent)

    def stop(self) -> dict[str, Any]:
        """Finish the file; returns {"path", "frames", "seconds", "repeated", ...}."""
        with self._lock:
            rec, self.recorder = self.recorder, None
            pending, self._pending = self._pending, None
        if rec is None:
            raise RuntimeError(
                f"{pending[0]}: the recording had not started yet" if pending else "not recording"
            )
        return rec.finish()

    def push(self, frame: Frame, transparent: bool) -> None:
        """The frame thread (or the GPU publisher): a frame of a look with `transparent`."""
        if self._pending is not None and self.recorder is None:
            with self._lock:
                pending = self._pending
                if pending is not None and transparent == pending[1]:
                    self._pending = None
                    try:
                        self.recorder = LiveRecorder(
                            self.source, pending[0], self.size, self.fps, transparent
                        )
                    except Exception as exc:
                        self._on_error(f"cannot record to {pending[0]}: {exc}")
        rec = self.recorder
        if rec is not None:
            if rec.error is not None:
                self._on_error(rec.error)
                with self._lock:
                    self.recorder = None
                rec.abort()
                return
            rec.push(frame)
