"""Build the shipped lip-sync defaults (reproducible: same synthesizers, same files).

    .venv/bin/python scripts/build_default_profile.py [--out audio/profiles/default.json]
        [--net audio/profiles/vowel_net.npz] [--templates-only | --live-only | --net-only]
        [--voice-only] [--also SOURCE ...] [--seed N] [--mask FILE | --no-mask]
        [--keep-live FILE] [--keep-voice FILE] [--held-tracks [--held-steps STEP ...]]
        [--band-share SHARE] [--recorded-share SHARE]

`--voice-only` trains the recipe's offline nets as p(voice) nets of the --net file alone
(`VowelNet.offline_voice`): its live net and vowel nets stay as they are (issue 15,
thirty-sixth round: p(voice) nets trained over recorded music, beside the shipped vowels).

The shipped ``vowel_net.npz`` (issue 15, thirty-first round in docs/BENCHMARKS.md) is the
recipe below with Kokoro's voices reading English in training (their vowels not sung) and the
training voices' held vowels, its live MLP and start mean those of the recipe's own seed-0
build (the file shipped before it): a change of the offline half alone, the live hop unchanged.
Since the thirty-third round a causal mel net (`LIVE_MEL` "beside", `LIVE_MEL_FIT`'s size) trained
on that recipe's tracks reads the live vowels beside the kept live MLP (the third step).
Since the thirty-sixth round the offline p(voice) comes from nets of its own (the fourth step,
`--voice-only`): the recipe's offline nets trained with recorded music under 54 % of the copies
(`audio.recorded_backings`' training pool: `apt-get install $(python -m
audio.recorded_backings)` first) and the held vowels at three pitches, two training seeds
averaged; the vowels and the live nets stay the third step's. It was built with one thread
(`OMP_NUM_THREADS=1`): the mel nets' training (`fit_mel_conv`) sums in another order on more
threads and gives other nets (rebuilt on two, the MLPs came out bit-identical, the mel nets not):

    .venv/bin/python scripts/build_default_profile.py --net-only --net /tmp/live-seed0.npz
    .venv/bin/python scripts/build_default_profile.py --net-only --also kokoro-en --held-tracks \
        --also-unsung --seed 5 --keep-live /tmp/live-seed0.npz
    .venv/bin/python scripts/build_default_profile.py --net-only --live-only --live-mel beside \
        --also kokoro-en --held-tracks --also-unsung --seed 0
    OMP_NUM_THREADS=1 .venv/bin/python scripts/build_default_profile.py --net-only --voice-only \
        --also kokoro-en --held-tracks --held-steps -15 0 15 --also-unsung --voice-seeds 5 6 \
        --band-share 0.9 --recorded-share 0.6

The Japanese lip-sync model (`--lipsync-model japanese`, `audio.vowel_net.LIPSYNC_MODELS`) is
the same recipe with Kokoro's voices in training, built as docs/BENCHMARKS.md says (issue 15,
twenty-third round):

    .venv/bin/python scripts/build_default_profile.py --net-only --also kokoro --seed 1 \
        --no-mask --net audio/profiles/vowel_net_ja.npz

1. ``default.json``: MFCC templates from espeak-ng sustained vowels of
   `audio.calibration.TRAIN_VOICES` (`audio.calibration.HELDOUT_VOICES` are never used), and the
   name of the network file, which makes the default engines take their vowels from it.
2. ``vowel_net.npz``: `audio.vowel_net.VowelNet` trained (`audio.vowel_net_train`) on the
   sentences of `TRAIN_SOURCES` with augmentation (the band underneath drawn from the
   training styles of `audio.backings`; its validation style and the demo song never). The whole flite synthesizer — and the
   speakers it shares with festival (kal, slt) — is held out, and the training voices' vowels
   are also sung (`audio.singing`) at 100 Hz-1 kHz, so `kagura bench lipsync` and the
   tests measure the shipped net on a synthesizer and speakers it never heard. Its offline
   half is three nets averaged: an MLP on all training voices, one without festival's voices
   of other languages (`MORE_WITHOUT_LANGS`), and a net of convolutions along mel and time
   (`audio.mel_conv`, `OFFLINE_MEL`) on all training voices. With `MASK` (off; issue 15,
   twenty-fourth round) they also hear a learned voice mask's voice (`audio.voice_mask`,
   trained first on the build's tracks, or given with --mask), and with "vowels" three more
   nets trained without it give p(voice) (or, with --keep-voice, another file's offline nets).
   `MASK_POOLS` and `MASK_HELD` make the mask hear longer spans and train on held vowels
   (twenty-sixth round).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audio.backings import TRAIN_STYLES
from audio.calibration import (
    DEFAULT_PROFILE,
    TRAIN_VOICES,
    Profile,
    save_profile,
    synth_vowel,
    templates_from_signal,
)
from audio.mfcc import MfccSettings
from audio.vowel_net import (
    DEFAULT_NET,
    FRONT_BOTH,
    FRONT_MASK,
    FRONT_SEPARATION,
    LIVE_FRONT_STEADY,
    VowelNet,
)
from core.avatar import VOWELS

HELD_OUT_SOURCE = "flite"
N_AUG = 5
EPOCHS = 8
FRONT = FRONT_SEPARATION
LIVE_OFFSETS = (-8, -6, -4, -2, -1, 0)
LIVE_FRONT = LIVE_FRONT_STEADY
OFFLINE_OFFSETS = (-12, -8, -5, -3, -1, 0, 1, 3, 5, 8, 12)
BAND_SHARE = 0.55  # augmented copies with a band underneath
# the live running cepstral mean's start weight, in hops: light, so a new voice's own mean takes
# over within a second (chosen on festival and espeak-ng, never on flite; docs/BENCHMARKS.md)
LIVE_CMN_PRIOR = 50
LIVE_CMN_VOICED = True  # only hops heard as a voice move it (a band must not become the mean)
# A second offline net, averaged with the first: the same recipe (3 augmented copies) on the
# corpus without festival's voices of other languages (the fourth round's corpus). The voices
# of other languages bring the band and the pauses most (docs/BENCHMARKS.md); the net without
# them keeps English vowels the way the first hears them less well.
MORE_WITHOUT_LANGS = ("it", "fi", "cs", "ca")
MORE_N_AUG = 3
# augmentation beyond `audio.vowel_net_train.examples`' defaults: the band underneath drawn
# from backings of several styles (`audio.backings`), its validation style never (issue 15:
# trained over one band alone, the net heard a voice in most of another song's instrumental)
AUG: dict = {"backings": TRAIN_STYLES}
# Tried on the validation voices (`app/bench_lipsync_split.py`, never flite) and not kept
# (docs/BENCHMARKS.md): offline nets of other training seeds averaged in, and the offline
# cepstra also divided by the clip's spread (`audio.vowel_net.clip_cvn`).
MORE_SEEDS = 0
OFFLINE_CVN = False
# The nets' kind: {} is an MLP over stacked hops; else a convolutional net's settings
# (`audio.vowel_net_train.fit_tcn`: channels, dilations)
LIVE_TCN: dict = {}
OFFLINE_TCN: dict = {}
# Causal convolutions along mel and time for the live engine (`audio.mel_conv.MelConv` with
# `causal`, run hop by hop; issue 15, thirty-second round): "" none; "instead" of the live MLP
# (it opened later); "beside" it, its p(vowel) averaged with the MLP's while p(voice), and so
# the gate, stays the MLP's (`VowelNet.live_more`). With a `base` (--live-only), "beside"
# keeps the base's live MLP and trains the mel net alone. `LIVE_MEL_FIT`: `fit_mel_conv`'s
# settings beyond its defaults ("offsets": the head's, `LIVE_OFFSETS` otherwise): half
# its channels and half its head, the size the live hop's budget affords (thirty-third round)
LIVE_MEL = ""
LIVE_MEL_FIT: dict = {"channels": (8, 16), "hidden": (64,)}
# Convolutions along mel and time (`audio.mel_conv.MelConv`, issue 15's twelfth round): ""
# none; "instead" of each offline MLP; "beside" the offline MLPs, one more averaged in. Both
# beat the MLPs alone on the validation voices by 3-4 points and tie with each other there
# (docs/BENCHMARKS.md); "beside" shuts more of the unheard style's pauses and runs one such
# net, not two.
OFFLINE_MEL = "beside"
MEL: dict = {}  # `audio.vowel_net_train.fit_mel_conv`'s settings beyond its defaults
# The live MLP's training beyond `audio.vowel_net_train.fit_live`'s defaults (`build_net`).
# Tried, not shipped (docs/BENCHMARKS.md, issue 15's thirteenth to sixteenth rounds): the
# offline nets as its teacher (`soft_weight`, `voice_weight`), twice as wide, the voice's
# onsets as targets as soon as the window's newest ms hold them (`onset_ms`), the voice's end
# weighted up (`tail_ms`, `tail_weight`: more pauses shut over a band, fewer vowels read
# there; `audio.vowel_net_train.voice_end`) — better vowels
# on the validation voices, and the onset targets open in time, but against the shipped file
# every full build lost vocal pauses over a band or vowels over an unheard backing there, or
# opened late (its offline nets, rebuilt on another CPU, are another draw); the live net alone
# retrained on the shipped offline nets (`--live-only`) lost vowels over a band, or shut fewer
# pauses live on the voices never used to choose.
LIVE_FIT: dict = {}
# The training voices' tracks also speak `audio.speech_corpus.EXTRA_TEXTS` (36 more English
# sentences, 6 more in each other language but Japanese; issue 15, twentieth round). The
# validation and test voices never do: `training_voices` has neither.
EXTRA_TEXTS = False
# The training voices also include `audio.speech_corpus.extra_voices` (festival's other three
# Czech speakers; issue 15, twentieth round).
EXTRA_VOICES = False
# Japanese sources the training voices also include (issue 15, twenty-second round):
# "open-jtalk" (`audio.speech_corpus.jtalk_voices`, Mei, a recorded woman through HTS) and
# "kokoro" (`kokoro_voices`, four women and a man through a neural synthesizer); and English
# ones: "kokoro-en" (`kokoro_english_voices`, the same voices reading English), "piper".
ALSO: tuple[str, ...] = ()
# The sources the shipped file's offline nets and live mel net also trained on (its three-step
# build, in the docstring; its live MLP did not): what `kagura bench lipsync` takes out of its
# tests
SHIPPED_ALSO: tuple[str, ...] = ("kokoro-en",)
# A learned voice mask (`audio.voice_mask`) as an offline front-end (issue 15, twenty-fourth
# round): "" none; "instead" of `FRONT`'s separation; "beside" it; "vowels": beside it for
# the vowels, while p(voice) comes from offline nets that do not hear it. The build trains the
# mask first (scripts/train_voice_mask.py's settings) unless it is given a trained one (--mask).
MASK = ""
# The separated voices' clip means and spreads start from their training means, worth
# FRONT_PRIOR_HOPS hops, as the mix's do (issue 15, twenty-fifth round): alone, a short clip of
# one held vowel becomes its own mean and its separated voice says nothing of the vowel. "" none,
# "use" in use only, "train" in training and in use (cost a backing's pauses: docs/BENCHMARKS.md),
# "mask": in use, the mask's voice alone (twenty-sixth round: on the harmonic/percussive voice
# they moved p(voice), whose nets never learnt them, and shut the mouth on short clips)
FRONT_PRIORS = ""
FRONT_PRIOR_HOPS = 50
# More sung tracks (rounds of `_tracks`' sung notes, other seeds) in the mask's training alone:
# the mask took held harmonic notes for the band's and cost sung vowels (twenty-fifth round)
MASK_SUNG = 0
# Spans of hops (lo, hi) around each hop whose mean log spectrum the mask also hears
# (`audio.voice_mask.pooled_means`), and flat held vowels of the training espeak-ng voices in
# its training alone (`_held`): the twenty-fifth round's lead for the mask's cost on held and
# sung notes, measured in the twenty-sixth (docs/BENCHMARKS.md: it does not ship)
MASK_POOLS: tuple[tuple[int, int], ...] = ()
MASK_HELD = False
# The vowel nets also train on the training espeak-ng voices' flat held vowels (`_held`; issue
# 15, twenty-ninth round: more speech in training shut the mouth on held notes; tried with
# "kokoro-en", not shipped: docs/BENCHMARKS.md)
HELD_TRACKS = False
# The held vowels' pitches: each voice's own, moved by these espeak-ng pitch steps (`_held`)
HELD_STEPS = (0,)
# The `ALSO` sources' vowels are sung in the training's sung tracks too (`_sung`); False: only
# the other training voices' are (twenty-ninth round: Kokoro's English cost the far voice's
# sung vowels)
ALSO_SUNG = True
# More rounds of sung notes (`_more_sung`: other notes, other seeds; of the voices `ALSO_SUNG`
# lets sing) in the vowel nets' training (twenty-ninth round: natural speech in training cost
# the far voice's sung vowels)
SUNG_ROUNDS = 0


def training_voices(
    held_out: str = HELD_OUT_SOURCE, extra: bool = False, also: tuple[str, ...] = ()
):
    """Corpus voices of every source but `held_out`, less the speakers `held_out` has; `extra`:
    and `audio.speech_corpus.extra_voices`, and the voices of the sources `also` names (see
    `ALSO`), after them."""
    from audio.speech_corpus import extra_voices, named_voices, voices

    spk = {v.speaker for v in voices(held_out)}
    more = (extra_voices() if extra else []) + [v for s in also for v in named_voices(s)]
    return [v for v in voices() + more if v.source != held_out and v.speaker not in spk]


def build_net(
    held_out: str = HELD_OUT_SOURCE,
    n_aug: int = N_AUG,
    epochs: int = EPOCHS,
    front: str = FRONT,
    live_offsets: tuple[int, ...] = LIVE_OFFSETS,
    live_front: str = LIVE_FRONT,
    offline_offsets: tuple[int, ...] = OFFLINE_OFFSETS,
    band_share: float = BAND_SHARE,
    live_cmn_prior: int = LIVE_CMN_PRIOR,
    base=None,
    live_cmn_voiced: bool = LIVE_CMN_VOICED,
    more_without: tuple[str, ...] = MORE_WITHOUT_LANGS,
    aug: dict | None = None,
    offline_cvn: bool | None = None,
    seed: int = 0,
    more_seeds: int | None = None,
    live_tcn: dict | None = None,
    offline_tcn: dict | None = None,
    live_mel: str | None = None,
    live_mel_fit: dict | None = None,
    cache: dict | None = None,
    offline_mel: str | None = None,
    mel: dict | None = None,
    live_fit: dict | None = None,
    extra_texts: bool | None = None,
    extra_voices: bool | None = None,
    also: tuple[str, ...] | None = None,
    mask: str | None = None,
    mask_file: str | None = None,
    front_priors: str | None = None,
    front_prior_hops: int | None = None,
    mask_sung: int | None = None,
    mask_pools: tuple[tuple[int, int], ...] | None = None,
    mask_held: bool | None = None,
    keep_voice: Path | None = None,
    held_tracks: bool | None = None,
    also_sung: bool | None = None,
    sung_rounds: int | None = None,
    held_steps: tuple[int, ...] | None = None,
    voice_for: VowelNet | None = None,
):
    """The net of the recipe; with `base` (a VowelNet of the same recipe) only its live half is
    retrained (same tracks, same augmentation draws) and its offline nets are kept.
    `more_without`: languages whose voices the second offline net is trained without (none: no
    second net); `seed`: augmentation draws and training (0: the shipped build). `aug`:
    augmentation settings for `audio.vowel_net_train.examples` (its `warp_range`, `lifter`),
    over the recipe's (`AUG`: a setting `aug` does not name stays the recipe's).
    `offline_cvn`: the offline cepstra also divided by the clip's spread (`OFFLINE_CVN` when
    None). `more_seeds`: offline nets of other training
    seeds averaged in (`MORE_SEEDS` when None). `live_tcn` / `offline_tcn`: that half is a
    convolutional net (`audio.vowel_net.Tcn`, `fit_tcn`'s settings: channels, dilations) over
    the hop vectors instead of an MLP over stacked hops. `live_mel`, `live_mel_fit`: `LIVE_MEL`,
    `LIVE_MEL_FIT` when None.
    `cache`: a dict that keeps the
    examples between calls of the same data settings (recipes that differ in their nets
    alone train on the very same examples). `offline_mel`, `mel`: `OFFLINE_MEL`, `MEL` when
    None. `live_fit`: the live MLP's training (`audio.vowel_net_train.fit_live`: hidden, nets,
    dropout, smoothing, mixup, weight_decay; soft_weight with teacher_t: the live net also
    learns the offline nets' vowel probabilities (`base`'s, else this build's, trained first),
    raised to 1 / teacher_t); `LIVE_FIT` when None. `extra_texts`: the training voices' speech
    tracks also speak `audio.speech_corpus.EXTRA_TEXTS` (`EXTRA_TEXTS` when None).
    `extra_voices`: `training_voices` with `audio.speech_corpus.extra_voices` (`EXTRA_VOICES`
    when None); `also`: with the voices of those sources (`ALSO` when None). `mask`: the learned
    voice mask's place (`MASK` when None; "vowels": p(voice) from offline nets trained on the
    same examples without the mask's block, `VowelNet.offline_voice`); `mask_file`: the
    trained mask (`scripts/train_voice_mask.py`; None: trained here first). `front_priors`:
    the separated voices' clip statistics start from their training means, worth
    `front_prior_hops` hops, "use": in use only, "train": in training too (`FRONT_PRIORS`,
    `FRONT_PRIOR_HOPS` when None). `mask_sung`: more sung tracks for the mask's training alone
    (`MASK_SUNG` when None); `mask_pools`, `mask_held`: `MASK_POOLS`, `MASK_HELD` when None.
    `keep_voice`: a net file whose offline nets give p(voice) instead (`kept_voice`).
    `held_tracks`: the training tracks also hold `_held`'s vowels (`HELD_TRACKS` when None);
    `also_sung`: the `also` voices' vowels are sung too (`ALSO_SUNG` when None); `sung_rounds`:
    more rounds of sung notes (`SUNG_ROUNDS` when None); `held_steps`: the held vowels' pitch
    steps (`HELD_STEPS` when None). `voice_for`: the recipe's offline nets are trained as the
    p(voice) nets of that net (its `offline_voice`; no live net is trained) and that net, its
    live and vowel nets as they were, is returned."""
    extra_texts = EXTRA_TEXTS if extra_texts is None else bool(extra_texts)
    extra_voices = EXTRA_VOICES if extra_voices is None else bool(extra_voices)
    also = tuple(ALSO if also is None else also)
    held_tracks = HELD_TRACKS if held_tracks is None else bool(held_tracks)
    also_sung = ALSO_SUNG if also_sung is None else bool(also_sung)
    sung_rounds = SUNG_ROUNDS if sung_rounds is None else int(sung_rounds)
    held_steps = tuple(HELD_STEPS if held_steps is None else held_steps)
    if voice_for is not None and base is not None:
        raise ValueError("voice_for: not with base (one keeps the offline nets, one the live)")
    if voice_for is not None:  # before any training: its offline nets must read our inputs
        cvn_on = bool(OFFLINE_CVN if offline_cvn is None else offline_cvn)
        same = {
            "front": voice_for.front == front,
            "offline_offsets": voice_for.offline_offsets == tuple(offline_offsets),
            "mask": voice_for.mask is None and not (MASK if mask is None else mask),
            "offline_cvn": (voice_for.offline_cvn is not None) == cvn_on,
        }
        differ = [k for k, ok in same.items() if not ok]
        if differ:
            raise ValueError(f"expected a net whose offline nets read this build's inputs "
                             f"(it differs in {', '.join(differ)})")  # fmt: skip
    live_fit = dict(LIVE_FIT if live_fit is None else live_fit)
    teacher_t = float(live_fit.pop("teacher_t", 1.0))
    distil = live_fit.get("soft_weight", 0.0) > 0
    offline_mel = OFFLINE_MEL if offline_mel is None else offline_mel
    mel = MEL if mel is None else mel
    if offline_mel not in ("", "instead", "beside"):
        raise ValueError(f"offline_mel: expected '', 'instead' or 'beside', got {offline_mel!r}")
    live_tcn = LIVE_TCN if live_tcn is None else live_tcn
    live_mel = LIVE_MEL if live_mel is None else live_mel
    if live_mel not in ("", "instead", "beside"):
        raise ValueError(f"live_mel: expected '', 'instead' or 'beside', got {live_mel!r}")
    if live_mel and live_tcn:
        raise ValueError("live_mel: not with live_tcn (the live MLP's place)")
    mel_fit = dict(LIVE_MEL_FIT if live_mel_fit is None else live_mel_fit)
    mel_fit.setdefault("offsets", tuple(live_offsets))
    offline_tcn = OFFLINE_TCN if offline_tcn is None else offline_tcn
    more_seeds = MORE_SEEDS if more_seeds is None else more_seeds
    aug = {**AUG, **(aug or {})}
    from audio.speech_corpus import named_voices
    from audio.vowel_net_train import (
        cmn_prior,
        cvn_prior,
        examples,
        fit_mel_conv,
        fit_tcn,
        train,
        train_offline,
    )
    from audio.vowel_net_train import front_priors as front_prior_stats

    mask_place = MASK if mask is None else mask
    if mask_place not in ("", "instead", "beside", "vowels"):
        raise ValueError(f"mask: expected '', 'instead', 'beside' or 'vowels', got {mask_place!r}")
    cache = {} if cache is None else cache
    specs = training_voices(held_out, extra_voices, also)
    also_specs = {v for s in also for v in named_voices(s)}

    def sung(voices):
        """The voices whose vowels are sung (`also_sung` False: not the `also` sources')."""
        return voices if also_sung else [v for v in voices if v not in also_specs]

    def tracks_without_langs():
        """The second offline net's tracks: the voices but those of `more_without`'s languages."""
        sub = [v for v in specs if v.lang not in more_without]
        return _tracks(sub, extra_texts, sung(sub))

    key = ("tracks", held_out, extra_texts, extra_voices, also, held_tracks, also_sung,
           sung_rounds, held_steps)  # fmt: skip
    if key not in cache:
        cache.clear()  # one corpus at a time: the examples are large
        singing = sung(specs)
        cache[key] = (_tracks(specs, extra_texts, singing) + _more_sung(singing, sung_rounds)
                      + (_held(specs, held_steps) if held_tracks else []))  # fmt: skip
    tracks = cache[key]
    mask = None
    if mask_place and base is None:  # trained on this build's training tracks
        mask_pools = MASK_POOLS if mask_pools is None else tuple(mask_pools)
        mask = _voice_mask(mask_file, mask_tracks(specs, tracks, mask_sung, mask_held), mask_pools)
        front = FRONT_MASK if mask_place == "instead" else FRONT_BOTH
    init = cmn_prior(tracks) if base is None else base.cmn_init
    priors_mode = FRONT_PRIORS if front_priors is None else front_priors
    if priors_mode not in ("", "use", "train", "mask"):
        raise ValueError(
            f"front_priors: expected '', 'use', 'train' or 'mask', got {priors_mode!r}"
        )
    prior_hops = FRONT_PRIOR_HOPS if front_prior_hops is None else front_prior_hops
    if base is not None:
        front, offline_offsets, mask = base.front, base.offline_offsets, base.mask
        cvn = base.offline_cvn
        priors, prior_hops = base.front_priors, base.front_prior_hops
    else:
        cvn = cvn_prior(tracks) if (OFFLINE_CVN if offline_cvn is None else offline_cvn) else None
        if priors_mode == "mask" and front == FRONT_BOTH:
            # the harmonic/percussive voice as the p(voice) nets learnt it: no prior
            priors = [None, *front_prior_stats(tracks, FRONT_MASK, mask)]
        else:
            priors = front_prior_stats(tracks, front, mask) if front and priors_mode else []
    trained_priors = priors if priors_mode == "train" and base is None else None
    if live_tcn or live_mel == "instead":
        live_offsets = (0,)
    if offline_tcn:
        offline_offsets = (0,)

    def hop_examples(trs, copies):
        """The hop vectors (offsets (0,)): stacked below for an MLP half, as before."""
        with_off = base is None or distil
        k = (len(trs), copies, seed, front, live_front, band_share, live_cmn_prior,
             with_off, live_cmn_voiced, None if cvn is None else cvn.tobytes(), repr(aug),
             bool(trained_priors), prior_hops)  # fmt: skip
        if k not in cache:
            cache[k] = examples(
                trs, init, n_aug=copies, seed=seed, front=front, live_offsets=(0,),
                live_front=live_front, offline_offsets=(0,), band_share=band_share,
                live_cmn_prior=live_cmn_prior, offline=with_off,
                live_cmn_voiced=live_cmn_voiced, offline_cvn=cvn, mask=mask,
                front_priors=trained_priors, front_prior_hops=prior_hops, **aug,
            )  # fmt: skip
        return cache[k]

    def offline_net(h, off_seed, conv=False):
        if offline_tcn:
            return fit_tcn(h.offline, h.voice, h.vowel, h.lengths, causal=False, epochs=epochs,
                           seed=off_seed, **offline_tcn)  # fmt: skip
        if conv:
            return fit_mel_conv(h.offline, h.voice, h.vowel, h.lengths, offline_offsets,
                                epochs=epochs, seed=off_seed, **mel)  # fmt: skip
        return train_offline(_stacked(h, (0,), offline_offsets), epochs=epochs, seed=off_seed - 1)

    hop = hop_examples(tracks, n_aug)
    ex = _stacked(hop, live_offsets, offline_offsets)
    live_net = None if voice_for is None else voice_for.live  # kept: not trained
    if voice_for is not None:
        live_tcn = live_mel = None
        distil = False
    if live_tcn:
        live_net = fit_tcn(hop.live, hop.voice, hop.vowel, hop.lengths, causal=True,
                           epochs=epochs, seed=seed, **live_tcn)  # fmt: skip
    live_more = []
    if live_mel:
        mel_net = fit_mel_conv(hop.live, hop.voice, hop.vowel, hop.lengths, epochs=epochs,
                               seed=seed, causal=True, **mel_fit)  # fmt: skip
        if live_mel == "instead":
            live_net = mel_net
        else:
            live_more = [mel_net]
            if base is not None:  # its live MLP kept: the gate as it was
                live_net, live_offsets = base.live, base.live_offsets
    kept_off = None if base is None else base.offline
    if base is None and (offline_tcn or offline_mel == "instead"):
        kept_off = offline_net(hop, seed + 1, conv=offline_mel == "instead")
    names = ", ".join(v.name for v in specs)
    info = (
        f"scripts/build_default_profile.py: {len(ex.voice)} hops ({n_aug} augmented copies) of "
        f"{names}; held out: {held_out}; front-ends: offline {front or 'none'}, live "
        f"{live_front or 'none'}; live mean start {live_cmn_prior} hops"
        + (", moved by voiced hops only" if live_cmn_voiced else "")
        + ("; offline cepstra normalised by the clip's spread" if cvn is not None else "")
        + (f"; augmentation {aug}" if aug else "")
        + (
            f"; backings under {band_share:g} of the augmented copies"
            if band_share != BAND_SHARE
            else ""
        )
        + (f"; seed {seed}" if seed else "")
        + ("; live half retrained (--live-only)" if base is not None else "")
        + (f"; live net convolutional {live_tcn}" if live_tcn else "")
        + (
            f"; live vowels from causal mel and time convolutions ({live_mel} the MLP"
            f"{', kept' if live_more and base is not None else ''}) {mel_fit}"
            if live_mel
            else ""
        )
        + (f"; offline net convolutional {offline_tcn}" if offline_tcn else "")
        + ("; offline nets of mel and time convolutions" if offline_mel == "instead" else "")
        + ("; with the extra training sentences" if extra_texts else "")
        + ("; with the extra training voices" if extra_voices else "")
        + (f"; with the voices of {', '.join(also)}" if also else "")
        + (" (their vowels not sung)" if also and not also_sung else "")
        + ("; with the training espeak-ng voices' held vowels" if held_tracks else "")
        + (f" at pitch steps {list(held_steps)}" if held_tracks and held_steps != (0,) else "")
        + (f"; with {sung_rounds} more round(s) of sung notes" if sung_rounds else "")
    )
    more, more_info = [], ""
    if base is not None:  # its offline nets are kept: so is what the file says of them
        more_info = "".join(f"; {p}" for p in base.info.split("; ") if p.startswith("averaged"))
    if base is None:
        # more offline nets on the same examples, other training seeds: averaged, their own
        # mistakes on an unheard voice partly cancel
        for k in range(more_seeds):
            more.append(offline_net(hop, seed + 100 * (k + 1) + 1))
        if more_seeds:
            more_info += f"; averaged with {more_seeds} more offline net(s), other seeds"
        if offline_mel == "beside":
            more.append(offline_net(hop, seed + 1, conv=True))
            more_info += "; averaged with an offline net of mel and time convolutions"
        if more_without:
            more.append(offline_net(hop_examples(tracks_without_langs(), MORE_N_AUG), seed + 1,
                                    conv=offline_mel == "instead"))  # fmt: skip
            more_info += (
                f"; averaged with a second offline net ({MORE_N_AUG} copies) without the "
                f"voices of {', '.join(more_without)}"
            )
    soft = None
    if distil:
        teacher = base
        if teacher is None:
            if kept_off is None:  # the offline MLP `train` would fit: the same rows and seed
                kept_off = offline_net(hop, seed + 1)
            teacher = VowelNet(None, kept_off, offline_offsets=offline_offsets, offline_more=more)
        soft = _teacher(teacher, hop, teacher_t)
    if live_fit:
        info += f"; live net {live_fit}" + (f", teacher T {teacher_t}" if distil else "")
    net = train(
        ex, init, info, epochs=epochs, seed=seed, front=front, live_offsets=live_offsets,
        live_front=live_front, offline_offsets=offline_offsets, live_cmn_prior=live_cmn_prior,
        offline=kept_off, live_cmn_voiced=live_cmn_voiced, offline_cvn=cvn, live=live_net,
        live_fit=live_fit, soft=soft,
    )  # fmt: skip
    del ex
    net.offline_more = base.offline_more if base is not None else more
    net.live_more = live_more
    net.mask = mask
    if voice_for is not None:
        return _as_voice_nets(net, voice_for, more_info)
    if keep_voice is not None:  # before a `base`'s: it is asked for by name
        net.offline_voice, net.voice_blocks = kept_voice(net, keep_voice)
        net.info += f"; p(voice) from {Path(keep_voice).name}'s offline nets"
    elif base is not None:
        net.offline_voice, net.voice_blocks = base.offline_voice, base.voice_blocks
    elif mask_place == "vowels":
        without = tracks_without_langs if more_without else None
        net.offline_voice = _voice_nets(hop, offline_net, without, hop_examples, offline_mel, seed)
        net.voice_blocks = 2
        net.info += "; p(voice) from offline nets that do not hear the mask's voice"
    net.info += more_info
    net.front_priors, net.front_prior_hops = priors, prior_hops
    if priors and base is None:
        which = "the mask's voice's" if priors_mode == "mask" else "the separated voices'"
        net.info += (f"; {which} clip statistics start from their training means "
                     f"({prior_hops} hops, {'in training and ' * (priors_mode == 'train')}in use)")  # fmt: skip
    return net


def _as_voice_nets(trained: VowelNet, net: VowelNet, more_info: str) -> VowelNet:
    """`net` with `trained`'s offline nets as its p(voice) nets (`VowelNet.offline_voice`),
    its live and vowel nets as they were (`build_net` checked that they read the same inputs)."""
    out = dataclasses.replace(net)
    out.offline_voice = [trained.offline, *trained.offline_more]
    out.voice_blocks = 2 if net.front else 1
    recipe = trained.info.split(": ", 1)[1]  # without the script's name
    out.info = (net.info.split("; p(voice) from ")[0]
                + f"; p(voice) from offline nets of their own ({recipe}{more_info})")  # fmt: skip
    return out


def kept_voice(net, path: Path) -> tuple[list, int]:
    """(nets, blocks): the nets that give the net file at `path` its p(voice) (its
    `offline_voice` where it has some, else its offline nets), as `net`'s p(voice) nets
    (`VowelNet.offline_voice`): they must read `net`'s first blocks at its offsets."""
    from audio.vowel_net import load_net

    kept = load_net(path)
    fits = net.front.startswith(kept.front) and kept.offline_offsets == net.offline_offsets
    if kept.offline_voice and fits:  # a file that kept another's already: the same nets again
        return kept.offline_voice, kept.voice_blocks
    if kept.offline is None or kept.mask is not None or not fits:
        raise ValueError(f"{path}: expected a net without a mask whose offline half reads "
                         f"{net.front}'s first blocks at offsets {net.offline_offsets}")  # fmt: skip
    return [kept.offline, *kept.offline_more], 2 if kept.front else 1


def keep_live(net, path: Path) -> None:
    """`net` takes the live net and start mean of the net file at `path` (a change of the
    offline half alone ships without a new draw of the live net); a file whose live net reads
    other inputs is named."""
    from audio.vowel_net import load_net

    kept = load_net(path)
    inputs = ("live_offsets", "live_front", "live_cmn_prior", "live_cmn_voiced")
    differ = [k for k in inputs if getattr(kept, k) != getattr(net, k)]
    if differ or kept.cmn_init.shape != net.cmn_init.shape:
        raise ValueError(f"{path}: expected a live net reading this build's inputs "
                         f"(it differs in {', '.join(differ) or 'cmn_init'})")  # fmt: skip
    net.live, net.cmn_init, net.live_more = kept.live, kept.cmn_init, kept.live_more
    net.info += f"; its live net and start mean are {Path(path).name}'s"


def _voice_mask(path: str | None, tracks: list, pools: tuple[tuple[int, int], ...] = ()):
    """The trained mask at `path`; where there is none, one trained now on the build's training
    `tracks` (scripts/train_voice_mask.py's settings, hearing `pools`), then kept at `path` if
    one is named ("cached": in the user's cache folder under the tracks' names and the pools,
    for the split bench's light builds)."""
    from audio.voice_mask import load_mask_file, save_mask_file

    if path == "cached":
        from core.paths import cache_dir

        key = "|".join(t.name for t in tracks) + (f"|pools {list(pools)}" if pools else "")
        names = hashlib.sha1(key.encode()).hexdigest()[:12]
        path = str(cache_dir("voice-mask") / f"{names}.npz")
    if path and Path(path).exists():
        return load_mask_file(path)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from train_voice_mask import train_mask

    mask, info = train_mask(tracks, pools=pools)
    print(info, flush=True)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_mask_file(path, mask, info)
    return mask


def _voice_nets(hop, offline_net, tracks_without_langs, hop_examples, offline_mel, seed) -> list:
    """The offline nets of `build_net` again, on the examples' first two hop-vector blocks (the
    mix's and the harmonic/percussive voice's): the nets of the recipe without the mask
    (`tracks_without_langs`: the second offline net's tracks, or None for none)."""
    from audio.vowel_net import HOP_DIM

    def without_mask(h):
        return dataclasses.replace(h, offline=np.ascontiguousarray(h.offline[:, : 2 * HOP_DIM]))

    h = without_mask(hop)
    nets = [offline_net(h, seed + 1)]
    if offline_mel == "beside":
        nets.append(offline_net(h, seed + 1, conv=True))
    if tracks_without_langs is not None:
        more = hop_examples(tracks_without_langs(), MORE_N_AUG)
        nets.append(offline_net(without_mask(more), seed + 1))
    return nets


def _teacher(net, hop, t: float = 1.0) -> np.ndarray:
    """(n, 6) p(voice) and the vowel probabilities `net`'s offline nets (averaged, as in use)
    give each hop of the hop-vector examples `hop`, track by track; the vowels raised to 1 / `t`
    and renormalised."""
    out, at = [], 0
    for n in np.asarray(hop.lengths).tolist():
        pv, pw = net.offline_hop_probs(hop.offline[at : at + n])
        at += n
        pw = np.asarray(pw, np.float64) ** (1.0 / t)
        pw = pw / pw.sum(axis=1, keepdims=True)
        out.append(np.concatenate([np.asarray(pv)[:, None], pw], 1).astype(np.float32))
    return np.concatenate(out)


def _stacked(hop, live_offsets, offline_offsets):
    """Hop-vector examples as an MLP's rows: each track's hops stacked at the offsets."""
    from audio.vowel_net_train import Examples, stack_runs

    return Examples(
        stack_runs(hop.live, hop.lengths, live_offsets),
        stack_runs(hop.offline, hop.lengths, offline_offsets),
        hop.voice,
        hop.vowel,
        hop.lengths,
        hop.heard,
        hop.banded,
        hop.roomed,
    )


def _sung(specs, seed: int = 0) -> list:
    """Each pair of voices' vowel envelopes sung from 100 Hz to 1 kHz, one track per pair
    (seeds `seed`, `seed` + 2, ...)."""
    from audio.lipsync_eval import sung_track

    return [
        sung_track(specs[i : i + 2], 24, seed=seed + i, f0_range=(100.0, 1000.0))
        for i in range(0, len(specs), 2)
    ]


def _more_sung(specs, rounds: int) -> list:
    """`rounds` more of `_tracks`' sung tracks (other notes, other seeds), for the mask."""
    return [t for r in range(rounds) for t in _sung(specs, 1000 * (r + 1))]


def mask_tracks(specs, tracks: list, sung: int | None = None, held: bool | None = None) -> list:
    """What the mask trains on: the build's training `tracks`, `sung` more rounds of sung notes
    (`_more_sung`) and with `held` the voices' held vowels (`_held`); `MASK_SUNG`, `MASK_HELD`
    when None."""
    sung = MASK_SUNG if sung is None else sung
    held = MASK_HELD if held is None else held
    return tracks + _more_sung(specs, sung) + (_held(specs) if held else [])


def _held(specs, steps: tuple[int, ...] = (0,)) -> list:
    """The five vowels of each espeak-ng voice of `specs` (English and Japanese; not
    `audio.calibration.HELDOUT_VOICES`' voices) sustained at its pitch moved by each of
    `steps`, one track per voice."""
    from audio.calibration import HELDOUT_VOICES
    from audio.lipsync_eval import held_vowel_track, held_vowels

    out = []
    held_out = {v for v, _ in HELDOUT_VOICES}
    for i, v in enumerate(specs):
        if v.source == "espeak-ng" and v.voice.split("+")[0] in ("en", "en-us", "ja") \
                and v.voice not in held_out:  # fmt: skip
            parts = held_vowels([(v.voice, int(v.pitch) + d) for d in steps])
            out.append(held_vowel_track(parts, f"held vowels ({v.name})", seed=500 + i))
    return out


def _tracks(specs, extra: bool = False, sung=None):
    """The voices' sentences (`extra`: with `audio.speech_corpus.EXTRA_TEXTS`), and the vowel
    envelopes of their `TEXTS` (of `sung`'s voices when given) sung from 100 Hz to 1 kHz (the
    same with or without `extra`)."""
    from audio.lipsync_eval import speech_track

    return [speech_track(v, extra=extra) for v in specs] + _sung(specs if sung is None else sung)


def build(templates_per_voice: int = 3) -> Profile:
    s = MfccSettings()
    sr = 16000
    templates: dict[str, list[np.ndarray]] = {v: [] for v in VOWELS[:5]}
    for voice, pitch in TRAIN_VOICES:
        for v in VOWELS[:5]:  # no N: espeak-ng's English voices do not sustain a hum
            x = synth_vowel(voice, pitch, v, sr)
            t, _ = templates_from_signal(x, sr, s, templates_per_voice)
            templates[v].append(t)
    voices = ", ".join(f"{v} -p {p}" for v, p in TRAIN_VOICES)
    return Profile(
        sr,
        s,
        {v: np.concatenate(t) for v, t in templates.items()},
        -60.0,
        "",  # no timestamp: the file is reproducible
        f"scripts/build_default_profile.py: espeak-ng sustained vowels of {voices}",
        {"vowel_net": DEFAULT_NET.name},
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_PROFILE)
    ap.add_argument("--net", type=Path, default=DEFAULT_NET)
    ap.add_argument("--templates-only", action="store_true", help="do not retrain the net")
    ap.add_argument(
        "--live-only", action="store_true", help="retrain only the live half of the --net file"
    )
    ap.add_argument("--net-only", action="store_true", help="build the --net file only")
    ap.add_argument(
        "--voice-only", action="store_true",
        help="retrain only the p(voice) nets of the --net file (its live and vowel nets kept)",
    )  # fmt: skip
    ap.add_argument(
        "--live-mel",
        choices=("instead", "beside"),
        default=None,
        help="causal mel and time convolutions for the live vowels (LIVE_MEL)",
    )
    ap.add_argument(
        "--also", nargs="+", default=None, metavar="SOURCE", help="sources ALSO trained on"
    )
    ap.add_argument("--seed", type=int, default=0, help="training seed (0: the shipped build)")
    ap.add_argument(
        "--voice-seeds", type=int, nargs="+", default=None, metavar="SEED",
        help="with --voice-only: the p(voice) nets of each of these training seeds, averaged",
    )  # fmt: skip
    ap.add_argument(
        "--held-tracks",
        action="store_true",
        help="the nets also train on held vowels (HELD_TRACKS)",
    )
    ap.add_argument(
        "--held-steps", type=int, nargs="+", default=None, metavar="STEP",
        help="with --held-tracks: the held vowels' espeak-ng pitch steps (HELD_STEPS)",
    )  # fmt: skip
    ap.add_argument(
        "--also-unsung",
        action="store_true",
        help="the --also sources' vowels are not sung in training (ALSO_SUNG False)",
    )
    ap.add_argument(
        "--no-mask", action="store_true",
        help="no learned voice mask, nor the separated voice's start mean (MASK '', FRONT_PRIORS '')",
    )  # fmt: skip
    ap.add_argument(
        "--band-share", type=float, default=BAND_SHARE, metavar="SHARE",
        help=f"the share of the augmented training copies with a backing (BAND_SHARE {BAND_SHARE})",
    )  # fmt: skip
    ap.add_argument(
        "--recorded-share", type=float, default=None, metavar="SHARE",
        help="that share of the banded training copies over recorded music "
        "(audio.recorded_backings; its training pool's Debian packages installed)",
    )  # fmt: skip
    ap.add_argument(
        "--keep-live", type=Path, default=None, metavar="FILE",
        help="keep FILE's live net (and start mean) instead of this build's",
    )  # fmt: skip
    ap.add_argument(
        "--keep-voice", type=Path, default=None, metavar="FILE",
        help="FILE's offline nets give p(voice) (with MASK 'vowels': only the vowels change)",
    )  # fmt: skip
    ap.add_argument(
        "--mask", default=None, metavar="FILE",
        help="a voice mask trained by scripts/train_voice_mask.py (else, with MASK, trained here)",
    )  # fmt: skip
    args = ap.parse_args()
    if args.live_only and args.voice_only:
        ap.error("--live-only, --voice-only: one half of the --net file at a time")
    if args.voice_seeds and not args.voice_only:
        ap.error("--voice-seeds: only with --voice-only")
    if args.keep_live and not args.keep_live.is_file():
        ap.error(f"--keep-live {args.keep_live}: expected a net file")
    for flag, share in (
        ("--band-share", args.band_share),
        ("--recorded-share", args.recorded_share),
    ):
        if share is not None and not 0.0 <= share <= 1.0:
            ap.error(f"{flag} {share}: expected a share from 0 to 1")
    if not args.net_only:
        prof = build()
        if args.out.exists():
            args.out.unlink()  # the shipped default is regenerated, not backed up
        save_profile(prof, args.out)
        n = sum(len(t) for t in prof.templates.values())
        print(f"wrote {args.out}: {n} templates")
    if not args.templates_only:
        t0 = time.perf_counter()
        base = voice_for = None
        if args.live_only or args.voice_only:
            from audio.vowel_net import load_net

            if not args.net.is_file():
                print(f"--net {args.net}: expected a net file to retrain", file=sys.stderr)
                return 2
            if args.live_only:
                base = load_net(args.net)
            else:
                voice_for = load_net(args.net)
        also = None if args.also is None else tuple(args.also)
        plain = {"mask": "", "front_priors": ""} if args.no_mask else {}
        held = True if args.held_tracks else None
        sung = False if args.also_unsung else None
        aug = None if args.recorded_share is None else {"recorded_share": args.recorded_share}
        seeds = args.voice_seeds or [args.seed]
        voice_nets = []
        for seed in seeds:  # one draw each; with --voice-only their p(voice) nets are averaged
            try:
                net = build_net(base=base, seed=seed, also=also, mask_file=args.mask,
                                live_mel=args.live_mel,
                                keep_voice=args.keep_voice, held_tracks=held, also_sung=sung,
                                band_share=args.band_share, aug=aug, voice_for=voice_for,
                                held_steps=args.held_steps, **plain)  # fmt: skip
            except ValueError as exc:
                if voice_for is None:
                    raise
                print(f"--voice-only --net {args.net}: {exc}", file=sys.stderr)
                return 2
            voice_nets += net.offline_voice
        if len(seeds) > 1:
            net.offline_voice = voice_nets
            net.info += f"; the p(voice) nets of training seeds {seeds} averaged"
        if args.keep_live:
            try:
                keep_live(net, args.keep_live)
            except ValueError as exc:
                print(f"--keep-live {exc}", file=sys.stderr)
                return 2
        net.save(args.net)
        print(f"wrote {args.net} in {time.perf_counter() - t0:.0f} s: {net.info}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
