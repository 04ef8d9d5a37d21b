"""The frame graph: chain checks at build time, ordered offline runs, batching, failure paths."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from core.avatar import AvatarTrack
from core.clock import frame_count, frame_pts_ns, ns_to_samples, samples_to_ns
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.graph import Graph, GraphError
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
