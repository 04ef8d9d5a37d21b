"""A learned voice mask: how much of each bin of a mix's spectrum is the voice, per 10 ms hop.

The offline vowel net (`audio.vowel_net`) reads the voice over a band better the more of the
band is gone before it listens. Harmonic/percussive separation (`audio.voice_separation`)
knows only "steady" and "broadband"; a band's melody, vibrato synth and reverb tails are
neither. This is the issue's other way: a small network trained on mixes the project makes
(the corpus's voices over the `audio.backings` styles, with rooms and noise), taught each
bin's voice share — the ideal ratio mask, voice power / (voice + rest) — from the hop and its
neighbours' log spectra (and, where it has `pools`, the mean log spectrum of longer spans before
and after). It needs no audio back: the mask multiplies the power spectra the features already
have, and the separated voice's features are made from that product (`masked_features`), so
the front-end costs one MLP per hop.

Inference is numpy (float16 weights in the vowel net's file); `audio.voice_mask_train` trains
it (torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audio.mfcc import FrameFeatures, MfccSettings, _plan
from audio.npz_layers import dense_arrays, read_dense
from core.atomic_write import replacing

__all__ = [
    "MASK_OFFSETS",
    "VoiceMask",
    "load_mask",
    "load_mask_file",
    "log_spectra",
    "mask_arrays",
    "masked_features",
    "pooled_means",
    "save_mask_file",
]

# neighbouring hops each hop's mask hears (a voice's partials glide, a band's notes hold)
MASK_OFFSETS = (-6, -3, -1, 0, 1, 3, 6)
FLOOR_DB = 80.0  # the inputs' floor under the clip's loud hops
BLOCK = 4096  # hops per matrix product: bounded memory on a long song


def log_spectra(power: np.ndarray) -> np.ndarray:
    """(n, bins) float32: each bin's level (dB / 10) against the clip's loud hops (the 95th
    percentile of the hops' total), floored `FLOOR_DB` under them: the same mix at any gain
    gives the same inputs."""
    p = np.asarray(power, np.float64)
    if len(p) == 0:
        return np.zeros(p.shape, np.float32)
    tot = 10.0 * np.log10(p.sum(axis=1) + 1e-20)
    ref = float(np.percentile(tot, 95))
    floor = 10.0 ** ((ref - FLOOR_DB) / 10.0)
    return ((10.0 * np.log10(p + floor) - ref) / 10.0).astype(np.float32)


def pooled_means(lp: np.ndarray, pools: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(n, len(pools) * bins) float32: for each hop t of one clip's `log_spectra` `lp` and each
    span (lo, hi) of `pools`, the mean of hops t + lo .. t + hi, the span cut to the clip (a span
    wholly past an edge: the edge hop)."""
    n, bins = lp.shape
    out = np.empty((n, len(pools) * bins), np.float32)
    if not pools or n == 0:
        return out
    cs = np.zeros((n + 1, bins), np.float64)
    np.cumsum(lp, axis=0, out=cs[1:])
    t = np.arange(n)
    for k, (lo, hi) in enumerate(pools):
        a, b = np.clip(t + lo, 0, n - 1), np.clip(t + hi, 0, n - 1)
        out[:, k * bins : (k + 1) * bins] = (cs[b + 1] - cs[a]) / (b - a + 1)[:, None]
    return out


def stacked_index(n: int, offsets: tuple[int, ...]) -> np.ndarray:
    """(n, len(offsets)) hop indices, edges held (as `audio.vowel_net.stack`)."""
    idx = np.arange(n)[:, None] + np.asarray(offsets)[None, :]
    return np.clip(idx, 0, max(n - 1, 0))


@dataclass
class VoiceMask:
    mean: np.ndarray  # (len(offsets) * bins,) input scaling
    std: np.ndarray
    layers: list[tuple[np.ndarray, np.ndarray]]  # ReLU between, a sigmoid after the last
    offsets: tuple[int, ...] = MASK_OFFSETS
    pools: tuple[tuple[int, int], ...] = ()  # spans whose mean it also hears (`pooled_means`)

    @property
    def bins(self) -> int:
        return len(self.layers[-1][1])

    def masks(self, power: np.ndarray) -> np.ndarray:
        """(n, bins) float32 in 0..1: the voice's share of each bin of the power spectra
        `power` (n, bins), one clip in time order."""
        power = np.asarray(power)
        if power.shape[1:] != (self.bins,):
            raise ValueError(f"the mask is for {self.bins} bins, got spectra of {power.shape[1:]}")
        return self.masks_of_inputs(log_spectra(power))

    def masks_of_inputs(self, lp: np.ndarray) -> np.ndarray:
        """`masks` of one clip's `log_spectra` (n, bins)."""
        n = len(lp)
        idx = stacked_index(n, self.offsets)
        pooled = pooled_means(lp, self.pools)
        out = np.empty((n, self.bins), np.float32)
        inv = (1.0 / self.std).astype(np.float32)
        width = len(self.offsets) * lp.shape[1]
        for a in range(0, n, BLOCK):
            h = lp[idx[a : a + BLOCK]].reshape(-1, width)
            if self.pools:
                h = np.concatenate([h, pooled[a : a + BLOCK]], axis=1)
            h = (h - self.mean) * inv
            for i, (w, b) in enumerate(self.layers):
                h = h @ w + b
                if i < len(self.layers) - 1:
                    np.maximum(h, 0.0, out=h)
            out[a : a + BLOCK] = 1.0 / (1.0 + np.exp(-np.clip(h, -30.0, 30.0)))
        return out


def masked_features(
    f: FrameFeatures, sr: int, mask: VoiceMask, settings: MfccSettings, warp: float = 1.0
) -> FrameFeatures:
    """The features of what the mask keeps of the hops `f` (which carry their power spectra,
    `keep_power`): cepstrum (formants `warp` times higher, as `f`'s), level, flatness, and in
    place of the periodicity the kept spectrum's harmonicity (its autocorrelation peak; the
    raw frames' periodicity would hear the band's partials too)."""
    from audio.vowel_net import _pitch_cols

    if f.power is None:
        raise ValueError("masked_features needs the hops' power spectra (keep_power)")
    kept = f.power.astype(np.float64) * mask.masks(f.power)
    plan = _plan(settings, sr, warp)
    band = kept[:, plan.flat_slice] + 1e-20
    flat = np.exp(np.mean(np.log(band), axis=1)) / np.mean(band, axis=1)
    level = 10.0 * np.log10(kept.sum(axis=1) / plan.nfft + 1e-12)
    harm = _pitch_cols(kept, plan, sr)[:, 0] if len(kept) else np.zeros(0, np.float32)
    return FrameFeatures(
        f.end,
        plan.cepstrum(kept),
        level.astype(np.float32),
        flat.astype(np.float32),
        harm.astype(np.float32),
    )


def mask_arrays(prefix: str, m: VoiceMask) -> dict[str, np.ndarray]:
    """`m` as named arrays (float16 weights) for a vowel net's npz."""
    arrays = {
        f"{prefix}_mean": m.mean.astype(np.float32),
        f"{prefix}_std": m.std.astype(np.float32),
        f"{prefix}_offsets": np.asarray(m.offsets, np.int64),
    }
    if m.pools:
        arrays[f"{prefix}_pools"] = np.asarray(m.pools, np.int64).reshape(-1, 2)
    arrays.update(dense_arrays(prefix, m.layers))
    return arrays


def load_mask(z, prefix: str, path) -> VoiceMask:
    """The mask `mask_arrays` saved under `prefix` in the open npz `z` (ValueError naming the
    file where it does not fit together)."""
    layers = read_dense(z, prefix, path)
    offsets = tuple(int(o) for o in z[f"{prefix}_offsets"])
    pools: tuple[tuple[int, int], ...] = ()
    if f"{prefix}_pools" in z.files:
        raw = np.asarray(z[f"{prefix}_pools"])
        if raw.ndim != 2 or raw.shape[1] != 2 or np.any(raw[:, 0] > raw[:, 1]):
            raise ValueError(
                f"{path}: {prefix}_pools: expected (spans, 2) of lo <= hi, got {raw.tolist()}"
            )
        pools = tuple((int(lo), int(hi)) for lo, hi in raw)
    mean = z[f"{prefix}_mean"].astype(np.float32)
    bins = len(layers[-1][1]) if layers else 0
    blocks = len(offsets) + len(pools)
    if not layers or len(mean) != blocks * bins or layers[0][0].shape[0] != len(mean):
        raise ValueError(
            f"{path}: {prefix}: expected layers whose input is {len(offsets)} offsets and "
            f"{len(pools)} spans x the output's bins ({bins}), got inputs of {len(mean)}"
        )
    return VoiceMask(mean, z[f"{prefix}_std"].astype(np.float32), layers, offsets, pools)


def save_mask_file(path, m: VoiceMask, info: str = "") -> None:
    """`m` alone in an npz (a mask trained once, read by the vowel net's build); written
    whole or not at all."""
    with replacing(path) as tmp:
        np.savez_compressed(tmp, info=np.array(info), **mask_arrays("mask", m))


def load_mask_file(path) -> VoiceMask:
    with np.load(path) as z:
        return load_mask(z, "mask", path)
