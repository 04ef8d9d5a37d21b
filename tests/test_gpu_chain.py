"""The GPU chain as one node (pipeline/gpu_chain.py): its parts in their own batch sizes and
order, its contract as one stage and part by part in the graph, and — on CUDA (marked gpu) —
the render's chain issued on its stream and waited for by the next node, against the same
stages run one after another and synchronised."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.gpu_chain import ChainStage, ChainWait, DeviceChain, chain_nodes, wait_ready
from pipeline.graph import Graph, GraphError
from tests.sinks import Collect

SIZE = (64, 36)
CTX = Context(width=SIZE[0], height=SIZE[1], fps=30, sample_rate=48000)
GIVES = spec("params", "image", "motion", size=SIZE, device="cpu")


def frames(n: int, size=SIZE) -> list[Frame]:
    w, h = size
    out = []
    for i in range(n):
        img = torch.full((h, w, 4), i % 256, dtype=torch.uint8)
        motion = torch.zeros(h, w, 2)
        out.append(Frame(i * 33_333_333, i, AvatarParams(), image=img, motion=motion))
    return out


class AddOne(BaseStage):
    """A part that adds `step` to every pixel and records the batches it was handed."""

    needs = spec("image", size=SIZE)
    gives = spec("image", size=SIZE)

    def __init__(self, name: str, max_batch: int, step: int = 1, needs_motion: bool = False):
        self.name, self.max_batch, self.step = name, max_batch, step
        if needs_motion:
            self.needs = spec("image", "motion", size=SIZE)
        self.batches: list[list[int]] = []
        self.closed = False

    def process_batch(self, batch: list[Frame]) -> list[Frame]:
        self.batches.append([f.index for f in batch])
        return [f.with_(image=f.image + self.step).timed(self.name, 0.5) for f in batch]

    def close(self) -> None:
        self.closed = True


def test_parts_take_the_batch_in_their_own_sizes_in_order():
    one, four = AddOne("one", 1), AddOne("four", 4, step=10)
    out = DeviceChain("cpu").issue(frames(6), [four, one])
    assert four.batches == [[0, 1, 2, 3], [4, 5]]
    assert one.batches == [[i] for i in range(6)]
    assert [f.index for f in out] == list(range(6))
    assert [int(f.image[0, 0, 0]) for f in out] == [i + 11 for i in range(6)]
    # on the CPU nothing is pending: the frames are finished as they come back
    assert all(f.ready is None for f in out)
    assert wait_ready(out) == out


def test_as_one_stage_it_needs_what_no_part_before_gives():
    # the second part needs motion: the node as a whole needs it from the stage before
    chain = ChainStage([AddOne("a", 4), AddOne("b", 4, needs_motion=True)], "cpu")
    assert chain.needs.fields == {"image", "motion"}
    assert chain.gives.fields == {"image"} and chain.gives.size == SIZE


def test_graph_checks_the_chain_part_by_part():
    parts = [AddOne("a", 4), AddOne("b", 4, needs_motion=True)]
    no_motion = spec("params", "image", size=SIZE, device="cpu")
    graph = Graph(frames(3), no_motion, chain_nodes(parts, "cpu"), Collect())
    with pytest.raises(GraphError, match="stage 'b' needs \\['motion'\\]"):
        graph.build()


def test_graph_runs_the_chain_node_and_closes_its_parts():
    parts = [AddOne("a", 4), AddOne("b", 1, step=2)]
    sink = Collect()
    stats = Graph(frames(9), GIVES, chain_nodes(parts, "cpu"), sink).run(CTX)
    assert stats.frames == 9
    assert [f.index for f in sink.frames] == list(range(9))
    assert [int(f.image[0, 0, 0]) for f in sink.frames] == [i + 3 for i in range(9)]
    assert all(p.closed for p in parts)
    # the part's own stamp survives the chain (the CPU: wall times)
    assert all(f.timings["a"] == 0.5 and "gpu" in f.timings for f in sink.frames)


@pytest.mark.gpu
def test_render_chain_on_its_stream_matches_the_stages_run_in_turn():
    """`kagura render`'s GPU chain (tiny random diffusion, temporal, x2 upscale, I420 readback)
    through the graph's two nodes: the frames leave the first pending and the second finished,
    each part timed on the GPU, the pictures those of the same stages run one at a time with a
    synchronise after each (as the graph ran them before the chain was one node)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from app.render_job import RenderRequest, diffusion_models, gpu_stages
    from presets.loader import load_preset
    from render.stage import RenderStage

    req = RenderRequest(
        audio=Path("unused.wav"),
        output=Path("unused.mp4"),
        width=256,
        height=144,
        device="cuda",
        diffusion_random="tiny",
        upscale=2,
    )
    render_size, out_size = req.sizes()
    preset = load_preset("ink-wash")
    models = diffusion_models(req)
    ctx = Context(*out_size, 30, 48000, extras={"device": "cuda"})
    idol = RenderStage(*render_size, preset.palette, preset.line)
    idol.setup(ctx)
    n = 12
    drawn = [
        idol.process(Frame(i * 33_333_333, i, AvatarParams(head_yaw=0.3 * np.sin(i / 2))))
        for i in range(n)
    ]
    gives = spec("params", "image", "motion", size=render_size, device="cpu")

    # the stages one at a time, the device synchronised after each
    stages = gpu_stages(req, preset, models, i420=True)
    for st in stages:
        st.setup(ctx)
    expected = []
    for f in drawn:
        for st in stages:
            (f,) = st.process_batch([f])
            torch.cuda.synchronize()
        expected.append(f.i420.clone())
    for st in stages:
        st.close()

    # the same stages, new, as the graph's chain node
    nodes = chain_nodes(gpu_stages(req, preset, models, i420=True), "cuda")
    issue, wait = nodes
    assert isinstance(issue, ChainStage) and isinstance(wait, ChainWait)
    pending: list[Frame] = []
    original = wait.process_batch

    def seen(batch: list[Frame]) -> list[Frame]:
        pending.extend(batch)
        return original(batch)

    wait.process_batch = seen  # what reaches the waiting node, kept for the check below
    sink = Collect()
    sink.needs = spec("i420", device="cpu")
    Graph(iter(drawn), gives, nodes, sink).run(ctx)
    assert len(sink.frames) == n
    assert all(f.ready is not None for f in pending)  # issued, not waited for, by the first
    assert all(f.ready is None for f in sink.frames)
    for got, want in zip(sink.frames, expected, strict=True):
        assert torch.equal(got.i420, want), f"frame {got.index}"
    names = {"upload", "stylize", "diffusion", "temporal", "upscale", "readback"}
    assert names <= set(sink.frames[-1].timings)
    assert all(sink.frames[-1].timings[k] >= 0.0 for k in names)
