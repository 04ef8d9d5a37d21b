"""The streaming runtime: a source, nodes and a sink, joined by bounded queues with a policy
each — `kagura render` and the live session both run through it.

    source ─► edge ─► node 1 ─► edge ─► … ─► node n ─► edge ─► sink

A node is a thread body, `run(inbox, outbox)`: it takes items from its inbox until the inbox is
closed (or, live, until the session stops) and puts what it makes into its outbox; when it ends
(returns or raises) its outbox is closed, so the next node drains what is left and ends too.
An offline stage (`core.stage.Stage`) becomes a node that takes up to its `max_batch` frames at
a time, times them and marks them for a profiler (NVTX). `parts`: the stages a node runs, in
order; `Graph.build()` checks them all against what the frames carry (core.stage.check_chain,
the live looks' check too: pipeline/live_chain.py).

Each edge (`Edge`) is a bounded queue with its policy (pipeline/queues.py): offline every edge
blocks (Policy.BLOCK: every frame reaches the file, memory stays bounded); live, where a late
item is worthless, the newest wins (Policy.LATEST). An `inline` edge is no queue: the next part
is called on the same thread (the live session's output tee, where a hand-off would only add
latency).

    Graph(frames, gives, stages, sink).run(ctx)        offline: to the end of the source, the
                                                       sink written on the caller's thread
    graph = Graph(analysis, gives, [frames, publish], tee, edges=[...], stop=event)
    graph.start(); …; graph.stop()                     live: the nodes run until `stop` is set

Offline, the first failure stops every node and is re-raised by `run` (the sink aborted). Live,
a node reports its own failures (the session's state) and the others go on; one that raises
anyway is logged and handed to `on_error`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.frame import Frame
from core.nvtx import stage_range
from core.stage import Context, GraphError, Spec, Stage, check_chain
from core.trace import step
from pipeline.cpu_memory import freeze_setup_objects
from pipeline.queues import BoundedQueue, Closed, Policy

__all__ = ["Edge", "Graph", "GraphError", "Node", "RunStats"]  # GraphError: core.stage's

log = logging.getLogger(__name__)


class Node(Protocol):
    """A part of the graph with a thread of its own (see the module docstring)."""

    name: str
    parts: tuple  # the stages it runs, in order, for the contract check

    def run(self, inbox: BoundedQueue | None, outbox: Any) -> None: ...


@dataclass(frozen=True)
class Edge:
    """How a node hands its items on: a bounded queue of `capacity` with `policy`, or, `inline`,
    a direct call of the next part on the node's own thread. A graph may also be given the
    queue itself (one a caller made and watches)."""

    capacity: int = 4
    policy: Policy = Policy.BLOCK
    inline: bool = False


INLINE = Edge(inline=True)


@dataclass
class RunStats:
    frames: int = 0
    seconds: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)  # total ms per stage

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


class StageNode:
    """An offline stage as a node: batches of up to its `max_batch`, each batch timed (wall ms,
    shared out over its frames, summed in `ms`) inside an NVTX range of the stage's name."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.name = stage.name
        self.parts = tuple(getattr(stage, "parts", (stage,)))  # a node of parts: the GPU chain
        self.ms = 0.0

    def run(self, inbox: BoundedQueue[Frame], outbox: Any) -> None:
        stage = self.stage
        while True:
            try:
                batch = inbox.get_batch(max(1, stage.max_batch))
            except Closed:
                return
            t0 = time.perf_counter()
            with stage_range(stage.name):  # the stage by name in a profiler
                out = stage.process_batch(batch)
            ms = (time.perf_counter() - t0) * 1e3
            self.ms += ms
            for frame in out:
                outbox.put(frame.timed(stage.name, ms / len(batch)))


class _IterSource:
    """Frames from an iterable, until it ends or the graph stops."""

    name = "source"
    parts = ()

    def __init__(self, frames: Iterable[Frame], stopping: threading.Event) -> None:
        self.frames, self.stopping = frames, stopping

    def run(self, inbox: None, outbox: BoundedQueue[Frame]) -> None:
        for frame in self.frames:
            if self.stopping.is_set():
                return
            outbox.put(frame)


class _WriteTo:
    """An inline edge's end: `put` is the sink's `write`."""

    def __init__(self, sink: Any) -> None:
        self.put = sink.write

    def close(self) -> None:
        pass


class Graph:
    """A source, nodes and a sink; see the module docstring.

    `source`: an iterable of frames, or a node whose `run(None, outbox)` makes them; `source_gives`:
    what its items carry. `stages`: offline stages (wrapped in `StageNode`s) or nodes. `edges`:
    one per hand-off (source → first node, …, last node → sink); default: blocking queues of
    `queue_capacity`. `stop`: the event that ends a live graph's nodes (they watch it themselves;
    default: the graph's own). `thread_prefix` names the threads; `on_thread_start(name)` runs on
    each node's thread before its body (the live session asks for real-time scheduling there);
    `on_error(name, exc)`: a live node raised (offline: the failure is `run`'s).
    """

    def __init__(
        self,
        source: Any,
        source_gives: Spec,
        stages: list[Any],
        sink: Any,
        queue_capacity: int = 4,
        *,
        edges: list[Edge | BoundedQueue] | None = None,
        stop: threading.Event | None = None,
        thread_prefix: str = "",
        on_thread_start: Callable[[str], None] | None = None,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.stopping = stop if stop is not None else threading.Event()
        # source and stages stay what the caller gave (farm/segments.py swaps them before
        # `run`); their nodes are made when the graph starts
        self.source = source
        self.source_gives = source_gives
        self.stages = stages
        self.nodes: list[Any] = []
        self.sink = sink
        self.edges = edges or [Edge(queue_capacity)] * (len(stages) + 1)
        if len(self.edges) != len(stages) + 1:
            raise ValueError(f"{len(stages)} nodes need {len(stages) + 1} edges")
        self.thread_prefix = thread_prefix
        self.on_thread_start = on_thread_start
        self.on_error = on_error
        self.queues: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self._cancelled: BaseException | None = None

    def build(self) -> Spec:
        """Check the chain (core.stage.check_chain), every node part by part; return what
        reaches the sink."""
        return self._check(self._make_nodes())

    def _check(self, nodes: list[Any]) -> Spec:
        parts = [p for node in nodes for p in node.parts]
        return check_chain(self.source_gives, [*parts, self.sink])

    def _make_nodes(self) -> list[Any]:
        return [
            StageNode(s) if callable(getattr(s, "process_batch", None)) else s for s in self.stages
        ]

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        """Check the chain, make the edges and start a thread per node (the source's first)."""
        nodes = self._make_nodes()
        self._check(nodes)
        self._start(nodes)

    def _start(self, nodes: list[Any]) -> None:
        """`start` with the nodes made and checked (`run` checks them before the set-up)."""
        self.errors = []
        self.nodes = nodes
        self.queues = [
            e
            if isinstance(e, BoundedQueue)
            else _WriteTo(self.sink)
            if e.inline
            else BoundedQueue(e.capacity, e.policy)
            for e in self.edges
        ]
        source = self.source
        if not callable(getattr(source, "run", None)):
            source = _IterSource(source, self.stopping)
        nodes = [source, *self.nodes]
        inboxes = [None, *self.queues[:-1]]
        self.threads = [
            threading.Thread(
                target=self._body,
                args=(node, inbox, outbox),
                name=f"{self.thread_prefix}{node.name}",
                daemon=True,
            )
            for node, inbox, outbox in zip(nodes, inboxes, self.queues, strict=True)
        ]
        for t in self.threads:
            t.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Set `stop` and wait for every node to end (each at most `timeout` s)."""
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=timeout)
        self.threads = []

    @property
    def running(self) -> bool:
        return bool(self.threads)

    def _body(self, node: Any, inbox: BoundedQueue | None, outbox: Any) -> None:
        try:
            if self.on_thread_start is not None:
                self.on_thread_start(node.name)
            node.run(inbox, outbox)
        except Closed:
            pass
        except BaseException as exc:
            self._failed(node.name, exc)
        finally:
            outbox.close()

    def cancel(self, exc: BaseException) -> None:
        """From another thread: `run` ends as if a node had raised `exc` (a served render whose
        client was stopped: app/cmd_serve.py), its sink aborted the way Ctrl+C aborts it."""
        self._cancelled = exc
        if self.queues:
            self._failed("cancel", exc)

    def _failed(self, name: str, exc: BaseException) -> None:
        if self.on_error is not None:
            log.error("%s failed", name, exc_info=exc)
            self.on_error(name, exc)
            return
        self.errors.append(exc)
        self.stopping.set()
        for q in self.queues:
            q.close()

    def run(self, ctx: Context, on_frame: Callable[[Frame], None] | None = None) -> RunStats:
        """Offline: set every part up, run to the end of the source and write every frame to
        the sink on this thread. On any error the sink is aborted and the error re-raised."""
        last = self.edges[-1]
        if isinstance(last, Edge) and last.inline:
            raise ValueError("run() writes the sink on its own thread: its last edge is a queue")
        nodes = self._make_nodes()
        self._check(nodes)  # before any part is set up
        stats = RunStats(stage_ms={s.name: 0.0 for s in self.stages})
        prepared: list = []
        try:
            launch = getattr(self.sink, "launch", None)
            if callable(launch):  # its processes start up while the stages set up
                launch(ctx)
                step("sink launched")
            for part in [*self.stages, self.sink]:
                part.setup(ctx)
                prepared.append(part)
                step(f"{getattr(part, 'name', type(part).__name__)} set up")
            freeze_setup_objects()
            t_start = time.perf_counter()
            self._start(nodes)
            if self._cancelled is not None:  # cancelled while the parts set up
                self._failed("cancel", self._cancelled)
            try:
                while True:
                    try:
                        frame = self.queues[-1].get()
                    except Closed:
                        break
                    self.sink.write(frame)
                    stats.frames += 1
                    if on_frame is not None:
                        on_frame(frame)
            except BaseException as exc:  # KeyboardInterrupt included: never leave a half file
                self._failed("sink", exc)
            for t in self.threads:
                t.join()
            self.threads = []
            if self.errors:
                raise self.errors[0]
            self.sink.finish()
            stats.seconds = time.perf_counter() - t_start
            for node in self.nodes:
                stats.stage_ms[node.name] += getattr(node, "ms", 0.0)
            return stats
        except BaseException:
            self.sink.abort()
            raise
        finally:
            for part in prepared:
                if part is not self.sink:
                    part.close()
