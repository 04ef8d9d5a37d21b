"""The opaque toon's colour math on the CPU as one compiled pass over the idol's box (numba).

    rgba_box(x, box, k, out)           writes out[y0:y1, x0:x1] (uint8 RGBA, alpha 255)
    i420_box(x, box, k, ly, cb, cr)    writes the box of the Y plane and its 2x2 chroma blocks

`k` is a `Consts` (toon.py builds it per frame: the background, vignette and grain maps, the
shading field's x-interpolated low rows and the scalars). The arithmetic is the torch code's
it replaced (kept in tests/test_toon_cpu.py as the reference) then `rgb_planes_to_i420`'s, per
pixel in float32 in the same order: in torch that was some thirty full-box float passes, each
a kernel of its own; here it is one pass over the box's rows. The values are the same except
where the compiler and torch's vector kernels round a multiply-add differently and a result
sits on a rounding edge: a level at most (18 of 18.4 M values on 20 studio frames at 640x360).

numba comes with librosa (a dependency). toon.py imports this module on the first opaque CPU
frame only (StylizeStage.setup's `warm_cpu`; numba's import, ~0.2 s, stays off every other
path). The compiled functions are cached in the user cache folder: the first run on a machine
compiles them (about 7 s of CPU on the 2-core machine; scripts/setup.sh does it at install),
later runs read them back (well under a second with numba's import). The kernels release the
GIL, so the idol's drawing and the encoder's Python run beside them.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from core.paths import cache_dir

# numba reads its cache folder when imported: Kagura's user cache (where librosa's functions
# are kept too, audio/features.py), writable for every user unlike a system site-packages
_reload = "numba" in sys.modules
os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir("numba")))
import numba  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.accel.i420 import _C_SCALE, _Y_SCALE, KB, KG, KR  # noqa: E402

if _reload:
    numba.config.reload_config()

F = np.float32
_KR, _KG, _KB = F(KR), F(KG), F(KB)
_YS, _CB, _CR = F(_Y_SCALE), F(_C_SCALE / (2.0 * (1.0 - KB))), F(_C_SCALE / (2.0 * (1.0 - KR)))


class Consts(NamedTuple):
    v255: np.ndarray  # (H, W) vignette · 255
    bg_half: np.ndarray  # (3, H, W) bg·v + 0.5
    bg_unit: np.ndarray  # (3, H, W) bg·v / 255
    grain: np.ndarray  # (H, W) this variant's grain in levels, or (0, 0): none
    shade: np.ndarray  # (rows, cols) x-interpolated, edge-padded low rows, or (0, 0): none
    shade_oy: int  # box row 0 is row shade_oy of the upsampled field
    shade_ox: int  # box column 0 is column shade_ox of shade
    wp: np.ndarray  # (8,) weight of the earlier low row per output phase
    wn: np.ndarray  # (8,) weight of the later one
    ks: float  # -0.35 · shading / 255
    lum: np.ndarray  # (3,) luma weights · (1 - s) / 255, or zeros where s == 1
    s: float  # s / 255, or 1 where s == 1 (then the vignette is scaled by 1/255 instead)
    saturate: bool


zero, one, top = F(0.0), F(1.0), F(255.0)
y16, c128, quarter = F(16.5), F(128.5), F(0.25)
opaque = np.uint32(0xFF000000)


@numba.njit(cache=True, nogil=True)
def _colours(x, yy, x0, w, v, bh, bu, gr, sh, r, ox, wp, wn, ks, lum, s, sat, a, sv, q, c):
    """Frame row yy, columns x0:x0+w (box row r of the shading field) -> c (3, w): the
    output colours, clamped to 0..255 and floored. x is uint32 RGBA (byte k = channel k);
    a, sv, q are scratch rows. Row-long loops over few arrays each, so LLVM vectorizes them
    (one loop over every term at once it does not)."""
    xr = x[yy, x0 : x0 + w]
    vr = v[yy, x0 : x0 + w]
    for i in range(w):
        a[i] = F(xr[i] >> 24)
    if sh.shape[0] > 0:
        ph = r % 8
        base = r // 8 + (1 if ph >= 4 else 0)
        s0, s1 = sh[base, ox : ox + w], sh[base + 1, ox : ox + w]
        w0, w1 = wp[ph], wn[ph]
        for i in range(w):
            t = min(max(s0[i] * w0 + s1[i] * w1, zero), one) * a[i]
            sv[i] = vr[i] + (ks * t) * vr[i]  # addcmul's order
    else:
        sv[:] = vr
    if not sat:
        for i in range(w):
            sv[i] = sv[i] * s
    for ch in range(3):
        qq, bhr, bur = q[ch], bh[ch, yy, x0 : x0 + w], bu[ch, yy, x0 : x0 + w]
        for i in range(w):
            qq[i] = bhr[i] - bur[i] * a[i]
        if gr.shape[0] > 0:
            grr = gr[yy, x0 : x0 + w]
            for i in range(w):
                qq[i] = qq[i] + grr[i]
        cc = c[ch]
        for i in range(w):
            cc[i] = F((xr[i] >> (8 * ch)) & 255)
    if sat:
        c0, c1, c2 = c[0], c[1], c[2]
        for i in range(w):
            m = c0[i] * lum[0] + c1[i] * lum[1] + c2[i] * lum[2]
            c0[i], c1[i], c2[i] = m + c0[i] * s, m + c1[i] * s, m + c2[i] * s
    for ch in range(3):
        cc, qq = c[ch], q[ch]
        for i in range(w):
            cc[i] = np.floor(min(max(qq[i] + cc[i] * sv[i], zero), top))


@numba.njit(cache=True, nogil=True)
def _rgba(x, y0, y1, x0, x1, v, bh, bu, gr, sh, oy, ox, wp, wn, ks, lum, s, sat, out):
    w = x1 - x0
    a, sv = np.empty(w, F), np.empty(w, F)
    q, c = np.empty((3, w), F), np.empty((3, w), F)
    for j in range(y1 - y0):
        yy = y0 + j
        _colours(x, yy, x0, w, v, bh, bu, gr, sh, j + oy, ox, wp, wn, ks, lum, s, sat, a, sv, q, c)
        o, c0, c1, c2 = out[yy, x0:x1], c[0], c[1], c[2]
        for i in range(w):  # r + g << 8 + b << 16 + 255 << 24, exact in float
            o[i] = np.uint32(c0[i] + c1[i] * F(256.0) + c2[i] * F(65536.0)) | opaque


@numba.njit(cache=True, nogil=True)
def _i420(x, y0, y1, x0, x1, v, bh, bu, gr, sh, oy, ox, wp, wn, ks, lum, s, sat, ly, cb, cr):
    w, hw = x1 - x0, (x1 - x0) // 2
    a, sv = np.empty(w, F), np.empty(w, F)
    q, c = np.empty((3, w), F), np.empty((3, w), F)
    pair = np.empty((3, hw), F)  # the row pair's column-pair sums, per channel
    for j in range(y1 - y0):
        yy = y0 + j
        _colours(x, yy, x0, w, v, bh, bu, gr, sh, j + oy, ox, wp, wn, ks, lum, s, sat, a, sv, q, c)
        lr, c0, c1, c2 = ly[yy, x0:x1], c[0], c[1], c[2]
        for i in range(w):
            lr[i] = np.uint8((c0[i] * _KR + c1[i] * _KG + c2[i] * _KB) * _YS + y16)
        for ch in range(3):  # sums of whole numbers: exact in any order
            cc, pp = c[ch], pair[ch]
            if j % 2 == 0:
                for i in range(hw):
                    pp[i] = cc[2 * i] + cc[2 * i + 1]
            else:
                for i in range(hw):
                    pp[i] = (pp[i] + cc[2 * i] + cc[2 * i + 1]) * quarter
        if j % 2 == 1:
            mr, mg, mb = pair[0], pair[1], pair[2]
            cbr, crr = cb[yy // 2, x0 // 2 : x1 // 2], cr[yy // 2, x0 // 2 : x1 // 2]
            for i in range(hw):
                my = mr[i] * _KR + mg[i] * _KG + mb[i] * _KB
                cbr[i] = np.uint8((mb[i] - my) * _CB + c128)
                crr[i] = np.uint8((mr[i] - my) * _CR + c128)


def _args(k: Consts):
    return (
        k.v255, k.bg_half, k.bg_unit, k.grain, k.shade, k.shade_oy, k.shade_ox, k.wp, k.wn,
        F(k.ks), k.lum, F(k.s), k.saturate,
    )  # fmt: skip


def rgba_box(x: np.ndarray, box, k: Consts, out: np.ndarray) -> None:
    _rgba(x, *box, *_args(k), out)


def i420_box(x: np.ndarray, box, k: Consts, ly, cb, cr) -> None:
    _i420(x, *box, *_args(k), ly, cb, cr)
