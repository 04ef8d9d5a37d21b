"""`kagura bench lipsync`, corpus part: vowels and pauses on synthesized speech and singing.

Signals come from `audio.speech_corpus` (espeak-ng, flite, festival, piper, open-jtalk,
kokoro, with phone timings) and
`audio.singing`, generated into the cache folder on first use. Scores (`audio.lipsync_eval`):
balanced vowel accuracy over A I U E O and the share of pauses with the mouth shut.

* **Per source**, the shipped engines (`MfccLipSync` offline, `LiveLipSync` live, default
  profile and network, with the separation front-ends the net file names). The shipped net never heard flite (nor the speakers flite shares with
  festival), so the flite column is the honest one; espeak-ng and festival voices were in its
  training (same sentences), and are marked so. Two Japanese sources follow: Open JTalk's Mei (a
  recorded woman through HTS) and Kokoro (four women and a man through a neural synthesizer);
  each is a test column unless the build script's `ALSO` trains on it.
* **Cross-source**: the same recipe trained once per source with that whole synthesizer (and
  its speakers) held out, tested on it (`--no-cross` skips the three trainings).
* The template engine of before this network (`net=None`), for comparison.
* A band underneath at +6 / 0 / -3 dB (band seeds not used in training), a backing of the
  style the training never draws (`audio.backings.VALID_STYLE`: where settings are chosen)
  and the demo song's backing (another generator, never trained nor tuned on: the test) at
  0 dB.
* Singing: flite's vowels sung at 150-400, 400-700 and 700-1000 Hz.
"""

from __future__ import annotations

import time

import numpy as np

from audio.backings import VALID_STYLE
from core.avatar import VOWELS

N_TEXTS = 4  # sentences per voice in the scored tracks
CROSS_AUG, CROSS_EPOCHS = 2, 6  # the cross-source trainings: a little lighter than the shipped


# what each source is to the shipped net (its festival column: ked trained on, kal and slt not)
_ROLE = {
    "espeak-ng": " (in training)",
    "flite": " (test)",
    "festival": " (ked in training)",
    "piper": " (unheard; far validation)",
    "open-jtalk": " (test, Japanese)",
    "kokoro": " (test, Japanese)",
}
# a source the build also trains on (its `ALSO`) -> the column it takes out of the tests, and
# what that column then is
_TRAINED_ROLE = {
    "open-jtalk": ("open-jtalk", " (in training, Japanese)"),
    "kokoro": ("kokoro", " (in training, Japanese)"),
    "kokoro-en": ("kokoro", " (its voices in training, reading English)"),
    "piper": ("piper", " (in training)"),
}
# the table's columns: the corpus's sources, Piper's English voice (never trained on, where the
# split bench chooses settings: not a test) and the two Japanese ones
# (`audio.speech_corpus.jtalk_voices`, `kokoro_voices`), tests unless the build trains on them
COLUMNS = ("espeak-ng", "flite", "festival", "piper", "open-jtalk", "kokoro")
TESTS = ("flite", "open-jtalk", "kokoro")


def _build_script():
    from app.bench_lipsync_split import load_build_script  # it imports this module

    return load_build_script()


def _roles(also: tuple[str, ...] | None = None) -> tuple[dict[str, str], tuple[str, ...]]:
    """Each column's role for a recipe that also trains on `also` (the shipped file's: the
    build's `ALSO` and `SHIPPED_ALSO`, when None), and the test columns."""
    if also is None:
        build = _build_script()
        also = (*build.ALSO, *build.SHIPPED_ALSO)
    roles = dict(_ROLE)
    for source in also:
        column, role = _TRAINED_ROLE[source]
        roles[column] = role
    trained = {_TRAINED_ROLE[source][0] for source in also}
    return roles, tuple(s for s in TESTS if s not in trained)


def _engines(net="auto"):
    from audio.calibration import default_profile_path, load_profile
    from audio.lipsync_eval import live_engine, offline_engine
    from audio.live_lipsync import LiveLipSync
    from audio.offline_lipsync import MfccLipSync

    prof = load_profile(default_profile_path())
    return {
        "offline": offline_engine(MfccLipSync(prof, net=net)),
        "live": live_engine(lambda: LiveLipSync(prof, 16000, net=net)),
    }


def _tracks(source: str):
    from audio.lipsync_eval import speech_track
    from audio.speech_corpus import named_voices

    vs = named_voices(source)
    if source == "espeak-ng":
        vs = vs[::2]  # half of its 16 voices: the scores hardly move, the run halves
    if source == "festival":
        # its four English voices: those of other languages (in training since round 5) would
        # change what the column measured before
        vs = [v for v in vs if v.lang == "en"]
    return [speech_track(v, N_TEXTS) for v in vs]


def _banded(tracks, vbr: float):
    from audio.lipsync_eval import with_band

    return [with_band(t, vbr, seed=9000 + i) for i, t in enumerate(tracks)]


def _styled(tracks, vbr: float, style: str = VALID_STYLE):
    """A backing of one `audio.backings` style under each track (seeds as `_banded`'s)."""
    from audio.lipsync_eval import with_backing

    return [with_backing(t, vbr, style, seed=9000 + i) for i, t in enumerate(tracks)]


def _demo_backing(tracks, vbr: float):
    """The demo song's backing (looped to length) under each track."""
    from audio import augment
    from audio.demo_song import make_demo_song_stems
    from audio.features import resample_mono
    from audio.lipsync_eval import Track

    _vocal, backing, sr = make_demo_song_stems(0)
    b = resample_mono(np.asarray(backing, np.float32).reshape(-1, backing.shape[-1]).mean(0)
                      if backing.ndim > 1 else backing, sr, 16000)  # fmt: skip
    out = []
    for t in tracks:
        reps = int(np.ceil(len(t.voice) / len(b)))
        y = augment.mix_at(t.voice, np.tile(b, reps)[: len(t.voice)], vbr)
        out.append(Track(f"{t.name} +demo backing", t.spec, t.voice, t.phones, y))
    return out


def _fmt(s) -> str:
    return f"{s.balanced:.1%} / {s.closed_share:.0%} ({s.closed}/{s.pauses})"


def corpus_report(say, cross: bool = True) -> None:
    from audio.lipsync_eval import evaluate, sung_track
    from audio.speech_corpus import available, named_voices

    missing = [s for s in COLUMNS if not available(s)]
    if missing:
        say(f"(corpus part skipped: synthesizers missing: {', '.join(missing)})")
        return
    t0 = time.perf_counter()
    eng = _engines()
    old = _engines(net=None)
    from audio.vowel_net import LIPSYNC_MODELS

    ja = _engines(net="japanese")["offline"] if LIPSYNC_MODELS["japanese"].exists() else None
    tracks = {s: _tracks(s) for s in COLUMNS}
    roles, tests = _roles()
    say("### Vowels and pauses on synthesized speech (per source)")
    say("")
    say(
        "Balanced vowel accuracy (A I U E O, 10 ms hops, phone timings as truth) / pauses "
        f"(≥ 0.2 s) with the mouth shut; {N_TEXTS} sentences per voice (espeak-ng: 8 of its 16 "
        "voices; festival: its 4 English ones). Shipped net: trained on espeak-ng and festival "
        "(ked and its Italian, Finnish, Czech and Catalan voices) and, its offline nets and "
        "the live vowels' mel net (not the live MLP), on Kokoro's voices reading English; never "
        "on flite nor the "
        "speakers flite shares with festival (kal, slt). Training settings are chosen on "
        "festival's voices of those two speakers (`python -m app.bench_lipsync_split`), never "
        "on flite: flite is the test. Piper: its English voice of a recorded man (a neural "
        "synthesizer) at three speeds, never trained on, the split bench's second validation "
        "set. Japanese: Open JTalk's voice Mei (a recorded woman; HTS) "
        "at her own pitch, 4 half tones lower and slower, 3 higher and faster; Kokoro's four "
        "women and its man (a neural synthesizer), two of the women also faster and slower."
    )
    say("")
    say("| condition | engine | " + " | ".join(
        f"{s}{roles[s]}" for s in COLUMNS) + " |")  # fmt: skip
    say("|---|---|" + "---|" * len(COLUMNS))
    confusion = {}  # offline, clean, per test column and Piper's
    conds = [("clean", None), ("band +6 dB", 6.0), ("band 0 dB", 0.0), ("band −3 dB", -3.0)]
    for cname, vbr in conds:
        # each column's tracks in this condition, mixed once for every engine that hears them
        heard = {s: tracks[s] if vbr is None else _banded(tracks[s], vbr) for s in COLUMNS}
        for ename, e in eng.items():
            cells = []
            for s in COLUMNS:
                sc = evaluate(e, heard[s])
                if (s in tests or s == "piper") and vbr is None and ename == "offline":
                    confusion[s] = sc.conf
                cells.append(_fmt(sc))
            say(f"| {cname} | {ename} | " + " | ".join(cells) + " |")
        if vbr is None:
            for ename, e in old.items():
                cells = [_fmt(evaluate(e, tracks[s])) for s in COLUMNS]
                say(f"| clean | {ename}, templates (before) | " + " | ".join(cells) + " |")
        if vbr in (None, 0.0) and ja is not None:
            # the offline model a user may choose instead (`--lipsync-model japanese`): it
            # trained on Kokoro's voices too, so its kokoro cells are not a test; open-jtalk is
            cells = [_fmt(evaluate(ja, heard[s])) for s in COLUMNS]
            say(
                f"| {cname} | offline, japanese model (kokoro trained on) | "
                + " | ".join(cells)
                + " |"
            )
    # the two backings under the test columns only
    styled = {s: _styled(tracks[s], 0.0) for s in tests}
    demo = {s: _demo_backing(tracks[s], 0.0) for s in tests}
    for label, backed in ((f"{VALID_STYLE} backing 0 dB (style never trained on)", styled),
                          ("demo-song backing 0 dB", demo)):  # fmt: skip
        for ename, e in eng.items():
            cells = [_fmt(evaluate(e, backed[s])) if s in backed else "–" for s in COLUMNS]
            say(f"| {label} | {ename} | " + " | ".join(cells) + " |")
    say("")
    for s, conf in confusion.items():
        say(f"Confusion, offline, {s} clean (rows: truth; columns: shown; – = mouth shut):")
        say("")
        say("| | " + " | ".join(VOWELS[:5]) + " | – |")
        say("|---|" + "---|" * 6)
        for j, v in enumerate(VOWELS[:5]):
            say(f"| {v} | " + " | ".join(str(int(n)) for n in conf[j]) + " |")
        say("")
    say(
        "Singing (the vowel envelopes of flite's voices and of Open JTalk's Mei, sung with "
        "vibrato and melismas, 30 notes per band; both unheard by the default model, Mei also "
        "by the japanese one):"
    )
    say("")
    say("| f0 | voices | offline | live | offline, japanese model |")
    say("|---|---|---|---|---|")
    for lo, hi in ((150.0, 400.0), (400.0, 700.0), (700.0, 1000.0)):
        for src in ("flite", "open-jtalk"):
            tr = [sung_track(named_voices(src)[:4], 30, seed=int(lo), f0_range=(lo, hi))]
            cells = [_fmt(evaluate(e, tr)) for e in eng.values()]
            cells.append(_fmt(evaluate(ja, tr)) if ja is not None else "–")
            say(f"| {lo:g}-{hi:g} Hz | {src} | " + " | ".join(cells) + " |")
    say("")
    if cross:
        _cross(say, tracks)
    say(f"(corpus part: {time.perf_counter() - t0:.0f} s)")
    say("")


def _cross(say, tracks) -> None:
    """Leave one synthesizer out: train the recipe without it, test on it."""
    from audio.calibration import default_profile_path, load_profile
    from audio.lipsync_eval import evaluate, live_engine, offline_engine
    from audio.live_lipsync import LiveLipSync
    from audio.offline_lipsync import MfccLipSync
    from audio.speech_corpus import SOURCES

    mod = _build_script()
    prof = load_profile(default_profile_path())
    say("### Cross-source (train without a synthesizer and its speakers, test on it)")
    say("")
    say(
        f"The shipped recipe with {CROSS_AUG} augmented copies and {CROSS_EPOCHS} epochs (the "
        f"shipped net: {mod.N_AUG} and {mod.EPOCHS}; its second offline net "
        f"{mod.MORE_N_AUG} copies); cells: balanced vowel accuracy / pauses shut."
    )
    say("")
    say(
        "| held out | trained on | offline clean | live clean | offline band 0 dB | live band 0 dB |"
    )
    say("|---|---|---|---|---|---|")
    for s in SOURCES:
        t0 = time.perf_counter()
        net = mod.build_net(s, n_aug=CROSS_AUG, epochs=CROSS_EPOCHS)
        srcs = sorted({v.source for v in mod.training_voices(s)})
        off = offline_engine(MfccLipSync(prof, net=net))
        live = live_engine(lambda net=net: LiveLipSync(prof, 16000, net=net))
        band = _banded(tracks[s], 0.0)
        cells = [_fmt(evaluate(off, tracks[s])), _fmt(evaluate(live, tracks[s]))]
        cells += [_fmt(evaluate(off, band)), _fmt(evaluate(live, band))]
        say(f"| {s} | {', '.join(srcs)} | " + " | ".join(cells) + " |")
        print(f"  (cross {s}: {time.perf_counter() - t0:.0f} s)", flush=True)
    say("")


def song_speed(say) -> None:
    """Offline lip-sync of a 4-minute song (the demo song looped), on this machine."""
    from audio.analysis import analyze_mono
    from audio.decode import decode_audio
    from audio.demo_song import demo_song_path
    from audio.offline_lipsync import MfccLipSync

    clip = decode_audio(demo_song_path())
    mono, sr = clip.mono(), clip.sample_rate
    mono = np.tile(mono, int(np.ceil(240 * sr / len(mono))))[: 240 * sr]
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        MfccLipSync().analyze(mono, sr, 30, 240 * 30)
        runs.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    analyze_mono(mono, sr, 30, lipsync=MfccLipSync())
    full = time.perf_counter() - t0
    say(
        f"- offline lip-sync of a 4-minute song (demo song looped, 48 kHz, 30 fps): "
        f"{min(runs):.1f} s (best of 2; goal ≤ 10 s); whole `analyze_mono` with it {full:.1f} s"
    )
