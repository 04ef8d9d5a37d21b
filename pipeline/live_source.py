"""The live session's audio sources: what a source must offer (`AudioSource`: a Capture or
a FilePlayback), an audio file played at real-time pace into the same ring buffer a microphone
fills (`FilePlayback`), the master clock read from it (`MasterClock`), and the watch that
reports its state changes (`SourceWatch`)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from audio.ringbuffer import RingBuffer, RingReader, RingSource

log = logging.getLogger(__name__)


class AudioSource(Protocol):
    """What LiveSession needs from a source (Capture and FilePlayback both provide it)."""

    ring: RingBuffer
    sample_rate: int
    channels: int
    state: str
    last_error: str | None

    def pts_ns(self) -> int: ...

    def reader(self, position: int | None = None) -> RingReader: ...

    def close(self) -> None: ...


class FilePlayback(RingSource):
    """An audio file fed into a ring buffer at real-time pace, indistinguishable from a mic.

    The file is decoded once (audio.decode.decode_audio, native rate; more than two channels
    are mixed to mono). Samples enter the ring in `block_ms` blocks as real time passes:

    * `play_out=True` and an output device opens: the output stream's callback copies each
      block to the speakers *and* into the ring, so the audio clock is the output device's
      clock and what is analysed is exactly what is heard (a streamer singing to a backing
      track). The callback only copies (docs/ARCHITECTURE.md, "Real-time rules", rule 1).
    * otherwise (no output device, `play_out=False`, or the output stream dies): a pacing
      thread writes the blocks against time.monotonic().

    After the end of the file it keeps writing silence (state "ended"; the clock keeps
    running, as a quiet microphone's would) unless `loop` is set.
    States (`state`, `on_state(state, message)`): "starting", "running", "ended", "closed".
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        loop: bool = False,
        play_out: bool = False,
        output_device: str | int | None = None,
        block_ms: float = 5.0,
        buffer_s: float = 10.0,
        on_state: Callable[[str, str], None] | None = None,
        start: bool = True,
    ) -> None:
        from audio.decode import decode_audio

        clip = decode_audio(path)
        samples = clip.samples
        if samples.shape[0] > 2:
            samples = samples.mean(axis=0, keepdims=True)
        self.path = Path(path)
        self.device_name = f"file: {self.path.name}"
        self.data = np.ascontiguousarray(samples.T, dtype=np.float32)  # (n, channels)
        self.sample_rate = int(clip.sample_rate)
        self.channels = int(self.data.shape[1])
        self.duration_s = self.data.shape[0] / self.sample_rate
        self.loop = loop
        self.play_out = play_out
        self.output_device = output_device
        self.blocksize = max(1, round(self.sample_rate * block_ms / 1000))
        self.ring = RingBuffer(
            max(int(self.sample_rate * buffer_s), 4 * self.blocksize),
            self.channels,
            max_block=max(4096, 4 * self.blocksize),
        )
        self.on_state = on_state
        self.state = "closed"
        self.last_error: str | None = None
        self.playing_out = False  # True while the output device drives the clock
        self._pos = 0  # next file frame to deliver
        self._silence = np.zeros((self.blocksize, self.channels), np.float32)
        self._stream: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    # -- the rest of the surface Capture offers (RingSource gives clock and data) --------------

    @property
    def finished(self) -> bool:
        return not self.loop and self._pos >= self.data.shape[0]

    def health(self) -> Any:
        from audio.capture import CaptureHealth

        return CaptureHealth(
            rate=self.sample_rate,
            overflows=0,
            drift_ppm=None,
            state=self.state,
            last_error=self.last_error,
            samples=self.ring.written,
            device=self.device_name,
        )

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._set_state("starting", f"playing {self.path.name}")
        if self.play_out:
            self._open_output()
        self._thread = threading.Thread(target=self._pace, name="kagura-file-playback", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop_worker()
        self._close_output()
        if self.state != "closed":
            self._set_state("closed", "playback closed")

    # -- delivery -----------------------------------------------------------------------------

    def _next_block(self, n: int) -> np.ndarray:
        """The next `n` frames of the file (silence after its end, or wrapped when looping)."""
        data = self.data
        total = data.shape[0]
        pos = self._pos
        if pos + n <= total:
            self._pos = pos + n
            return data[pos : pos + n]
        out = np.zeros((n, self.channels), np.float32)
        if pos < total:
            out[: total - pos] = data[pos:]
        if self.loop:
            rest = n - max(total - pos, 0)
            out[n - rest :] = (
                data[:rest] if rest <= total else np.resize(data, (rest, self.channels))
            )
            self._pos = rest % total
        else:
            self._pos = total
        return out

    def _callback(self, outdata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        block = self._next_block(frames)  # a view, or a small array near the file end
        outdata[:] = block
        self.ring.write(block)

    def _open_output(self) -> None:
        from audio.capture import start_stream  # PortAudio is process-global: one lock for it

        try:
            stream = start_stream(
                lambda sd: sd.OutputStream(
                    device=self.output_device,
                    channels=self.channels,
                    samplerate=self.sample_rate,
                    blocksize=self.blocksize,
                    dtype="float32",
                    latency="low",
                    callback=self._callback,
                )
            )
        except Exception as exc:
            self.last_error = "no audio output: " + " ".join(str(exc).split())
            log.info("file playback: %s; pacing on the system clock instead", self.last_error)
            return
        self._stream = stream
        self.playing_out = True

    def _close_output(self) -> None:
        from audio.capture import stop_stream

        stream, self._stream = self._stream, None
        self.playing_out = False
        if stream is not None:
            stop_stream(stream)

    def _pace(self) -> None:
        rate = self.sample_rate
        t0 = time.monotonic()
        w0 = self.ring.written
        last_change = t0
        last_w = w0
        while not self._stop.wait(self.blocksize / rate / 2):
            now = time.monotonic()
            if self.playing_out:
                w = self.ring.written
                if w != last_w:
                    last_w, last_change = w, now
                    if self.state == "starting":
                        self._set_state("running", f"playing {self.path.name} (and out loud)")
                stream = self._stream
                dead = stream is None or not stream.active
                if dead or now - last_change > 0.5:  # the output died: pace on our own
                    self.last_error = "the audio output stopped; pacing on the system clock"
                    self._close_output()
                    t0, w0 = now, self.ring.written
                else:
                    self._check_end()
                    continue
            due = w0 + int((now - t0) * rate)
            while self.ring.written + self.blocksize <= due:
                self.ring.write(self._next_block(self.blocksize))
            if self.state == "starting" and self.ring.written > w0:
                self._set_state("running", f"playing {self.path.name}")
            self._check_end()

    def _check_end(self) -> None:
        if self.finished and self.state == "running":
            self._set_state("ended", f"{self.path.name} ended")

    def _set_state(self, state: str, message: str) -> None:
        if state == self.state:
            return
        self.state = state
        log.info("file playback %s: %s", state, message)
        if self.on_state is not None:
            try:
                self.on_state(state, message)
            except Exception:
                log.exception("file playback: on_state callback failed")


# ---------------------------------------------------------------------------------------------
# clock


class MasterClock:
    """'Now' on the audio-sample clock, continuous between the source's sample blocks.

    The newest sample's time stamp moves in steps of one device block; a presenter ticking at
    the display refresh needs a smooth 'now'. `now_ns()` = monotonic + offset, where the offset
    is the largest (newest pts − monotonic) seen over the last `window_s`: the moment right
    after a block arrives, when the newest pts is freshest. A sliding window — not an envelope
    that only decays slowly — forgets the backlog some devices hand over in one burst when they
    start (PulseAudio here: ~0.4 s at once), which would otherwise keep 'now' that far ahead
    and make every frame look late. Drift cannot accumulate either. It never goes backwards.
    """

    def __init__(self, source: AudioSource, window_s: float = 1.0) -> None:
        self.source = source
        self.window_ns = int(window_s * 1e9)
        self._recent: deque[tuple[int, int]] = deque()  # (mono, offset)
        self._last_now = 0
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        mono = time.monotonic_ns()
        offset = self.source.pts_ns() - mono
        with self._lock:
            recent = self._recent
            # a monotonic deque: offsets decreasing from the front, so the front is the max
            while recent and recent[-1][1] <= offset:
                recent.pop()
            recent.append((mono, offset))
            while recent[0][0] < mono - self.window_ns:
                recent.popleft()
            now = max(mono + recent[0][1], self._last_now)
            self._last_now = now
            return now


class SourceWatch:
    """A source's state as the session last saw it: `poll()` (the frame thread, every tick)
    tells `on_state(state, message)` of each change; a lost device's message has its error."""

    def __init__(self, source: Any, on_state: Callable[[str, str], None]) -> None:
        self.source = source
        self.on_state = on_state
        self.state = getattr(source, "state", "unknown")

    def poll(self) -> None:
        st = getattr(self.source, "state", "unknown")
        if st != self.state:
            self.state = st
            err = getattr(self.source, "last_error", None)
            name = getattr(self.source, "device_name", "input")
            self.on_state(st, f"{name}: {st}" + (f" ({err})" if err and st == "lost" else ""))
