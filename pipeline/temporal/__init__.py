"""Temporal alignment of stylized frames (history warped by the renderer's motion vectors).

    pipeline.temporal.stage   TemporalStage (name "temporal"), warp(), flicker(), sharpness(),
                              laplacian_rms(), ghosting()

Importing this package imports torch (the stage runs on CPU or CUDA); no Qt, no Skia.
"""

from pipeline.temporal.stage import (
    TemporalStage,
    flicker,
    ghosting,
    laplacian_rms,
    sharpness,
    warp,
)

__all__ = ["TemporalStage", "flicker", "ghosting", "laplacian_rms", "sharpness", "warp"]
