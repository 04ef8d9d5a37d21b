"""Where the first diffusion frame's set-up goes on a GPU (issue 16): one fresh process per mode.

    python3 scripts/cuda_first_use.py cold     the diffusion stage set up straight after CUDA
    python3 scripts/cuda_first_use.py libs     the GPU libraries' first use (pipeline/accel/
                                               first_use.py) first, then the stage

Prints one line of seconds: CUDA's start, the libraries' first use (libs), the model load, the
stage's buffers and memory layout, its first three eager frames one by one, then its whole
set-up as the product runs it (warm-up frame and graph capture, everything loaded by then).
"""

from __future__ import annotations

import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

t_import = time.perf_counter() - t0


def main(mode: str) -> None:
    from pipeline.accel.first_use import touch_gpu_libraries
    from pipeline.diffusion import DiffusionStage
    from pipeline.diffusion.kagura_model import load_kagura
    from presets.loader import load_preset

    dev = torch.device("cuda")
    t = time.perf_counter()
    torch.zeros(1, device=dev).add_(1).item()
    cuda_s = time.perf_counter() - t
    libs_s = 0.0
    if mode == "libs":
        t = time.perf_counter()
        touch_gpu_libraries(dev)
        torch.cuda.synchronize(dev)
        libs_s = time.perf_counter() - t
    t = time.perf_counter()
    models = load_kagura(dtype="float16", device="cuda")
    load_s = time.perf_counter() - t
    preset = load_preset("studio")
    stage = DiffusionStage(
        models,
        preset,
        640,
        360,
        device="cuda",
        dtype="float16",
        cuda_graph=True,
        capture_steps=(1,),
    )
    sync = torch.cuda.synchronize
    t = time.perf_counter()
    with torch.no_grad():
        stage._allocate()
        for module in (models.unet, models.vae):
            module.to(memory_format=torch.channels_last)
        sync(dev)
        alloc_s = time.perf_counter() - t
        runs = []
        for _ in range(3):  # the eager frame: first, second, third
            t = time.perf_counter()
            stage._run(stage._k, stage._cfg)
            sync(dev)
            runs.append(time.perf_counter() - t)
    t = time.perf_counter()
    stage.setup()  # what the product runs: again warm-up, then the graph capture
    sync(dev)
    setup_s = time.perf_counter() - t
    print(
        f"{mode}: import torch {t_import:.2f} s, CUDA start {cuda_s:.2f} s, libraries "
        f"{libs_s:.2f} s, model load {load_s:.2f} s, buffers and layout {alloc_s:.2f} s, "
        f"eager frames " + " / ".join(f"{r:.3f}" for r in runs) + f" s, then set-up "
        f"{setup_s:.2f} s"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cold")
