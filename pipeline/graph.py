"""The graph: a source, a chain of stages and a sink, joined by bounded queues.

`Graph.build()` checks every stage's needs against what the frames carry at that point
(core.stage.check_chain: the live session's looks and GPU chain are checked by the same
function, pipeline/live_chain.py).
`Graph.run()` gives each stage its own thread (torch, Skia and FFmpeg release the GIL for their
heavy work, so stages overlap on several cores) and moves frames through bounded queues:

    source ─► q ─► stage 1 ─► q ─► … ─► stage n ─► q ─► sink

This is the offline runtime (`kagura render`, `kagura bench offline`): every queue blocks
(Policy.BLOCK: every frame reaches the file), nothing waits on a wall clock, and a stage that
allows it receives up to `max_batch` frames at once. The GPU chain is one node here, issued on
one CUDA stream by one thread and waited for by the next (pipeline/gpu_chain.py: `ChainStage`,
`ChainWait`), as the live session's frame and publisher threads issue and wait for it. Live
mode (pipeline/live.py) runs the same stage classes on the capture clock in its own frame loop
(pipeline/live_frames.py), not through this class, with latest-wins queues (Policy.LATEST)
where a late item is worthless: the avatar parameters, the frames for the display, the
recorder (docs/ARCHITECTURE.md, "One runtime, two clocks").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from core.frame import Frame
from core.nvtx import stage_range
from core.stage import Context, GraphError, Sink, Spec, Stage, check_chain
from core.trace import step
from pipeline.cpu_memory import freeze_setup_objects
from pipeline.queues import BoundedQueue, Closed, Policy

__all__ = ["Graph", "GraphError", "RunStats"]  # GraphError: core.stage's, named here too


@dataclass
class RunStats:
    frames: int = 0
    seconds: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)  # total ms per stage

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


class Graph:
    def __init__(
        self,
        source: Iterable[Frame],
        source_gives: Spec,
        stages: list[Stage],
        sink: Sink,
        queue_capacity: int = 4,
    ):
        self.source = source
        self.source_gives = source_gives
        self.stages = stages
        self.sink = sink
        self.queue_capacity = queue_capacity

    def build(self) -> Spec:
        """Check the chain (core.stage.check_chain), a node made of parts (the GPU chain,
        pipeline/gpu_chain.py) part by part; return what reaches the sink."""
        parts = [p for st in self.stages for p in getattr(st, "parts", (st,))]
        return check_chain(self.source_gives, [*parts, self.sink])

    def run(self, ctx: Context, on_frame: Callable[[Frame], None] | None = None) -> RunStats:
        """Run to the end of the source. On any error the sink is aborted and the error re-raised."""
        self.build()
        stats = RunStats(stage_ms={s.name: 0.0 for s in self.stages})
        queues = [
            BoundedQueue[Frame](self.queue_capacity, Policy.BLOCK)
            for _ in range(len(self.stages) + 1)
        ]
        errors: list[BaseException] = []
        stop = threading.Event()

        def fail(exc: BaseException) -> None:
            errors.append(exc)
            stop.set()
            for q in queues:
                q.close()

        def feed() -> None:
            try:
                for frame in self.source:
                    if stop.is_set():
                        return
                    queues[0].put(frame)
            except Closed:
                pass
            except BaseException as exc:
                fail(exc)
            finally:
                queues[0].close()

        def work(stage: Stage, inbox: BoundedQueue[Frame], outbox: BoundedQueue[Frame]) -> None:
            try:
                while True:
                    try:
                        batch = inbox.get_batch(max(1, stage.max_batch))
                    except Closed:
                        return
                    t0 = time.perf_counter()
                    with stage_range(stage.name):  # the stage by name in a profiler
                        out = stage.process_batch(batch)
                    ms = (time.perf_counter() - t0) * 1e3
                    stats.stage_ms[stage.name] += ms
                    for frame in out:
                        outbox.put(frame.timed(stage.name, ms / len(batch)))
            except Closed:
                pass
            except BaseException as exc:
                fail(exc)
            finally:
                outbox.close()

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
            threads = [threading.Thread(target=feed, name="source", daemon=True)]
            for i, stage in enumerate(self.stages):
                threads.append(
                    threading.Thread(
                        target=work,
                        args=(stage, queues[i], queues[i + 1]),
                        name=stage.name,
                        daemon=True,
                    )
                )
            t_start = time.perf_counter()
            for t in threads:
                t.start()
            try:
                while True:
                    try:
                        frame = queues[-1].get()
                    except Closed:
                        break
                    self.sink.write(frame)
                    stats.frames += 1
                    if on_frame is not None:
                        on_frame(frame)
            except BaseException as exc:  # KeyboardInterrupt included: never leave a half file
                fail(exc)
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            self.sink.finish()
            stats.seconds = time.perf_counter() - t_start
            return stats
        except BaseException:
            self.sink.abort()
            raise
        finally:
            for part in prepared:
                if part is not self.sink:
                    part.close()
