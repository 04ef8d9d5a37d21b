"""The GPU libraries' first use, on a thread of its own while the command does other set-up.

    start_first_use(device)   after torch's import: a daemon thread creates the CUDA context,
                              then runs one small call of each kind of kernel the stages use
                              (convolutions, matrix products, attention, normalisation,
                              resampling) on a stream of its own
    wait_first_use()          before any CUDA-graph capture (pipeline/accel/graphs.py,
                              pipeline/diffusion/stage.py, pipeline/upscale/stage.py)

Why: the first convolution and the first matrix product of a process load cuDNN's and cuBLAS's
kernels and create their handles, on the way to the first frame inside the first stage that
runs them (docs/BENCHMARKS.md, "The GPU libraries' first use").
torch lets go of the GIL inside each call, so the thread overlaps the model load and the
CPU-side set-up that come after torch's import. Every capture waits for it first: a capture
in the default (global) mode fails when another thread touches CUDA meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading

import torch
import torch.nn.functional as F

__all__ = ["start_first_use", "touch_gpu_libraries", "wait_first_use"]

log = logging.getLogger("kagura.accel")

# set (to anything) to leave the thread out: the A/B of `kagura bench e2e` (docs/BENCHMARKS.md)
OFF_ENV = "KAGURA_NO_GPU_FIRST_USE"

_thread: threading.Thread | None = None
_lock = threading.Lock()


@torch.inference_mode()
def touch_gpu_libraries(device: torch.device) -> None:
    """One small call of each kernel family the stages run, in half and single precision
    (the diffusion model runs half; the stylizer, temporal stage and upscaler single)."""
    for dtype in (torch.float16, torch.float32):
        x = torch.rand(1, 32, 24, 40, device=device, dtype=dtype)
        x = x.to(memory_format=torch.channels_last)
        for k in (3, 1):
            w = torch.rand(32, 32, k, k, device=device, dtype=dtype)
            x = F.conv2d(x, w.to(memory_format=torch.channels_last), padding=k // 2)
        x = F.silu(F.group_norm(x, 8))
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False)
        x = F.pixel_shuffle(x, 2)
        q = torch.rand(1, 2, 96, 64, device=device, dtype=dtype)
        F.scaled_dot_product_attention(q, q, q)
        F.linear(q, torch.rand(64, 64, device=device, dtype=dtype))
        F.layer_norm(q, (64,))
        torch.bmm(q[0], q[0].transpose(1, 2))


def _run(device: torch.device) -> None:
    try:
        torch.cuda.init()
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            touch_gpu_libraries(device)
        stream.synchronize()
    except Exception as exc:  # only a head start: the stages' own warm-up does the same work
        log.debug("GPU libraries' first use failed: %s", exc)


def start_first_use(device: str | torch.device) -> None:
    """Start the thread (once per process; nothing on a CPU device)."""
    global _thread
    device = torch.device(device)
    if device.type != "cuda" or os.environ.get(OFF_ENV):
        return
    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(
            target=_run, args=(device,), name="kagura-gpu-first-use", daemon=True
        )
        _thread.start()


def wait_first_use() -> None:
    """Until the thread has ended (at once if there was none)."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()
