"""An offline vowel net that reads the clip's spectrum with convolutions along mel and time.

A longer or shorter vocal tract moves every formant by about the same factor: on a mel scale,
a shift of the whole spectrum shape by a band or two. The cepstra the MLP reads
(`audio.vowel_net.Mlp`) spread such a shift over every coefficient; convolutions along the mel
axis with max-pooling carry a vowel's shape across it, and their taps across neighbouring hops
see the formants move between sounds. Issue 15's twelfth round measured both
(docs/BENCHMARKS.md): mel-only convolutions per hop gained nothing on unheard voices, mel and
time together gained.

Input: a clip's hop vectors (`audio.vowel_net.offline_inputs` at offsets (0,)). Each block of
`BLOCK` columns starts with a cepstrum, which is turned back into the smoothed log-mel shape it
stands for (the inverse of the cepstrum's DCT, the dropped coefficients zero); the blocks (the
mix and the separated voice) are the convolutions' channels. Two convolutions over (mel, hop)
— kernel 5 x 3 as shipped (`audio.vowel_net_train.MEL_K`), the time taps `dilation` hops
apart, zero padding, ReLU, max-pool 2 along mel — give each hop's features once; with the blocks' other columns (periodicity, flatness)
they are stacked at the net's offsets (edges held, as `audio.vowel_net.stack`) and an MLP gives
`Mlp`'s 6 outputs: p(voice) and A I U E O.

Offline the convolutions see neighbouring hops on both sides. `causal`: only this hop and the
past (time taps 2d, d and 0 hops back, offsets <= 0) — the live net of that kind, run hop by hop
by `MelConvStepper` (issue 15, thirty-second round: the twelfth round's gain of mel and time
convolutions offline, tried live). Inference is numpy (the stepper's hop compiled,
`audio.mel_conv_kernels`); `audio.vowel_net_train.fit_mel_conv` trains it (torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from audio.npz_layers import dense_arrays

__all__ = [
    "BLOCK",
    "MelConv",
    "MelConvStepper",
    "cepstrum_to_mel",
    "load_mel_conv",
    "mel_conv_arrays",
    "scaled_inputs",
    "split_blocks",
]

BLOCK = 22  # columns per block of a hop vector: n_coefs cepstra, then the block's own cues


def cepstrum_to_mel(n_coefs: int, n_mels: int, first_coef: int) -> np.ndarray:
    """(n_coefs, n_mels): cepstra (coefficients first_coef.. of the DCT-II of the log-mel
    spectrum, as `audio.mfcc` makes them) back to the smoothed log-mel shape (up to its mean
    and a scale, which the net's own scaling takes away)."""
    k = np.arange(first_coef, first_coef + n_coefs)
    m = np.arange(n_mels)
    return (2.0 / n_mels) * np.cos(np.pi * k[:, None] * (2 * m[None, :] + 1) / (2 * n_mels))


def split_blocks(hops: np.ndarray, n_coefs: int) -> tuple[np.ndarray, np.ndarray]:
    """Hop vectors (n, blocks * BLOCK) -> cepstra (n, blocks, n_coefs), cues (n, the rest)."""
    b = np.asarray(hops, np.float32).reshape(len(hops), -1, BLOCK)
    return b[:, :, :n_coefs], b[:, :, n_coefs:].reshape(len(hops), -1)


def scaled_inputs(hops, to_mel, mel_scale, cue_mean, cue_std) -> tuple[np.ndarray, np.ndarray]:
    """Hop vectors (n, blocks * BLOCK) -> what the convolutions and the head read: the scaled
    log-mel shapes (n, blocks, mels) and the scaled cues (n, n_cues). Numpy inference
    (`MelConv.hop_features`) and torch training (`audio.vowel_net_train`) both start here."""
    cep, cues = split_blocks(hops, to_mel.shape[0])
    mel = (cep @ to_mel - mel_scale[0]) / mel_scale[1]
    return mel.astype(np.float32), ((cues - cue_mean) / cue_std).astype(np.float32)


@dataclass
class MelConv:
    to_mel: np.ndarray  # (n_coefs, n_mels)
    mel_scale: np.ndarray  # (2,): mean and spread of the training's log-mel shapes
    cue_mean: np.ndarray  # (n_cues,) per hop: the blocks' columns that are not cepstra
    cue_std: np.ndarray
    convs: list[tuple[np.ndarray, np.ndarray]]  # (k_mel, 3, c_in, c_out), (c_out,)
    dilation: int  # hops between a convolution's time taps
    head: object  # audio.vowel_net.Mlp over the stacked hop features (no scaling of its own)
    offsets: tuple[int, ...]
    causal: bool = False  # time taps in the past only (a live net)

    def hop_features(self, hops: np.ndarray) -> np.ndarray:
        """A clip's hop vectors (n, blocks * BLOCK), in time order -> (n, features): each
        hop's convolution output, then its scaled cues."""
        mel, cues = self.scaled(hops)  # (n, blocks, mels), (n, n_cues)
        h = np.ascontiguousarray(mel.transpose(0, 2, 1))  # (n, mels, c)
        n = len(h)
        for w, b in self.convs:
            out = _conv(h, w, b, self.dilation, self.causal)
            h = np.maximum(out[:, 0::2], out[:, 1::2])  # max-pool 2 along mel
        feats = h.transpose(0, 2, 1).reshape(n, -1)  # per hop: (channel, mel), as torch's
        return np.concatenate([feats, cues], axis=1)

    def scaled(self, hops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`scaled_inputs` with this net's scales."""
        return scaled_inputs(hops, self.to_mel, self.mel_scale, self.cue_mean, self.cue_std)

    def logits(self, hops: np.ndarray) -> np.ndarray:
        """A clip's hop vectors (n, blocks * BLOCK), in time order -> (n, 6) logits: the head
        on `audio.vowel_net.stack(hop_features, offsets)`, its first layer applied per offset
        and the products shifted (the same sum; the stacked rows, offsets x features wide, are
        never made: on a 4-minute song they are hundreds of MB)."""
        f = self.hop_features(hops)
        n, k = len(f), f.shape[1]
        w0, b0 = self.head.layers[0]
        h = np.broadcast_to(b0, (n, len(b0))).copy()
        t = np.arange(n)
        for i, off in enumerate(self.offsets):
            h += (f @ w0[i * k : (i + 1) * k])[np.clip(t + off, 0, max(n - 1, 0))]
        for w, b in self.head.layers[1:]:
            np.maximum(h, 0.0, out=h)
            h = h @ w + b
        return h

    def predict_hops(self, hops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A clip's hop vectors (n, blocks * BLOCK), in time order -> (p(voice) (n,),
        p(A I U E O) (n, 5))."""
        from audio.vowel_net import probs

        return probs(self.logits(hops))

    def predict(self, hops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`predict_hops`: the interface `audio.vowel_net.Tcn` has (a clip's hop vectors in time
        order), which the live net's batch use calls."""
        return self.predict_hops(hops)

    def stepper(self) -> MelConvStepper:
        if not self.causal or max(self.offsets) > 0:
            raise ValueError("a centred (offline) MelConv cannot run hop by hop")
        if len(self.head.layers) < 2:
            raise ValueError("a MelConv without a hidden layer cannot run hop by hop")
        return MelConvStepper(self)


class MelConvStepper:
    """A causal `MelConv` hop by hop: the same numbers as `MelConv.predict` over the stream (up
    to float32 rounding). Why it is shaped so: a live hop affords a few small matrix products;
    the whole hop is one compiled call (`audio.mel_conv_kernels.hop_probs`), in numpy its calls
    cost more than their arithmetic.

    A convolution's output at hop t is the sum of its three time taps' products with the inputs
    of hops t - 2d, t - d and t. Each hop's products with all three taps are made once, when
    the hop arrives (one matrix product over its mel windows), and kept in a ring of 2d + 1
    hops; the output adds three of them (none before the first hop: the batch's zero padding).
    The head's first layer likewise: each hop's features times every offset's block
    once (the cues' scaling folded in), a ring of them summed at the offsets (the first hop's
    repeated before it: the batch's held edge). `step(x, commit=False)` changes nothing (a
    provisional hop, `audio.live_lipsync.LiveLipSync.latch`)."""

    def __init__(self, net: MelConv) -> None:
        from audio.mel_conv_kernels import hop_probs

        self._hop_probs = hop_probs
        d = self.d = net.dilation
        span = 2 * d + 1
        mels = net.to_mel.shape[1]
        # the hop's cepstra -> its scaled mel shapes, as `scaled_inputs`
        self.to_mel = (net.to_mel / net.mel_scale[1]).astype(np.float32)
        self.mel_off = np.float32(net.mel_scale[0] / net.mel_scale[1])
        # per convolution (`audio.mel_conv_kernels.conv_hop`'s arrays): the taps' weights side
        # by side (k_mel * c_in, 3 * c_out) and its bias; the ring of the last hops' products;
        # its pooled output (tuples: the compiled call unpacks them faster than typed lists)
        convs, rings, outs = [], [], []
        for w, b in net.convs:
            km, _, c_in, c_out = w.shape
            wcat = np.concatenate([w[:, j].reshape(km * c_in, c_out) for j in range(3)], axis=1)
            convs.append((np.ascontiguousarray(wcat, np.float32), b.astype(np.float32)))
            rings.append(np.zeros((span, mels, 3 * c_out), np.float32))
            outs.append(np.zeros((mels // 2, c_out), np.float32))
            mels //= 2
        self.convs, self.rings, self.outs = tuple(convs), tuple(rings), tuple(outs)
        w0, b0 = net.head.layers[0]
        n_off = len(net.offsets)
        k = len(w0) // n_off
        n_cues = len(net.cue_mean)
        # (features, offsets * hidden): each offset's block of the head's first layer side by
        # side, the cues' rows divided by their spread and their mean's share in the bias
        blocks = [w0[i * k : (i + 1) * k].astype(np.float32) for i in range(n_off)]
        b0 = b0.astype(np.float32).copy()
        for blk in blocks:
            b0 -= (net.cue_mean / net.cue_std) @ blk[k - n_cues :]
            blk[k - n_cues :] /= net.cue_std[:, None]
        self.head0 = np.ascontiguousarray(np.concatenate(blocks, axis=1))
        self.head_b0 = b0
        self.dense = tuple(
            (np.ascontiguousarray(w, np.float32), b.astype(np.float32))
            for w, b in net.head.layers[1:]
        )
        self.f = np.empty(k, np.float32)  # this hop's features: (channel, mel), then the cues
        back = -min(net.offsets) + 1
        offs = np.asarray(net.offsets)
        self.now = int(np.flatnonzero(offs == 0)[0]) if 0 in net.offsets else -1
        past = np.flatnonzero(offs < 0)
        # for each slot of the newest hop, the ring rows (and offset blocks) of the past offsets
        self.past_rows = np.stack([(s + offs[past]) % back for s in range(back)]).astype(np.int64)
        self.past_cols = past.astype(np.int64)
        self.gring = np.zeros((back, n_off, len(b0)), np.float32)
        self.probs = np.zeros(6)
        self.count = 0
        # compiled now (or loaded from numba's cache), not on the first live hop
        self.step(np.zeros(net.convs[0][0].shape[2] * BLOCK, np.float32), commit=False)

    def step(self, x: np.ndarray, commit: bool = True) -> tuple[float, np.ndarray]:
        hop = np.asarray(x, np.float32).reshape(-1, BLOCK)
        self._hop_probs(hop, self.to_mel, self.mel_off, self.convs, self.rings, self.outs,
                        self.d, self.count, commit, self.head0, self.head_b0, self.gring,
                        self.past_rows, self.past_cols, self.now, self.dense, self.f,
                        self.probs)  # fmt: skip
        if commit:
            self.count += 1
        return float(self.probs[0]), self.probs[1:].copy()


CHUNK = 2048  # hops per matrix product: bounds the unrolled windows' memory on long songs


def _conv(h: np.ndarray, w: np.ndarray, b: np.ndarray, d: int, causal: bool = False) -> np.ndarray:
    """ReLU of the convolution of h (n, mels, c_in) with w (k_mel, 3, c_in, c_out): mel taps
    centred, time taps d hops apart (centred, or `causal`: this hop and two before), zero
    padding (torch's conv2d, channels last). Per time tap one matrix product over the mel
    windows, a chunk of hops at a time."""
    km, kt, c_in, c_out = w.shape
    n, mels = h.shape[:2]
    pad = np.pad(h, ((2 * d, 0) if causal else (d, d), (km // 2, km // 2), (0, 0)))
    taps = [w[:, j].reshape(km * c_in, c_out) for j in range(kt)]
    out = np.empty((n, mels, c_out), np.float32)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        acc = np.broadcast_to(b, (e - s, mels, c_out)).copy()
        for j, wj in enumerate(taps):  # the hop d before, this one, d after
            win = sliding_window_view(pad[s + j * d : e + j * d], km, axis=1)  # (., mels, c, k)
            acc += win.transpose(0, 1, 3, 2).reshape(e - s, mels, km * c_in) @ wj
        np.maximum(acc, 0.0, out=acc)
        out[s:e] = acc
    return out


def mel_conv_arrays(name: str, m: MelConv) -> dict[str, np.ndarray]:
    """The net's arrays for a VowelNet file, under `name`_ (float16 weights, as the MLPs')."""
    a = {
        f"{name}_kind": np.array("melconv"),
        f"{name}_to_mel": m.to_mel.astype(np.float32),
        f"{name}_mel_scale": m.mel_scale.astype(np.float32),
        f"{name}_cue_mean": m.cue_mean.astype(np.float32),
        f"{name}_cue_std": m.cue_std.astype(np.float32),
        f"{name}_dilation": np.asarray(m.dilation, np.int64),
        # not `name`_offsets: for the live net that is the VowelNet's own "live_offsets"
        f"{name}_head_offsets": np.asarray(m.offsets, np.int64),
        f"{name}_causal": np.asarray(m.causal),
    }
    for i, (w, b) in enumerate(m.convs):
        a[f"{name}_c{i}_w"] = w.astype(np.float16)
        a[f"{name}_c{i}_b"] = b.astype(np.float16)
    a.update(dense_arrays(name, m.head.layers))
    return a


def load_mel_conv(z, name: str, path) -> MelConv:
    """The `name` net of an open VowelNet file; one ValueError line naming the file and the
    key that is missing or does not fit."""
    from audio.vowel_net import Mlp

    def arr(key: str) -> np.ndarray:
        if f"{name}_{key}" not in z:
            raise ValueError(f"{path}: {name}_{key}: missing (a mel-convolution net needs it)")
        return z[f"{name}_{key}"].astype(np.float32)

    convs = []
    while f"{name}_c{len(convs)}_w" in z:
        i = len(convs)
        convs.append((arr(f"c{i}_w"), arr(f"c{i}_b")))
    layers = []
    while f"{name}_w{len(layers)}" in z:
        i = len(layers)
        layers.append((arr(f"w{i}"), arr(f"b{i}")))
    to_mel = arr("to_mel")
    dilation = int(arr("dilation"))
    # files written before the live net could be one: `name`_offsets
    offsets = tuple(
        int(o) for o in arr("head_offsets" if f"{name}_head_offsets" in z else "offsets")
    )
    ok = bool(convs) and bool(layers) and dilation >= 1
    c_in = convs[0][0].shape[2] if convs and convs[0][0].ndim == 4 else -1
    for w, b in convs:
        ok = ok and w.ndim == 4 and w.shape[2] == c_in and w.shape[3] == len(b)
        ok = ok and w.shape[0] % 2 == 1 and w.shape[1] == 3
        c_in = w.shape[3] if w.ndim == 4 else -1
    if not ok or to_mel.shape[1] % 2 ** len(convs):
        raise ValueError(
            f"{path}: {name}_c*_w: expected convolutions (odd k_mel, 3, c_in, c_out) chained "
            f"over a mel axis that halves {len(convs)} times, and {name}_dilation >= 1"
        )
    n_cues = len(arr("cue_mean"))
    want = (c_in * (to_mel.shape[1] >> len(convs)) + n_cues) * len(offsets)
    if layers[0][0].shape[0] != want:
        raise ValueError(
            f"{path}: {name}_w0: takes {layers[0][0].shape[0]} inputs, the convolutions and "
            f"{len(offsets)} offsets give {want}"
        )
    head = Mlp(np.zeros(want, np.float32), np.ones(want, np.float32), layers)
    causal = bool(z[f"{name}_causal"]) if f"{name}_causal" in z else False
    if causal and max(offsets) > 0:
        raise ValueError(
            f"{path}: {name}_head_offsets: a causal net reads no future hop (got {offsets})"
        )
    if causal and len(layers) < 2:
        raise ValueError(
            f"{path}: {name}_w1: missing (a causal net runs hop by hop with a hidden layer)"
        )
    return MelConv(to_mel, arr("mel_scale"), arr("cue_mean"), arr("cue_std"), convs, dilation,
                   head, offsets, causal)  # fmt: skip
