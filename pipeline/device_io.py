"""The two ends of the GPU chain as stages: frames go to the device once and come back once.

    UploadStage(size, device="cuda")               image + motion to the GPU (async copies)
    ReadbackStage(size, device="cuda", i420=False)  pictures back to pinned host memory

They open and close the GPU chain (pipeline/gpu_chain.py), live and offline alike.
"""

from __future__ import annotations

import time

from core.frame import Frame
from core.stage import BaseStage, spec


class UploadStage(BaseStage):
    """Image + motion to the GPU, once: asynchronous copies from the idol's pinned memory."""

    name = "upload"
    max_batch = 4

    def __init__(self, size: tuple[int, int], device: str = "cuda"):
        import torch

        self.device = torch.device(device)
        self.needs = spec("image", "motion", size=size, device="cpu")
        self.gives = spec("image", "motion", size=size, device=self.device.type)

    def process(self, frame: Frame) -> Frame:
        image = frame.image.to(self.device, non_blocking=True)
        motion = frame.motion  # None where an avatar source draws no motion (live)
        motion = motion.to(self.device, non_blocking=True) if motion is not None else None
        return frame.with_(image=image, motion=motion)


class ReadbackStage(BaseStage):
    """Pictures back to the host: one copy per batch into page-locked memory, queued on the
    current stream and not waited for — the GPU chain's done event says when it has landed
    (pipeline/gpu_chain.py: the last part of its chain, live and offline). Motion vectors are
    dropped here (nothing after needs them). On the CPU the pictures are already there.

    `i420=True` (opaque MP4 output): the batch is converted to I420 planes on the GPU first
    (pipeline/accel/i420.py) and the sink gets `Frame.i420` instead of RGBA: 1.5 bytes a pixel
    instead of 4 to read back and to hand to the encoders, and no colour conversion left for
    them."""

    name = "readback"
    max_batch = 4

    def __init__(self, size: tuple[int, int] | None, device: str = "cuda", i420: bool = False):
        self.device = device
        self.cuda = str(device).startswith("cuda")
        self.i420 = i420
        self.needs = spec("image", size=size, device=str(device).split(":")[0])
        self.gives = spec("i420" if i420 else "image", size=size, device="cpu")

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        import torch

        from pipeline.accel import pinned_empty

        t0 = time.perf_counter()
        if self.i420:
            from pipeline.accel.i420 import rgba_to_i420

            pictures = rgba_to_i420(torch.stack([f.image for f in frames]))
        else:
            pictures = [f.image for f in frames]
        if self.cuda:
            host = pinned_empty((len(frames), *pictures[0].shape), torch.uint8)
            for i, p in enumerate(pictures):
                host[i].copy_(p, non_blocking=True)
        else:
            host = pictures
        ms = (time.perf_counter() - t0) * 1000.0 / len(frames)
        if self.i420:
            out = [f.with_(image=None, motion=None, i420=host[i]) for i, f in enumerate(frames)]
        else:
            out = [f.with_(image=host[i], motion=None) for i, f in enumerate(frames)]
        return [f.timed(self.name, ms) for f in out]
