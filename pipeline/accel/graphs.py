"""CUDA graphs captured per shape bucket at setup, replayed with copy-in; capture is checked.

    cache = GraphCache(fn, device="cuda", stream=None, rtol=1e-3, atol=1e-3, warmup_iters=3,
                       pad_batch=False, clone_output=True)
    cache.capture(example)        # at setup, once per (shape, batch, dtype) bucket
    y = cache(x)                  # replay: x is copied into the bucket's static input

`fn(x: Tensor) -> Tensor` must be a pure function of its input (weights fixed). The bucket key is
(shape without batch, batch, dtype); `pad_batch=True` lets a smaller batch use the smallest
captured bucket with room for it (rows past the batch keep stale data, so only for functions
that treat batch rows independently — convolutions, eval-mode norms).

Several inputs and outputs: `fn(a, b, ...) -> Tensor | tuple[Tensor, ...]`, captured with
`cache.capture(a, b, ...)` and called as `cache(a, b, ...)`; the bucket key is then the tuple of
each input's key, and every input is copied into its static twin (no packing into one tensor).
Values the graph should read without being recaptured (a blend weight) belong in device tensors
the function reads, changed with `fill_` on the stream that replays it.

Capture is CHECKED, never silently replaced by eager:
- any exception while warming up or capturing (a host sync, `.item()`, a CPU tensor, dynamic
  control flow, an allocation the capture forbids) raises `GraphCaptureError` naming the
  bucket and the cause;
- after capture the graph is replayed on the example and compared with the eager result of the
  same input; a mismatch beyond rtol/atol (or a NaN, or a different shape/dtype) raises
  `GraphCaptureError` with the largest error;
- calling the cache for a bucket that was not captured raises `GraphCaptureError` (the shapes
  a stage meets in steady state are known at setup; an unexpected one is a bug to report, not
  a reason to capture in the hot path). `capture_on_miss=True` captures it instead (checked
  the same way) — for offline runs where the first call's cost does not matter.

Capture mode is "thread_local": other pipeline threads may keep using CUDA while a stage
captures. Each bucket has its own memory pool (safe whatever the replay order).

`warm_up(fn, *examples, iters=3, stream=None)` runs `fn` on a side stream (cuDNN/cuBLAS pick
their algorithms, lazy modules initialise) and waits for it — what a stage does at setup before
capturing or before its first real frame.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger("kagura.accel")

BucketKey = tuple[tuple[int, ...], int, torch.dtype]


class GraphCaptureError(RuntimeError):
    """A CUDA graph could not be captured, or its replay does not match eager execution."""


def bucket_key(x: torch.Tensor) -> BucketKey:
    """(shape without the batch dimension, batch, dtype)."""
    if x.ndim == 0:
        raise ValueError("GraphCache: inputs need a batch dimension")
    return (tuple(x.shape[1:]), int(x.shape[0]), x.dtype)


def _describe(key: BucketKey) -> str:
    shape, batch, dtype = key
    return f"batch {batch} x {tuple(shape)} {str(dtype).removeprefix('torch.')}"


def warm_up(
    fn: Callable[..., object],
    *examples: object,
    iters: int = 3,
    stream: torch.cuda.Stream | None = None,
) -> None:
    """Run `fn(*examples)` `iters` times on a side stream and wait for it (CPU: just run it)."""
    devices = {e.device for e in examples if isinstance(e, torch.Tensor)}
    cuda = [d for d in devices if d.type == "cuda"]
    with torch.inference_mode():
        if not cuda:
            for _ in range(iters):
                fn(*examples)
            return
        dev = cuda[0]
        side = stream if stream is not None else torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(iters):
                fn(*examples)
        torch.cuda.current_stream(dev).wait_stream(side)
        side.synchronize()


@dataclass
class _Entry:
    graph: torch.cuda.CUDAGraph
    static_in: tuple[torch.Tensor, ...]
    static_out: tuple[torch.Tensor, ...]
    single_out: bool  # fn returned one tensor, not a tuple


def _key_of(xs: tuple[torch.Tensor, ...]) -> Any:
    """One input: its bucket key (what `buckets` has always listed); several: the tuple."""
    return bucket_key(xs[0]) if len(xs) == 1 else tuple(bucket_key(x) for x in xs)


def _describe_key(key: Any) -> str:
    if isinstance(key[-1], torch.dtype):  # one input's key
        return _describe(key)
    return " + ".join(_describe(k) for k in key)


def _as_outputs(out: object) -> tuple[tuple[torch.Tensor, ...], bool]:
    if isinstance(out, torch.Tensor):
        return (out,), True
    if isinstance(out, tuple) and out and all(isinstance(t, torch.Tensor) for t in out):
        return out, False
    raise TypeError(f"fn returned {type(out).__name__}, not a tensor or a tuple of tensors")


class GraphCache:
    def __init__(
        self,
        fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
        device: torch.device | str = "cuda",
        *,
        stream: torch.cuda.Stream | None = None,
        rtol: float = 1e-3,
        atol: float = 1e-3,
        warmup_iters: int = 3,
        pad_batch: bool = False,
        clone_output: bool = True,
        capture_on_miss: bool = False,
        name: str = "graph",
    ):
        self.fn = fn
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"GraphCache: CUDA graphs need a CUDA device, got {self.device}")
        self.stream = stream
        self.rtol, self.atol = float(rtol), float(atol)
        self.warmup_iters = max(1, int(warmup_iters))
        self.pad_batch = pad_batch
        self.clone_output = clone_output
        self.capture_on_miss = capture_on_miss
        self.name = name
        self._entries: dict[Any, _Entry] = {}
        self.replays = 0

    # -- capture --------------------------------------------------------------------------------

    @property
    def buckets(self) -> list[Any]:
        return list(self._entries)

    def capture(self, *examples: torch.Tensor) -> Any:
        """Capture `fn` for the bucket of `examples` and check the replay against eager.
        Raises GraphCaptureError with the reason on any failure."""
        if not examples:
            raise ValueError(f"{self.name}: capture needs an example input")
        if self.pad_batch and len(examples) > 1:
            raise ValueError(f"{self.name}: pad_batch takes one input, got {len(examples)}")
        if not torch.cuda.is_available():
            raise GraphCaptureError(f"{self.name}: cannot capture, CUDA is not available")
        key = _key_of(examples)
        what = f"{self.name}: CUDA graph for {_describe_key(key)}"
        if key in self._entries:
            return key
        try:
            static_in = tuple(e.detach().to(self.device).clone() for e in examples)
        except Exception as exc:
            raise GraphCaptureError(
                f"{what}: cannot place the example on {self.device}: {exc}"
            ) from exc
        capture_stream = self.stream if self.stream is not None else torch.cuda.Stream(self.device)
        try:
            with torch.inference_mode():
                # eager reference, then warm-up on the capture stream (algorithm choice,
                # lazy initialisation, the caching allocator's first blocks)
                capture_stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(capture_stream):
                    reference = tuple(t.clone() for t in _as_outputs(self.fn(*static_in))[0])
                    for _ in range(self.warmup_iters):
                        self.fn(*static_in)
                capture_stream.synchronize()
        except Exception as exc:
            raise GraphCaptureError(f"{what}: the eager warm-up failed: {exc}") from exc

        graph = torch.cuda.CUDAGraph()
        try:
            with (
                torch.inference_mode(),
                torch.cuda.graph(graph, stream=capture_stream, capture_error_mode="thread_local"),
            ):
                captured = self.fn(*static_in)
        except Exception as exc:
            _recover_after_failed_capture(self.device)
            raise GraphCaptureError(
                f"{what}: capture failed ({type(exc).__name__}: {_first_line(exc)}); "
                "the function must not synchronise with the host (.item(), .cpu(), printing a "
                "CUDA tensor, torch.cuda.synchronize), create CPU tensors or branch on GPU values"
            ) from exc
        try:
            static_out, single = _as_outputs(captured)
        except TypeError as exc:
            raise GraphCaptureError(f"{what}: {exc}") from exc

        entry = _Entry(graph, static_in, static_out, single)
        try:
            with torch.inference_mode():
                graph.replay()
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            raise GraphCaptureError(f"{what}: the first replay failed: {_first_line(exc)}") from exc
        if len(static_out) != len(reference):
            raise GraphCaptureError(
                f"{what}: replay gives {len(static_out)} outputs, eager {len(reference)}"
            )
        for out, ref in zip(static_out, reference, strict=True):
            self._check(what, out, ref)
        self._entries[key] = entry
        log.info("%s captured and checked against eager", what)
        return key

    def _check(self, what: str, out: torch.Tensor, ref: torch.Tensor) -> None:
        if out.shape != ref.shape or out.dtype != ref.dtype:
            raise GraphCaptureError(
                f"{what}: replay gives {out.dtype} {tuple(out.shape)}, eager "
                f"{ref.dtype} {tuple(ref.shape)}"
            )
        a, b = out.float(), ref.float()
        if not bool(torch.isfinite(a).eq(torch.isfinite(b)).all()):
            raise GraphCaptureError(f"{what}: replay and eager disagree on non-finite values")
        finite = torch.isfinite(b)
        err = (a - b).abs().where(finite, torch.zeros_like(a))
        limit = self.atol + self.rtol * b.abs().where(finite, torch.zeros_like(b))
        if bool((err > limit).any()):
            worst = float(err.max())
            raise GraphCaptureError(
                f"{what}: replay does not match eager (max abs error {worst:.3g}, "
                f"tolerance atol {self.atol:g} + rtol {self.rtol:g} * |eager|) — the function "
                "likely reads state that changes between calls or uses host values"
            )

    # -- replay ---------------------------------------------------------------------------------

    def _find(self, xs: tuple[torch.Tensor, ...]) -> tuple[_Entry, int]:
        key = _key_of(xs)
        entry = self._entries.get(key)
        if entry is not None:
            return entry, int(xs[0].shape[0])
        if self.pad_batch and len(xs) == 1:
            fits = [
                k for k in self._entries if k[0] == key[0] and k[2] == key[2] and k[1] >= key[1]
            ]
            if fits:
                return self._entries[min(fits, key=lambda k: k[1])], key[1]
        if self.capture_on_miss:
            log.warning("%s: no graph for %s; capturing now", self.name, _describe_key(key))
            self.capture(*xs)
            return self._entries[key], int(xs[0].shape[0])
        have = ", ".join(_describe_key(k) for k in self._entries) or "none"
        raise GraphCaptureError(
            f"{self.name}: no CUDA graph captured for {_describe_key(key)} (captured: {have}); "
            "capture every steady-state shape at setup"
        )

    def __call__(self, *xs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        entry, batch = self._find(xs)
        full = batch == entry.static_in[0].shape[0]
        for static, x in zip(entry.static_in, xs, strict=True):
            (static if full else static[:batch]).copy_(x, non_blocking=True)
        entry.graph.replay()
        self.replays += 1
        outs = entry.static_out if full else tuple(o[:batch] for o in entry.static_out)
        if self.clone_output:
            outs = tuple(o.clone() for o in outs)
        return outs[0] if entry.single_out else outs

    def clear(self) -> None:
        self._entries.clear()


def _recover_after_failed_capture(device: torch.device) -> None:
    """A capture that fails inside its body leaves the CUDA RNG believing it is still being
    captured (`cudaStreamEndCapture` errors before torch's generator epilogue runs), and the
    next random op fails with "Offset increment outside graph capture". Give every CUDA
    generator a fresh copy of its state (same seed and offset, not capturing); then let the
    device drain. Errors here are swallowed: the capture error is the one to report."""
    for gen in getattr(torch.cuda, "default_generators", ()):
        with contextlib.suppress(Exception):
            gen.graphsafe_set_state(gen.clone_state())
    with contextlib.suppress(Exception):
        torch.cuda.synchronize(device)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
