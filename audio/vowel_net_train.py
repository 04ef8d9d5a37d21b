"""Training `audio.vowel_net.VowelNet` on the synthesized corpus, with augmentation (torch).

Each training track (one voice's sentences joined with pauses) is heard several times, each
time changed at random: played faster or slower (pitch, formants and tempo together), formants
shifted alone (a warped mel filterbank: vocal-tract length), white or pink noise at 30-10 dB
SNR, room reverb, and a synthetic band underneath at +12 to -4 dB vocal-to-backing ratio (the
band also plays through the pauses, which teaches "band, no voice"): `audio.augment.band`, or
backings of several styles (`audio.backings`: melodic leads, strings, plucks ...). Labels come from the
synthesizer's phone timings at the centre of each hop's window: "voice" wherever the truth is
not a pause, a vowel class where it is one of A I U E O.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from audio import augment
from audio.backings import backing as styled_backing
from audio.lipsync_eval import Track
from audio.mel_conv import MelConv, cepstrum_to_mel, scaled_inputs, split_blocks
from audio.mfcc import mfcc_frames
from audio.recorded_backings import recorded_backing
from audio.speech_corpus import SR, labels_at
from audio.vocoder import lpc_vocode
from audio.voice_mask import VoiceMask
from audio.vowel_fronting import F2_SHARE_RANGE, front_spans
from audio.vowel_net import (
    CMN_PRIOR,
    FRONT_BOTH,
    FRONT_MASK,
    HOP_DIM,
    LIVE_OFFSETS,
    NET_SETTINGS,
    OFFLINE_OFFSETS,
    Mlp,
    Tcn,
    VowelNet,
    clip_cmn,
    clip_spread,
    live_inputs,
    offline_inputs,
    stack,
)

__all__ = [
    "Examples",
    "cmn_prior",
    "examples",
    "fit_live",
    "fit_tcn",
    "front_priors",
    "fused_mlp",
    "stack_runs",
    "train",
    "train_offline",
]

_VOWEL_IDX = {v: i for i, v in enumerate("AIUEO")}
# `Examples.heard` looks this far back from the window's end, in 1 ms steps: to the window's
# centre, where the targets are read
HEARD_MS = 12
SPEED_RANGE = (0.85, 1.5)  # played faster or slower (pitch, formants and tempo together)
WARP_RANGE = (0.85, 1.2)  # formant shift alone, on top of the speed change's
VBR_RANGE = (-4.0, 12.0)  # vocal-to-backing ratio of the band underneath (dB)
FRONT_U_STREAM = 0xF0  # the fronted-U draws' own random stream (beside the seed)
VOCODE_STREAM = 0xF1  # the vocoded copies' own random stream (beside the seed)
RECORDED_STREAM = 0xF2  # the recorded backings' own random stream (beside the seed)


@dataclass
class Examples:
    live: np.ndarray  # float32 (n, d_live)
    offline: np.ndarray  # float32 (n, d_offline)
    voice: np.ndarray  # float32 (n,) 0/1
    vowel: np.ndarray  # int64 (n,) 0..4, -1 where not a vowel
    # hops of each heard track in order (a convolutional net trains on runs of a track's hops)
    lengths: np.ndarray | None = None
    # float32 (n,): how long (ms, up to HEARD_MS) the voice has sounded at the window's end —
    # the voice targets' `voice`, at the window's centre, come that much later at an onset
    heard: np.ndarray | None = None
    banded: np.ndarray | None = None  # bool (n,): a band plays under the hop's copy
    roomed: np.ndarray | None = None  # bool (n,): the hop's copy is heard in a room (reverb)

    @staticmethod
    def concat(parts: list[Examples]) -> Examples:
        cols = (np.concatenate([getattr(p, k) for p in parts]) for k in
                ("live", "offline", "voice", "vowel"))  # fmt: skip
        more = {}
        for k in ("heard", "banded", "roomed"):
            if all(getattr(p, k) is not None for p in parts):
                more[k] = np.concatenate([getattr(p, k) for p in parts])
        return Examples(*cols, np.array([len(p.voice) for p in parts], np.int64), **more)


def lifter_rows(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """Input rows with every stacked hop vector's cepstrum scaled by `gain` (n_coefs,): sharper
    (> 1) or flatter (< 1) spectral peaks, as another synthesizer's or vocoder's formant
    bandwidths. Every hop vector of both nets starts with its n_coefs cepstra (HOP_DIM wide
    blocks: the mix's and, with a front-end, the separated voice's)."""
    nc = NET_SETTINGS.n_coefs
    y = x.reshape(len(x), -1, HOP_DIM)
    y[:, :, :nc] *= gain.astype(np.float32)
    return y.reshape(x.shape)


def _one(
    audio, phones, warp, cmn_init, front, offsets, live_front, off_offsets, live_prior, offline,
    live_voiced=False, gain=None, cvn=None, warp_front=False, banded=False, roomed=False,
    mask=None, front_priors=None, front_prior_hops=CMN_PRIOR,
) -> Examples:  # fmt: skip
    power = bool(live_front) or front in (FRONT_MASK, FRONT_BOTH)
    f = mfcc_frames(audio, SR, NET_SETTINGS, warp=warp, keep_power=power)
    win = round(NET_SETTINGS.win_ms * SR / 1000)
    lab = labels_at(phones, (f.end - win / 2) / SR)
    heard = heard_ms(phones, f.end / SR)
    vowel = np.array([_VOWEL_IDX.get(c, -1) for c in lab], np.int64)
    # a voice-gated live mean moves on the hops after a voiced one (live: after a hop the net
    # heard a voice in)
    voiced = np.r_[False, lab[:-1] != "-"] if live_voiced else None
    live = live_inputs(f, SR, cmn_init, offsets, live_front, live_prior, voiced,
                       warp if warp_front else 1.0)  # fmt: skip
    off = np.zeros((len(f), 0), np.float32)
    if offline:
        off = offline_inputs(audio, SR, f, None, front, warp, off_offsets, cvn=cvn, mask=mask,
                             front_priors=front_priors,
                             front_prior_hops=front_prior_hops)  # fmt: skip
    if gain is not None:
        live = lifter_rows(live, gain)
        # a normalised spread undoes a cepstral gain: the offline rows keep theirs
        off = lifter_rows(off, gain) if offline and cvn is None else off
    return Examples(live, off, (lab != "-").astype(np.float32), vowel, heard=heard,
                    banded=np.full(len(lab), banded), roomed=np.full(len(lab), roomed))  # fmt: skip


def heard_ms(phones, ends_s: np.ndarray) -> np.ndarray:
    """(n,) float32: for windows ending at `ends_s` (s), for how many ms up to each end the
    phones have been a voice without a pause (0: a pause at the end; at most HEARD_MS + 1)."""
    run = np.ones(len(ends_s), bool)
    out = np.zeros(len(ends_s), np.float32)
    for k in range(HEARD_MS + 1):
        run &= labels_at(phones, np.asarray(ends_s, np.float64) - k / 1000) != "-"
        out += run
    return out


def onset_voice(ex: Examples, onset_ms: float, over_band: bool = True) -> np.ndarray:
    """The voice targets with each onset shown once the window's newest `onset_ms` ms hold
    the voice: the truth at the window's centre (`ex.voice`) shows it 12.5 ms later than the
    level does, and the live gate opens on the net's p(voice) — a net taught the centre's
    truth holds the mouth shut over the first hop it hears. Not `over_band`: the centre's
    truth where a band plays under the copy (a sooner voice there opened the gate in the
    band's own rises; docs/BENCHMARKS.md)."""
    if ex.heard is None:
        raise ValueError("onset_ms: the examples carry no `heard` (build them with `examples`)")
    if not 0 < onset_ms <= HEARD_MS:
        raise ValueError(f"onset_ms: expected 0 < onset_ms <= {HEARD_MS}, got {onset_ms}")
    early = ex.heard >= onset_ms
    if not over_band:
        if ex.banded is None:
            raise ValueError(
                "onset_band: the examples carry no `banded` (build them with `examples`)"
            )
        early &= ~ex.banded
    return np.maximum(ex.voice, early.astype(np.float32))


def since_voice(voice: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(n,) int64: for each hop, how many hops since the last hop whose truth is a voice, in
    its own track (0 on a voice hop; a large number before a track's first voice)."""
    out = np.empty(len(voice), np.int64)
    at = 0
    for n in np.asarray(lengths).tolist():
        i = np.arange(n)
        last = np.maximum.accumulate(np.where(voice[at : at + n] > 0.5, i, -(1 << 30)))
        out[at : at + n] = i - last
        at += n
    return out


def voice_end(
    ex: Examples, voice: np.ndarray, end_hops: int = 0, tail_ms: float = 0.0,
    tail_weight: float = 1.0, pause_weight: float = 1.0, tail_band: bool = True,
    tail_both: bool = False, tail_room: bool = False,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The live voice's end as a target of its own (issue 15, sixteenth round): -> (voice
    targets, each hop's weight in the voice loss). `voice`: the targets so far (`ex.voice`, or
    `onset_voice`'s). `end_hops`: the last hops of a voice before a pause are shown as the
    pause (the truth at the window's centre ends a voice 12.5 ms after the window's newest ms
    went quiet); `tail_ms`, `tail_weight`: the pause hops up to `tail_ms` after a voice ends
    weigh `tail_weight` in the voice loss (the mouth must close there, where a decaying tail
    still sounds like the voice heard just before); `pause_weight`: every other pause hop's
    weight; not `tail_band`: the tail weighted in the copies without a band underneath only
    (a band's own decays are not the voice's); `tail_both`: the voice hops up to `tail_ms`
    before a pause weigh `tail_weight` too (the end taught on both sides, so the weight sharpens
    the edge rather than tilting every unsure hop towards a pause); `tail_room`: the tail
    weighted in the copies heard in a room only (issue 15, eighteenth round: there the voice's
    reverberation fades on into the pause, the slow close the weight is for). Hops are
    `NET_SETTINGS.hop_ms` apart, each track's own (`ex.lengths`)."""
    if ex.lengths is None:
        raise ValueError("voice_end: the examples carry no `lengths` (build them with `examples`)")
    voice = np.asarray(voice, np.float32).copy()
    truth = ex.voice > 0.5
    rev = since_voice(~truth[::-1], ex.lengths[::-1])[::-1]  # hops until the next pause
    if end_hops > 0:
        # a voice hop with a pause within `end_hops` hops after it, in its own track
        voice[truth & (rev <= end_hops)] = 0.0
    w = np.ones(len(voice), np.float32)
    quiet = voice < 0.5
    w[quiet] = pause_weight
    if tail_ms > 0:
        since = since_voice(truth.astype(np.float32), ex.lengths)
        tail = quiet & ~truth & (since * NET_SETTINGS.hop_ms <= tail_ms)
        if tail_both:
            tail |= truth & (voice > 0.5) & (rev * NET_SETTINGS.hop_ms <= tail_ms)
        if not tail_band:
            if ex.banded is None:
                raise ValueError(
                    "tail_band: the examples carry no `banded` (build them with `examples`)"
                )
            tail &= ~ex.banded
        if tail_room:
            if ex.roomed is None:
                raise ValueError(
                    "tail_room: the examples carry no `roomed` (build them with `examples`)"
                )
            tail &= ex.roomed
        w[tail] = tail_weight
    return voice, w


def cvn_prior(tracks: list[Track]) -> np.ndarray:
    """The clean tracks' mean cepstral spread over their sounding hops: where the offline
    spread starts in use (`VowelNet.offline_cvn`)."""
    out = []
    for tr in tracks:
        f = mfcc_frames(tr.voice, SR, NET_SETTINGS)
        out.append(clip_spread(clip_cmn(f), f))
    return np.mean(out, axis=0)


def front_priors(tracks: list[Track], front: str, mask=None) -> list[tuple[np.ndarray, ...]]:
    """Each separated voice of `front` (`offline_inputs`' order): the clean tracks' mean
    cepstra and mean spread over its sounding hops, as `cmn_prior` and `cvn_prior` give the
    mix's: where its clip statistics start in use (`VowelNet.front_priors`)."""
    from audio.voice_mask import masked_features
    from audio.vowel_net import FRONT_SEPARATION, separated_features

    if front in (FRONT_MASK, FRONT_BOTH) and mask is None:
        raise ValueError("the mask front-end needs its mask")
    per_front: list[list] = []
    for tr in tracks:
        fronts = []
        if front in (FRONT_SEPARATION, FRONT_BOTH):
            fronts.append(separated_features(tr.voice, SR))
        if front in (FRONT_MASK, FRONT_BOTH):
            f = mfcc_frames(tr.voice, SR, NET_SETTINGS, keep_power=True)
            fronts.append(masked_features(f, SR, mask, NET_SETTINGS))
        for i, fs in enumerate(fronts):
            ms = clip_cmn(fs)
            if len(per_front) <= i:
                per_front.append([])
            per_front[i].append((fs.mfcc[0] - ms[0], clip_spread(ms, fs)))
    return [tuple(np.mean(col, axis=0) for col in zip(*rows, strict=True)) for rows in per_front]


def cmn_prior(tracks: list[Track]) -> np.ndarray:
    """The mean MFCCs of the clean tracks' sounding hops: where the live running mean starts."""
    means = []
    for tr in tracks:
        f = mfcc_frames(tr.voice, SR, NET_SETTINGS)
        means.append(f.mfcc.astype(np.float64) - clip_cmn(f))
    return np.mean([m[0] for m in means], axis=0)


def examples(
    tracks: list[Track],
    cmn_init: np.ndarray,
    n_aug: int = 4,
    seed: int = 0,
    clean: bool = True,
    front: str = "",
    live_offsets: tuple[int, ...] = LIVE_OFFSETS,
    live_front: str = "",
    offline_offsets: tuple[int, ...] = OFFLINE_OFFSETS,
    band_share: float = 0.55,
    live_cmn_prior: int = CMN_PRIOR,
    offline: bool = True,
    live_cmn_voiced: bool = False,
    warp_range: tuple[float, float] = WARP_RANGE,
    lifter: float = 0.0,
    offline_cvn: np.ndarray | None = None,
    speed_range: tuple[float, float] = SPEED_RANGE,
    formant_follow: float = 0.5,
    backings: tuple[str, ...] = (),
    vbr_range: tuple[float, float] = VBR_RANGE,
    warp_front: bool = False,
    room_share: float = 0.3,
    mask: VoiceMask | None = None,
    front_priors: list | None = None,
    front_prior_hops: int = CMN_PRIOR,
    front_u: float = 0.0,
    vocode_share: float = 0.0,
    recorded_share: float = 0.0,
    recorded_vowels: bool = True,
) -> Examples:
    """The tracks as heard clean (if `clean`) and `n_aug` times augmented (the offline net's
    inputs left empty when not `offline`: a live-only training skips the costly separation).
    `speed_range`: playing faster or slower (pitch, formants and tempo); of its formant shift
    the share `formant_follow` is kept (0: pitch alone), on top of which `warp_range` shifts
    the formants alone (vocal-tract length); `lifter`: the spread
    (natural log) of the cepstral gain's tilt, 0 for none (`lifter_rows`); `offline_cvn`: the
    offline rows' cepstra divided by each clip's spread (`audio.vowel_net.clip_cvn`);
    `backings`: the styles of `audio.backings` the band underneath is drawn from (empty: the
    one band of `audio.augment.band`), at a vocal-to-backing ratio in `vbr_range` (dB).
    `warp_front`: the live front-end's cepstrum warped with the mix's (without it only the
    mix's cepstrum moves with the warp, the front-end's keeps the voice's own formants).
    `room_share`: the share of the augmented copies heard in a room (reverb, the targets kept
    dry: the tail is a pause). `mask`: the learned mask of the `FRONT_MASK` front-end;
    `front_priors`: where the separated voices' clip statistics start (`front_priors`), worth
    `front_prior_hops` hops, as in use. `front_u`: the share of U phones of the augmented copies
    spoken fronted (`audio.vowel_fronting`: F2 raised toward F3, as American English /u/ after
    coronals), drawn apart so a recipe without it keeps every other draw. `vocode_share`: the
    share of the augmented copies re-made by a pulse-and-noise LPC vocoder
    (`audio.vocoder.lpc_vocode`: parametric synthesizers' sound) before their room, band and
    noise, drawn apart likewise. `recorded_share`: the share of the banded copies whose backing
    is recorded music (`audio.recorded_backings`, its training pool) instead of a synthesized
    one, drawn apart likewise; not `recorded_vowels`: those copies teach where a voice sounds
    only (their vowel targets left out)."""
    more = (live_cmn_prior, offline, live_cmn_voiced)
    front_rng = np.random.default_rng([seed, FRONT_U_STREAM])
    vocode_rng = np.random.default_rng([seed, VOCODE_STREAM])
    recorded_rng = np.random.default_rng([seed, RECORDED_STREAM])
    cvn = offline_cvn
    ramp = np.linspace(0.0, 1.0, NET_SETTINGS.n_coefs)
    rng = np.random.default_rng(seed)
    parts = []
    for tr in tracks:
        if clean:
            parts.append(
                _one(
                    tr.voice,
                    tr.phones,
                    1.0,
                    cmn_init,
                    front,
                    live_offsets,
                    live_front,
                    offline_offsets,
                    *more,
                    cvn=cvn,
                    mask=mask,
                    front_priors=front_priors,
                    front_prior_hops=front_prior_hops,
                )
            )
        for _ in range(n_aug):
            s = float(np.exp(rng.uniform(*np.log(speed_range))))
            k = 1.0 - formant_follow
            # sqrt where k is 1/2: the draws of the builds before the knob, to the last bit
            warp = float(np.exp(rng.uniform(*np.log(warp_range)))) / (
                np.sqrt(s) if k == 0.5 else s**k
            )
            voice = _fronted_u(tr, front_u, front_rng) if front_u > 0 else tr.voice
            y = augment.speed(voice, s)
            if vocode_share > 0 and vocode_rng.uniform() < vocode_share:
                y = lpc_vocode(y, vocode_rng)
            ph = [(a / s, b / s, c) for a, b, c in tr.phones]
            y = y * float(np.exp(rng.uniform(np.log(0.05), 0.0)))  # any level
            roomed = rng.uniform() < room_share
            if roomed:
                y = augment.reverb(y, rng.uniform(0.2, 0.8), rng, rng.uniform(0.2, 0.6))
            banded = rng.uniform() < band_share
            recorded = False
            if banded:
                bseed = int(rng.integers(1 << 30))  # drawn either way: the later draws stay
                if recorded_share > 0 and recorded_rng.uniform() < recorded_share:
                    rseed = int(recorded_rng.integers(1 << 30))
                    backing = recorded_backing(len(y) / SR + 0.1, rseed, "train")
                    recorded = True
                elif backings:
                    backing = styled_backing(len(y) / SR + 0.1, bseed, styles=tuple(backings))
                else:
                    backing = augment.band(len(y) / SR + 0.1, bseed)
                y = augment.mix_at(y, backing, rng.uniform(*vbr_range))
            if rng.uniform() < 0.5:
                y = augment.add_noise(y, rng.uniform(10, 35), rng, pink=rng.uniform() < 0.5)
            # drawn last, so a recipe without it keeps every other draw
            gain = np.exp(rng.uniform(-lifter, lifter) * ramp) if lifter > 0 else None
            part = _one(y, ph, warp, cmn_init, front, live_offsets, live_front, offline_offsets,
                        *more, gain=gain, cvn=cvn, warp_front=warp_front, banded=banded,
                        roomed=roomed, mask=mask, front_priors=front_priors,
                        front_prior_hops=front_prior_hops)  # fmt: skip
            if recorded and not recorded_vowels:
                part.vowel = np.full_like(part.vowel, -1)
            parts.append(part)
    return Examples.concat(parts)


def _fronted_u(tr: Track, share: float, rng: np.random.Generator) -> np.ndarray:
    """The track's voice with a drawn `share` of its U phones fronted."""
    spans = [(a, b) for a, b, c in tr.phones if c == "U" and rng.uniform() < share]
    shares = [float(rng.uniform(*F2_SHARE_RANGE)) for _ in spans]
    return front_spans(tr.voice, SR, spans, shares) if spans else tr.voice


def _standardised(x: np.ndarray, voice: np.ndarray, vowel: np.ndarray):
    """(mean, std, standardised inputs, voice targets, vowel targets) as torch tensors: both
    net kinds learn on inputs scaled by the examples' own mean and spread."""
    import torch

    mean = x.mean(axis=0)
    std = x.std(axis=0) + 1e-3
    xt = torch.from_numpy((x - mean) / std).float()
    return mean, std, xt, torch.from_numpy(voice).float(), torch.from_numpy(vowel).long()


def _trainer(params, vowel: np.ndarray, steps: int, smoothing: float = 0.0,
             weight_decay: float = 1e-4):  # fmt: skip
    """The losses, class weights, optimiser and schedule every net here trains with: -> step(z,
    voice, vowel, soft=None, soft_weight=0, mix=None), one optimiser step on logits z (n, 6)
    against those targets (vowel -1: none). `soft` (n, 5): a teacher's vowel probabilities,
    weighing `soft_weight` of the vowel loss where the truth is a vowel; `mix` (lam, voice2,
    vowel2): the rows are mixtures, lam of the first targets and 1 - lam of the second (mixup).
    `smoothing`: the hard vowel targets' label smoothing."""
    import torch

    counts = np.bincount(vowel[vowel >= 0], minlength=5).astype(np.float64)
    cw = torch.tensor(counts.sum() / np.maximum(counts, 1) / 5, dtype=torch.float32)
    opt = torch.optim.AdamW(params, lr=2e-3, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    bce = torch.nn.BCEWithLogitsLoss()
    bce_rows = torch.nn.BCEWithLogitsLoss(reduction="none")
    ce = torch.nn.CrossEntropyLoss(weight=cw, ignore_index=-1, label_smoothing=smoothing)

    def soft_ce(logits, q, w):
        """Cross-entropy of `logits` against the distributions `q`, rows weighted by `w`."""
        s = -(q * torch.log_softmax(logits, dim=1)).sum(dim=1)
        return (w * s).sum() / w.sum()

    def bce_w(logits, t, w=None):
        """The voice loss; `w` (n,): each row's weight (a mean of the weighted rows, so a
        weight above 1 adds to the loss rather than taking from the other rows')."""
        if w is None:
            return bce(logits, t)
        return (w * bce_rows(logits, t)).mean()

    def hard(z, voice_t, vowel_t, w=None):
        loss = bce_w(z[:, 0], voice_t, w)
        if (vowel_t >= 0).any():
            loss = loss + ce(z[:, 1:], vowel_t)
        return loss

    def step(z, voice_t, vowel_t, soft=None, soft_weight=0.0, mix=None, soft_on="vowel",
             voice_weight=0.0, vw=None) -> None:  # fmt: skip
        if mix is None:
            loss = hard(z, voice_t, vowel_t, vw)
        else:
            lam, voice2, vowel2 = mix
            loss = lam * hard(z, voice_t, vowel_t) + (1 - lam) * hard(z, voice2, vowel2)
        if soft is not None and voice_weight > 0:
            # the teacher's p(voice) (column 0) for voice_weight of the voice loss
            loss = loss + voice_weight * (
                bce_w(z[:, 0], soft[:, 0], vw) - bce_w(z[:, 0], voice_t, vw)
            )
        if soft is not None and soft_weight > 0:
            on = vowel_t >= 0
            if on.any():
                # the teacher's distribution, weighted by the truth's class weight as the hard loss
                taught = soft_ce(z[on, 1:], soft[on, 1:], cw[vowel_t[on]])
                loss = loss + soft_weight * (taught - ce(z[on, 1:], vowel_t[on]))
            if soft_on == "voice":
                # and the voiced hops that are no vowel (consonants): the teacher's vowels alone
                # (the shape the mouth shows there), weighted by the class the teacher reads
                on = (vowel_t < 0) & (voice_t > 0.5)
                if on.any():
                    q = soft[on, 1:]
                    loss = loss + soft_weight * soft_ce(z[on, 1:], q, cw[q.argmax(dim=1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()

    return step


def _fit(
    x: np.ndarray, voice: np.ndarray, vowel: np.ndarray, hidden, epochs, seed,
    dropout: float = 0.1, smoothing: float = 0.0, mixup: float = 0.0,
    soft: np.ndarray | None = None, soft_weight: float = 0.0, weight_decay: float = 1e-4,
    soft_on: str = "vowel", voice_weight: float = 0.0, voice_w: np.ndarray | None = None,
) -> Mlp:  # fmt: skip
    """An MLP; `dropout`, `smoothing`, `weight_decay`: its regularisation; `mixup`: the Beta
    parameter of mixup between random rows (0: none); `soft` (n, 6: p(voice), p(A I U E O)),
    `soft_weight`, `soft_on` ("vowel" or "voice": the hops it teaches vowels on),
    `voice_weight`: a teacher's probabilities (`_trainer`); `voice_w` (n,): each row's weight
    in the voice loss (None: all 1; not with mixup)."""
    import torch

    if voice_w is not None and mixup > 0:
        raise ValueError("voice_w: not with mixup")

    torch.manual_seed(seed)
    mean, std, xt, vt, wt = _standardised(x, voice, vowel)
    st = None if soft is None else torch.from_numpy(np.asarray(soft, np.float32))
    vwt = None if voice_w is None else torch.from_numpy(np.asarray(voice_w, np.float32))
    dims = [x.shape[1], *hidden, 6]
    mods: list[torch.nn.Module] = []
    for i in range(len(dims) - 1):
        mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            mods += [torch.nn.ReLU(), torch.nn.Dropout(dropout)]
    net = torch.nn.Sequential(*mods)
    n = len(xt)
    step = _trainer(net.parameters(), vowel, epochs * (n // 512 + 1), smoothing, weight_decay)
    g = torch.Generator().manual_seed(seed)
    beta = torch.distributions.Beta(mixup, mixup) if mixup > 0 else None
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, 512):
            idx = perm[i : i + 512]
            xb, mix = xt[idx], None
            if beta is not None:
                # mixup: each batch mixed with itself reversed, one lam per batch
                lam = float(beta.sample())
                lam = max(lam, 1 - lam)  # the first row's targets lead
                j = idx.flip(0)
                xb, mix = lam * xb + (1 - lam) * xt[j], (lam, vt[j], wt[j])
            step(net(xb), vt[idx], wt[idx], None if st is None else st[idx], soft_weight, mix=mix,
                 soft_on=soft_on, voice_weight=voice_weight,
                 vw=None if vwt is None else vwt[idx])  # fmt: skip
    layers = [
        (m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
        for m in net
        if isinstance(m, torch.nn.Linear)
    ]
    return Mlp(mean.astype(np.float32), std.astype(np.float32), layers)


def _runs(lengths: np.ndarray, chunk: int) -> np.ndarray:
    """Start hops of runs of `chunk` hops that each lie inside one track (a track's last run
    ends at its end; tracks shorter than `chunk` are left out)."""
    starts, at = [], 0
    for n in np.asarray(lengths).tolist():
        if n >= chunk:
            s = list(range(at, at + n - chunk + 1, chunk))
            if s[-1] != at + n - chunk:
                s.append(at + n - chunk)
            starts += s
        at += n
    return np.asarray(starts, np.int64)


def stack_runs(v: np.ndarray, lengths: np.ndarray, offsets: tuple[int, ...]) -> np.ndarray:
    """`audio.vowel_net.stack` of each track's hop vectors (edges held per track): the rows
    `examples` gives at these offsets when given offsets (0,)."""
    if tuple(offsets) == (0,) or v.shape[1] == 0:  # (0 columns: a live-only training's)
        return v
    ends = np.cumsum(lengths)
    return np.concatenate(
        [stack(v[e - n : e], offsets) for n, e in zip(lengths, ends, strict=True)]
    )


def fit_tcn(
    x: np.ndarray,
    voice: np.ndarray,
    vowel: np.ndarray,
    lengths: np.ndarray,
    channels: int = 32,
    dilations: tuple[int, ...] = (1, 2, 4, 8),
    causal: bool = True,
    epochs: int = 8,
    seed: int = 0,
    kernel: int = 3,
    chunk: int = 256,
) -> Tcn:
    """A `audio.vowel_net.Tcn` on the hop vectors `x` (n, c) of the tracks `lengths` (in
    order), trained on runs of `chunk` hops of one track each (edges held, as in use)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit_tcn(x, voice, vowel, lengths, channels, dilations, causal, epochs, seed,
                        kernel, chunk)  # fmt: skip
    finally:
        torch.set_num_threads(threads)


def _fit_tcn(x, voice, vowel, lengths, channels, dilations, causal, epochs, seed, kernel, chunk):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(seed)
    mean, std, xt, vt, wt = _standardised(x, voice, vowel)
    starts = torch.from_numpy(_runs(lengths, chunk))
    convs = torch.nn.ModuleList()
    c_in = x.shape[1]
    for _ in dilations:
        convs.append(torch.nn.Conv1d(c_in, channels, kernel))
        c_in = channels
    head = torch.nn.Conv1d(channels, 6, 1)
    drop = torch.nn.Dropout(0.1)
    pads = [((kernel - 1) * d, 0) if causal else ((kernel - 1) * d // 2,) * 2 for d in dilations]

    def forward(h):  # (b, c, t)
        for i, (conv, d) in enumerate(zip(convs, dilations, strict=True)):
            y = F.relu(F.conv1d(F.pad(h, pads[i], mode="replicate"), conv.weight, conv.bias,
                                dilation=d))  # fmt: skip
            h = drop(y) + h if i > 0 else drop(y)
        return head(h)

    params = [*convs.parameters(), *head.parameters()]
    batch = 16
    step = _trainer(params, vowel, epochs * (len(starts) // batch + 1))
    g = torch.Generator().manual_seed(seed)
    span = torch.arange(chunk)
    convs.train()
    drop.train()
    for _ in range(epochs):
        perm = starts[torch.randperm(len(starts), generator=g)]
        for i in range(0, len(perm), batch):
            idx = perm[i : i + batch, None] + span[None]  # (b, t)
            z = forward(xt[idx].transpose(1, 2))  # (b, 6, t)
            step(z.transpose(1, 2).reshape(-1, 6), vt[idx].reshape(-1), wt[idx].reshape(-1))
    conv_w = [
        (c.weight.detach().numpy().transpose(2, 1, 0).copy(), c.bias.detach().numpy().copy())
        for c in convs
    ]
    hw = head.weight.detach().numpy()[:, :, 0].T.copy()
    return Tcn(mean.astype(np.float32), std.astype(np.float32), conv_w, tuple(dilations),
               (hw, head.bias.detach().numpy().copy()), causal)  # fmt: skip


MEL_CHANNELS = (16, 32)  # the convolutions' channels (kernel MEL_K mel bands x 3 hops each)
MEL_K = 5
MEL_DILATION = 2  # hops between the time taps
MEL_HIDDEN = (128,)
MEL_RUN, MEL_MARGIN = 192, 16  # training runs (hops) and the hops at each end left unscored


def _mel_forward(convs, head, mel, cues, offsets, dilation, drop=None, causal=False):
    """The net in torch on runs of hops: mel (b, t, blocks, mels), cues (b, t, n) (both as
    `audio.mel_conv.scaled_inputs` gives them) -> (b, t, 6); `causal`: the time taps this hop
    and two before (zero padding before the run), as `audio.mel_conv.MelConv.causal`.
    `convs`, `head`: (weight, bias) pairs in torch's layout. Training and the tests run this one
    definition; the stacking holds each run's edges, as `audio.vowel_net.stack` a clip's."""
    import torch
    import torch.nn.functional as F

    b, t = mel.shape[:2]
    h = mel.permute(0, 2, 3, 1)  # (b, blocks, mels, t)
    for w, bias in convs:
        pad = (w.shape[2] // 2, 0 if causal else dilation)
        if causal:
            h = F.pad(h, (2 * dilation, 0))
        h = F.max_pool2d(F.relu(F.conv2d(h, w, bias, padding=pad, dilation=(1, dilation))), (2, 1))
    h = torch.cat([h.permute(0, 3, 1, 2).reshape(b, t, -1), cues], dim=2)  # (channel, mel)
    idx = (torch.arange(t)[:, None] + torch.as_tensor(offsets)[None]).clamp(0, t - 1)
    h = h[:, idx].reshape(b, t, -1)
    for i, (w, bias) in enumerate(head):
        h = F.linear(h, w, bias)
        if i < len(head) - 1:
            h = F.relu(h)
            h = drop(h) if drop is not None else h
    return h


def _mel_torch_weights(m: MelConv):
    import torch

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a, np.float32))

    convs = [(t(w.transpose(3, 2, 0, 1)), t(b)) for w, b in m.convs]
    return convs, [(t(w.T), t(b)) for w, b in m.head.layers]


def mel_conv_torch_logits(m: MelConv, hops: np.ndarray) -> np.ndarray:
    """`m`'s logits on a clip's hop vectors computed by torch (`_mel_forward`, the clip as one
    run): what training optimised, to check the numpy inference against."""
    import torch

    mel, cues = m.scaled(hops)
    convs, head = _mel_torch_weights(m)
    with torch.no_grad():
        z = _mel_forward(convs, head, torch.from_numpy(mel)[None], torch.from_numpy(cues)[None],
                         m.offsets, m.dilation, causal=m.causal)  # fmt: skip
    return z[0].numpy()


def fit_mel_conv(
    hops: np.ndarray,
    voice: np.ndarray,
    vowel: np.ndarray,
    lengths: np.ndarray,
    offsets: tuple[int, ...] = OFFLINE_OFFSETS,
    epochs: int = 8,
    seed: int = 0,
    dilation: int = MEL_DILATION,
    dropout: float = 0.1,
    run: int = MEL_RUN,
    channels: tuple[int, ...] = MEL_CHANNELS,
    hidden: tuple[int, ...] = MEL_HIDDEN,
    causal: bool = False,
) -> MelConv:
    """A `audio.mel_conv.MelConv` on the hop vectors `hops` (n, blocks * BLOCK) of the tracks
    `lengths` (in order), trained on runs of `run` hops inside one track, drawn at random
    places (tracks shorter than a run are left out), each run's `MEL_MARGIN` hops at either end
    unscored (their context is cut). The losses, class weights, optimiser and schedule of `_fit`.
    `causal`: the live net of that kind (time taps in the past; `offsets` <= 0)."""
    import torch

    torch.manual_seed(seed)
    nc, n_mels = NET_SETTINGS.n_coefs, NET_SETTINGS.n_mels
    to_mel = cepstrum_to_mel(nc, n_mels, NET_SETTINGS.first_coef).astype(np.float32)
    cep, cues = split_blocks(hops, nc)
    mel = cep @ to_mel
    mel_scale = np.array([mel.mean(), mel.std() + 1e-3], np.float32)
    cue_mean, cue_std = cues.mean(axis=0), cues.std(axis=0) + 1e-3
    del mel, cep, cues
    mel_np, cue_np = scaled_inputs(hops, to_mel, mel_scale, cue_mean, cue_std)
    mel_t, cue_t = torch.from_numpy(mel_np), torch.from_numpy(cue_np)
    vt = torch.from_numpy(voice).float()
    wt = torch.from_numpy(vowel).long()

    convs = torch.nn.ModuleList()
    c_in = mel_np.shape[1]
    for c in channels:
        convs.append(torch.nn.Conv2d(c_in, c, (MEL_K, 3)))
        c_in = c
    n_feat = (c_in * (n_mels >> len(channels)) + cue_np.shape[1]) * len(offsets)
    dims = [n_feat, *hidden, 6]
    head = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in itertools.pairwise(dims))
    drop = torch.nn.Dropout(dropout)
    modules = torch.nn.ModuleList([convs, head])

    lengths = np.asarray(lengths, np.int64)
    starts0 = np.cumsum(lengths) - lengths
    usable = np.flatnonzero(lengths >= run)
    share = lengths[usable] / lengths[usable].sum()
    per_epoch = int(lengths[usable].sum() // (run - 2 * MEL_MARGIN)) + 1
    batch = 8
    step = _trainer(modules.parameters(), vowel, epochs * (per_epoch // batch + 1))
    rng = np.random.default_rng(seed)
    span = torch.arange(run)
    inner = slice(MEL_MARGIN, run - MEL_MARGIN)

    def pairs(mods):
        return [(mod.weight, mod.bias) for mod in mods]

    modules.train()
    drop.train()
    for _ in range(epochs):
        tr = rng.choice(usable, per_epoch, p=share)
        st = starts0[tr] + (rng.random(per_epoch) * (lengths[tr] - run + 1)).astype(np.int64)
        for i in range(0, per_epoch, batch):
            idx = torch.from_numpy(st[i : i + batch])[:, None] + span[None]  # (b, run)
            z = _mel_forward(pairs(convs), pairs(head), mel_t[idx], cue_t[idx], offsets,
                             dilation, drop, causal)[:, inner].reshape(-1, 6)  # fmt: skip
            step(z, vt[idx][:, inner].reshape(-1), wt[idx][:, inner].reshape(-1))

    def np_(a):
        return a.detach().numpy().copy()

    conv_w = [(np_(c.weight).transpose(2, 3, 1, 0).copy(), np_(c.bias)) for c in convs]
    layers = [(np_(lin.weight).T.copy(), np_(lin.bias)) for lin in head]
    mlp = Mlp(np.zeros(n_feat, np.float32), np.ones(n_feat, np.float32), layers)
    return MelConv(to_mel, mel_scale, cue_mean.astype(np.float32), cue_std.astype(np.float32),
                   conv_w, int(dilation), mlp, tuple(offsets), causal)  # fmt: skip


LIVE_HIDDEN = (64, 32)
OFFLINE_HIDDEN = (96, 48)


def fused_mlp(nets: list[Mlp]) -> Mlp:
    """MLPs of the same inputs and scaling as one MLP whose logits are their mean: the hidden
    layers side by side (block-diagonal), the output layers averaged. The live hop runs one
    `Mlp.predict_one` whatever the count."""
    if len(nets) == 1:
        return nets[0]
    for m in nets[1:]:
        if not (np.array_equal(m.mean, nets[0].mean) and np.array_equal(m.std, nets[0].std)):
            raise ValueError("fused_mlp: the nets must share their input scaling")
    depth = len(nets[0].layers)
    layers = []
    for i in range(depth):
        ws = [m.layers[i][0] for m in nets]
        bs = [m.layers[i][1] for m in nets]
        if i == 0:
            w, b = np.concatenate(ws, axis=1), np.concatenate(bs)
        elif i < depth - 1:
            rows, cols = sum(a.shape[0] for a in ws), sum(a.shape[1] for a in ws)
            w = np.zeros((rows, cols), np.float32)
            r = c = 0
            for a in ws:
                w[r : r + a.shape[0], c : c + a.shape[1]] = a
                r, c = r + a.shape[0], c + a.shape[1]
            b = np.concatenate(bs)
        else:
            w, b = np.concatenate(ws, axis=0) / len(nets), np.mean(bs, axis=0)
        layers.append((w.astype(np.float32), np.asarray(b, np.float32)))
    return Mlp(nets[0].mean, nets[0].std, layers)


def fit_live(
    x: np.ndarray, voice: np.ndarray, vowel: np.ndarray, epochs: int = 8, seed: int = 0,
    hidden: tuple[int, ...] = LIVE_HIDDEN, nets: int = 1, **fit,
) -> Mlp:  # fmt: skip
    """The live MLP; `nets` > 1: that many of other training seeds, fused (`fused_mlp`);
    `fit`: `_fit`'s regularisation, mixup and teacher settings."""
    return fused_mlp(
        [_fit(x, voice, vowel, tuple(hidden), epochs, seed + 1000 * k, **fit) for k in range(nets)]
    )


def train_offline(ex: Examples, epochs: int = 8, seed: int = 0, stride: int = 2) -> Mlp:
    """An offline net alone (as `train`'s), e.g. one more for `VowelNet.offline_more`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = slice(None, None, stride)
        return _fit(ex.offline[s], ex.voice[s], ex.vowel[s], OFFLINE_HIDDEN, epochs, seed + 1)
    finally:
        torch.set_num_threads(threads)


def train(
    ex: Examples,
    cmn_init: np.ndarray,
    info: str = "",
    epochs: int = 8,
    seed: int = 0,
    stride: int = 2,
    front: str = "",
    live_offsets: tuple[int, ...] = LIVE_OFFSETS,
    live_front: str = "",
    offline_offsets: tuple[int, ...] = OFFLINE_OFFSETS,
    live_cmn_prior: int = CMN_PRIOR,
    offline: Mlp | Tcn | None = None,
    live_cmn_voiced: bool = False,
    offline_cvn: np.ndarray | None = None,
    live: Mlp | Tcn | None = None,
    live_fit: dict | None = None,
    soft: np.ndarray | None = None,
) -> VowelNet:
    """Both nets on every `stride`-th example (neighbouring hops are nearly the same); with
    `offline` (or `live`) given, that net is kept and only the other one is trained.
    `offline_cvn`: the spread the examples' offline rows were normalised by (`examples`),
    stored with the net. `live_fit`: `fit_live`'s settings (hidden, nets, dropout, smoothing,
    mixup, weight_decay, soft_weight, soft_on, voice_weight; and onset_ms, onset_band: the
    live voice targets of `onset_voice`; end_hops, tail_ms, tail_weight, pause_weight,
    tail_band, tail_both, tail_room: the voice's end as a target, `voice_end`); `soft` (n, 6):
    a teacher's p(voice) and vowel probabilities per example for the live net (`_fit`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is faster than two
    try:
        s = slice(None, None, stride)
        if live is None:
            lf = dict(live_fit or {})
            onset = lf.pop("onset_ms", 0)
            over_band = lf.pop("onset_band", True)
            voice = onset_voice(ex, onset, over_band) if onset else ex.voice
            ends = {k: lf.pop(k) for k in ("end_hops", "tail_ms", "tail_weight", "pause_weight",
                                           "tail_band", "tail_both", "tail_room")
                    if k in lf}  # fmt: skip
            if ends:
                voice, vw = voice_end(ex, voice, **ends)
                lf["voice_w"] = vw[s]
            if soft is not None:
                if onset:  # the teacher's p(voice) is its centre's: the onsets shown as sooner
                    soft = soft.copy()
                    soft[:, 0] = np.maximum(soft[:, 0], voice - ex.voice)
                lf["soft"] = soft[s]
            live = fit_live(ex.live[s], voice[s], ex.vowel[s], epochs, seed, **lf)
        off = offline
        if off is None:
            off = _fit(ex.offline[s], ex.voice[s], ex.vowel[s], OFFLINE_HIDDEN, epochs, seed + 1)
    finally:
        torch.set_num_threads(threads)
    cmn = np.asarray(cmn_init, np.float64)
    offs = tuple(live_offsets)
    return VowelNet(live, off, info, cmn, front=front, live_offsets=offs, live_front=live_front,
                    offline_offsets=tuple(offline_offsets),
                    live_cmn_prior=int(live_cmn_prior),
                    live_cmn_voiced=bool(live_cmn_voiced),
                    offline_cvn=offline_cvn)  # fmt: skip
