"""CPU-safe parts of pipeline.accel: priority requests, refusal sentences, graph-cache
bookkeeping without CUDA, transfer helpers' CPU paths, TensorRT status and cache keys."""

from __future__ import annotations

import os
import threading

import pytest
import torch

import pipeline.accel.priority as prio
from pipeline.accel import (
    GraphCache,
    GraphCaptureError,
    Readback,
    Uploader,
    pinned_empty,
    request_realtime_priority,
    warm_up,
)
from pipeline.accel.graphs import bucket_key
from pipeline.accel.tensorrt_backend import (
    NOT_INSTALLED,
    engine_cache_key,
    tensorrt_available,
    tensorrt_status,
)


def in_thread(fn):
    """Run fn in a short-lived thread (a priority change dies with it)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_realtime_priority_real_call_says_what_happened():
    msg = in_thread(request_realtime_priority)
    assert msg.endswith(".")
    assert ("SCHED_FIFO" in msg) or ("not available" in msg)
    assert ("now runs with" in msg) or ("not permitted" in msg) or ("failed" in msg)


def test_realtime_priority_not_permitted_falls_back_to_nice(monkeypatch):
    def refuse(*a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    monkeypatch.setattr(os, "getpriority", lambda *a: 0)
    monkeypatch.setattr(os, "setpriority", refuse)
    msg = request_realtime_priority("rr")
    assert msg == (
        "Real-time scheduling (SCHED_RR) is not permitted; lowering the nice value to -10 "
        "is not permitted either; priority unchanged."
    )
    seen = []
    monkeypatch.setattr(os, "setpriority", lambda *a: seen.append(a))
    msg = request_realtime_priority()
    assert "not permitted; the nice value was lowered from 0 to -10 instead." in msg
    assert seen == [(os.PRIO_PROCESS, 0, -10)]
    with pytest.raises(ValueError):
        request_realtime_priority("idle")


def test_high_priority_stream_needs_cuda():
    if torch.cuda.is_available():
        pytest.skip("covered by tests/test_accel_gpu.py")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        prio.high_priority_stream("cuda")


def test_graph_cache_refuses_cpu_and_reports_missing_cuda():
    with pytest.raises(ValueError, match="CUDA device"):
        GraphCache(lambda x: x, device="cpu")
    cache = GraphCache(lambda x: x * 2, device="cuda")  # constructing touches no CUDA
    if not torch.cuda.is_available():
        with pytest.raises(GraphCaptureError, match="CUDA is not available"):
            cache.capture(torch.zeros(1, 3))
    with pytest.raises(GraphCaptureError, match="no CUDA graph captured for batch 2"):
        cache(torch.zeros(2, 3, 4))


def test_bucket_key():
    k = bucket_key(torch.zeros(4, 3, 8, 8, dtype=torch.float16))
    assert k == ((3, 8, 8), 4, torch.float16)
    assert bucket_key(torch.zeros(2, 3, 8, 8)) != k


def test_warm_up_cpu():
    calls = []
    warm_up(lambda x: calls.append(x.sum()), torch.ones(3), iters=2)
    assert len(calls) == 2


def test_transfer_cpu_paths():
    host = torch.arange(12, dtype=torch.uint8).view(3, 4)
    up = Uploader("cpu")
    assert torch.equal(up.upload(host), host)
    rb = Readback(slots=2)
    t = rb.start(host)
    assert t.ready() and torch.equal(t.wait(copy=True), host)
    buf = pinned_empty((2, 3), torch.float32)
    assert buf.shape == (2, 3) and buf.dtype == torch.float32


def test_tensorrt_status_plain():
    msg = tensorrt_status()
    if not tensorrt_available():
        assert msg == NOT_INSTALLED == "TensorRT is not installed: using eager/CUDA graphs"
    else:
        assert msg.startswith("TensorRT ")


BASE = dict(
    model_hash="ab" * 32,
    input_shape=(1, 3, 270, 480),
    dtype="float16",
    trt_version="10.13.0",
    gpu_name="NVIDIA H200",
    compute_capability=(9, 0),
)


def test_engine_cache_key_same_inputs_same_key():
    assert engine_cache_key(**BASE) == engine_cache_key(**dict(BASE))
    assert len(engine_cache_key(**BASE)) == 64


@pytest.mark.parametrize(
    "change",
    [
        {"model_hash": "cd" * 32},
        {"input_shape": (1, 3, 360, 640)},
        {"input_shape": (2, 3, 270, 480)},
        {"dtype": "bfloat16"},
        {"dtype": "float32"},
        {"trt_version": "10.14.1"},
        {"gpu_name": "NVIDIA H100 80GB HBM3"},
        {"compute_capability": (8, 9)},
    ],
)
def test_engine_cache_key_changes_with_every_component(change):
    assert engine_cache_key(**(BASE | change)) != engine_cache_key(**BASE)


def test_engine_cache_key_rejects_unknown_dtype():
    with pytest.raises(ValueError):
        engine_cache_key(**(BASE | {"dtype": "fp8"}))


def test_realtime_priority_is_not_inherited_by_threads_started_afterwards():
    """A real-time thread's children (a thread pool it would start) run at normal priority."""
    seen = {}

    def child():
        seen["child"] = os.sched_getscheduler(0)

    def parent():
        seen["said"] = request_realtime_priority()
        seen["parent"] = os.sched_getscheduler(0)
        t = threading.Thread(target=child)
        t.start()
        t.join()

    in_thread(lambda: parent())
    if not seen["said"].startswith("This thread now runs with SCHED_FIFO"):
        pytest.skip(f"real-time scheduling not granted here: {seen['said']}")
    assert seen["parent"] & ~getattr(os, "SCHED_RESET_ON_FORK", 0) == os.SCHED_FIFO
    assert seen["child"] == os.SCHED_OTHER
