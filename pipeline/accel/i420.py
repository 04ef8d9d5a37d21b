"""RGBA → I420 (yuv420p, BT.709 limited range) in torch, on the GPU before the readback.

    rgba_to_i420(x uint8 (B, H, W, 4) premultiplied) -> uint8 (B, H * 3 // 2, W)

The layout is the one PyAV's `VideoFrame.from_ndarray(a, format="yuv420p")` takes: the Y plane
(H rows of W), then U (H/2 x W/2, packed as H/4 rows of W), then V. H and W must be even.

Why: at 1080p an RGBA frame is 8.3 MB and an I420 frame 3.1 MB. Converting on the GPU makes
the readback, the copy into the encoders' shared memory and the encoders' own work (swscale's
colour conversion, single-threaded per encoder) all smaller — the offline render is limited by
those host-side steps, not by the GPU (docs/BENCHMARKS.md, offline render on cuda).

The arithmetic is what the file sinks ask swscale for (`reformat(format="yuv420p",
dst_colorspace=ITU709, dst_color_range=MPEG)`): BT.709 luma weights (Kr 0.2126, Kb 0.0722,
ITU-R BT.709-6 table 3), luma scaled to 16..235 and chroma to 16..240, chroma from the mean of
each 2x2 block. The premultiplied RGB is the picture over black (an opaque frame's RGB), as
swscale sees it when it drops the alpha; transparent outputs keep RGBA (yuva420p is not made
here). tests/test_i420.py checks the planes against swscale.
"""

from __future__ import annotations

import torch

__all__ = ["i420_shape", "rgba_to_i420"]

KR, KB = 0.2126, 0.0722
KG = 1.0 - KR - KB
_Y_SCALE, _C_SCALE = 219.0 / 255.0, 224.0 / 255.0


def i420_shape(width: int, height: int) -> tuple[int, int]:
    """(rows, columns) of one I420 picture as a uint8 array."""
    if width % 2 or height % 2:
        raise ValueError(f"I420 needs an even width and height, got {width}x{height}")
    return height * 3 // 2, width


def rgba_to_i420(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[-1] != 4:
        raise ValueError(
            f"rgba_to_i420: expected uint8 (B, H, W, 4), got {x.dtype} {tuple(x.shape)}"
        )
    b, h, w, _ = x.shape
    rows, _ = i420_shape(w, h)
    rgb = x[..., :3].permute(0, 3, 1, 2).float()  # (B, 3, H, W), 0..255
    r, g, bl = rgb.unbind(1)
    out = torch.empty(b, rows, w, dtype=torch.uint8, device=x.device)
    luma = (r * KR).add_(g, alpha=KG).add_(bl, alpha=KB)  # 0..255
    out[:, :h] = luma.mul(_Y_SCALE).add_(16.5).floor_().clamp_(0, 255).to(torch.uint8)
    # chroma from the 2x2 means of R, G, B (luma of the mean = mean of the luma: linear)
    m = torch.nn.functional.avg_pool2d(rgb, 2)  # (B, 3, H/2, W/2)
    mr, mg, mb = m.unbind(1)
    my = (mr * KR).add_(mg, alpha=KG).add_(mb, alpha=KB)
    cb = (mb - my).mul_(_C_SCALE / (2.0 * (1.0 - KB))).add_(128.5)
    cr = (mr - my).mul_(_C_SCALE / (2.0 * (1.0 - KR))).add_(128.5)
    quarter = h * w // 4
    flat = out.view(b, -1)
    flat[:, h * w : h * w + quarter] = cb.floor_().clamp_(0, 255).to(torch.uint8).view(b, -1)
    flat[:, h * w + quarter :] = cr.floor_().clamp_(0, 255).to(torch.uint8).view(b, -1)
    return out
