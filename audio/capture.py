"""Live microphone capture: PortAudio (sounddevice) into a lock-free ring buffer.

    cap = Capture("usb")            # device by name substring (case-insensitive) or index
    frames, end = cap.latest(1024)  # newest 1024 frames; sample end-1 is at pts_ns()
    cap.health()                    # CaptureHealth(rate, overflows, drift_ppm, state, ...)
    cap.close()

The audio callback only copies the block into the ring buffer and counts status flags
(docs/ARCHITECTURE.md, "Real-time rules", rule 1). Everything else — noticing a dead
stream, measuring clock drift, reopening a device that went away and came back — happens in
a supervisor thread that looks at the ring buffer's sample counter a few dozen times a second.

The clock is the number of samples delivered (`samples_captured`); it is never reset. When the
device is lost the clock stops, and when it is back it continues from where it stopped: the
outage is recorded in `gaps` as (sample index, seconds of wall time missed).

Device hot-plug: PortAudio enumerates devices once, at initialisation. To see a device that
was plugged in later, `refresh_devices()` terminates and re-initialises PortAudio — which
closes every stream of the process, so it only runs while no stream opened by this module is
open (Kagura opens its PortAudio streams here). A device reached through a sound server
(PulseAudio/PipeWire "pulse"/"default") needs no refresh: the PCM stays listed, and opening
it again reaches the returned source.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from audio.errors import AudioError
from audio.ringbuffer import RingBuffer, RingSource

__all__ = [
    "Capture",
    "CaptureError",
    "CaptureHealth",
    "InputDevice",
    "list_input_devices",
    "refresh_devices",
]

log = logging.getLogger(__name__)

FALLBACK_RATES = (48000, 44100, 16000)

# PortAudio is process-global: opening/closing streams and re-initialising are serialised here.
_PA_LOCK = threading.RLock()
_open_streams = 0  # streams opened through this module and not yet closed (under _PA_LOCK)


def start_stream(make: Callable[[Any], Any]) -> Any:
    """A started PortAudio stream: `make(sounddevice)` builds it (an InputStream or an
    OutputStream). Opened under the PortAudio lock and counted, so `refresh_devices()` never
    restarts PortAudio under it; every stream started here is ended with `stop_stream`."""
    global _open_streams
    sd = _sd()
    with _PA_LOCK:
        stream = make(sd)
        _open_streams += 1  # keeps refresh_devices() off this stream
        try:
            stream.start()
        except Exception:
            stream.close(ignore_errors=True)
            _open_streams -= 1
            raise
    return stream


def stop_stream(stream: Any) -> None:
    """Abort and close a stream from `start_stream` (a dead device may refuse even that)."""
    global _open_streams
    with _PA_LOCK:
        try:
            stream.abort(ignore_errors=True)
            stream.close(ignore_errors=True)
        except Exception as exc:  # nothing to keep
            log.debug("capture: closing the old stream: %s", exc)
        _open_streams -= 1


class CaptureError(AudioError):
    """A capture device could not be used; the message is one line and names the device."""


@dataclass(frozen=True)
class InputDevice:
    index: int
    name: str
    host_api: str
    channels: int
    default_rate: int
    is_default: bool


@dataclass(frozen=True)
class CaptureHealth:
    """A snapshot of the capture, for status displays and logs.

    `drift_ppm`: how much faster (+) or slower (−) the device's sample clock runs than
    `time.monotonic()`, fitted over the current run (None for its first ~11 s).
    `lag_ms`: how far the audio clock has fallen behind the wall clock since the current run
    started (grows by drift_ppm·elapsed; the constant buffering latency is not included).
    """

    rate: int
    overflows: int
    drift_ppm: float | None
    state: str  # "starting" | "running" | "lost" | "closed"
    last_error: str | None
    lag_ms: float | None = None
    samples: int = 0
    gaps: int = 0
    device: str = ""


def _sd() -> Any:
    """The sounddevice module (imported lazily: importing it initialises PortAudio)."""
    try:
        import sounddevice
    except OSError as exc:  # libportaudio2 missing
        raise CaptureError(f"PortAudio is not available ({exc}); install libportaudio2") from exc
    return sounddevice


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send fd 2 to /dev/null for a moment (as sounddevice does while PortAudio initialises).

    Used around reopen attempts while a device is lost: ALSA and PortAudio print several lines
    to stderr for each failed open, five times a second; the reason is kept in last_error.
    """
    saved = None
    try:
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
    try:
        yield
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)


def refresh_devices() -> bool:
    """Re-scan the devices PortAudio sees (after a hot-plug). False if a stream is still open.

    sounddevice has no public call for this; terminating and re-initialising PortAudio is the
    documented PortAudio way (device lists are fixed between Pa_Initialize and Pa_Terminate).
    """
    sd = _sd()
    with _PA_LOCK:
        if _open_streams:
            return False
        sd._terminate()
        sd._initialize()
    return True


def list_input_devices(refresh: bool = False) -> list[InputDevice]:
    """Every device with input channels, in PortAudio's order."""
    sd = _sd()
    if refresh:
        refresh_devices()
    with _PA_LOCK:
        devices = sd.query_devices()
        apis = sd.query_hostapis()
        try:
            default_in = int(sd.default.device[0])
        except (TypeError, ValueError, IndexError):
            default_in = -1
    return [
        InputDevice(
            index=int(d["index"]),
            name=str(d["name"]),
            host_api=str(apis[d["hostapi"]]["name"]),
            channels=int(d["max_input_channels"]),
            default_rate=int(d["default_samplerate"]),
            is_default=int(d["index"]) == default_in,
        )
        for d in devices
        if d["max_input_channels"] > 0
    ]


def _describe(devices: list[InputDevice]) -> str:
    if not devices:
        return "none (is a microphone connected and a sound server running?)"
    return ", ".join(f"{d.index} {d.name!r}" for d in devices)


def _find(device: str | int | None, devices: list[InputDevice]) -> InputDevice | None:
    if device is None:
        return next((d for d in devices if d.is_default), devices[0] if devices else None)
    if isinstance(device, int):
        return next((d for d in devices if d.index == device), None)
    want = device.casefold()
    exact = [d for d in devices if d.name.casefold() == want]
    if exact:
        return exact[0]
    return next((d for d in devices if want in d.name.casefold()), None)


def _resolve(device: str | int | None, channels: int) -> InputDevice:
    devices = list_input_devices()
    found = _find(device, devices)
    if found is None and refresh_devices():  # plugged in (or server started) after PortAudio
        devices = list_input_devices()  # was initialised: look again with a fresh list
        found = _find(device, devices)
    if found is None:
        what = "no default input device" if device is None else f"input device {device!r}"
        raise CaptureError(f"{what} not found; available input devices: {_describe(devices)}")
    if found.channels < channels:
        raise CaptureError(
            f"input device {found.name!r} has {found.channels} input channel(s), "
            f"{channels} requested"
        )
    return found


def _negotiate_rate(dev: InputDevice, channels: int, requested: int | None) -> int:
    sd = _sd()
    candidates: list[int] = []
    for r in (requested, dev.default_rate, *FALLBACK_RATES):
        if r and int(r) not in candidates:
            candidates.append(int(r))
    reason = ""
    for rate in candidates:
        try:
            with _PA_LOCK:
                sd.check_input_settings(
                    device=dev.index, channels=channels, dtype="float32", samplerate=rate
                )
        except Exception as exc:  # sounddevice raises PortAudioError or ValueError
            reason = " ".join(str(exc).split())
            continue
        if requested and rate != requested:
            log.warning("capture: %r does not take %d Hz; using %d Hz", dev.name, requested, rate)
        return rate
    raise CaptureError(
        f"input device {dev.name!r} accepts none of the sample rates "
        f"{', '.join(map(str, candidates))} ({reason})"
    )


class _DriftMeter:
    """Device clock vs time.monotonic(), from the lower envelope of the audio lag.

    Every poll computes lag = (wall time elapsed)·rate − samples delivered. Delivery is
    blocky, so lag saw-tooths; its minimum over one second is a sharp estimate of the
    lag at a delivery instant. The slope of those minima over time (median of slopes between
    points half the window apart) is the drift, free of the block jitter.
    """

    BUCKET_S = 1.0

    def __init__(self, rate: int, t0: float, w0: int) -> None:
        self.rate = rate
        self.t0 = t0
        self.w0 = w0
        self.minima: deque[tuple[float, float]] = deque(maxlen=600)  # (t, min lag in samples)
        self._bucket_end = t0 + self.BUCKET_S
        self._bucket_min = float("inf")
        self._bucket_t = t0

    def add(self, now: float, written: int) -> None:
        lag = (now - self.t0) * self.rate - (written - self.w0)
        if lag < self._bucket_min:
            self._bucket_min, self._bucket_t = lag, now
        if now >= self._bucket_end:
            self.minima.append((self._bucket_t, self._bucket_min))
            self._bucket_min = float("inf")
            self._bucket_end = now + self.BUCKET_S

    MIN_BUCKETS = 10  # below ~10 s, millisecond delivery jitter swamps a ppm estimate

    def drift_ppm(self) -> float | None:
        if len(self.minima) < self.MIN_BUCKETS + 1:
            return None
        pts = np.array(list(self.minima)[1:])  # the first second holds the start-up transient
        t, lag = pts[:, 0], pts[:, 1]
        # Theil-Sen-style: median slope between points half the window apart, so a one-off
        # change of the delivery pattern (a player joining the sink, a busy second) is ignored
        h = len(t) // 2
        slope = float(np.median((lag[h:] - lag[:-h]) / (t[h:] - t[:-h])))  # lag gained per s
        return -slope / self.rate * 1e6

    def lag_ms(self) -> float | None:
        if len(self.minima) < 2:
            return None
        return (self.minima[-1][1] - self.minima[1 if len(self.minima) > 2 else 0][1]) * (
            1000.0 / self.rate
        )


class Capture(RingSource):
    """Capture from one input device into a ring buffer, and keep it alive.

    `device`: name substring (case-insensitive; an exact name wins), PortAudio index, or None
    for the default input. `sample_rate`: tried first, then the device's default rate, then
    48000/44100/16000; `sample_rate` is the rate in use. The ring holds `buffer_s` seconds.
    `on_state(state, message)` is called from the supervisor thread on every state change
    ("starting", "running", "lost", "closed"). `stall_s`: no samples for this long while
    running means the device is lost; `start_timeout_s`: how long a (re)opened stream may take
    to deliver its first samples; `retry_s`: how often a lost device is looked for.
    """

    def __init__(
        self,
        device: str | int | None = None,
        sample_rate: int | None = None,
        channels: int = 1,
        block_ms: float = 5,
        buffer_s: float = 10,
        *,
        latency: str | float = "low",
        on_state: Callable[[str, str], None] | None = None,
        stall_s: float = 0.5,
        start_timeout_s: float = 3.0,
        retry_s: float = 0.2,
        poll_s: float = 0.017,
        start: bool = True,
    ) -> None:
        if channels < 1:
            raise CaptureError(f"channels must be at least 1, got {channels}")
        dev = _resolve(device, channels)
        self.device_name = dev.name  # re-resolved by exact name after a hot-plug
        self.device_index = dev.index
        self.host_api = dev.host_api
        self.channels = channels
        self.sample_rate = _negotiate_rate(dev, channels, sample_rate)
        self.blocksize = max(1, round(self.sample_rate * block_ms / 1000))
        self.latency = latency
        self.on_state = on_state
        self.stall_s = stall_s
        self.start_timeout_s = start_timeout_s
        self.retry_s = retry_s
        self.poll_s = poll_s

        capacity = max(int(self.sample_rate * buffer_s), 2 * self.blocksize)
        self.ring = RingBuffer(capacity, channels, max_block=max(4096, 4 * self.blocksize))
        self.overflows = 0  # input overflow flags seen by the callback
        self.status_flags = 0  # callbacks that carried any status flag
        self.gaps: list[tuple[int, float]] = []  # (sample index where it resumed, seconds lost)
        self.state = "closed"
        self.last_error: str | None = None
        self.reopens = 0

        self._stream: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drift: _DriftMeter | None = None
        self._lost_at: float | None = None  # wall time of the last sample before an outage
        self._lost_written = 0
        self._state_lock = threading.Lock()
        log.info(
            "capture: %r (%s, index %d) at %d Hz, %d ch, %d-frame blocks",
            dev.name,
            dev.host_api,
            dev.index,
            self.sample_rate,
            channels,
            self.blocksize,
        )
        if start:
            self.start()

    # -- the audio callback: copy and count, nothing else -------------------------------------

    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        self.ring.write(indata)
        if status:
            self.status_flags += 1
            if status.input_overflow:
                self.overflows += 1

    # -- health (clock and data: RingSource) ---------------------------------------------------

    def health(self) -> CaptureHealth:
        drift = self._drift
        return CaptureHealth(
            rate=self.sample_rate,
            overflows=self.overflows,
            drift_ppm=drift.drift_ppm() if drift else None,
            state=self.state,
            last_error=self.last_error,
            lag_ms=drift.lag_ms() if drift else None,
            samples=self.ring.written,
            gaps=len(self.gaps),
            device=self.device_name,
        )

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Open the device and start the supervisor. Raises CaptureError if it cannot open."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._set_state("starting", f"opening {self.device_name!r} at {self.sample_rate} Hz")
        try:
            self._open(self.device_index)
        except Exception as exc:
            self._set_state("closed", str(exc))
            raise CaptureError(
                f"cannot open input device {self.device_name!r}: {' '.join(str(exc).split())}"
            ) from exc
        self._thread = threading.Thread(target=self._supervise, name="kagura-capture", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the stream and the supervisor. Idempotent."""
        self._stop_worker()
        self._close_stream()
        if self.state != "closed":
            self._set_state("closed", "capture closed")

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- internals (supervisor thread) --------------------------------------------------------

    def _open(self, index: int) -> None:
        self._opened_written = self.ring.written
        stream = start_stream(
            lambda sd: sd.InputStream(
                device=index,
                channels=self.channels,
                samplerate=self.sample_rate,
                blocksize=self.blocksize,
                dtype="float32",
                latency=self.latency,
                callback=self._callback,
            )
        )
        self._stream = stream
        self._opened_at = time.monotonic()

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stop_stream(stream)

    def _set_state(self, state: str, message: str) -> None:
        with self._state_lock:
            if state == self.state and state != "lost":
                return
            self.state = state
        level = logging.WARNING if state == "lost" else logging.INFO
        log.log(level, "capture %s: %s", state, message)
        if self.on_state is not None:
            try:
                self.on_state(state, message)
            except Exception:
                log.exception("capture: on_state callback failed")

    def _lose(self, reason: str, last_sample_at: float) -> None:
        self.last_error = reason
        self._lost_at = last_sample_at
        self._lost_written = self.ring.written
        self._drift = None
        self._close_stream()
        self._set_state("lost", f"{self.device_name!r}: {reason}; waiting for it to come back")

    def _try_reopen(self, refreshed_at: float) -> float:
        """One attempt to find and open the device again; returns when PortAudio was refreshed."""
        now = time.monotonic()
        found = _find(self.device_name, list_input_devices())
        # a hot-plugged device needs a fresh device list; re-scan at most twice a second
        stale = found is None or self._open_failed
        if stale and now - refreshed_at >= 0.5 and refresh_devices():
            refreshed_at = now
            found = _find(self.device_name, list_input_devices())
        if found is None:
            self.last_error = f"device {self.device_name!r} is not present"
            return refreshed_at
        try:
            with _quiet_stderr():  # ALSA/PortAudio print every failed attempt to fd 2
                self._open(found.index)
        except Exception as exc:
            self._open_failed = True
            self.last_error = " ".join(str(exc).split())
            return refreshed_at
        self._open_failed = False
        self.device_index = found.index
        self.reopens += 1
        self._set_state("starting", f"{self.device_name!r} is back; reopened")
        return refreshed_at

    def _supervise(self) -> None:
        ring = self.ring
        last_w = ring.written
        last_change = time.monotonic()
        next_retry = 0.0
        refreshed_at = 0.0
        self._open_failed = False
        while not self._stop.wait(self.poll_s):
            now = time.monotonic()
            w = ring.written
            if w != last_w:
                last_w, last_change = w, now
            state = self.state
            if state == "starting":
                if w != self._opened_written:
                    self._on_running(now, w)
                elif self._stream is None or not self._stream.active:
                    self._lose("the stream stopped while starting", last_change)
                elif now - self._opened_at > self.start_timeout_s:
                    self._lose(
                        f"no samples {self.start_timeout_s:.1f} s after opening", last_change
                    )
            elif state == "running":
                if self._drift is not None:
                    self._drift.add(now, w)
                if self._stream is None or not self._stream.active:
                    self._lose("the stream stopped (device error or removed)", last_change)
                elif now - last_change > self.stall_s:
                    self._lose(f"no samples for {now - last_change:.2f} s", last_change)
            elif state == "lost" and now >= next_retry:
                next_retry = now + self.retry_s
                refreshed_at = self._try_reopen(refreshed_at)

    def _on_running(self, now: float, written: int) -> None:
        self._drift = _DriftMeter(self.sample_rate, now, written)
        if self._lost_at is None:
            self._set_state("running", f"capturing from {self.device_name!r}")
            return
        missed = now - self._lost_at
        self.gaps.append((self._lost_written, missed))
        self._lost_at = None
        self._set_state(
            "running",
            f"{self.device_name!r} recovered; {missed:.2f} s missing after sample "
            f"{self._lost_written}",
        )


def record(
    seconds: float,
    device: str | int | None = None,
    *,
    sample_rate: int | None = None,
    on_block: Callable[[np.ndarray, int], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Record `seconds` of mono audio from `device` through a Capture -> (float32, rate).

    The one recording path for calibration (CLI and dialog): the same device choice, rate
    negotiation and one-line CaptureError as live capture. The take starts when the device
    actually delivers (``on_start`` is called then), so a sound server that needs a moment to
    start costs no part of the take; ``on_block(samples, rate)`` gets each new piece (~20 ms)
    on the calling thread. A device that stops delivering before the time is up raises
    CaptureError instead of returning a short take.
    """
    with Capture(device, sample_rate=sample_rate, channels=1, buffer_s=seconds + 4.0) as cap:
        deadline = time.monotonic() + cap.start_timeout_s + 1.0
        while cap.state != "running":
            if time.monotonic() > deadline:
                raise CaptureError(
                    f"input device {cap.device_name!r} delivers no sound; check that it is "
                    "connected and not muted"
                )
            time.sleep(0.01)
        reader = cap.reader()
        if on_start is not None:
            on_start()
        rate = cap.sample_rate
        need = round(seconds * rate)
        parts: list[np.ndarray] = []
        got = 0
        deadline = time.monotonic() + seconds + 2.0
        while got < need:
            if time.monotonic() > deadline:
                raise CaptureError(
                    f"input device {cap.device_name!r} delivered {got / rate:.2f} s of "
                    f"{seconds:.2f} s; check that it is connected and not muted"
                )
            time.sleep(0.02)
            block = reader.read(need - got)
            if len(block):
                mono = block[:, 0].copy()
                parts.append(mono)
                got += len(mono)
                if on_block is not None:
                    on_block(mono, rate)
    return np.concatenate(parts).astype(np.float32), rate
