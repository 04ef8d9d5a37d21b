"""Scoring lip-sync against synthesized speech with phone timings (`audio.speech_corpus`).

A *track* is one voice's utterances joined with pauses of 0.3-0.8 s (a song-like take), heard
clean or with a band underneath (`audio.augment`). An engine turns the track's audio into
hops: the time each hop shows, its openness and its weights over A I U E O N.

* **Balanced vowel accuracy**: over hops whose truth is a vowel, the recall of each of A I U E O
  (the shown shape is the strongest of A I U E O; a hop with no vowel weight at all — the mouth
  shut — is its own column, "closed", and counts as wrong), averaged over the five vowels.
* **Pauses closed**: pauses of at least `MIN_PAUSE_S`; their inside (trimmed by `TRIM_S` at both
  ends: the mouth may close late and open early) must have openness below `CLOSED_OPEN` on at
  least `CLOSED_SHARE` of its hops.

Live hops are scored against the truth at the centre of their analysis window (their time minus
half a window); the lag itself is measured separately by `kagura bench lipsync`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from audio import augment
from audio.speech_corpus import SR, VoiceSpec, labels_at, synthesize
from core.avatar import VOWELS

__all__ = [
    "Score",
    "Track",
    "held_vowel_track",
    "held_vowels",
    "live_engine",
    "offline_engine",
    "score",
    "speech_track",
]

MIN_PAUSE_S = 0.2
TRIM_S = 0.06
CLOSED_OPEN = 0.1
CLOSED_SHARE = 0.9
LIVE_CENTRE_S = 0.0125  # half the 25 ms MFCC window

Engine = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass
class Track:
    name: str
    spec: VoiceSpec | None
    voice: np.ndarray  # the clean vocal
    phones: list[tuple[float, float, str]]
    audio: np.ndarray  # what the engine hears

    @property
    def source(self) -> str:
        return self.spec.source if self.spec else "sung"


def join(name: str, spec, parts, seed: int = 0, gap_s=(0.3, 0.8), lead_s: float = 0.4) -> Track:
    """Join (audio, phones) parts with random pauses (a -70 dBFS noise floor throughout)."""
    rng = np.random.default_rng(seed)
    chunks, phones = [np.zeros(int(lead_s * SR), np.float32)], []
    pos = lead_s
    for x, ph in parts:
        phones += [(a + pos, b + pos, c) for a, b, c in ph]
        chunks.append(x)
        pos += len(x) / SR
        gap = np.zeros(int(rng.uniform(*gap_s) * SR), np.float32)
        chunks.append(gap)
        pos += len(gap) / SR
    y = np.concatenate(chunks)
    y = y + (rng.standard_normal(len(y)) * 10 ** (-70 / 20)).astype(np.float32)
    return Track(name, spec, y.astype(np.float32), phones, y.astype(np.float32))


def speech_track(
    spec: VoiceSpec, n_texts: int | None = None, offset: int = 0, seed: int = 0, extra: bool = False
):
    """`spec`'s sentences as one track; `extra`: its `audio.speech_corpus.EXTRA_TEXTS` too
    (training voices only)."""
    utts = synthesize(spec, n_texts, offset, extra)
    return join(spec.name, spec, [(u.audio, u.phones) for u in utts], seed)


def sung_track(
    specs: list[VoiceSpec],
    n_notes: int = 20,
    seed: int = 0,
    f0_range: tuple[float, float] = (150.0, 1000.0),
) -> Track:
    """Sung vowels (`audio.singing`) on the vowel envelopes of `specs`' sentences."""
    from audio.singing import sing, vowel_envelopes

    envs = []
    for sp in specs:
        envs += vowel_envelopes(synthesize(sp))
    y, ph = sing(envs, n_notes, np.random.default_rng(seed), f0_range)
    lo, hi = f0_range
    tr = join(f"sung {lo:g}-{hi:g} Hz ({specs[0].source})", None, [(y, ph)], seed)
    tr.spec = specs[0]
    return tr


def held_vowels(voices=None) -> list:
    """(name, audio, phones) of each vowel of each (espeak-ng voice, pitch) (default:
    `audio.calibration.HELDOUT_VOICES`) sustained by espeak-ng (`synth_vowel`, about 1.5 s at
    one pitch: the flat held note a user sings to calibrate); each vowel's truth spans its
    voiced part (the 10 ms hops within 30 dB of its loudest)."""
    from audio.calibration import HELDOUT_VOICES, synth_vowel

    hop = SR // 100
    out = []
    for voice, pitch in voices or HELDOUT_VOICES:
        for v in "AIUEO":
            x = synth_vowel(voice, pitch, v, SR)
            n = len(x) // hop
            db = 10 * np.log10(np.mean(np.square(x[: n * hop].reshape(n, hop), dtype=np.float64), 1)
                               + 1e-20)  # fmt: skip
            on = np.flatnonzero(db > db.max() - 30)
            a, b = on[0] * hop, (on[-1] + 1) * hop
            out.append((f"{voice} {v}", x[a:b], [(0.0, (b - a) / SR, v)]))
    return out


def held_vowel_track(held: list, name: str = "held vowels (espeak-ng, held-out voices)",
                     seed: int = 11) -> Track:  # fmt: skip
    """`held_vowels`' vowels joined with pauses into one track."""
    return join(name, None, [(x, ph) for _, x, ph in held], seed)


def held_vowel_clips(held: list) -> list[Track]:
    """`held_vowels`' vowels, each a clip of its own (a pause before and after): a clip's
    statistics are then one vowel's, as in a short clip of one held note
    (`audio.vowel_net.clip_cmn`)."""
    return [join(name, None, [(x, ph)], seed=11 + i)
            for i, (name, x, ph) in enumerate(held)]  # fmt: skip


def _over(track: Track, backing: np.ndarray, vbr_db: float, what: str) -> Track:
    """`track`'s voice over `backing` at `vbr_db` (`augment.mix_at`), named for `what`."""
    y = augment.mix_at(track.voice, backing, vbr_db)
    return Track(f"{track.name} +{what} {vbr_db:+g} dB", track.spec, track.voice, track.phones, y)


def with_band(track: Track, vbr_db: float, seed: int = 0) -> Track:
    """`track` over the synthesized band of `augment.band`."""
    return _over(track, augment.band(len(track.voice) / SR + 0.1, seed), vbr_db, "band")


def with_backing(track: Track, vbr_db: float, style: str, seed: int = 0) -> Track:
    """`with_band` with a backing of one `audio.backings` style."""
    from audio.backings import backing

    return _over(track, backing(len(track.voice) / SR + 0.1, seed, style), vbr_db, style)


def with_recorded(track: Track, vbr_db: float, pool: str, seed: int = 0) -> Track:
    """`with_band` with recorded music of one pool of `audio.recorded_backings`."""
    from audio.recorded_backings import recorded_backing

    music = recorded_backing(len(track.voice) / SR + 0.1, seed, pool)
    return _over(track, music, vbr_db, f"{pool} music")


# --- engines ----------------------------------------------------------------------------------


def offline_engine(lipsync, fps: int = 100) -> Engine:
    """An `audio.lipsync.LipSync` at `fps` frames per second (frame i shows time i / fps)."""

    def run(y: np.ndarray):
        n = int(np.ceil(len(y) / SR * fps))
        res = lipsync.analyze(y, SR, fps, n)
        return np.arange(n) / fps, np.asarray(res.open), np.asarray(res.vowels)

    return run


def live_engine(make: Callable[[], object]) -> Engine:
    """A causal engine (`audio.live_lipsync.LiveLipSync`-like) fed 5 ms blocks."""

    def run(y: np.ndarray):
        frames = make().process(y)
        t = np.array([f.t for f in frames]) - LIVE_CENTRE_S
        op = np.array([f.open for f in frames])
        vw = np.array([f.vowels for f in frames]).reshape(-1, len(VOWELS))
        return t, op, vw

    return run


# --- scores -----------------------------------------------------------------------------------


@dataclass
class Score:
    conf: np.ndarray = field(default_factory=lambda: np.zeros((5, 6), np.int64))  # +closed
    pauses: int = 0
    closed: int = 0

    def __iadd__(self, o: Score) -> Score:
        self.conf = self.conf + o.conf
        self.pauses += o.pauses
        self.closed += o.closed
        return self

    @property
    def balanced(self) -> float:
        rows = self.conf.sum(axis=1)
        ok = rows > 0
        return float(np.mean(np.diag(self.conf)[ok] / rows[ok])) if ok.any() else float("nan")

    @property
    def closed_share(self) -> float:
        return self.closed / self.pauses if self.pauses else float("nan")


def score(track: Track, times: np.ndarray, open_: np.ndarray, vowels: np.ndarray) -> Score:
    lab = labels_at(track.phones, times)
    s = Score()
    shown = np.argmax(vowels[:, :5], axis=1)
    shown = np.where(vowels[:, :5].sum(axis=1) > 1e-6, shown, 5)
    for j, v in enumerate(VOWELS[:5]):
        sel = lab == v
        s.conf[j] += np.bincount(shown[sel], minlength=6)[:6]
    # pauses: the joined gaps and the synthesizer's own silences
    for a, b in scored_pauses(track.phones, times):
        inside = open_[a:b]
        if len(inside) == 0:
            continue
        s.pauses += 1
        s.closed += int(np.mean(inside < CLOSED_OPEN) >= CLOSED_SHARE)
    return s


def scored_pauses(phones, times: np.ndarray) -> list[tuple[int, int]]:
    """The hops (start, end) inside each pause `score` scores: the pauses of at least
    `MIN_PAUSE_S`, `TRIM_S` left out at each end (a span may be empty)."""
    is_pause = labels_at(phones, times) == "-"
    edges = np.flatnonzero(np.diff(np.r_[0, is_pause.astype(np.int8), 0]))
    dt = float(np.median(np.diff(times))) if len(times) > 1 else 0.01
    k = round(TRIM_S / dt)
    return [
        (a + k, b - k)
        for a, b in zip(edges[::2], edges[1::2], strict=True)
        if (b - a) * dt >= MIN_PAUSE_S
    ]


def evaluate(engine: Engine, tracks: list[Track]) -> Score:
    total = Score()
    for tr in tracks:
        t, op, vw = engine(tr.audio)
        total += score(tr, t, op, vw)
    return total


def open_on_vowels(engine: Engine, tracks: list[Track]) -> float:
    """Share of the vowel hops (truth) where `engine`'s mouth is open (> 0.1): what a stricter
    voice gate costs over a backing, which balanced accuracy and shut pauses do not show alone."""
    hit = tot = 0
    for tr in tracks:
        t, op, _ = engine(tr.audio)
        vowel = np.isin(labels_at(tr.phones, t), list("AIUEO"))
        hit += int(np.sum(op[vowel] > 0.1))
        tot += int(vowel.sum())
    return hit / max(tot, 1)
