"""Causal, calibrated lip-sync for live input: samples in, one `LipFrame` per 10 ms hop out.

Compared with uLipSync (a 64 ms window and a spring of about 50 ms; docs/ARCHITECTURE.md,
"Outside facts"):

* **Short windows.** Vowels from MFCCs of a 25 ms window (`audio.mfcc`); openness from the level
  of the most recent 12 ms only, so an onset shows up within one hop.
* **Noise gate with hysteresis** relative to a tracked noise floor: the gate opens when the level
  is `open_db` above the floor, less than `quiet_db` under the recent peak *and* the frame is tonal (low spectral flatness or clear
  periodicity: broadband noise is neither), and closes only when the level falls under
  `close_db` above the floor (close < open), so the mouth neither chews on noise nor shuts on
  the soft end of a phrase. The floor follows the level down at once and up slowly while the
  gate is shut (a fan switched on becomes the new floor); it is frozen while the gate is open.
* **Openness** maps the level from `close_db` above the floor to 6 dB under a slowly decaying
  peak (auto gain), and is held at `min_open` while the gate is open.
* **Predictive output filter**: an alpha-beta filter (position + velocity) with a fast attack
  gain and a slower release gain, output = its one-hop-ahead prediction. It removes jitter like
  a smoother but does not add the smoother's delay on a steady rise or fall.
* Timestamps are sample counts (``t`` = time of the last sample used), so nothing drifts however
  long it runs.

Vowel shapes come from `audio.calibration.VowelMatcher` (nearest template per vowel; several
templates per vowel) smoothed over ~2 hops; N (closed mouth / hum) takes the weight the mouth is
not open.

**The shipped network** (`audio.vowel_net`, when audio/profiles/vowel_net.npz is present) hears
whether a voice sounds — also over a band or background music — from the last ~80 ms of MFCCs
and of what its front-end (`audio.voice_separation`: the music's held partials and drum hits
taken out of each hop's spectrum) leaves: the gate opens on a clear, tonal rise above the floor
only if the net does not deny a voice, or on the net alone when it is sure (a singer over music
never rises far above the music's level), and it closes when the net hears no voice for
`VOICE_OFF_S`. With the default profile (which names the net) the net also gives the vowel; a
calibrated profile keeps its own templates for vowels.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass

import numpy as np

from audio.calibration import Profile, VowelMatcher, load_profile, load_user_or_default
from audio.mfcc import MfccStream
from audio.vowel_net import NET_SETTINGS, LiveNet, VowelNet, fuse, resolve_net
from core.avatar import VOWELS, AvatarParams

__all__ = [
    "OVR_VISEMES",
    "LipFrame",
    "LiveLipSync",
    "mouth_form",
    "to_avatar_params",
    "to_live2d",
    "to_ovr_visemes",
    "to_vrm",
]

N_IDX = VOWELS.index("N")
_NO_N = np.zeros(1)  # appended to the net's five vowel probabilities: N's
OVR_VISEMES = (
    "sil",
    "PP",
    "FF",
    "TH",
    "DD",
    "kk",
    "CH",
    "SS",
    "nn",
    "RR",
    "aa",
    "E",
    "ih",
    "oh",
    "ou",
)
# Live2D ParamMouthForm per vowel: + is a wide/smiling mouth (I, E), - a rounded one (U, O).
_FORM = np.array([0.1, 0.8, -0.6, 0.5, -0.5, 0.0])


@dataclass(slots=True)
class LipFrame:
    """One hop: ``t`` s (audio time of the last sample used), ``open`` 0..1, ``vowels`` (6,)
    weights over VOWELS summing to 1 (N = 1 when silent), ``silent`` when the gate is shut."""

    t: float
    open: float
    vowels: np.ndarray
    silent: bool
    level_db: float = -120.0
    confidence: float = 0.0  # best vowel probability of the classifier (0 when not matched)

    def weight(self, name: str) -> float:
        return float(self.vowels[VOWELS.index(name)])

    def as_dict(self) -> dict[str, float]:
        return {v: float(w) for v, w in zip(VOWELS, self.vowels, strict=True)}

    @property
    def vowel(self) -> str:
        """The dominant shape among A I U E O (N only when silent)."""
        return "N" if self.silent else VOWELS[int(np.argmax(self.vowels[:N_IDX]))]


class LiveLipSync:
    # the net's p(voice): under VOICE_OFF for VOICE_OFF_S closes the gate; the gate opens on a
    # rise above the floor unless p(voice) is under VOICE_OFF, or on the net alone above
    # VOICE_SURE; VOWEL_ALPHA: how far each hop moves the shown vowel to the classified one
    VOICE_OFF = 0.65  # chosen on the never-trained backing style (docs/BENCHMARKS.md)
    VOICE_OFF_S = 0.02
    VOICE_SURE = 0.85
    VOWEL_ALPHA = 0.6
    # MEL_VOICE > 0: the gate's p(voice) is the live MLP's and the mel nets' beside it
    # (`VowelNet.live_more`) mixed, this the mel nets' share (0: the MLP's alone)
    MEL_VOICE = 0.0
    # a voice's fading end (issue 15, eighteenth round; chosen on the validation rooms): with
    # FADE_HOPS > 0 an open gate also closes where the level fell on each of the last FADE_HOPS
    # hops (none rising by more than FADE_SLACK dB) by FADE_DB in all, while p(voice) is under
    # FADE_PV (a room's tail sounds like the voice before it, so the net alone holds the mouth
    # open in it); after such a close neither the level nor the net alone (VOICE_SURE) reopens
    # it before the level has risen FADE_REOPEN_DB over its lowest since (over a band the net
    # alone reopens the gate on a vowel with hardly a rise: not after other closes).
    # REOPEN_DB > 0: once shut, the gate reopens on the level only where it has risen REOPEN_DB
    # over its lowest since the close (a tail still far above the floor does not reopen on a
    # flicker of p(voice))
    FADE_HOPS = 4
    FADE_DB = 5.0
    FADE_SLACK = 0.5
    FADE_PV = 0.9
    FADE_UNDER_PEAK = 0.0
    FADE_REOPEN_DB = 3.0
    # with FADE_HOPS > 0, FADE2_HOPS > 0: a second, longer and deeper fall (FADE2_DB over
    # FADE2_HOPS, none rising by more than FADE2_SLACK) closes it whatever p(voice) says (off:
    # it cost more vowels over a band than the first rule, docs/BENCHMARKS.md)
    FADE2_HOPS = 0
    FADE2_DB = 12.0
    FADE2_SLACK = 2.0
    REOPEN_DB = 0.0

    def __init__(
        self,
        profile: Profile | str | os.PathLike | None = None,
        sample_rate: int = 16000,
        hop_ms: float = 10.0,
        method: str = "distance",
        open_db: float = 12.0,
        close_db: float = 6.0,
        span_db: float = 24.0,
        min_open: float = 0.12,
        floor_rise_db_s: float = 6.0,
        net: VowelNet | str | None = "auto",
    ) -> None:
        if profile is None:
            profile = load_user_or_default()
        elif not isinstance(profile, Profile):
            profile = load_profile(profile)
        if close_db >= open_db:
            raise ValueError(f"close_db ({close_db}) must be below open_db ({open_db})")
        self.profile = profile
        self.sample_rate = int(sample_rate)
        settings = dataclasses.replace(profile.mfcc, hop_ms=float(hop_ms))
        self.stream = MfccStream(self.sample_rate, settings)
        self.matcher = VowelMatcher(profile, method)
        net, self.net_vowels = resolve_net(net, profile)
        if net is not None and (settings.win_ms, settings.preemph) != (
            NET_SETTINGS.win_ms,
            NET_SETTINGS.preemph,
        ):
            net = None  # a profile with another window: the net's features cannot share it
        self.net = net
        self.net_settings = dataclasses.replace(NET_SETTINGS, hop_ms=float(hop_ms))
        self.hop_s = self.stream.hop / self.sample_rate
        self.open_db, self.close_db, self.span_db = open_db, close_db, span_db
        self.min_open = min_open
        self.floor_rise = floor_rise_db_s * self.hop_s
        self.peak_decay = 3.0 * self.hop_s
        # a hum or hiss this far under the recent loud peak is not a voice (synthesizers'
        # recorded pauses, a fan): the gate stays shut
        self.quiet_db = 35.0
        # alpha-beta gains per hop (attack: nearly immediate; release: ~2-3 hops)
        self.att = (0.85, 0.35)
        self.rel = (0.5, 0.12)
        self.reset()

    def reset(self) -> None:
        self.floor = float(self.profile.noise_floor_db)
        self.peak: float | None = None
        self.gate = False
        self.untonal = 0
        self.x = 0.0
        self.v = 0.0
        self.p = np.zeros(len(VOWELS))
        self.p[0] = 1.0
        self.last_probs: np.ndarray | None = None  # raw classifier output of the last hop
        self.last_voice = 1.0  # the net's p(voice) of the last hop (1 without a net)
        self.unvoiced = 0  # hops in a row the net heard no voice
        self.recent: tuple[float, ...] = ()  # the last FADE_HOPS + 1 hops' levels
        self.low: float | None = None  # the lowest level since the gate shut (REOPEN_DB)
        self.faded = False  # the gate shut on a fading level (FADE_HOPS)
        self._last_end = -1  # stream position of the last hop's newest sample
        also = self.net_settings if self.net is not None else None
        # the profile's own MFCCs feed its templates only: not read where the net gives vowels
        # with the live front-end the net computes its cepstrum beside the cleaned one's
        self.stream = MfccStream(
            self.sample_rate,
            self.stream.settings,
            also,
            cepstrum=not self.net_vowels,
            also_cepstrum=self.net is None or not self.net.live_front,
        )
        self.live_net = None
        if self.net is not None:
            self.live_net = LiveNet(
                self.net.live,
                self.net.cmn_init,
                self.net.live_offsets,
                self.net.live_front,
                self.sample_rate,
                self.net.live_cmn_prior,
                self.net.live_cmn_voiced,
                self.net.live_more,
                more_voice=self.MEL_VOICE,
            )

    # ------------------------------------------------------------------------------------
    def push(self, samples: np.ndarray) -> list[LipFrame]:
        """Feed mono float32 samples (any block size); returns the frames they completed."""
        # with a net the stream appends the net's cepstrum to each hop (same spectrum)
        return [self._step(*hop) for hop in self.stream.push(samples)]

    def latch(self) -> LipFrame | None:
        """The mouth now: a provisional hop ending at the newest sample pushed (its MFCCs,
        level, tonality and gate decision from the newest window, through the same gate, scale
        and filter), without changing any state — the next real hop goes on exactly as if this
        had not been asked. None before the first whole window, or right at a hop's end.

        Why: hops end every `hop_ms` (10 ms), so a video frame started between two hops shows
        a mouth up to one hop old; latched at the frame's start the mouth is at most as old as
        the newest audio block. The state machine (noise floor, gate hysteresis, auto gain,
        vowel smoothing) still moves only at real hops, so its tuning holds."""
        newest = self.stream.newest()
        if newest is None or newest[0] == self._last_end:
            return None
        state = self._save()
        try:
            return self._step(*newest, commit=False)
        finally:
            self._load(state)

    def _save(self) -> tuple:
        return (self.floor, self.peak, self.gate, self.untonal, self.x, self.v, self.p.copy(),
                self.last_probs, self._last_end, self.last_voice, self.unvoiced, self.recent,
                self.low, self.faded)  # fmt: skip

    def _load(self, state: tuple) -> None:
        (self.floor, self.peak, self.gate, self.untonal, self.x, self.v, self.p,
         self.last_probs, self._last_end, self.last_voice, self.unvoiced, self.recent,
         self.low, self.faded) = state  # fmt: skip

    def _step(
        self,
        end: int,
        cep: np.ndarray,
        lev: float,
        flat: float,
        per: float,
        net_cep: np.ndarray | None = None,
        net_power: np.ndarray | None = None,
        commit: bool = True,
        template_probs: np.ndarray | None = None,
    ) -> LipFrame:
        self._last_end = end
        pw = None
        pv = 1.0
        if self.live_net is not None and net_power is not None:
            pv, pw = self.live_net.step(net_cep, lev, per, flat, commit, net_power)
        tonal = flat < 0.12 or per > 0.6
        op = self._gate_open(lev, tonal, pv)
        # --- vowel --------------------------------------------------------------------------------
        conf = 0.0
        self.last_probs = None
        if self.gate and tonal:
            if pw is not None and self.net_vowels:
                probs = np.concatenate((pw, _NO_N))
            elif pw is not None:  # a calibrated profile: templates and net vote together
                probs = np.zeros(len(VOWELS))
                probs[:N_IDX] = fuse(pw, self.matcher.probs(cep)[:N_IDX])
            elif template_probs is not None:  # computed for all hops at once (offline)
                probs = template_probs
            else:
                probs = self.matcher.probs(cep)
            self.last_probs = probs
            conf = float(probs.max())
            self.p += self.VOWEL_ALPHA * (probs - self.p)
        silent = not self.gate and op == 0.0
        if silent:
            w = np.zeros(len(VOWELS), np.float32)
            w[N_IDX] = 1.0
        else:  # on six Python floats: numpy's calls on a 6-vector cost more than the sums
            o = min(op / 0.3, 1.0)
            ws = [q * o for q in self.p.tolist()]
            ws[N_IDX] += 1.0 - o
            tot = sum(ws)
            w = np.array([q / tot for q in ws], np.float32)
        t = (end - 1) / self.sample_rate
        return LipFrame(t, op, w, silent, lev, conf)

    def _gate_open(self, lev: float, tonal: bool, pv: float) -> float:
        """The gate, the noise floor, the openness and its filter for one hop (scalars only:
        the offline engine runs just this per hop) -> the mouth's openness."""
        self.last_voice = pv
        self.unvoiced = self.unvoiced + 1 if pv < self.VOICE_OFF else 0
        fading = False
        if self.FADE_HOPS > 0:
            keep = max(self.FADE_HOPS, self.FADE2_HOPS)
            self.recent = (*self.recent[-keep:], lev)
            r = self.recent[-self.FADE_HOPS - 1 :]
            fading = (
                len(r) > self.FADE_HOPS
                and r[0] - lev >= self.FADE_DB
                and pv < self.FADE_PV
                and (self.peak is None or lev < self.peak - self.FADE_UNDER_PEAK)
                and all(b <= a + self.FADE_SLACK for a, b in itertools.pairwise(r))
            )
            r = self.recent[-self.FADE2_HOPS - 1 :]
            fading = fading or (
                self.FADE2_HOPS > 0
                and len(r) > self.FADE2_HOPS
                and r[0] - lev >= self.FADE2_DB
                and all(b <= a + self.FADE2_SLACK for a, b in itertools.pairwise(r))
            )
        low = -999.0 if self.low is None else self.low
        risen = self.REOPEN_DB <= 0 or lev >= low + self.REOPEN_DB
        held = fading or (self.faded and lev < low + self.FADE_REOPEN_DB)
        # --- gate with hysteresis against the tracked floor -------------------------------
        if self.gate:
            self.untonal = 0 if tonal else self.untonal + 1
            if (
                lev < self.floor + self.close_db
                or self.untonal * self.hop_s > 0.15
                or self.unvoiced * self.hop_s >= self.VOICE_OFF_S - 1e-9
                or fading
            ):
                self.gate = False
                self.low = lev
                self.faded = fading
        elif (
            lev > -75.0
            and (self.peak is None or lev > self.peak - self.quiet_db)
            and tonal  # noise is never a voice, whatever the net says
            and not held  # nor is a fading tail
            and (
                (lev > self.floor + self.open_db and pv > self.VOICE_OFF and risen)
                or pv > self.VOICE_SURE
            )
        ):
            self.gate = True
            self.untonal = 0
            self.low = None
            self.faded = False
        else:
            if self.low is not None:
                self.low = min(self.low, lev)
            if self.peak is not None:  # the loud reference fades while nothing sounds
                self.peak -= self.peak_decay
        if lev < self.floor:
            self.floor = max(lev, -96.0)
        elif not self.gate:
            self.floor = min(self.floor + self.floor_rise, lev)
        # --- openness target ----------------------------------------------------------------
        if self.gate:
            lo = self.floor + self.close_db
            self.peak = lev if self.peak is None else max(lev, self.peak - self.peak_decay)
            top = min(max(self.peak - 6.0, lo + 10.0), lo + self.span_db)
            target = max(min((lev - lo) / (top - lo), 1.0), self.min_open)
            if self.live_net is not None:  # over music the level hardly rises: the net opens
                target = max(target, 0.4 * pv)
        else:
            target = 0.0
        # --- predictive alpha-beta filter --------------------------------------------------------
        pred = self.x + self.v
        r = target - pred
        a, b = self.att if r > 0 else self.rel
        self.x = pred + a * r
        self.v += b * r
        if not self.gate and self.x < 0.03:
            self.x = self.v = 0.0
        return min(max(self.x + self.v, 0.0), 1.0)

    def process(self, samples: np.ndarray, block: int | None = None) -> list[LipFrame]:
        """Run a whole signal through `push` in blocks (default 5 ms), as a device would."""
        block = block or max(self.sample_rate // 200, 1)
        x = np.asarray(samples, np.float32)
        out: list[LipFrame] = []
        for i in range(0, len(x), block):
            out += self.push(x[i : i + block])
        return out


# --------------------------------------------------------------------------------------------
# mappings


def mouth_form(frame: LipFrame) -> float:
    return float(np.clip(_FORM @ frame.vowels, -1.0, 1.0))


def to_live2d(frame: LipFrame) -> dict[str, float]:
    return {"ParamMouthOpenY": float(frame.open), "ParamMouthForm": mouth_form(frame)}


def to_vrm(frame: LipFrame) -> dict[str, float]:
    """VRM 1.0 vowel expressions; each is the vowel's weight scaled by the openness."""
    w = frame.vowels * min(frame.open / 0.6, 1.0)
    return {
        k: float(w[VOWELS.index(v)])
        for k, v in zip(("aa", "ih", "ou", "ee", "oh"), "AIUEO", strict=True)
    }


def to_ovr_visemes(frame: LipFrame) -> dict[str, float]:
    """The 15 OVRLipSync visemes (sum 1): vowels scaled by openness, N -> nn, the rest sil."""
    out = dict.fromkeys(OVR_VISEMES, 0.0)
    if frame.silent:
        out["sil"] = 1.0
        return out
    o = float(frame.open)
    for name, v in (("aa", "A"), ("ih", "I"), ("ou", "U"), ("E", "E"), ("oh", "O"), ("nn", "N")):
        out[name] = float(frame.vowels[VOWELS.index(v)]) * o
    out["sil"] = 1.0 - o
    return out


def to_avatar_params(frame: LipFrame, base: AvatarParams) -> AvatarParams:
    return dataclasses.replace(
        base,
        mouth_open=float(frame.open),
        mouth_form=mouth_form(frame),
        vowels=np.asarray(frame.vowels, np.float32).copy(),
    )
