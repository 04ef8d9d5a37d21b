"""pipeline.accel.first_use: the GPU libraries' first use on a thread of its own.

On the CPU: the kernel families it touches all run (the same calls the thread makes on a GPU),
and a CPU device starts no thread. On the GPU machine (`pytest -m gpu`): in a fresh process,
a graph capture started right after the thread waits for it, and succeeds."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from pipeline.accel import first_use


def test_every_kernel_family_runs_on_the_cpu():
    first_use.touch_gpu_libraries(torch.device("cpu"))


def test_a_cpu_device_starts_no_thread():
    first_use.start_first_use("cpu")
    assert first_use._thread is None
    first_use.wait_first_use()  # nothing to wait for: returns at once


CAPTURE_RIGHT_AFTER = """
import torch
from pipeline.accel import GraphCache
from pipeline.accel import first_use
first_use.start_first_use("cuda")
net = torch.nn.Conv2d(3, 8, 3, padding=1).cuda().eval()
cache = GraphCache(net, torch.device("cuda"), name="probe")
x = torch.rand(1, 3, 32, 32, device="cuda")
cache.capture(x)
assert not first_use._thread.is_alive(), "the capture did not wait for the first-use thread"
with torch.inference_mode():
    assert torch.allclose(cache(x), net(x), atol=1e-3)
print("ok")
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_capture_right_after_the_start_waits_for_the_thread():
    out = subprocess.run(
        [sys.executable, "-c", CAPTURE_RIGHT_AFTER], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
