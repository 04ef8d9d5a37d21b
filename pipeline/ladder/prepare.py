"""The quality ladder's lower rungs, set up on a helper thread while the first frames flow.

    rest = LowerRungs(stages, rungs, ctx, device, thread_name="kagura-live-ladder",
                      first=[(diffusion, [start_rung])], on_first=painting.set)
    rest.start()            # after the first rung is set up and warmed (`first` aside)
    rest.ready              # True once every rung can run
    rest.wait(timeout)      # the frame thread, when the ladder wants a rung not ready yet
    rest.close()            # the chain closes: stop after the stage being set up

A live chain sets up and warms only the rung it starts on before the first frame; each
diffusion variant is a CUDA-graph capture, so setting up every rung first delayed the first
frame by most of a second (docs/BENCHMARKS.md, the start-up steps). The others are set up here,
beside the frame thread: the captures are thread-local and on streams of their own
(pipeline/diffusion/stage.py, pipeline/upscale/stage.py), so the frame thread keeps issuing
frames on its stream meanwhile. The ladder needs a window of measured frames before it steps
down, which normally outlasts this; a step that comes sooner waits for it (GpuChain.submit).

`first`: (stage, rungs) set up before the others, then `on_first()` is called (their buffers
written): the live chain's start-rung diffusion, which its first frames pass by until it is
ready (pipeline/live_gpu.py, "painting beside the first frames").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from core.stage import Context
from pipeline.cpu_memory import freeze_setup_objects
from pipeline.quality import Rung

log = logging.getLogger("kagura.quality")


class LowerRungs:
    """Calls `stage.prepare(rungs, ctx)` on every ladder stage, on a thread of its own."""

    def __init__(
        self,
        stages: Sequence[Any],
        rungs: Sequence[Rung],
        ctx: Context,
        device: torch.device,
        *,
        thread_name: str,
        first: Sequence[tuple[Any, Sequence[Rung]]] = (),
        on_first: Callable[[], None] | None = None,
    ) -> None:
        self._stages = list(stages)
        self._first = [(st, tuple(rs)) for st, rs in first]
        self._on_first = on_first
        self._rungs = tuple(rungs)
        self._ctx = ctx
        self._device = device
        self._done = threading.Event()
        self._closing = False
        self.error: str | None = None
        self.seconds: float | None = None  # how long the set-up took, once done
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    @property
    def ready(self) -> bool:
        return self._done.is_set() and self.error is None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(self) -> None:
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the set-up has ended (ready or failed)."""
        return self._done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """No further stage is set up; waits for the one in progress (its stages are about to
        be closed by the caller)."""
        self._closing = True
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            for st, rungs in self._first:
                st.prepare(rungs, self._ctx)
            if self._first:
                if self._device.type == "cuda":
                    torch.cuda.synchronize(self._device)
                if self._on_first is not None:
                    self._on_first()
            for st in self._stages:
                if self._closing:
                    self.error = "closed before the set-up ended"
                    return
                st.prepare(self._rungs, self._ctx)
            if self._device.type == "cuda":
                torch.cuda.synchronize(self._device)  # their buffers written before first use
            freeze_setup_objects()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            log.warning("quality: the lower rungs could not be set up: %s", self.error)
        finally:
            self.seconds = time.perf_counter() - t0
            self._done.set()
        if self.error is None:
            log.info(
                "quality: the lower rungs are ready (%.2f s, beside the first frames)",
                self.seconds,
            )
