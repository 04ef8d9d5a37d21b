"""Pinned host buffers and asynchronous copies for upload (host -> GPU) and readback.

    pinned_empty(shape, dtype) -> Tensor       page-locked where CUDA is available, else plain
    up = Uploader(device, slots=2, stream=None)
    x = up.upload(host_tensor)                 # device tensor, usable on the current stream
    rb = Readback(slots=2, stream=None)
    t = rb.start(device_tensor)                # async copy into a pinned slot
    t.ready() -> bool; t.wait(copy=False) -> host tensor

Why: a copy from pageable memory is staged by the driver and blocks the host; from pinned
memory it is a DMA that overlaps with compute. Slots rotate; a slot is reused only after its previous copy has finished
(waited on with its CUDA event), so at most `slots` copies are in flight. A readback result
without `copy=True` is a view of its slot: valid until `slots` more `start()` calls.

`stream`: the copy stream (None: the current stream). With a separate copy stream, the copy
waits for the work queued so far on the current stream (upload: the consumer waits for the copy).
Everything degrades to plain synchronous copies where CUDA is absent, so CPU code paths and
tests use the same calls.
"""

from __future__ import annotations

import torch


def pinned_empty(shape: tuple[int, ...], dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    # allocated pinned (torch's caching host allocator), not pinned by copying a pageable one
    return torch.empty(shape, dtype=dtype, pin_memory=torch.cuda.is_available())


class _Slots:
    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.n = slots
        self.bufs: list[torch.Tensor | None] = [None] * slots
        self.events: list[torch.cuda.Event | None] = [None] * slots
        self.next = 0

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[int, torch.Tensor]:
        i = self.next
        self.next = (i + 1) % self.n
        ev = self.events[i]
        if ev is not None:
            ev.synchronize()  # the slot's previous copy has finished
        buf = self.bufs[i]
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dtype:
            buf = self.bufs[i] = pinned_empty(shape, dtype)
        return i, buf


class Uploader:
    def __init__(
        self,
        device: torch.device | str,
        slots: int = 2,
        stream: torch.cuda.Stream | None = None,
    ):
        self.device = torch.device(device)
        self.stream = stream
        self._slots = _Slots(slots)

    def upload(self, host: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cuda":
            return host.to(self.device)
        i, buf = self._slots.take(tuple(host.shape), host.dtype)
        buf.copy_(host)  # host memcpy into page-locked memory
        current = torch.cuda.current_stream(self.device)
        copy_stream = self.stream if self.stream is not None else current
        with torch.cuda.stream(copy_stream):
            dst = torch.empty(host.shape, dtype=host.dtype, device=self.device)
            dst.copy_(buf, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(copy_stream)
        self._slots.events[i] = ev
        if copy_stream is not current:
            current.wait_event(ev)
            dst.record_stream(current)
        return dst


class ReadbackTicket:
    def __init__(self, host: torch.Tensor, event: torch.cuda.Event | None):
        self._host, self._event = host, event

    def ready(self) -> bool:
        return self._event is None or self._event.query()

    def wait(self, copy: bool = False) -> torch.Tensor:
        if self._event is not None:
            self._event.synchronize()
        return self._host.clone() if copy else self._host


class Readback:
    def __init__(self, slots: int = 2, stream: torch.cuda.Stream | None = None):
        self.stream = stream
        self._slots = _Slots(slots)

    def start(self, src: torch.Tensor) -> ReadbackTicket:
        if src.device.type != "cuda":
            return ReadbackTicket(src.detach().cpu().clone(), None)
        i, buf = self._slots.take(tuple(src.shape), src.dtype)
        current = torch.cuda.current_stream(src.device)
        copy_stream = self.stream if self.stream is not None else current
        if copy_stream is not current:
            copy_stream.wait_stream(current)  # the producer's work comes first
            src.record_stream(copy_stream)  # keep src's memory until the copy is done
        with torch.cuda.stream(copy_stream):
            buf.copy_(src, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(copy_stream)
        self._slots.events[i] = ev
        return ReadbackTicket(buf, ev)
