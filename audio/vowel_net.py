"""A tiny network that hears a voice (even over a band) and its vowel, from MFCC context.

Per 10 ms hop the input is a stack of hop vectors (20 MFCCs of 40 mel bands of a 25 ms window,
periodicity, log spectral flatness) at a few offsets: only past hops for the live engine, past
and future for the offline one. Two fully connected layers (ReLU) end in 6 outputs: the logit
of "a voice sounds here" and the logits of A I U E O. Inference is numpy only (the live path
runs on machines without torch); `audio.vowel_net_train` trains it (torch) on the synthesized
corpus with augmentation, and `scripts/build_default_profile.py` ships the result as
`audio/profiles/vowel_net.npz` (float16 weights, a few hundred kB).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from audio import fft
from audio.mel_conv import MelConv, load_mel_conv, mel_conv_arrays
from audio.mfcc import FrameFeatures, MfccSettings, _plan, mfcc_frames
from audio.npz_layers import dense_arrays, read_dense
from audio.voice_mask import VoiceMask, load_mask, mask_arrays, masked_features
from core.atomic_write import replacing

if TYPE_CHECKING:
    from audio.time_chunks import ChunkedRows

__all__ = [
    "DEFAULT_NET",
    "FRONT_BOTH",
    "FRONT_MASK",
    "FRONT_SEPARATION",
    "LIPSYNC_MODELS",
    "LIVE_FRONT_PITCH",
    "LIVE_FRONT_STEADY",
    "LIVE_OFFSETS",
    "NET_SETTINGS",
    "OFFLINE_OFFSETS",
    "LiveNet",
    "Mlp",
    "Tcn",
    "VowelNet",
    "check_lipsync_model",
    "fuse",
    "hop_vectors",
    "live_inputs",
    "load_net",
    "offline_inputs",
    "stack",
]

NET_SETTINGS = MfccSettings(n_mels=40, first_coef=1, last_coef=20)
LIVE_OFFSETS = (-8, -6, -4, -2, -1, 0)
OFFLINE_OFFSETS = (-12, -8, -5, -3, -1, 0, 1, 3, 5, 8, 12)
DEFAULT_NET = Path(__file__).resolve().parent / "profiles" / "vowel_net.npz"
# The offline lip-sync models a user picks from (`--lipsync-model`, render.toml): "default" reads
# every voice it was built on alike; "japanese" was also trained on Kokoro's Japanese voices
# and reads unheard Japanese speech better offline, English a little worse; live it did no
# better than the default, which the live app keeps (docs/BENCHMARKS.md, issue 15).
LIPSYNC_MODELS = {"default": DEFAULT_NET, "japanese": DEFAULT_NET.with_name("vowel_net_ja.npz")}
HOP_DIM = NET_SETTINGS.n_coefs + 2


# Cepstral mean normalisation: MFCCs less their mean over the sounding hops remove what is the
# same all along — the microphone, the room, the synthesizer's or the singer's spectral tilt —
# and is the one change that most helped voices of other synthesizers. Offline the mean is the
# clip's; live it is a running mean (`CMN_TAU` hops, starting from the training mean worth
# `CMN_PRIOR` hops offline, `VowelNet.live_cmn_prior` hops live), the same in training as in use.
CMN_TAU = 1000
CMN_PRIOR = 200  # a long sustained vowel must not become the mean
# The live mean's start weight in files that do not name one. A heavy start keeps the live
# mean near the training mean for seconds: a voice whose mean lies far from it (another
# synthesizer's tilt) is misread until the mean has moved (docs/BENCHMARKS.md, issue 15).
LIVE_CMN_PRIOR_OLD = CMN_PRIOR
# With `VowelNet.live_cmn_voiced` only hops heard as a voice move the live mean (live: the
# net's p(voice) of the hop before over VOICED_P; in training: the truth of the hop before), so
# a band playing before or between the phrases does not become the mean a light start adopts.
VOICED_P = 0.9  # chosen on festival over the band at 0 dB (docs/BENCHMARKS.md)
CMN_RANGE_DB = 30.0  # hops within this of the (decaying) loudest one count as sounding


def clip_cmn(
    f: FrameFeatures, prior: np.ndarray | None = None, weight: int = CMN_PRIOR
) -> np.ndarray:
    """MFCCs less their mean over the clip's sounding hops (offline).

    With a `prior` (the training mean) the mean starts from it, worth `weight` hops: a short
    clip of one sustained vowel must not become its own mean (which would erase it)."""
    if len(f) == 0:
        return f.mfcc
    top = float(np.percentile(f.level_db, 95))
    act = f.level_db > top - CMN_RANGE_DB
    sel = f.mfcc[act] if act.any() else f.mfcc
    if prior is None:
        m = sel.mean(axis=0)
    else:
        m = (weight * np.asarray(prior) + sel.sum(axis=0)) / (weight + len(sel))
    return f.mfcc - m


def clip_spread(
    x: np.ndarray, f: FrameFeatures, prior: np.ndarray | None = None, weight: int = CMN_PRIOR
) -> np.ndarray:
    """(n_coefs,) the spread (RMS) of mean-normalised MFCCs `x` of the hops `f` over the
    clip's sounding hops; with a `prior` (the training's spread) it starts from it, worth
    `weight` hops: a short clip of one vowel must not become its own scale."""
    top = float(np.percentile(f.level_db, 95))
    act = f.level_db > top - CMN_RANGE_DB
    sel = np.asarray(x[act] if act.any() else x, np.float64)
    ss = np.square(sel).sum(axis=0)
    if prior is None:
        var = ss / len(sel)
    else:
        var = (weight * np.square(np.asarray(prior, np.float64)) + ss) / (weight + len(sel))
    return np.sqrt(np.maximum(var, 1e-6))


def clip_cvn(
    x: np.ndarray, f: FrameFeatures, prior: np.ndarray | None = None, weight: int = CMN_PRIOR
) -> np.ndarray:
    """Mean-normalised MFCCs `x` divided by their spread (`clip_spread`; offline): a
    synthesizer or vocoder that smooths (or sharpens) the spectrum scales the cepstra, the
    high ones most, and this undoes it."""
    if len(f) == 0:
        return x
    return (x / clip_spread(x, f, prior, weight)).astype(np.float32)


class RunningCmn:
    """The live mean: one `update` per hop, in order."""

    def __init__(self, init: np.ndarray, prior: int = CMN_PRIOR) -> None:
        self.mean = np.asarray(init, np.float64).copy()
        self.n = int(prior)
        self.peak = -120.0

    def update(self, cep: np.ndarray, level_db: float, voiced: bool = True) -> np.ndarray:
        self.peak = max(level_db, self.peak - 0.03)  # 3 dB/s decay at 10 ms hops
        c = np.asarray(cep, np.float64)
        if voiced and level_db > self.peak - CMN_RANGE_DB and level_db > -75.0:
            self.n = min(self.n + 1, CMN_TAU)
            self.mean += (c - self.mean) / self.n
        return (c - self.mean).astype(np.float32)

    def state(self) -> tuple:
        return self.mean.copy(), self.n, self.peak

    def restore(self, st: tuple) -> None:
        self.mean, self.n, self.peak = st[0].copy(), st[1], st[2]


def running_cmn(
    f: FrameFeatures, init: np.ndarray, prior: int = CMN_PRIOR, voiced: np.ndarray | None = None
) -> np.ndarray:
    """`RunningCmn.update` over every hop of `f` (the same numbers, in one pass): which hops
    move the mean is a scalar recursion on the levels; only those hops touch the vectors.
    `voiced`: per hop, whether it may move the mean (all, when None)."""
    if len(f) == 0:
        return f.mfcc
    cep = np.asarray(f.mfcc, np.float64)
    means = np.empty_like(cep)
    mean = np.asarray(init, np.float64).copy()
    n, peak = int(prior), -120.0
    ok = np.ones(len(f), bool) if voiced is None else np.asarray(voiced, bool)
    for k, lv in enumerate(f.level_db):  # float32 scalars: the same arithmetic as `update`
        peak = max(lv, peak - 0.03)
        if ok[k] and lv > peak - CMN_RANGE_DB and lv > -75.0:
            n = min(n + 1, CMN_TAU)
            mean += (cep[k] - mean) / n
        means[k] = mean
    return (cep - means).astype(np.float32)


def hop_vectors(f: FrameFeatures, mfcc: np.ndarray | None = None) -> np.ndarray:
    """(n, HOP_DIM) float32: MFCCs (normalised: `mfcc`), periodicity, log10 flatness."""
    return np.concatenate(
        [
            f.mfcc if mfcc is None else mfcc,
            f.periodicity[:, None],
            np.log10(np.maximum(f.flatness, 1e-4))[:, None],
        ],
        axis=1,
    ).astype(np.float32)


FRONT_SEPARATION = "separation"
# the learned voice mask (`audio.voice_mask`) in place of the harmonic/percussive separation:
# the separated voice's hop vector is the masked spectrum's (the net's file holds the mask)
FRONT_MASK = "mask"
# both: the harmonic/percussive separation's voice and the mask's, side by side after the mix's
FRONT_BOTH = "separation+mask"
OFFLINE_FRONTS = ("", FRONT_SEPARATION, FRONT_MASK, FRONT_BOTH)
LIVE_FRONT_STEADY = "steady"
SEP_DIM = NET_SETTINGS.n_coefs + 2
# The steady front-end plus a pitch cue that is not an MFCC (issue 15, ninth round; off by
# default): the normalised autocorrelation peak of what the suppressor left (a voice's
# partials move, a band's held notes were taken out) and the log pitch at that peak; the
# stacked offsets show the net how the pitch moves (vibrato, glides) against steady notes.
LIVE_FRONT_PITCH = "steady-pitch"
PITCH_DIM = 2
PITCH_HZ = (80.0, 900.0)


def _front_dim(front: str) -> int:
    """Columns the live front-end appends to each hop vector."""
    return {LIVE_FRONT_STEADY: SEP_DIM, LIVE_FRONT_PITCH: SEP_DIM + PITCH_DIM}.get(front, 0)


def _pitch_lags(plan, sr: int) -> tuple[int, int]:
    # the circular autocorrelation of an nfft-point spectrum: lags under nfft/2 only
    return max(int(sr / PITCH_HZ[1]), 1), min(int(sr / PITCH_HZ[0]), plan.nfft // 2 - 1)


def _pitch_cols(cleaned: np.ndarray, plan, sr: int) -> np.ndarray:
    """(n, PITCH_DIM): harmonicity (autocorrelation peak / energy, 0..1) and log2(f0 / 200 Hz)
    of the suppressor's output (n, bins); `_pitch_hop` is one row of it."""
    lo, hi = _pitch_lags(plan, sr)
    ac = fft.irfft(cleaned, plan.nfft, axis=1)[:, : hi + 1]
    k = np.argmax(ac[:, lo:], axis=1)
    peak = ac[np.arange(len(ac)), lo + k]
    h = np.clip(peak / np.maximum(ac[:, 0], 1e-20), 0.0, 1.0)
    return np.stack([h, np.log2(sr / (lo + k) / 200.0)], axis=1).astype(np.float32)


def _pitch_hop(cleaned: np.ndarray, plan, sr: int, out: np.ndarray) -> None:
    lo, hi = _pitch_lags(plan, sr)
    ac = np.fft.irfft(cleaned, plan.nfft)[: hi + 1]
    k = int(np.argmax(ac[lo:]))
    out[0] = min(max(float(ac[lo + k]) / max(float(ac[0]), 1e-20), 0.0), 1.0)
    out[1] = math.log2(sr / (lo + k) / 200.0)


def _sep_vectors(power: np.ndarray, cleaned: np.ndarray, sr: int, warp: float = 1.0) -> np.ndarray:
    """(n, SEP_DIM): the cepstrum of what the live front-end left, its log flatness and how
    much of the hop's energy it kept (dB): over a band in a pause, little. `warp` (training
    only): the cepstrum as if every formant were `warp` times higher, as the mix's."""
    plan = _plan(NET_SETTINGS, sr)
    cep = (plan if warp == 1.0 else _plan(NET_SETTINGS, sr, warp)).cepstrum(cleaned)
    band = cleaned[:, plan.flat_slice] + 1e-20
    flat = np.exp(np.mean(np.log(band), axis=1)) / np.mean(band, axis=1)
    kept = 10 * np.log10((cleaned.sum(axis=1) + 1e-20) / (power.sum(axis=1) + 1e-20))
    return np.concatenate(
        [cep, np.log10(np.maximum(flat, 1e-4))[:, None], np.maximum(kept, -40.0)[:, None] / 10],
        axis=1,
    ).astype(np.float32)


def _sep_vector_hop(
    plan, power: np.ndarray, cleaned: np.ndarray, out: np.ndarray, cep: np.ndarray | None = None
) -> None:
    """`_sep_vectors` of one hop (power, cleaned: (bins,)), written into `out` (SEP_DIM,).
    `cep`: the cleaned hop's cepstrum where already computed."""
    nc = NET_SETTINGS.n_coefs
    out[:nc] = plan.cepstrum_hop(cleaned) if cep is None else cep
    band = cleaned[plan.flat_slice] + 1e-20
    flat = math.exp(float(np.log(band).sum()) / plan.flat_n) / (float(band.sum()) / plan.flat_n)
    kept = 10 * math.log10((float(cleaned.sum()) + 1e-20) / (float(power.sum()) + 1e-20))
    out[nc] = math.log10(max(flat, 1e-4))
    out[nc + 1] = max(kept, -40.0) / 10


def live_inputs(
    f: FrameFeatures,
    sr: int,
    cmn_init: np.ndarray,
    offsets: tuple[int, ...] = LIVE_OFFSETS,
    front: str = "",
    cmn_prior: int = CMN_PRIOR,
    voiced: np.ndarray | None = None,
    front_warp: float = 1.0,
    front_cols: np.ndarray | None = None,
) -> np.ndarray:
    """The live net's input rows for the hops `f` (batch; `LiveNet` gives the same hop by hop).
    With the steady-suppression front-end `f` must carry its power spectra (keep_power).
    `voiced`: the hops that may move the running mean (`VowelNet.live_cmn_voiced`).
    `front_warp` (training only): the front-end's cepstrum formant-warped as `f`'s were.
    `front_cols`: `live_front_columns(f, sr, front)` if already made."""
    v = hop_vectors(f, running_cmn(f, cmn_init, cmn_prior, voiced))
    if front in (LIVE_FRONT_STEADY, LIVE_FRONT_PITCH):
        if front_cols is None:
            front_cols = live_front_columns(f, sr, front, front_warp)
        v = np.concatenate([v, front_cols], axis=1)
    return stack(v, offsets)


def live_front_columns(
    f: FrameFeatures, sr: int, front: str, front_warp: float = 1.0
) -> np.ndarray:
    """The live front-end's columns of `live_inputs` (they need only the hops' power spectra:
    the render makes them beside the offline net)."""
    from audio.voice_separation import suppress_steady

    p = f.power.astype(np.float64)
    c = suppress_steady(p)
    cols = [_sep_vectors(p, c, sr, front_warp)]
    if front == LIVE_FRONT_PITCH:
        cols.append(_pitch_cols(c, _plan(NET_SETTINGS, sr), sr))
    return np.concatenate(cols, axis=1)


def separated_features(
    y: np.ndarray, sr: int, warp: float = 1.0, residual: np.ndarray | None = None
) -> FrameFeatures:
    """The separated voice's features (`residual`: `voice_residual(y, sr)` if already made),
    as `offline_inputs` reads them: a task of its own, so the render can make them beside the
    mix's features (`residual_f`)."""
    from audio.voice_separation import voice_residual

    if residual is None:
        residual = voice_residual(y, sr)
    return mfcc_frames(residual, sr, NET_SETTINGS, warp=warp)


def offline_inputs(
    y: np.ndarray,
    sr: int,
    f: FrameFeatures,
    prior: np.ndarray | None,
    front: str = "",
    warp: float = 1.0,
    offsets: tuple[int, ...] = OFFLINE_OFFSETS,
    cvn: np.ndarray | None = None,
    cvn_prior: bool = False,
    residual: np.ndarray | None = None,
    residual_f: FrameFeatures | None = None,
    mask: VoiceMask | None = None,
    front_priors: list | None = None,
    front_prior_hops: int = CMN_PRIOR,
) -> np.ndarray:
    """The offline net's input rows for the hops `f` of `y` (the same in training and use).

    With the separation front-end (`audio.voice_separation`) each hop carries the separated
    voice's hop vector next to the mix's: over a band the net reads the vowel and the voice
    from what is left of the voice, on clean speech it still has the untouched features.
    `cvn` (the training's spread, `VowelNet.offline_cvn`): the mix's cepstra are also divided
    by the clip's spread (`clip_cvn`; starting from `cvn` where `cvn_prior`, as in use), the
    separated voice's by its own. `residual`: `voice_residual(y, sr)` if already made;
    `residual_f`: its features too (`separated_features`: the render makes them beside the
    other features; not with a `warp`). With the learned mask front-end (`FRONT_MASK`) the
    separated voice is what `mask` keeps of `f`'s power spectra (`keep_power`); with
    `FRONT_BOTH` both separated voices follow the mix's vector. `front_priors`: each separated
    voice's training mean and spread (`VowelNet.front_priors`), where its clip's own start (as
    `prior` and `cvn` do for the mix's), in the order the vectors follow, worth
    `front_prior_hops` hops."""
    m = clip_cmn(f, prior)
    if cvn is not None:
        m = clip_cvn(m, f, cvn if cvn_prior else None)
    v = hop_vectors(f, m)
    parts = [v]
    priors = iter(front_priors or ())
    if front in (FRONT_SEPARATION, FRONT_BOTH):
        fs = residual_f if residual_f is not None else separated_features(y, sr, warp, residual)
        parts.append(_front_vectors(fs, cvn, next(priors, None), front_prior_hops))
    if front in (FRONT_MASK, FRONT_BOTH):
        if mask is None:
            raise ValueError("the mask front-end needs its mask")
        fs = masked_features(f, sr, mask, NET_SETTINGS, warp)
        parts.append(_front_vectors(fs, cvn, next(priors, None), front_prior_hops))
    return stack(np.concatenate(parts, axis=1) if len(parts) > 1 else v, offsets)


def _front_vectors(
    fs: FrameFeatures, cvn: np.ndarray | None, prior: tuple | None = None, weight: int = CMN_PRIOR
) -> np.ndarray:
    """A front-end's separated voice as hop vectors, normalised by its own clip statistics;
    with a `prior` (its training mean and spread) they start from it, as the mix's do: a short
    clip of one held vowel must not become its own mean, which erases the vowel."""
    ms = clip_cmn(fs, None if prior is None else prior[0], weight)
    if cvn is not None:
        ms = clip_cvn(ms, fs, None if prior is None else prior[1], weight)
    return hop_vectors(fs, ms)


def stack(v: np.ndarray, offsets: tuple[int, ...]) -> np.ndarray:
    """Rows k of v at k + offset for each offset, side by side (edges held)."""
    n = len(v)
    idx = np.clip(np.arange(n)[:, None] + np.asarray(offsets)[None, :], 0, max(n - 1, 0))
    return v[idx].reshape(n, -1)


def probs_one(z: np.ndarray) -> tuple[float, np.ndarray]:
    """`probs` of one hop's 6 logits, on Python floats: on 6 numbers numpy's calls cost more
    than their arithmetic (the live MLP's and Tcn's hop end here; the mel net's compiled hop
    does the same sums, `audio.mel_conv_kernels.hop_probs`)."""
    z = z.tolist()
    pv = 1.0 / (1.0 + math.exp(-min(max(z[0], -30.0), 30.0)))
    top = max(z[1:])
    e = [math.exp(v - top) for v in z[1:]]
    tot = sum(e)
    return pv, np.array([v / tot for v in e])


def probs(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 6 logits of each row (n, 6) -> (p(voice) (n,), p(A I U E O) (n, 5))."""
    pv = 1.0 / (1.0 + np.exp(-np.minimum(np.maximum(z[:, 0], -30), 30)))  # np.clip's
    e = np.exp(z[:, 1:] - z[:, 1:].max(axis=1, keepdims=True))
    return pv, e / e.sum(axis=1, keepdims=True)


@dataclass
class Mlp:
    mean: np.ndarray
    std: np.ndarray
    layers: list[tuple[np.ndarray, np.ndarray]]
    _folded: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = (np.asarray(x, np.float32) - self.mean) / self.std
        for i, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if i < len(self.layers) - 1:
                np.maximum(h, 0.0, out=h)
        return h

    def folded_first_layer(self) -> tuple[np.ndarray, np.ndarray]:
        """(weights, bias) of the first layer with the input scaling folded in (kept): the live
        hop's, numpy's `predict_one` and the compiled `audio.live_net_kernels`'."""
        if self._folded is None:
            w, b = self.layers[0]
            s = (1.0 / self.std).astype(np.float32)
            self._folded = (w * s[:, None], (b - (self.mean * s) @ w).astype(np.float32))
        return self._folded

    def predict_one(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """`predict` of one row (the live hop): the input scaling folded into the first layer
        and the sigmoid and softmax on Python floats — on 6 outputs numpy's calls cost more
        than their arithmetic. The same numbers up to float32 rounding."""
        w0, b0 = self.folded_first_layer()
        h = np.asarray(x, np.float32).reshape(-1) @ w0 + b0
        for w, b in self.layers[1:]:
            np.maximum(h, 0.0, out=h)
            h = h @ w + b
        return probs_one(h)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """-> (p(voice) (n,), p(A I U E O) (n, 5))."""
        return probs(self.logits(np.atleast_2d(x)))


@dataclass
class Tcn:
    """A temporal convolutional net over the hop vectors (not stacked rows): `Mlp`'s interface
    for a whole clip in time order (`predict`, `logits`), and hop by hop (`stepper`).

    Each layer is a kernel-`k` convolution at its dilation, edges held (the first/last input
    repeated: torch's replicate padding), ReLU, and from the second layer on a residual add;
    a 1x1 head gives the 6 logits. `causal`: only past hops (live; the receptive field
    ``(k - 1) * sum(dilations)`` hops back), else centred (offline: half that each way). Why:
    stacked frames give the net a few fixed offsets; the convolutions learn their own context,
    ~300 ms and more, for the cost of a few small matrix products per hop."""

    mean: np.ndarray
    std: np.ndarray
    convs: list[tuple[np.ndarray, np.ndarray]]  # (k, c_in, c_out), (c_out,)
    dilations: tuple[int, ...]
    head: tuple[np.ndarray, np.ndarray]  # (c, 6), (6,)
    causal: bool = True

    def _taps(self, layer: int) -> np.ndarray:
        """Offsets (hops) of one layer's kernel taps, oldest first."""
        k, d = len(self.convs[layer][0]), self.dilations[layer]
        off = np.arange(k) * d
        return off - off[-1] if self.causal else off - off[-1] // 2

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = (np.asarray(x, np.float32) - self.mean) / self.std
        n = len(h)
        t = np.arange(n)
        for i, (w, b) in enumerate(self.convs):
            out = np.broadcast_to(b, (n, len(b))).copy()
            for j, o in enumerate(self._taps(i)):
                out += h[np.clip(t + o, 0, max(n - 1, 0))] @ w[j]
            np.maximum(out, 0.0, out=out)
            h = out + h if i > 0 else out
        return h @ self.head[0] + self.head[1]

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """-> (p(voice) (n,), p(A I U E O) (n, 5)) for the hops `x` (n, c), in time order."""
        return probs(self.logits(np.atleast_2d(x)))

    def stepper(self) -> TcnStepper:
        if not self.causal:
            raise ValueError("a centred (offline) Tcn cannot run hop by hop")
        return TcnStepper(self)


class TcnStepper:
    """A causal `Tcn` hop by hop. Layer i keeps its last span_i inputs twice over in a buffer
    of 2 span_i rows (row t at t mod span_i and at that + span_i), so its taps — hops t - j d
    — are one strided slice: few numpy calls per hop, which is what a hop costs here. The input
    scaling is folded into the first layer. `step(x, commit=False)` changes nothing (a
    provisional hop). The same numbers as `Tcn.predict` over the stream up to float32
    rounding."""

    def __init__(self, net: Tcn) -> None:
        s = (1.0 / net.std).astype(np.float32)
        w0, b0 = net.convs[0]
        convs = [(w0 * s[None, :, None], b0 - np.einsum("c,kco->o", net.mean * s, w0))]
        self.layers = []
        for i, (w, b) in enumerate([*convs, *net.convs[1:]]):
            k, d = len(w), net.dilations[i]
            n = (k - 1) * d + 1
            buf = np.zeros((2 * n, w.shape[1]), np.float32)
            self.layers.append((w.reshape(-1, w.shape[2]).astype(np.float32),
                                np.asarray(b, np.float32), k, d, n, buf))  # fmt: skip
        self.head = net.head
        self.count = 0

    def step(self, x: np.ndarray, commit: bool = True) -> tuple[float, np.ndarray]:
        h = np.asarray(x, np.float32).reshape(-1)
        c = self.count
        for i, (w, b, k, d, n, buf) in enumerate(self.layers):
            if c == 0:
                if commit:
                    buf[:] = h  # edges held
                rows = np.tile(h, k)
            else:
                q = c % n + n  # this hop's row (the mirror), its taps q - j d
                if commit:
                    buf[q] = h
                    buf[q - n] = h
                    rows = buf[q - (k - 1) * d : q + 1 : d].reshape(-1)
                else:
                    rows = np.concatenate((buf[q - (k - 1) * d : q : d].reshape(-1), h))
            out = rows @ w
            out += b
            np.maximum(out, 0.0, out=out)
            h = out + h if i > 0 else out
        if commit:
            self.count += 1
        return probs_one(h @ self.head[0] + self.head[1])


@dataclass
class VowelNet:
    live: Mlp | Tcn | MelConv  # a MelConv live net is causal (`audio.mel_conv.MelConvStepper`)
    offline: Mlp | Tcn | MelConv
    info: str = ""
    cmn_init: np.ndarray = field(default_factory=lambda: np.zeros(NET_SETTINGS.n_coefs))
    settings_win_s: float = NET_SETTINGS.win_ms / 1000.0
    # "" or one of OFFLINE_FRONTS: the offline nets also hear the voice as the front-end(s)
    # separate it
    front: str = ""
    live_offsets: tuple[int, ...] = LIVE_OFFSETS  # the live net's context (past hops only)
    live_front: str = ""  # "", LIVE_FRONT_STEADY or LIVE_FRONT_PITCH
    offline_offsets: tuple[int, ...] = OFFLINE_OFFSETS  # the offline net's context
    live_cmn_prior: int = LIVE_CMN_PRIOR_OLD  # the live running mean's start weight (hops)
    live_cmn_voiced: bool = False  # only hops heard as a voice move the live mean
    # more offline nets on the same inputs, trained on other corpora or of another kind (a
    # `audio.mel_conv.MelConv`): their probabilities and `offline`'s are averaged (offline
    # only: the live hop pays for one net)
    offline_more: list[Mlp | Tcn | MelConv] = field(default_factory=list)
    # the training clips' cepstral spread (n_coefs,): where set, the offline net's cepstra are
    # also divided by the clip's own spread (`clip_cvn`); None: mean normalisation only
    offline_cvn: np.ndarray | None = None
    mask: VoiceMask | None = None  # the learned mask of `FRONT_MASK` / `FRONT_BOTH`
    # Offline nets that read only the first `voice_blocks` hop-vector blocks (with FRONT_BOTH:
    # the mix's and the harmonic/percussive voice's) and give p(voice) alone, averaged; the
    # nets above still give the vowels. Why: the mask's voice reads vowels better over a band
    # but hears a backing it never trained on as a voice in the pauses (docs/BENCHMARKS.md).
    offline_voice: list[Mlp | Tcn | MelConv] = field(default_factory=list)
    voice_blocks: int = 0
    # each front-end's separated voice: its training mean cepstra and spread (`front_priors`,
    # in `offline_inputs`' order), where its clip statistics start; empty: its clip's own alone;
    # None for one voice: that voice's alone
    front_priors: list[tuple[np.ndarray, np.ndarray] | None] = field(default_factory=list)
    front_prior_hops: int = CMN_PRIOR  # the hops the priors are worth
    # more live nets on the live hop vectors (causal: a MelConv, its own offsets): their
    # p(vowel) is averaged with the live net's; p(voice), and so the gate's timing, is the live
    # net's alone (issue 15, thirty-second round: the mel net opened later, read vowels better)
    live_more: list[Tcn | MelConv] = field(default_factory=list)

    @property
    def needs_power(self) -> bool:
        """Whether the nets read the hops' power spectra (a live front-end, the mask)."""
        return bool(self.live_front) or self.front in (FRONT_MASK, FRONT_BOTH)

    def offline_hop_probs(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(p(voice) (n,), p(vowel) (n, 5)) of one clip's offline hop vectors `v` (n, dim): the
        offline nets averaged, each MLP on the hops stacked at `offline_offsets`, each MelConv
        over the clip's hops at its own; p(voice) from `offline_voice` where there are some."""
        pv, pw = self._averaged([self.offline, *self.offline_more], v)
        if self.offline_voice:
            pv, _ = self._averaged(self.offline_voice, v[:, : self.voice_blocks * HOP_DIM])
        return pv, pw

    def _averaged(self, nets: list, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = None
        if not all(isinstance(m, MelConv) for m in nets):
            x = stack(v, self.offline_offsets)
        pv = pw = 0.0
        for m in nets:
            # a MelConv convolves over the clip's hops at its own offsets
            pv2, pw2 = m.predict_hops(v) if isinstance(m, MelConv) else m.predict(x)
            pv, pw = pv + pv2, pw + pw2
        return pv / len(nets), pw / len(nets)

    def live_probs(self, hops: np.ndarray, vowels: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(p(voice) (n,), p(vowel) (n, 5)) of the live nets over a clip's live hop vectors
        (`live_inputs` at offsets (0,)), as `LiveNet` gives them hop by hop. `vowels` False:
        p(vowel) is the live net's alone (`live_more` not run: only p(voice) is wanted)."""
        pv, pw = self.live.predict(stack(hops, self.live_offsets))
        if not vowels or not self.live_more:
            return pv, pw
        for m in self.live_more:
            pw = pw + m.predict(hops)[1]
        return pv, pw / (1 + len(self.live_more))

    def offline_probs(
        self,
        y: np.ndarray,
        sr: int,
        f: FrameFeatures | None = None,
        live_weight: float = 0.5,
        residual: np.ndarray | None = None,
        residual_f: FrameFeatures | None = None,
        live_front: np.ndarray | Future[np.ndarray] | ChunkedRows | None = None,
        vowel_weight: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every hop of `y`: (end sample, p(voice), p(vowel) (n, 5)) with the offline net.
        `f`: the hops' `NET_SETTINGS` features if already computed (with their power spectra
        where the live net has a front-end); `residual` / `residual_f`: the separated voice or
        its features (`separated_features`), if already made (`offline_inputs`); `live_front`:
        the live net's `live_front_columns` of `f`, or what gives them from `result()` (a
        future, `audio.time_chunks.ChunkedRows`). p(voice) is the
        offline net's and the live net's, geometrically weighted: the live net's weight
        `live_weight`; p(vowel) the same with `vowel_weight` (the live net not run where both
        are 0)."""
        if f is None:
            f = mfcc_frames(y, sr, NET_SETTINGS, keep_power=self.needs_power)
        v = offline_inputs(y, sr, f, self.cmn_init, self.front, offsets=(0,),
                           cvn=self.offline_cvn, cvn_prior=True, residual=residual,
                           residual_f=residual_f, mask=self.mask,
                           front_priors=self.front_priors,
                           front_prior_hops=self.front_prior_hops)  # fmt: skip
        pv, pw = self.offline_hop_probs(v)
        # The clip's mean is the wrong reference where the clip is mostly band (an intro, an
        # instrumental): the live net, whose running mean starts from the training mean,
        # must agree that a voice sounds.
        # (its mean moved by the hops the offline net hears a voice in, where it is voice-gated)
        if live_weight <= 0 and vowel_weight <= 0:
            return f.end, pv, pw
        voiced = np.r_[False, pv[:-1] > VOICED_P] if self.live_cmn_voiced else None
        if hasattr(live_front, "result"):  # a Future, or chunks being made
            live_front = live_front.result()
        pl, plw = self.live_probs(
            live_inputs(
                f, sr, self.cmn_init, (0,), self.live_front, self.live_cmn_prior, voiced,
                front_cols=live_front,
            ),
            vowels=vowel_weight > 0,
        )  # fmt: skip
        if vowel_weight > 0:
            # the live net hears 80 ms of the past and no future, yet reads unheard
            # synthesizers' and sung vowels better than the offline nets (docs/BENCHMARKS.md)
            pw = pw ** (1 - vowel_weight) * plw**vowel_weight
            pw = pw / pw.sum(axis=1, keepdims=True)
        if live_weight == 0.5:  # the same numbers as before the weight was a setting
            return f.end, np.sqrt(pv * pl), pw
        return f.end, pv ** (1 - live_weight) * pl**live_weight, pw

    def save(self, path: str | os.PathLike) -> None:
        arrays: dict[str, np.ndarray] = {
            "info": np.array(self.info),
            "front": np.array(self.front),
            "live_front": np.array(self.live_front),
            "live_offsets": np.asarray(self.live_offsets, np.int64),
            "offline_offsets": np.asarray(self.offline_offsets, np.int64),
            "live_cmn_prior": np.asarray(self.live_cmn_prior, np.int64),
            "live_cmn_voiced": np.asarray(self.live_cmn_voiced),
            "cmn_init": self.cmn_init.astype(np.float32),
        }
        if self.offline_cvn is not None:
            arrays["offline_cvn"] = np.asarray(self.offline_cvn, np.float32)
        if self.mask is not None:
            arrays.update(mask_arrays("mask", self.mask))
        for i, prior in enumerate(self.front_priors):
            mean, spread = prior if prior is not None else (np.zeros(0), np.zeros(0))
            arrays[f"front{i}_cmn"] = np.asarray(mean, np.float32)
            arrays[f"front{i}_cvn"] = np.asarray(spread, np.float32)
        if self.front_priors:
            arrays["front_prior_hops"] = np.asarray(self.front_prior_hops, np.int64)
        more = [(f"offline{i + 1}", m) for i, m in enumerate(self.offline_more)]
        more += [(f"live{i + 1}", m) for i, m in enumerate(self.live_more)]
        more += [(f"voice{i}", m) for i, m in enumerate(self.offline_voice)]
        if self.offline_voice:
            arrays["voice_blocks"] = np.asarray(self.voice_blocks, np.int64)
        for name, m in (("live", self.live), ("offline", self.offline), *more):
            if isinstance(m, MelConv):
                arrays.update(mel_conv_arrays(name, m))
                continue
            arrays[f"{name}_mean"] = m.mean.astype(np.float32)
            arrays[f"{name}_std"] = m.std.astype(np.float32)
            if isinstance(m, Tcn):
                arrays[f"{name}_kind"] = np.array("tcn")
                arrays[f"{name}_dilations"] = np.asarray(m.dilations, np.int64)
                arrays[f"{name}_causal"] = np.asarray(m.causal)
                for i, (w, b) in enumerate(m.convs):
                    arrays[f"{name}_c{i}_w"] = w.astype(np.float16)
                    arrays[f"{name}_c{i}_b"] = b.astype(np.float16)
                arrays[f"{name}_head_w"] = m.head[0].astype(np.float16)
                arrays[f"{name}_head_b"] = m.head[1].astype(np.float16)
                continue
            arrays.update(dense_arrays(name, m.layers))
        with replacing(path) as tmp:
            np.savez_compressed(tmp, **arrays)


def load_net(path: str | os.PathLike = DEFAULT_NET) -> VowelNet:
    with np.load(path) as z:
        offs = tuple(int(o) for o in z["live_offsets"]) if "live_offsets" in z else LIVE_OFFSETS
        oo = (
            tuple(int(o) for o in z["offline_offsets"])
            if "offline_offsets" in z
            else OFFLINE_OFFSETS
        )
        nets = []
        names = ["live", "offline"]
        while any(f"offline{len(names) - 1}_{k}" in z for k in ("mean", "kind")):
            names.append(f"offline{len(names) - 1}")
        n_off = len(names)
        while any(f"voice{len(names) - n_off}_{k}" in z for k in ("mean", "kind")):
            names.append(f"voice{len(names) - n_off}")
        n_voice = len(names)
        while any(f"live{len(names) - n_voice + 1}_{k}" in z for k in ("mean", "kind")):
            names.append(f"live{len(names) - n_voice + 1}")
        for name in names:
            kind = str(z[f"{name}_kind"]) if f"{name}_kind" in z else "mlp"
            if kind == "tcn":
                nets.append(_load_tcn(z, name, path))
                continue
            if kind == "melconv":
                nets.append(load_mel_conv(z, name, path))
                continue
            if kind != "mlp":
                raise ValueError(
                    f"{path}: {name}_kind: unknown net {kind!r} (expected 'tcn' or 'melconv')"
                )
            nets.append(Mlp(z[f"{name}_mean"], z[f"{name}_std"], read_dense(z, name, path)))
        front = str(z["front"]) if "front" in z else ""
        if front not in OFFLINE_FRONTS:
            raise ValueError(
                f"{path}: unknown front-end {front!r} (expected one of {OFFLINE_FRONTS[1:]})"
            )
        mask = load_mask(z, "mask", path) if front in (FRONT_MASK, FRONT_BOTH) else None
        cmn = z["cmn_init"].astype(np.float64)
        if max(offs) != 0:
            raise ValueError(f"{path}: the live net's offsets must end at 0 (got {offs})")
        if isinstance(nets[0], Tcn | MelConv) and (offs != (0,) or not nets[0].causal):
            raise ValueError(f"{path}: a convolutional live net must be causal, offsets (0,)")
        for name, m in zip(names[n_voice:], nets[n_voice:], strict=True):
            if not (isinstance(m, MelConv | Tcn) and m.causal):
                raise ValueError(f"{path}: {name}_kind: expected a causal convolutional net "
                                 "(more live nets read the hop vectors, not stacked rows)")  # fmt: skip
        lf = str(z["live_front"]) if "live_front" in z else ""
        if lf not in ("", LIVE_FRONT_STEADY, LIVE_FRONT_PITCH):
            raise ValueError(
                f"{path}: unknown live front-end {lf!r} "
                f"(expected {LIVE_FRONT_STEADY!r} or {LIVE_FRONT_PITCH!r})"
            )
        if any(isinstance(m, Tcn) for m in nets[1:]) and oo != (0,):
            raise ValueError(f"{path}: a convolutional offline net takes offline_offsets (0,)")
        prior = int(z["live_cmn_prior"]) if "live_cmn_prior" in z else LIVE_CMN_PRIOR_OLD
        if not 1 <= prior <= CMN_TAU:
            raise ValueError(f"{path}: live_cmn_prior must be 1..{CMN_TAU} hops (got {prior})")
        voiced = bool(z["live_cmn_voiced"]) if "live_cmn_voiced" in z else False
        cvn = z["offline_cvn"].astype(np.float64) if "offline_cvn" in z else None
        if cvn is not None and (cvn.shape != cmn.shape or not np.all(cvn > 0)):
            raise ValueError(
                f"{path}: offline_cvn must be {cmn.shape[0]} positive spreads (got {cvn.shape})"
            )
        front_priors = []
        while f"front{len(front_priors)}_cmn" in z:
            i = len(front_priors)
            if f"front{i}_cvn" not in z:
                raise ValueError(f"{path}: front{i}_cvn: missing (front{i}_cmn has no spread)")
            mean, spread = z[f"front{i}_cmn"].astype(np.float64), z[f"front{i}_cvn"]
            if mean.shape == spread.shape == (0,):  # that voice starts from its clip alone
                front_priors.append(None)
                continue
            if mean.shape != cmn.shape or spread.shape != cmn.shape or not np.all(spread > 0):
                raise ValueError(f"{path}: front{i}_cmn / _cvn must be {cmn.shape[0]} means and "
                                 f"positive spreads (got {mean.shape}, {spread.shape})")  # fmt: skip
            front_priors.append((mean, spread.astype(np.float64)))
        if len(front_priors) > (2 if front == FRONT_BOTH else 1 if front else 0):
            raise ValueError(f"{path}: {len(front_priors)} front priors for front-end {front!r}")
        prior_hops = int(z["front_prior_hops"]) if "front_prior_hops" in z else CMN_PRIOR
        if not 1 <= prior_hops <= CMN_TAU:
            raise ValueError(f"{path}: front_prior_hops must be 1..{CMN_TAU} (got {prior_hops})")
        blocks = int(z["voice_blocks"]) if "voice_blocks" in z else 0
        if n_voice > n_off and not 1 <= blocks <= 3:
            raise ValueError(f"{path}: voice_blocks must be 1..3 hop-vector blocks (got {blocks})")
        return VowelNet(nets[0], nets[1], str(z["info"]), cmn, front=front, live_offsets=offs,
                        live_front=lf, offline_offsets=oo, live_cmn_prior=prior,
                        live_cmn_voiced=voiced, offline_more=nets[2:n_off],
                        offline_cvn=cvn, mask=mask, offline_voice=nets[n_off:n_voice],
                        live_more=nets[n_voice:],
                        voice_blocks=blocks, front_priors=front_priors,
                        front_prior_hops=prior_hops)  # fmt: skip


def _load_tcn(z, name: str, path) -> Tcn:
    convs = []
    while f"{name}_c{len(convs)}_w" in z:
        i = len(convs)
        convs.append(
            (z[f"{name}_c{i}_w"].astype(np.float32), z[f"{name}_c{i}_b"].astype(np.float32))
        )
    dil = tuple(int(d) for d in z[f"{name}_dilations"])
    if not convs or len(dil) != len(convs) or min(dil) < 1:
        raise ValueError(
            f"{path}: {name}_dilations: expected one dilation >= 1 per convolution "
            f"({len(convs)}), got {dil}"
        )
    head = (z[f"{name}_head_w"].astype(np.float32), z[f"{name}_head_b"].astype(np.float32))
    return Tcn(z[f"{name}_mean"], z[f"{name}_std"], convs, dil, head, bool(z[f"{name}_causal"]))


TEMPLATE_WEIGHT = 0.5


def fuse(net_probs: np.ndarray, template_probs: np.ndarray) -> np.ndarray:
    """A calibrated profile's template probabilities and the net's, as one vote (A..O).

    The templates were made from the user's own sustained vowels, the net from many voices'
    sentences: the product keeps what both agree on (`TEMPLATE_WEIGHT` tempers the sharper
    templates)."""
    p = np.asarray(net_probs, np.float64) * np.maximum(template_probs, 1e-6) ** TEMPLATE_WEIGHT
    return p / p.sum(axis=-1, keepdims=True)


_SHIPPED: dict[str, VowelNet] = {}


def check_lipsync_model(model: object) -> None:
    """ValueError (a line to show the user) unless `model` names a shipped net whose file is
    here: a key of `LIPSYNC_MODELS`; "default" may be missing (the formant engine stands in)."""
    if not isinstance(model, str) or model not in LIPSYNC_MODELS:
        raise ValueError(f"unknown lip-sync model; expected one of {', '.join(LIPSYNC_MODELS)}")
    if model != "default" and not LIPSYNC_MODELS[model].exists():
        raise ValueError(f"its file {LIPSYNC_MODELS[model]} is missing (a broken install)")


def shipped_net(model: str = "default") -> VowelNet | None:
    """The shipped network of `model` (a key of `LIPSYNC_MODELS`; cached), or None where the
    default's file is missing (another model's missing file: `check_lipsync_model`'s error)."""
    check_lipsync_model(model)
    if model not in _SHIPPED and LIPSYNC_MODELS[model].exists():
        _SHIPPED[model] = load_net(LIPSYNC_MODELS[model])
    return _SHIPPED.get(model)


def default_net() -> VowelNet | None:
    """The shipped default network (cached), or None where the file is missing."""
    return shipped_net("default")


def resolve_net(net, profile) -> tuple[VowelNet | None, bool]:
    """(the net an engine uses, whether its vowels count) for the engines' `net` argument:
    "auto" = the shipped default net, a key of `LIPSYNC_MODELS` = that shipped net, both for
    voice activity and for vowels, alone when the profile names a net (the shipped profile),
    voting with a calibrated profile's templates otherwise (`fuse`); a VowelNet = that net
    for both; None = no net."""
    if not isinstance(net, str):
        return net, net is not None
    model = "default" if net == "auto" else net
    if model not in LIPSYNC_MODELS:
        raise ValueError(f"net must be 'auto', a lip-sync model, None or a VowelNet, got {net!r}")
    return shipped_net(model), bool(profile.extra.get("vowel_net"))


class LiveNet:
    """The live net hop by hop: keeps the last hop vectors its offsets need.

    The shipped configuration (the steady front-end and an MLP) runs its hop compiled, in one
    call (`audio.live_net_kernels`); `compiled=False` keeps the numpy path, which every other
    configuration takes (the two give the same numbers up to float rounding)."""

    def __init__(
        self,
        mlp: Mlp | Tcn | MelConv,
        cmn_init: np.ndarray,
        offsets: tuple[int, ...] = LIVE_OFFSETS,
        front: str = "",
        sample_rate: int = 16000,
        cmn_prior: int = CMN_PRIOR,
        cmn_voiced: bool = False,
        more: list = (),
        compiled: bool = True,
        more_voice: float = 0.0,
    ) -> None:
        self.mlp = mlp
        # a convolutional net keeps its own history (its rings); it reads this hop's vector
        self.conv = mlp.stepper() if isinstance(mlp, Tcn | MelConv) else None
        if self.conv is not None and tuple(offsets) != (0,):
            raise ValueError(f"a convolutional live net takes offsets (0,), got {offsets}")
        self.more = [m.stepper() for m in more]  # `VowelNet.live_more`: their vowels averaged
        self.more_voice = float(more_voice) if self.more else 0.0  # their p(voice)'s share
        self.cmn = RunningCmn(cmn_init, cmn_prior)
        self.cmn_voiced = cmn_voiced
        self.voiced = False  # the last committed hop's p(voice) > VOICED_P
        self.span = -min(offsets) + 1
        self.sr = int(sample_rate)
        self.sep = None
        self.pitch = front == LIVE_FRONT_PITCH
        if front in (LIVE_FRONT_STEADY, LIVE_FRONT_PITCH):
            from audio.voice_separation import SteadySuppressor

            self.sep = SteadySuppressor()
            self.plan = _plan(NET_SETTINGS, self.sr)
            self._rows = np.empty((2, self.plan.nfft // 2 + 1))  # the mix's and what is left
        dim = HOP_DIM + _front_dim(front)
        self.ring = np.zeros((self.span, dim), np.float32)
        self.count = 0
        self._idx = np.asarray(offsets) + self.span - 1
        self.compiled = None
        if (
            compiled
            and self.sep is not None
            and not self.pitch
            and isinstance(mlp, Mlp)
            and len(mlp.layers) > 1
        ):
            from audio.live_net_kernels import CompiledLiveHop

            self.compiled = CompiledLiveHop(mlp, cmn_init, cmn_prior, offsets, self.plan, dim)
            self._v = np.empty(dim, np.float32)

    def step(self, cep, level_db: float, per: float, flat: float, commit: bool = True, power=None):
        """One hop -> (p(voice), p(vowel) (5,)). commit=False leaves the history unchanged.
        `power`: the hop's power spectrum (needed with the steady-suppression front-end); with
        it `cep` may be None: the mix's cepstrum is then computed here, in one filterbank pass
        with the cleaned spectrum's (one numpy call sequence for both rows)."""
        may_move = self.voiced or not self.cmn_voiced
        if self.compiled is not None:
            v = self._v
            pv, pw = self.compiled.step(cep, level_db, per, flat, commit, power, may_move, v)
        else:
            pv, pw, v = self._step_numpy(cep, level_db, per, flat, commit, power, may_move)
        if self.more:
            more_pv = 0.0
            for m in self.more:
                mv, mw = m.step(v, commit)
                pw = pw + mw
                more_pv += mv
            pw = pw / (1 + len(self.more))
            if self.more_voice > 0.0:
                pv += self.more_voice * (more_pv / len(self.more) - pv)
        if commit:
            self.voiced = pv > VOICED_P
        return pv, pw

    def _step_numpy(self, cep, level_db, per, flat, commit, power, may_move) -> tuple:
        """`step` before the nets beside: (p(voice), p(vowel), this hop's vector)."""
        sep_cep = None
        if self.sep is not None:
            p = np.asarray(power, np.float64).reshape(-1)
            cleaned = self.sep.step(p, commit)
            if cep is None:
                rows = self._rows
                rows[0] = p
                rows[1] = cleaned
                cep, sep_cep = self.plan.cepstrum(rows)
        st = None if commit else self.cmn.state()
        c = self.cmn.update(cep, level_db, may_move)
        if st is not None:
            self.cmn.restore(st)
        v = np.empty(self.ring.shape[1], np.float32)  # this hop's vector, as `hop_vectors`'
        nc = NET_SETTINGS.n_coefs
        v[:nc] = c
        v[nc] = per
        v[nc + 1] = math.log10(max(flat, 1e-4))
        if self.sep is not None:
            _sep_vector_hop(self.plan, p, cleaned, v[HOP_DIM:], sep_cep)
            if self.pitch:
                _pitch_hop(cleaned, self.plan, self.sr, v[HOP_DIM + SEP_DIM :])
        if self.count == 0:
            ring = np.repeat(v[None], self.span, axis=0)  # edges held, as offline
        elif commit:
            ring = self.ring
            ring[:-1] = ring[1:]
            ring[-1] = v
        else:
            ring = np.concatenate([self.ring[1:], v[None]])
        if commit:
            self.ring = ring
            self.count += 1
        if self.conv is not None:
            pv, pw = self.conv.step(v, commit)
        else:
            pv, pw = self.mlp.predict_one(ring[self._idx])
        return pv, pw, v
