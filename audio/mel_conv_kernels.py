"""Compiled pieces of the causal mel-convolution net's live hop (`audio.mel_conv.MelConvStepper`).

Why compiled: a hop's arithmetic is small (a few hundred thousand multiply-adds) and in numpy
it took some 45 calls whose dispatch cost more than their work — more than the live hop's
budget (issue 15, thirty-second round of docs/BENCHMARKS.md); each call into numba costs
microseconds too, so the stepper makes one a hop (`hop_probs`). numba (installed with librosa)
compiles the hop once per machine (`cache=True`: later processes read it back); the
matrix products inside call the same BLAS as numpy's. Imported by `MelConvStepper` alone, so
numba's import stays off every other path. The first stepper on a machine compiles the hop
(about 17 s on the 2-core CPU; later processes read it back in about a second): scripts/setup.sh
does it for the shipped net, as it does the toon pass.

The numbers are those of `audio.mel_conv.MelConv.predict` over the stream up to float32
rounding (tests/test_mel_conv.py checks both against the clip's batch).
"""

from __future__ import annotations

import os
import sys

from audio.features import NUMBA_CACHE_ENV, numba_cache_dir

# numba reads its cache folder when imported: Kagura's user cache, as librosa's functions and
# the toon pass (pipeline/stylize/toon_cpu.py) — writable for every user, unlike site-packages
_reload = "numba" in sys.modules
os.environ.setdefault(NUMBA_CACHE_ENV, numba_cache_dir())
import numba  # noqa: E402
import numpy as np  # noqa: E402

if _reload:
    numba.config.reload_config()


@numba.njit(cache=True)
def conv_hop(h, w, b, ring, c, d, commit, out):  # pragma: no cover - compiled
    """One causal convolution at hop `c`, then ReLU and a max-pool of 2 along mel.

    h (mels, c_in): this hop's input; w (k_mel * c_in, 3 * c_out): the three time taps' weights
    side by side, each over a window of k_mel mel bands (centred, zero beyond the edges);
    ring (2d + 1, mels, 3 * c_out): each of the last hops' products with the taps, hop t at
    t mod (2d + 1); out (mels // 2, c_out): the pooled output. This hop's products with tap 2,
    hop c - d's with tap 1 and hop c - 2d's with tap 0 are summed (none before the first hop:
    the batch's zero padding); `commit`: this hop's products are kept in the ring."""
    mels, c_in = h.shape
    k_in = w.shape[0]
    km = k_in // c_in
    c_out = w.shape[1] // 3
    span = ring.shape[0]
    windows = np.zeros((mels, k_in), np.float32)
    for m in range(mels):
        for j in range(km):
            src = m + j - km // 2
            if 0 <= src < mels:
                windows[m, j * c_in : (j + 1) * c_in] = h[src]
    p = np.dot(windows, w)  # (mels, 3 * c_out)
    a = p[:, 2 * c_out :] + b
    if c >= d:
        a += ring[(c - d) % span, :, c_out : 2 * c_out]
    if c >= 2 * d:
        a += ring[(c - 2 * d) % span, :, :c_out]
    if commit:
        ring[c % span] = p
    for m in range(mels // 2):
        for o in range(c_out):
            v = max(a[2 * m, o], a[2 * m + 1, o])
            out[m, o] = v if v > 0.0 else 0.0


@numba.njit(cache=True)
def head_hop(f, head0, b0, gring, past_rows, past_cols, now, c, commit):  # pragma: no cover
    """The head's first layer at hop `c`, before its ReLU: (hidden,).

    f (features,): this hop's features; head0 (features, offsets * hidden): each offset's block
    of the layer side by side; gring (back, offsets, hidden): each of the last hops' products
    with every block, hop t at t mod back; past_rows / past_cols: for this hop's slot, the ring
    rows and blocks of the offsets before 0; `now`: the block of offset 0 (-1: none). Before the
    first hop the first hop's products stand in (the batch's held edge)."""
    n_off, hidden = gring.shape[1], gring.shape[2]
    g = np.dot(f, head0).reshape(n_off, hidden)
    z = b0.copy()
    for i in range(len(past_cols)):
        z += g[past_cols[i]] if c == 0 else gring[past_rows[i], past_cols[i]]
    if now >= 0:
        z += g[now]
    if commit:
        if c == 0:
            for r in range(gring.shape[0]):
                gring[r] = g
        else:
            gring[c % gring.shape[0]] = g
    return z


@numba.njit(cache=True)
def hop_probs(hop, to_mel, mel_off, convs, rings, outs, d, c, commit, head0, head_b0, gring,
              past_rows, past_cols, now, dense, f, probs):  # pragma: no cover - compiled  # fmt: skip
    """A whole hop of the stepper in one call (each numba call from Python costs microseconds).

    hop (blocks, BLOCK): this hop's vector; to_mel (n_coefs, mels) and mel_off: its cepstra to
    scaled mel shapes; convs: per convolution (weights, bias) as `conv_hop` takes them, with
    its ring and pooled output in rings / outs; head0 ... now: `head_hop`'s; dense: the head's
    later layers (weights, bias), a ReLU before each; f: room for this hop's features. Writes
    p(voice) and p(A I U E O) to probs (6,)."""
    nc = to_mel.shape[0]
    mel = np.dot(np.ascontiguousarray(hop[:, :nc]), to_mel) - mel_off  # (blocks, mels)
    h = np.ascontiguousarray(mel.T)  # (mels, channels)
    for i in range(len(convs)):
        conv_hop(h, convs[i][0], convs[i][1], rings[i], c, d, commit, outs[i])
        h = outs[i]
    mels, chans = h.shape
    for ch in range(chans):  # the features: (channel, mel), then the cues
        for m in range(mels):
            f[ch * mels + m] = h[m, ch]
    k = chans * mels
    for bl in range(hop.shape[0]):
        for j in range(nc, hop.shape[1]):
            f[k] = hop[bl, j]
            k += 1
    z = head_hop(f, head0, head_b0, gring, past_rows[c % past_rows.shape[0]], past_cols, now,
                 c, commit)  # fmt: skip
    for i in range(len(dense)):
        z = np.dot(np.maximum(z, np.float32(0.0)), dense[i][0]) + dense[i][1]
    probs[0] = 1.0 / (1.0 + np.exp(-min(max(z[0], -30.0), 30.0)))
    top = z[1:].max()
    e = np.exp(z[1:] - top)
    probs[1:] = e / e.sum()
