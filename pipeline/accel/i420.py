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
    y, cb, cr = rgb_planes_to_i420(rgb)
    out = torch.empty(b, rows, w, dtype=torch.uint8, device=x.device)
    out[:, :h] = y
    quarter = h * w // 4
    flat = out.view(b, -1)
    flat[:, h * w : h * w + quarter] = cb.reshape(b, -1)
    flat[:, h * w + quarter :] = cr.reshape(b, -1)
    return out


def rgb_planes_to_i420(rgb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float (…, 3, h, w) whole numbers 0..255 (an RGB picture's uint8 values; h, w even) ->
    uint8 Y (…, h, w), Cb and Cr (…, h/2, w/2): the arithmetic of `rgba_to_i420`, for a
    caller that holds the picture as float planes already (the CPU stylize, on the idol's box)."""
    r, g, bl = rgb.unbind(-3)
    luma = (r * KR).add_(g, alpha=KG).add_(bl, alpha=KB)  # 0..255
    # 16.5..235.5 (Y) and 16.5..240.5 (Cb, Cr) for inputs in 0..255: positive and in range, so
    # the conversion's truncation is the floor and no clamp is needed
    y = luma.mul_(_Y_SCALE).add_(16.5).to(torch.uint8)
    # chroma from the 2x2 means of R, G, B (luma of the mean = mean of the luma: linear);
    # summed as rows then columns: the sums of whole numbers are exact in any order, so this
    # equals avg_pool2d(rgb, 2), which is several times slower on the CPU
    rows = torch.add(rgb[..., 0::2, :], rgb[..., 1::2, :])
    m = torch.add(rows[..., 0::2], rows[..., 1::2]).mul_(0.25)  # (…, 3, h/2, w/2)
    mr, mg, mb = m.unbind(-3)
    my = (mr * KR).add_(mg, alpha=KG).add_(mb, alpha=KB)
    cb = (mb - my).mul_(_C_SCALE / (2.0 * (1.0 - KB))).add_(128.5)
    cr = (mr - my).mul_(_C_SCALE / (2.0 * (1.0 - KR))).add_(128.5)
    return y, cb.to(torch.uint8), cr.to(torch.uint8)
