"""Set up a graph's parts side by side, one thread each, before its first frame.

    set_up_together([*stages, sink], ctx, prepared, on_each=lambda part: ...)

An offline render's first frame waited for every stage's set-up in turn: the stylizer's
warm-up and captures, then the diffusion stage's captures, then the upscaler's (docs/
BENCHMARKS.md, the set-up steps). Most of each is the GPU working or the driver waiting, not
Python, so they overlap. The parts are set up on threads of their own; on CUDA each thread
works on a stream of its own: while one thread captures a graph (thread-local captures,
pipeline/accel/graphs.py, pipeline/diffusion/stage.py, pipeline/upscale/stage.py) no other may
touch the legacy default stream, which every blocking stream depends on. The streams are
synchronised before this returns, so what the set-ups wrote is there for the frame threads.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from core.stage import Context


def _own_stream():
    """A stream context of its own on CUDA; nothing when this process has not started CUDA
    (a CPU render never imports torch for this; a CUDA render has loaded its models)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return nullcontext(None)
    return torch.cuda.stream(torch.cuda.Stream())


def set_up_together(
    parts: Sequence[Any],
    ctx: Context,
    prepared: list[Any],
    on_each: Callable[[Any], None] | None = None,
) -> None:
    """Calls `part.setup(ctx)` for every part, each on its own thread, and waits for all.
    Each part set up is appended to `prepared` (for the caller to close), and `on_each(part)`
    runs on that part's thread after it. If any failed, raises the first failure (in the order
    of `parts`) once every thread has ended."""
    errors: dict[int, BaseException] = {}
    lock = threading.Lock()

    def one(i: int, part: Any) -> None:
        try:
            with _own_stream() as stream:
                part.setup(ctx)
                if stream is not None:
                    stream.synchronize()
            with lock:
                prepared.append(part)
            if on_each is not None:
                on_each(part)
        except BaseException as exc:
            with lock:
                errors[i] = exc

    if len(parts) <= 1:  # nothing to overlap
        for i, part in enumerate(parts):
            one(i, part)
    else:
        threads = [
            threading.Thread(target=one, args=(i, p), name=f"setup-{_name(p)}", daemon=True)
            for i, p in enumerate(parts)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[min(errors)]


def _name(part: Any) -> str:
    return str(getattr(part, "name", type(part).__name__))
