"""Recording a live session: its frames and the captured audio into a crash-safe video file,
on a thread of its own."""

from __future__ import annotations

import contextlib
import logging
import threading
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
