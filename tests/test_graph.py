"""The frame graph: chain checks at build time, ordered offline runs, batching, failure paths."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from core.avatar import AvatarParams, AvatarTrack
from core.clock import frame_count, frame_pts_ns, ns_to_samples, samples_to_ns
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.graph import INLINE, Edge, Graph, GraphError
from pipeline.queues import BoundedQueue, Closed, Policy
from pipeline.sources import TRACK_GIVES, track_frames

CTX = Context(width=64, height=36, fps=30, sample_rate=48000)


class AddImage(BaseStage):
    name = "add-image"
    needs = spec("params")
    gives = spec("image", size=(64, 36))

    def process(self, frame: Frame) -> Frame:
        return frame.with_(image=np.full((36, 64, 4), frame.index % 256, np.uint8))


class Doubler(BaseStage):
    name = "double"
    needs = spec("image")
    gives = spec("image")
    max_batch = 8

    def __init__(self):
        self.batch_sizes: list[int] = []

    def process_batch(self, frames):
        self.batch_sizes.append(len(frames))
        return [f.with_(image=f.image * 2) for f in frames]


class Fails(BaseStage):
    name = "fails"
    needs = spec("params")

    def process(self, frame):
        if frame.index == 5:
            raise RuntimeError("stage broke on frame 5")
        return frame


class ListSink:
    name = "list"
    needs = spec("params")

    def __init__(self):
        self.frames: list[Frame] = []
        self.finished = False
        self.aborted = False

    def setup(self, ctx):
        pass

    def write(self, frame):
        self.frames.append(frame)

    def finish(self):
        self.finished = True

    def abort(self):
        self.aborted = True


def make_track(n: int) -> AvatarTrack:
    return AvatarTrack.neutral(np.array([frame_pts_ns(i, 30) for i in range(n)]), 30)


def test_clock_is_exact_over_hours():
    rate, fps = 48000, 30
    # 3 hours of frames: each frame's pts maps back to the exact sample 1600*i.
    for i in (0, 1, 29, 30, 3 * 3600 * fps):
        pts = frame_pts_ns(i, fps)
        assert ns_to_samples(pts, rate) == i * rate // fps
    assert samples_to_ns(48000, 48000) == 1_000_000_000
    assert frame_count(48000, 48000, 30) == 30
    assert frame_count(48001, 48000, 30) == 31


def test_build_rejects_missing_fields():
    sink = ListSink()
    sink.needs = spec("image")
    graph = Graph(track_frames(make_track(3)), TRACK_GIVES, [], sink)
    with pytest.raises(GraphError, match=r"stage 'list' needs \['image'\]"):
        graph.build()


def test_build_rejects_size_mismatch():
    sink = ListSink()
    sink.needs = spec("image", size=(128, 72))
    graph = Graph(track_frames(make_track(3)), TRACK_GIVES, [AddImage()], sink)
    with pytest.raises(GraphError, match="needs 128x72 images, gets 64x36"):
        graph.build()


def test_offline_run_keeps_order_and_batches():
    sink = ListSink()
    doubler = Doubler()

    n = 200
    graph = Graph(
        track_frames(make_track(n)), TRACK_GIVES, [AddImage(), doubler], sink, queue_capacity=16
    )
    stats = graph.run(CTX)
    assert stats.frames == n
    assert [f.index for f in sink.frames] == list(range(n))
    assert all(int(f.image[0, 0, 0]) == (i % 256) * 2 % 256 for i, f in enumerate(sink.frames))
    assert sink.finished and not sink.aborted
    assert sum(doubler.batch_sizes) == n
    assert set(sink.frames[0].timings) == {"add-image", "double"}


def test_stage_error_aborts_sink_and_propagates():
    sink = ListSink()
    graph = Graph(track_frames(make_track(50)), TRACK_GIVES, [Fails()], sink)
    with pytest.raises(RuntimeError, match="frame 5"):
        graph.run(CTX)
    assert sink.aborted and not sink.finished
    assert len(sink.frames) <= 5


def test_sink_error_aborts():
    class BadSink(ListSink):
        def write(self, frame):
            raise OSError("disk full")

    sink = BadSink()
    with pytest.raises(OSError, match="disk full"):
        Graph(track_frames(make_track(50)), TRACK_GIVES, [], sink).run(CTX)
    assert sink.aborted


def test_latest_policy_drops_oldest_and_counts():
    q: BoundedQueue[int] = BoundedQueue(3, Policy.LATEST)
    for i in range(10):
        q.put(i)
    assert q.dropped == 7
    assert [q.get() for _ in range(3)] == [7, 8, 9]
    q.close()
    with pytest.raises(Closed):
        q.get()


def test_block_policy_bounds_memory():
    q: BoundedQueue[int] = BoundedQueue(2, Policy.BLOCK)
    q.put(1)
    q.put(2)
    done = threading.Event()

    def producer():
        q.put(3)
        done.set()

    t = threading.Thread(target=producer)
    t.start()
    assert not done.wait(0.2)  # full: the producer waits instead of growing the queue
    assert q.get() == 1
    assert done.wait(2)
    t.join()
    assert len(q) == 2


# -- the runtime live sessions run through: nodes, edge policies, an inline sink, stop -------


class Numbers:
    """A source node: frames 0..n-1 into its outbox, then `done` is set."""

    name = "numbers"
    parts = ()

    def __init__(self, n: int) -> None:
        self.n, self.done = n, threading.Event()

    def run(self, inbox, outbox):
        assert inbox is None
        for i in range(self.n):
            outbox.put(Frame(i, i, AvatarParams(pts_ns=i)))
        self.done.set()


class NewestOnly:
    """A node that waits for the source to finish, then passes on what its inbox still holds,
    on the thread it runs on (recorded), and idles until the graph stops."""

    name = "newest"
    parts = (AddImage(),)

    def __init__(self, source: Numbers, stop: threading.Event) -> None:
        self.source, self.stop = source, stop
        self.inbox = None

    def run(self, inbox, outbox):
        self.inbox = inbox
        assert self.source.done.wait(5)
        while len(inbox):
            outbox.put(inbox.get())
        self.stop.wait(5)


class ThreadSink(ListSink):
    """Records which thread wrote each frame."""

    needs = spec("params", "image")

    def __init__(self):
        super().__init__()
        self.threads: list[str] = []

    def write(self, frame):
        self.threads.append(threading.current_thread().name)
        super().write(frame)


def test_live_graph_latest_edge_keeps_the_newest_and_the_inline_sink_runs_on_the_node():
    stop = threading.Event()
    numbers, sink = Numbers(10), ThreadSink()
    started: list[str] = []
    graph = Graph(
        numbers,
        spec("params"),
        [NewestOnly(numbers, stop)],
        sink,
        edges=[Edge(1, Policy.LATEST), INLINE],
        stop=stop,
        thread_prefix="t-",
        on_thread_start=lambda name: started.append(threading.current_thread().name + ":" + name),
    )
    graph.start()
    node = graph.nodes[0]
    assert numbers.done.wait(5)
    graph.stop(timeout=5)
    assert not graph.running and stop.is_set()
    # a latest-wins edge of one: nine superseded, the newest passed on
    assert [f.index for f in sink.frames] == [9] and node.inbox.dropped == 9
    assert sink.threads == ["t-newest"]  # no hand-off: written by the node's own thread
    assert sorted(started) == ["t-newest:newest", "t-numbers:numbers"]


def test_graph_refuses_nodes_whose_parts_do_not_fit_before_any_thread_starts():
    class NeedsMotion(ListSink):
        needs = spec("params", "image", "motion")

    stop = threading.Event()
    numbers = Numbers(3)
    graph = Graph(
        numbers,
        spec("params"),
        [NewestOnly(numbers, stop)],
        NeedsMotion(),
        edges=[Edge(1, Policy.LATEST), INLINE],
        stop=stop,
    )
    with pytest.raises(GraphError, match="'list' needs \\['motion'\\]"):
        graph.start()
    assert not graph.running and not numbers.done.is_set()


def test_a_live_node_that_raises_is_reported_and_ends_while_the_others_run_on():
    class Breaks:
        name = "breaks"
        parts = ()

        def run(self, inbox, outbox):
            inbox.get()
            raise RuntimeError("node broke")

    stop = threading.Event()
    failures: list[tuple[str, str]] = []
    numbers, sink = Numbers(1), ListSink()
    graph = Graph(
        numbers,
        spec("params"),
        [Breaks()],
        sink,
        edges=[Edge(4), INLINE],
        stop=stop,
        on_error=lambda name, exc: failures.append((name, str(exc))),
    )
    graph.start()
    breaks_thread = graph.threads[1]
    breaks_thread.join(5)
    assert not breaks_thread.is_alive() and failures == [("breaks", "node broke")]
    graph.stop(timeout=5)
    assert sink.frames == [] and not sink.aborted  # a live sink is the session's to close


def test_a_node_ending_closes_its_edge_so_the_next_drains_and_ends():
    """Offline nodes end in order: the source's end closes the first edge, each stage drains
    its inbox and ends, and the sink sees every frame, in order, then `finish`."""
    sink = ListSink()
    graph = Graph(track_frames(make_track(20)), TRACK_GIVES, [AddImage(), Doubler()], sink)
    graph.run(CTX)
    assert [f.index for f in sink.frames] == list(range(20)) and sink.finished
    assert all(len(q) == 0 for q in graph.queues[:-1]) and not graph.running


def test_run_refuses_an_inline_last_edge():
    """`run` writes the sink on the caller's thread from the last queue; an inline sink is
    for graphs that `start` (live)."""
    sink = ListSink()
    graph = Graph(track_frames(make_track(3)), TRACK_GIVES, [], sink, edges=[INLINE])
    with pytest.raises(ValueError, match="its last edge is a queue"):
        graph.run(CTX)
    assert sink.frames == [] and not sink.finished
