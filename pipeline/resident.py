"""GPU chains and models kept set up between renders, for a process that renders many songs.

    resident = ResidentChains(keep=2)
    graph, ctx, n = build_graph(req, analyze=..., resident=resident)   # app/render_job.py
    ...                                                                # the next request
    resident.close()

`kagura serve` (app/cmd_serve.py) holds one. A fresh `kagura render` spends seconds before its
first frame on work that does not depend on the song: torch's import, the model load, every GPU
part's set-up (weights to the device, warm-up frames, CUDA-graph captures). Here the models are
loaded once per (checkpoint, device), and a chain's parts are set up once per *shape* — the
device, the sizes, the model, the GPU switches and the preset — and reused by every later
render of that shape.

Between two renders a reused chain starts afresh: every part with a `reset()` forgets its
stream (the diffusion stage primes its in-flight slots again, the temporal stage drops its
history; it also does so by itself when the frame index goes back), so a render through a kept
chain gives the frames a fresh process gives (tests/test_serve.py compares them). At most
`keep` chains are kept, the least recently used closed first, and as many models (a chain
still kept holds its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from core.stage import Context
from core.trace import step
from pipeline.gpu_chain import ChainStage, ChainWait

__all__ = ["ResidentChainStage", "ResidentChains"]


class ResidentChainStage(ChainStage):
    """A `ChainStage` whose parts outlive the graph: set up by the first graph that runs it,
    reset by every later one, closed by its `ResidentChains` (the graph's `close` leaves them)."""

    def __init__(self, parts: Sequence[Any], device: str) -> None:
        super().__init__(parts, device)
        self.runs = 0

    def setup(self, ctx: Context) -> None:
        if not self._set_up:
            try:
                super().setup(ctx)
            except BaseException:
                self.release()  # a part half set up: the next graph sets them all up again
                raise
        else:
            for part in self.parts:
                reset = getattr(part, "reset", None)
                if callable(reset):
                    reset()
            if self.chain.cuda:  # the resets ran on this thread's stream, as a set-up does
                self.chain.stream.wait_stream(torch.cuda.current_stream(self.chain.device))
            step("gpu chain reused")
        self.runs += 1

    def close(self) -> None:
        """Kept for the next render (`ResidentChains` closes it)."""

    def release(self) -> None:
        super().close()


class ResidentChains:
    """The models and the set-up GPU chains of the last `keep` render shapes."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = max(1, int(keep))
        self._chains: OrderedDict[Hashable, ResidentChainStage] = OrderedDict()
        self._models: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def models(self, key: Hashable, load: Callable[[], Any]) -> Any:
        """The models for `key`, loaded by `load()` the first time. None (weights that could
        not be loaded: the loader's notice says why) is not kept: each render tries again and
        says so again, as a render in its own process does."""
        with self._lock:
            models = self._models.pop(key, None)
            if models is None:
                models = load()
            if models is not None:
                self._models[key] = models  # the most recently used last
                while len(self._models) > self.keep:  # a chain still kept keeps its own
                    self._models.popitem(last=False)
            return models

    def nodes(self, key: Hashable, make_parts: Callable[[], list], device: str) -> list[Any]:
        """The graph's nodes for the chain of shape `key`: the kept one (its parts set up), or
        one of `make_parts()` that the graph sets up and this keeps."""
        with self._lock:
            chain = self._chains.pop(key, None)
            if chain is None:
                chain = ResidentChainStage(make_parts(), device)
            self._chains[key] = chain  # the most recently used last
            while len(self._chains) > self.keep:
                _, old = self._chains.popitem(last=False)
                old.release()
        return [chain, ChainWait()]

    def __len__(self) -> int:
        return len(self._chains)

    def close(self) -> None:
        with self._lock:
            while self._chains:
                _, chain = self._chains.popitem()
                chain.release()
            self._models.clear()
