"""Training the learned voice mask (`audio.voice_mask`) on mixes the project makes.

Each training track is heard clean and `n_aug` times augmented as the vowel net's training
hears it (`audio.vowel_net_train.examples`: faster or slower, any level, a room, a band of the
training styles at −4…+12 dB under the voice, noise), but here the parts are kept apart: the
target of each bin is the voice's share of its power, voice / (voice + band + noise) — a
room's tail is the voice's, the voice net decides later what a pause is. The loss weighs each
bin by its loudness in the mix (compressed): what the features' log mel bands hear.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from audio import augment
from audio.backings import TRAIN_STYLES
from audio.backings import backing as styled_backing
from audio.mfcc import mfcc_frames
from audio.voice_mask import MASK_OFFSETS, VoiceMask, log_spectra, pooled_means, stacked_index
from audio.vowel_net import NET_SETTINGS
from audio.vowel_net_train import SPEED_RANGE, VBR_RANGE  # the vowel net's training's draws

__all__ = ["MaskExamples", "fit_mask", "mask_examples"]

SR = 16000
WEIGHT_POWER = 0.15  # the loss's weight: each bin's mix power to this power (~ loudness)


@dataclass
class MaskExamples:
    inputs: np.ndarray  # float16 (n, bins): `log_spectra` of the mixes, clip by clip
    target: np.ndarray  # float16 (n, bins): the voice's share of each bin
    weight: np.ndarray  # float16 (n, bins)
    lengths: np.ndarray  # int64: hops of each clip, in order


def _power(y: np.ndarray) -> np.ndarray:
    return mfcc_frames(np.asarray(y, np.float32), SR, NET_SETTINGS, keep_power=True).power


def _clip(voice: np.ndarray, rest: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """(inputs, target, weight) of the mix voice + rest."""
    mix = voice if rest is None else voice + rest
    pm = _power(mix).astype(np.float64)
    if rest is None:
        target = np.ones_like(pm)
    else:
        pv, pr = _power(voice).astype(np.float64), _power(rest).astype(np.float64)
        target = pv / (pv + pr + 1e-12 * (pv + pr).max() + 1e-30)
    ref = np.percentile(pm.sum(axis=1), 95) / pm.shape[1] + 1e-30
    weight = np.minimum(pm / ref, 1e3) ** WEIGHT_POWER
    f16 = np.float16
    return log_spectra(pm).astype(f16), target.astype(f16), weight.astype(f16)


def _track_clips(job) -> list[tuple[np.ndarray, ...]]:
    voice, n_aug, seed, styles, band_share, room_share = job
    rng = np.random.default_rng(seed)
    out = [_clip(voice, None)]
    for _ in range(n_aug):
        s = float(np.exp(rng.uniform(*np.log(SPEED_RANGE))))
        y = augment.speed(voice, s).astype(np.float64)
        y = y * float(np.exp(rng.uniform(np.log(0.05), 0.0)))
        if rng.uniform() < room_share:
            y = augment.reverb(y, rng.uniform(0.2, 0.8), rng, rng.uniform(0.2, 0.6))
        rest = np.zeros(len(y))
        if rng.uniform() < band_share:
            band = styled_backing(len(y) / SR + 0.1, int(rng.integers(1 << 30)), styles=styles)
            y, rest = augment.mix_parts(y, band, rng.uniform(*VBR_RANGE))
        if rng.uniform() < 0.5:
            noisy = augment.add_noise(y + rest, rng.uniform(10, 35), rng, pink=rng.uniform() < 0.5)
            rest = noisy.astype(np.float64) - y
        out.append(_clip(y, rest))
    return out


def mask_examples(
    voices: list[np.ndarray],
    n_aug: int = 4,
    seed: int = 0,
    styles: tuple[str, ...] = TRAIN_STYLES,
    band_share: float = 0.8,
    room_share: float = 0.3,
    workers: int = 1,
) -> MaskExamples:
    """The clean voices (16 kHz) heard clean and `n_aug` times mixed (see the module's doc);
    `workers` processes make them (the same examples with any number)."""
    jobs = [(v, n_aug, seed * 100003 + i, tuple(styles), band_share, room_share)
            for i, v in enumerate(voices)]  # fmt: skip
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            clips = [c for part in pool.map(_track_clips, jobs, chunksize=4) for c in part]
    else:
        clips = [c for job in jobs for c in _track_clips(job)]
    cols = [np.concatenate(parts) for parts in zip(*clips, strict=True)]
    return MaskExamples(*cols, np.array([len(c[0]) for c in clips], np.int64))


def _clip_index(lengths: np.ndarray, offsets: tuple[int, ...]) -> np.ndarray:
    """(n, len(offsets)) indices into the concatenated clips, each clip's edges held."""
    parts, start = [], 0
    for n in lengths.tolist():
        parts.append(stacked_index(n, offsets) + start)
        start += n
    return np.concatenate(parts) if parts else np.zeros((0, len(offsets)), np.int64)


def fit_mask(
    ex: MaskExamples,
    hidden: tuple[int, ...] = (512, 512),
    epochs: int = 10,
    seed: int = 0,
    batch: int = 2048,
    lr: float = 1e-3,
    offsets: tuple[int, ...] = MASK_OFFSETS,
    device: str | None = None,
    pools: tuple[tuple[int, int], ...] = (),
) -> VoiceMask:
    """An MLP from each hop's stacked log spectra (and its `pools` spans' means) to its bins'
    voice shares (weighted squared error), Adam with the rate cosine-decayed; on CUDA where
    there is one."""
    import torch

    torch.manual_seed(seed)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    idx = torch.from_numpy(_clip_index(ex.lengths, offsets)).to(dev)
    lp = torch.from_numpy(ex.inputs).to(dev)
    tgt = torch.from_numpy(ex.target).to(dev)
    wgt = torch.from_numpy(ex.weight).to(dev)
    bins = lp.shape[1]
    pooled = torch.from_numpy(_clip_pools(ex, pools)).to(dev)

    def rows_in(rows):
        x = lp[idx[rows]].reshape(len(rows), -1)
        return torch.cat([x, pooled[rows]], 1).float() if pools else x.float()

    # input scaling from a sample of the rows (each offset's column is a hop's)
    sample = rows_in(torch.arange(0, len(idx), max(len(idx) // 20000, 1), device=dev))
    mean, std = sample.mean(0), sample.std(0).clamp_min(1e-3)
    dims = [(len(offsets) + len(pools)) * bins, *hidden, bins]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    steps = epochs * max(len(idx) // batch, 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    gen = torch.Generator(device=dev).manual_seed(seed)
    step = 0
    for _ in range(epochs):
        order = torch.randperm(len(idx), device=dev, generator=gen)
        for a in range(0, len(order) - batch + 1, batch):
            rows = order[a : a + batch]
            x = (rows_in(rows) - mean) / std
            m = torch.sigmoid(model(x))
            w = wgt[rows].float()
            loss = (w * (m - tgt[rows].float()) ** 2).sum() / w.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step >= steps:
                break
    lin = [m for m in model if isinstance(m, torch.nn.Linear)]
    out = [(m.weight.detach().T.cpu().numpy().astype(np.float32),
            m.bias.detach().cpu().numpy().astype(np.float32)) for m in lin]  # fmt: skip
    return VoiceMask(mean.cpu().numpy(), std.cpu().numpy(), out, tuple(offsets), tuple(pools))


def _clip_pools(ex: MaskExamples, pools: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(n, len(pools) * bins) float16: `pooled_means` clip by clip."""
    parts, start = [], 0
    for n in ex.lengths.tolist():
        lp = ex.inputs[start : start + n].astype(np.float32)
        parts.append(pooled_means(lp, pools).astype(np.float16))
        start += n
    bins = ex.inputs.shape[1]
    return np.concatenate(parts) if parts else np.zeros((0, len(pools) * bins), np.float16)


def mask_loss(m: VoiceMask, ex: MaskExamples) -> float:
    """The weighted squared error of `m` over `ex` (clip by clip), numpy: for a held-out set."""
    tot = wsum = 0.0
    start = 0
    for n in ex.lengths.tolist():
        sl = slice(start, start + n)
        start += n
        pred = m.masks_of_inputs(ex.inputs[sl].astype(np.float32))
        w = ex.weight[sl].astype(np.float64)
        tot += float((w * (pred - ex.target[sl].astype(np.float64)) ** 2).sum())
        wsum += float(w.sum())
    return tot / max(wsum, 1e-12)
