"""pipeline.accel on CUDA: graph capture of a small conv net (replay matches eager and is
faster, median of 50 CUDA-event timings), uncapturable functions raise GraphCaptureError,
batch padding, the high-priority stream, pinned upload/readback, TensorRT where installed.
Run on the GPU machine: `pytest -m gpu tests/test_accel_gpu.py -s`. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from core.stats import median
from pipeline.accel import (
    GraphCache,
    GraphCaptureError,
    Readback,
    Uploader,
    high_priority_stream,
    warm_up,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def small_net() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, padding=1), nn.ReLU()]
    for _ in range(10):
        layers += [nn.Conv2d(32, 32, 3, padding=1), nn.ReLU()]
    layers.append(nn.Conv2d(32, 3, 3, padding=1))
    return nn.Sequential(*layers).cuda().eval().requires_grad_(False)


def median_ms(fn, x, n: int = 50) -> float:
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return median(times)


def test_capture_replay_matches_eager_and_is_faster():
    net = small_net()
    x = torch.rand(1, 3, 64, 64, device="cuda")
    cache = GraphCache(net, "cuda", rtol=1e-4, atol=1e-5)
    key = cache.capture(x)
    assert key == ((3, 64, 64), 1, torch.float32) and cache.buckets == [key]
    with torch.inference_mode():
        for seed in range(3):
            y = torch.rand(
                1, 3, 64, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)
            )
            assert torch.allclose(cache(y), net(y), rtol=1e-4, atol=1e-5)
        warm_up(net, x)
        eager = median_ms(net, x)
        replay = median_ms(cache, x)
    print(
        f"small conv net 64x64: eager {eager:.3f} ms, graph replay {replay:.3f} ms (median of 50)"
    )
    assert replay < eager


def test_item_in_function_raises():
    def bad(x):
        return x * (x.sum().item() > 0)  # host sync inside

    with pytest.raises(GraphCaptureError, match="capture failed"):
        GraphCache(bad, "cuda").capture(torch.rand(2, 8, device="cuda"))


def test_synchronize_in_function_raises():
    def bad(x):
        y = x + 1
        torch.cuda.synchronize()
        return y

    with pytest.raises(GraphCaptureError):
        GraphCache(bad, "cuda").capture(torch.rand(2, 8, device="cuda"))


def test_host_state_mismatch_raises():
    calls = [0]

    def drifting(x):  # reads host state that changes between calls: frozen at capture
        calls[0] += 1
        return x * float(calls[0])

    with pytest.raises(GraphCaptureError, match="does not match eager"):
        GraphCache(drifting, "cuda").capture(torch.ones(1, 4, device="cuda"))


def test_cuda_still_usable_after_failed_capture_and_uncaptured_shape():
    def bad(x):
        return x * x.max().item()

    with pytest.raises(GraphCaptureError):
        GraphCache(bad, "cuda").capture(torch.rand(1, 8, device="cuda"))
    torch.rand(4, device="cuda")  # the CUDA RNG works after a failed capture
    net = small_net()
    cache = GraphCache(net, "cuda", rtol=1e-4, atol=1e-5)
    cache.capture(torch.rand(1, 3, 32, 32, device="cuda"))
    with pytest.raises(GraphCaptureError, match="no CUDA graph captured"):
        cache(torch.rand(1, 3, 48, 48, device="cuda"))


def test_pad_batch_uses_larger_bucket():
    net = small_net()
    cache = GraphCache(net, "cuda", pad_batch=True, rtol=1e-4, atol=1e-5)
    cache.capture(torch.rand(4, 3, 32, 32, device="cuda"))
    x = torch.rand(3, 3, 32, 32, device="cuda")
    with torch.inference_mode():
        y = cache(x)
        assert y.shape == (3, 3, 32, 32)
        assert torch.allclose(y, net(x), rtol=1e-4, atol=1e-5)


def test_several_inputs_and_outputs_and_a_device_scalar_read_at_replay():
    """fn(a, b) -> (sum, product * weight): each input copied into its own static tensor, both
    outputs returned; a weight kept in a device scalar changes with fill_ and needs no capture."""
    weight = torch.full((), 2.0, device="cuda")

    def fn(a, b):
        return a + b, (a * b).mul_(weight)

    cache = GraphCache(fn, "cuda", rtol=0, atol=0)
    a, b = torch.rand(2, 1, 8, device="cuda"), torch.rand(2, 3, 8, device="cuda")
    key = cache.capture(a, b)
    assert key == (((1, 8), 2, torch.float32), ((3, 8), 2, torch.float32))
    with torch.inference_mode():
        a2, b2 = torch.rand(2, 1, 8, device="cuda"), torch.rand(2, 3, 8, device="cuda")
        s, p = cache(a2, b2)
        assert torch.equal(s, a2 + b2) and torch.equal(p, a2 * b2 * 2.0)
        weight.fill_(5.0)
        _, p = cache(a2, b2)
        assert torch.equal(p, a2 * b2 * 5.0) and cache.replays == 2
    with pytest.raises(GraphCaptureError, match="no CUDA graph captured"):
        cache(a2, b2[:, :2])


def test_high_priority_stream_and_replay_on_it():
    s = high_priority_stream("cuda")
    assert s.priority < 0 and s.priority <= torch.cuda.Stream(priority=-1).priority
    net = small_net()
    cache = GraphCache(net, "cuda", stream=s, rtol=1e-4, atol=1e-5)
    x = torch.rand(1, 3, 32, 32, device="cuda")
    cache.capture(x)
    with torch.cuda.stream(s), torch.inference_mode():
        y = cache(x)
        ref = net(x)
    s.synchronize()
    assert torch.allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_pinned_upload_and_readback_roundtrip():
    copy_stream = torch.cuda.Stream()
    up, rb = Uploader("cuda", stream=copy_stream), Readback(stream=copy_stream)
    for i in range(5):
        host = torch.full((270, 480, 4), i, dtype=torch.uint8)
        dev = up.upload(host)
        assert dev.is_cuda
        t = rb.start(dev + 1)
        out = t.wait(copy=True)
        assert not out.is_cuda and bool((out == i + 1).all())
        assert t.ready()


def test_tensorrt_module_matches_torch(tmp_path):
    pytest.importorskip("tensorrt")
    from pipeline.accel.onnx_export import export_onnx
    from pipeline.accel.tensorrt_backend import TrtModule

    net = small_net().float()
    x = torch.rand(1, 3, 64, 64)
    res = export_onnx(net.cpu(), x, tmp_path / "net.onnx")
    trt_mod = TrtModule.from_onnx(res.path, (1, 3, 64, 64), "float32", tmp_path / "cache")
    y = trt_mod(x.cuda())
    ref = net.cuda()(x.cuda())
    assert torch.allclose(y.float(), ref, rtol=1e-2, atol=1e-3)
