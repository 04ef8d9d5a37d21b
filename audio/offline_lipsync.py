"""Offline MFCC lip-sync for music videos: the live engine's analysis, plus look-ahead.

`MfccLipSync` implements `audio.lipsync.LipSync`. It runs `LiveLipSync` over the whole signal
(same gate, openness and templates as live), then uses what a live engine cannot — the future:

* the engine's own delay (~1-2 hops) is removed by reading its output `delay_s` later;
* the mouth opens early: each frame takes the max openness of the next `open_lead_s`;
* vowels are anticipated: frame i shows the vowel classified `vowel_lead_s` later (Rhubarb
  anticipates vowels by up to 200 ms; we default to 50 ms ≈ 1.5 frames at 30 fps);
* vowel probabilities are averaged over each video frame's span, and a dominant shape shorter
  than `min_shape_s` (Rhubarb: 70 ms) takes the previous shape, so nothing flickers.

With the shipped network (`audio.vowel_net`) the offline engine also listens both ways: its
offline net (±120 ms of context) gives the vowel (default profile) and whether a voice sounds;
the mouth is shut wherever it hears none — a band playing through a vocal pause — and opened
at least partly where it hears one, however loud the music around it is.

Plug it in with ``analyze_clip(clip, fps, lipsync=MfccLipSync())``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from audio import time_chunks
from audio.calibration import Profile, VowelMatcher, load_profile, load_user_or_default
from audio.features import resample_mono
from audio.lipsync import FormantLipSync, LipSyncResult
from audio.live_lipsync import LiveLipSync
from audio.mfcc import FrameFeatures, _plan, mfcc_frames, mfcc_frames_pair, shares_spectrum
from audio.time_chunks import chunked_frames, chunked_rows
from audio.voice_separation import LIVE_STEADY_HOPS, residual_grid, residual_reach
from audio.vowel_net import (
    FRONT_BOTH,
    FRONT_SEPARATION,
    NET_SETTINGS,
    VowelNet,
    fuse,
    live_front_columns,
    resolve_net,
    separated_features,
)
from core.avatar import VOWELS

__all__ = ["MfccLipSync"]

N_IDX = VOWELS.index("N")


class MfccLipSync:
    # p(voice) under VOICE_LO shuts the mouth, VOICE_HI and above opens it; the live net's
    # share in p(voice) (`VowelNet.offline_probs`); the running median over it (hops). Chosen
    # on the backing style the net never trained on (`audio.backings.VALID_STYLE`, festival's
    # validation voices): a band's melody reads as a weak voice, a voice as a sure one
    VOICE_LO = 0.65
    VOICE_HI = 0.75
    LIVE_WEIGHT = 0.25
    VOICE_MEDIAN = 15
    # the live net's share in p(vowel) (`VowelNet.offline_probs`; 0: the offline nets' alone,
    # tried at 0.25 and 0.5 and not kept: docs/BENCHMARKS.md, issue 15's thirtieth round)
    LIVE_VOWEL_WEIGHT = 0.0

    def __init__(
        self,
        profile: Profile | str | os.PathLike | None = None,
        method: str = "distance",
        delay_s: float = 0.01,
        open_lead_s: float = 0.03,
        vowel_lead_s: float = 0.05,
        min_shape_s: float = 0.07,
        net: VowelNet | str | None = "auto",
        net_vowel_lead_s: float = 0.0,
        net_min_shape_s: float = 0.04,
    ) -> None:
        if profile is None:
            profile = load_user_or_default()
        elif not isinstance(profile, Profile):
            profile = load_profile(profile)
        self.profile = profile
        self.method = method
        self.delay_s = delay_s
        self.open_lead_s = open_lead_s
        self.vowel_lead_s = vowel_lead_s
        self.min_shape_s = min_shape_s
        net, self.net_vowels = resolve_net(net, profile)
        self.net = net
        # the offline net already hears ±120 ms around each hop: its vowels need no extra lead
        self.net_vowel_lead_s = net_vowel_lead_s
        self.net_min_shape_s = net_min_shape_s  # its vowels are steady: a shorter minimum

    def hops(self, mono: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per 10 ms hop: time (s, last sample), openness, vowel probabilities (n, 6) or NaN."""
        sr = self.profile.sample_rate
        y = resample_mono(np.asarray(mono, np.float32), sample_rate, sr)
        return self._gate_hops(mfcc_frames(y, sr, self._settings()), sr, True)

    def _settings(self):
        # the live engine's analysis (its profile's, at a 10 ms hop)
        return dataclasses.replace(self.profile.mfcc, hop_ms=10.0)

    def _gate_hops(
        self, f: FrameFeatures, sr: int, need_probs: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`hops` from the hops' features: the live engine's gate and openness run hop by hop
        (its `_gate_open`, scalars only); the vowels of the hops where it would classify one
        follow at once (the template probabilities; NaN everywhere when not `need_probs`)."""
        # the level gate and openness only: the offline net (both ways) does the rest
        eng = LiveLipSync(self.profile, sr, method=self.method, net=None)
        n = len(f)
        op = np.empty(n, np.float64)
        classify = np.zeros(n, bool)
        gate = eng._gate_open
        for k, (lev, flat, per) in enumerate(
            zip(f.level_db.tolist(), f.flatness.tolist(), f.periodicity.tolist(), strict=True)
        ):
            tonal = flat < 0.12 or per > 0.6
            op[k] = gate(lev, tonal, 1.0)
            classify[k] = eng.gate and tonal
        probs = np.full((n, len(VOWELS)), np.nan)
        if need_probs and classify.any():
            probs[classify] = eng.matcher.probs(f.mfcc)[classify]  # as the engine's per-hop rows
        self._levels = np.asarray(f.level_db, np.float64)  # for `analyze`'s clip-level gate
        return (f.end - 1) / sr, op, probs

    def analyze(
        self, mono: np.ndarray, sample_rate: int, fps: int, num_frames: int
    ) -> LipSyncResult:
        n = int(num_frames)
        if n == 0:
            return LipSyncResult(np.zeros(0, np.float32), np.zeros((0, len(VOWELS)), np.float32))
        sr = self.profile.sample_rate
        y = resample_mono(np.asarray(mono, np.float32), sample_rate, sr)
        with ThreadPoolExecutor(
            max(time_chunks.CORES, 2), thread_name_prefix="lipsync-part"
        ) as pool:
            return self._analyze(y, sr, fps, n, pool)

    def _analyze(
        self, y: np.ndarray, sr: int, fps: int, n: int, pool: ThreadPoolExecutor
    ) -> LipSyncResult:
        # The features are made in time chunks on `pool`, every part beside the others
        # (audio/time_chunks.py: the whole pass's numbers, to a matrix product's last bits):
        # the render's first frame waits for the whole analysis, and many cores are there.
        residual = live_front = None
        net_plan = _plan(NET_SETTINGS, sr)
        hop = net_plan.hop
        if self.net is not None and self.net.front in (FRONT_SEPARATION, FRONT_BOTH):
            grid = math.lcm(residual_grid(sr), hop)
            residual = chunked_frames(
                partial(separated_features, sr=sr), y, hop, grid, residual_reach(sr), pool
            )
        settings = self._settings()
        net_f = None
        if self.net is not None and shares_spectrum(settings, NET_SETTINGS, sr):
            # the gate's features and the net's from one FFT pass (the same numbers as two)
            pair = partial(
                mfcc_frames_pair,
                sample_rate=sr,
                settings=settings,
                also=NET_SETTINGS,
                keep_power=self.net.needs_power,
            )
            f, net_f = chunked_frames(pair, y, hop, hop, 2 * net_plan.win, pool).result()
            if self.net.live_front and max(self.LIVE_WEIGHT, self.LIVE_VOWEL_WEIGHT) > 0:
                # each hop's columns read the last LIVE_STEADY_HOPS hops' spectra
                live_front = chunked_rows(
                    partial(_live_front_rows, net_f, sr, self.net.live_front),
                    len(net_f),
                    2 * LIVE_STEADY_HOPS,
                    pool,
                )
        else:
            f = mfcc_frames(y, sr, settings)
        # with the net the hops' template vowels are never shown: not computed
        t, op, probs = self._gate_hops(f, sr, self.net is None)
        frame_t = np.arange(n) / fps
        voice_t = None
        if self.net is not None and len(t):
            end, pvoice, pvowel = self.net.offline_probs(
                y,
                sr,
                net_f,
                self.LIVE_WEIGHT,
                residual_f=None if residual is None else residual.result(),
                live_front=live_front,
                vowel_weight=self.LIVE_VOWEL_WEIGHT,
            )
            win = round(self.net.settings_win_s * sr)
            voice_t = (end - win / 2) / sr  # each hop's window centre
            pvoice = _median(pvoice, self.VOICE_MEDIAN)
            if not self.net_vowels:
                # a calibrated profile: its templates and the net vote together
                cep = f.mfcc if settings == self.profile.mfcc else None
                if cep is None:
                    cep = mfcc_frames(y, sr, self.profile.mfcc).mfcc
                tmpl = VowelMatcher(self.profile, self.method).probs(cep)[: len(pvowel), :N_IDX]
                pvowel = fuse(pvowel, tmpl)
        # openness: engine output `delay_s` later, max over the next open_lead_s + frame span
        half = 0.5 / fps
        lo = np.searchsorted(t, frame_t + self.delay_s - half)
        hi = np.searchsorted(t, frame_t + self.delay_s + half + self.open_lead_s, side="right")
        lo = np.clip(lo, 0, len(t) - 1)
        hi = np.clip(np.maximum(hi, lo + 1), 1, len(t))
        mouth = _range_max(op, lo, hi)
        if voice_t is not None:
            # shut where the clip is more than 35 dB under its loud reference (hum, hiss) ...
            lev = self._levels
            ref = float(np.percentile(lev[op > 0], 95)) if (op > 0).any() else float(lev.max())
            quiet = np.clip((lev - (ref - 35.0)) / 6.0, 0.0, 1.0)
            # ... and where the offline net hears no voice; at least half open where it does
            pv = np.interp(t, voice_t, pvoice)
            g = np.clip((pv - self.VOICE_LO) / (self.VOICE_HI - self.VOICE_LO), 0.0, 1.0) * quiet
            g = _range_max(g, lo, hi)  # same span as the openness: opens early, closes on time
            mouth = np.maximum(mouth, 0.45 * g) * g
        # vowels: fill unknown hops with the last known, average over the frame span, led
        known = np.isfinite(probs[:, 0])
        if known.any():
            idx = np.where(known, np.arange(len(probs)), -1)
            idx = np.maximum.accumulate(idx)
            idx[idx < 0] = int(np.argmax(known))
            filled = probs[idx]
        else:
            filled = np.zeros_like(probs)
            filled[:, 0] = 1.0
        c = np.concatenate([np.zeros((1, len(VOWELS))), np.cumsum(filled, axis=0)])
        vlo = np.clip(np.searchsorted(t, frame_t + self.vowel_lead_s - half), 0, len(t) - 1)
        vhi = np.clip(np.searchsorted(t, frame_t + self.vowel_lead_s + half), 0, len(t))
        vhi = np.maximum(vhi, vlo + 1)
        pv = (c[vhi] - c[vlo]) / (vhi - vlo)[:, None]
        if voice_t is not None:
            # the offline net's vowel over each frame's span (its hops' window centres)
            cn = np.concatenate([np.zeros((1, N_IDX)), np.cumsum(pvowel, axis=0)])
            lead = self.net_vowel_lead_s
            nlo = np.clip(np.searchsorted(voice_t, frame_t + lead - half), 0, len(voice_t) - 1)
            nhi = np.clip(np.searchsorted(voice_t, frame_t + lead + half), 0, len(voice_t))
            nhi = np.maximum(nhi, nlo + 1)
            pv = np.zeros((n, len(VOWELS)))
            pv[:, :N_IDX] = (cn[nhi] - cn[nlo]) / (nhi - nlo)[:, None]
            shape_s = self.net_min_shape_s
        else:
            shape_s = self.min_shape_s
        k = max(int(np.ceil(shape_s * fps - 1e-9)), 1)
        pv = FormantLipSync._min_length(pv, k)
        o = np.clip(mouth / 0.3, 0.0, 1.0)
        vow = pv * o[:, None]
        vow[:, N_IDX] += 1.0 - o
        vow /= vow.sum(axis=1, keepdims=True)
        return LipSyncResult(mouth.astype(np.float32), vow.astype(np.float32))


def _live_front_rows(f: FrameFeatures, sr: int, front: str, lo: int, hi: int) -> np.ndarray:
    """`live_front_columns` of the hops lo..hi of `f`."""
    part = dataclasses.replace(f, end=f.end[lo:hi], power=f.power[lo:hi])
    return live_front_columns(part, sr, front)


def _median(x: np.ndarray, k: int) -> np.ndarray:
    if len(x) < k:
        return x
    pad = np.pad(x, (k // 2, k // 2), mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(pad, k), axis=1)


def _range_max(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(x[lo[i]:hi[i]]) for each i (ranges are short)."""
    width = int((hi - lo).max())
    pad = np.concatenate([x, np.full(width, -np.inf)])
    idx = lo[:, None] + np.arange(width)[None, :]
    vals = pad[idx]
    vals[np.arange(width)[None, :] >= (hi - lo)[:, None]] = -np.inf
    return vals.max(axis=1)
