"""A preallocated single-producer ring buffer of float32 samples, safe to read without locks.

The producer is the audio callback: `write` copies one block in with numpy slice assignment
and then advances `written`, the total number of samples (frames) ever written. `written` is
the live audio-sample clock: sample `k` has the time stamp `samples_to_ns(k, rate)`, and the
newest sample is `written - 1`.

Consumers never block the producer and never write shared state. Each reads either the latest
N samples (`latest`) or everything since its own position (`RingReader.read`), and learns after
the copy whether the producer overwrote part of what it copied; that part is dropped and
counted as an overrun, and the reader catches up to the oldest sample still intact.

Why no lock is needed (CPython):

* One writer. `written` changes only in `write`, and only *after* the block's samples are
  stored, so a reader that sees `written == w` finds samples `< w` already in storage.
  The copy itself may run without the GIL (numpy releases it for large copies), but the store
  to `written` is a Python attribute store made while holding the GIL; a reader loads
  `written` while holding the GIL too. Taking and releasing the GIL are full memory barriers,
  so the samples are visible to any thread that sees the new counter value. (This argument
  is for the GIL build Kagura runs on; a free-threaded build would need the counter store
  to be a release and its load an acquire, which CPython does not promise for attributes.)
* `written` is a Python int: loads and stores are atomic (one reference swap); it never
  wraps (int64 range at 192 kHz lasts ~1.5 million years).
* The storage holds `capacity + max_block` frames. While a reader copies, the writer may be
  in the middle of an unpublished block of at most `max_block` frames beyond `written`,
  which can only overwrite samples older than `written - capacity`. A reader therefore
  re-reads `written` after its copy: every copied sample `>= written_after - capacity` is
  intact, the older ones are not and are discarded as an overrun.

`write` allocates no sample storage: it slices preallocated arrays (numpy creates small view
objects, as any Python code would) and stores one int.
"""

from __future__ import annotations

import threading
from typing import Self

import numpy as np

from core.clock import samples_to_ns

__all__ = ["RingBuffer", "RingReader"]


class RingBuffer:
    """Holds the latest `capacity` frames of `channels` float32 samples.

    `max_block` is the largest block a single `write` publishes at once (bigger writes are
    split); it sizes the guard region that keeps readers clear of a write in progress.
    """

    def __init__(self, capacity: int, channels: int = 1, max_block: int = 4096) -> None:
        if capacity < 1 or channels < 1 or max_block < 1:
            raise ValueError("capacity, channels and max_block must be positive")
        self.capacity = int(capacity)
        self.channels = int(channels)
        self.max_block = int(max_block)
        self._size = self.capacity + self.max_block  # storage frames, guard included
        self._buf = np.zeros((self._size, self.channels), dtype=np.float32)
        self.written = 0  # total frames ever written: the audio-sample clock

    # -- producer (one thread) ----------------------------------------------------------------

    def write(self, block: np.ndarray) -> None:
        """Copy `block` (frames × channels, or frames for mono) in and publish it.

        Real-time safe: slice assignment into preallocated storage, then one int store.
        """
        n = block.shape[0]
        if n > self.max_block:  # rare (not in the audio callback): publish in guard-sized parts
            for i in range(0, n, self.max_block):
                self.write(block[i : i + self.max_block])
            return
        if block.ndim == 1:
            block = block.reshape(n, 1)
        size = self._size
        w = self.written
        i = w % size
        first = size - i
        if n <= first:
            self._buf[i : i + n] = block
        else:
            self._buf[i:] = block[:first]
            self._buf[: n - first] = block[first:]
        self.written = w + n  # publish after the copy (see module docstring)

    # -- consumers (any number, each in one thread) -------------------------------------------

    def oldest(self) -> int:
        """Index of the oldest frame a reader may still copy intact."""
        return max(0, self.written - self.capacity)

    def _copy(self, start: int, stop: int, out: np.ndarray) -> int:
        """Copy frames [start, stop) into out[:stop-start]; return the first intact index."""
        size = self._size
        n = stop - start
        i = start % size
        first = size - i
        if n <= first:
            out[:n] = self._buf[i : i + n]
        else:
            out[:first] = self._buf[i:]
            out[first:n] = self._buf[: n - first]
        return max(0, self.written - self.capacity)  # re-read after the copy

    def latest(self, n: int, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """The newest `n` frames (fewer at the very start) and the index one past the last.

        Returns `(frames × channels array, end)`: the last frame is sample `end - 1` on the
        audio clock. `out`, if given, is a preallocated (≥n, channels) float32 array to fill.
        """
        if not 0 <= n <= self.capacity:
            raise ValueError(f"n must be in [0, {self.capacity}], got {n}")
        end = self.written
        start = max(0, end - n)
        if out is None:
            out = np.empty((end - start, self.channels), dtype=np.float32)
        intact = self._copy(start, end, out)
        if intact > start:  # the producer lapped us during the copy (n close to capacity)
            return out[intact - start : end - start], end
        return out[: end - start], end

    def reader(self, position: int | None = None) -> RingReader:
        """A reader starting at `position` (default: now, i.e. only new samples)."""
        return RingReader(self, self.written if position is None else position)


class RingReader:
    """One consumer's position in a RingBuffer, with its overrun count."""

    def __init__(self, ring: RingBuffer, position: int = 0) -> None:
        self.ring = ring
        self.position = int(position)
        self.overruns = 0  # times this reader fell behind and samples were lost
        self.lost = 0  # frames overwritten before this reader got them

    @property
    def available(self) -> int:
        """Frames written since this reader's position (may exceed capacity if behind)."""
        return self.ring.written - self.position

    def read(self, max_frames: int | None = None) -> np.ndarray:
        """Everything since the last read (at most `max_frames`), oldest first.

        If the producer overwrote frames this reader had not read yet, they are skipped:
        `overruns` grows by one, `lost` by the number of frames, and the reader continues
        from the oldest intact frame. The first returned frame is sample `position` as it was
        after that catch-up; after the call `position` is one past the last returned frame.
        """
        ring = self.ring
        end = ring.written
        start = self.position
        oldest = max(0, end - ring.capacity)
        if start < oldest:
            self._lose(oldest - start)
            start = oldest
        if max_frames is not None:
            end = min(end, start + max_frames)
        out = np.empty((end - start, ring.channels), dtype=np.float32)
        intact = ring._copy(start, end, out)
        if intact > start:  # lapped during the copy: drop the torn prefix
            self._lose(min(intact, end) - start)
            out = out[min(intact, end) - start :]
            start = min(intact, end)
        self.position = start + out.shape[0]
        return out

    def skip_to_newest(self, keep: int) -> int:
        """Leave all but the newest `keep` unread frames unread for good; returns how many were
        skipped. For a consumer that fell too far behind and would rather follow the present
        than catch up. Not an overrun (`overruns`/`lost` unchanged): nothing was overwritten,
        the reader chose to move on."""
        newest = self.ring.written - max(0, int(keep))
        skipped = newest - self.position
        if skipped <= 0:
            return 0
        self.position = newest
        return skipped

    def _lose(self, frames: int) -> None:
        self.overruns += 1
        self.lost += frames


class RingSource:
    """The reading side every live audio source offers (Capture, FilePlayback): its ring buffer
    is the audio-sample clock. Subclasses set `self.ring` and `self.sample_rate`, run their
    delivery on a worker thread (`self._thread`, told to end by the event `self._stop`) and
    define start() (a no-op while running) and close(); `with source:` starts and closes."""

    ring: RingBuffer
    sample_rate: int
    _stop: threading.Event
    _thread: threading.Thread | None

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stop_worker(self) -> None:
        """Tell the worker thread to end and wait for it (not when called from it)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None

    @property
    def samples_captured(self) -> int:
        """Samples delivered since the source started: the live audio-sample clock."""
        return self.ring.written

    def pts_ns(self) -> int:
        """Time stamp of the newest sample on the audio-sample clock (0 before the first)."""
        return samples_to_ns(max(self.ring.written - 1, 0), self.sample_rate)

    def latest(self, n: int, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """The newest `n` frames and the index one past the last (see RingBuffer.latest)."""
        return self.ring.latest(n, out)

    def reader(self, position: int | None = None) -> RingReader:
        """A reader of everything delivered from `position` on (default: from now)."""
        return self.ring.reader(position)
