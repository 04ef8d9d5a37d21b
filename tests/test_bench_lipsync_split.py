"""The split bench's reverb condition: rooms that fade on after the voice, truth kept dry."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from app.bench_lipsync_split import (
    REVERB_RT60,
    _memo,
    close_after_voice,
    main,
    parse_gate,
    reverb_tracks,
)
from audio.lipsync_eval import Track
from tests.tiny_nets import random_mlp

SR = 16000


def _track() -> Track:
    """0.4 s lead-in, a 0.5 s vowel, a 0.6 s pause, a 0.3 s vowel, a 0.4 s pause."""
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(int(2.2 * SR)) * 10 ** (-70 / 20)).astype(np.float32)
    t = np.arange(len(y)) / SR
    phones = [(0.4, 0.9, "A"), (1.5, 1.8, "I")]
    for a, b, _ in phones:
        sel = (t >= a) & (t < b)
        y[sel] += (0.1 * np.sin(2 * np.pi * 220 * t[sel])).astype(np.float32)
    return Track("toy", None, y, phones, y.copy())


def _db(x: np.ndarray) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(np.asarray(x, np.float64) ** 2)) + 1e-12))


def _shipped_layout(seed: int, info: str):
    """A random `VowelNet` laid out as the shipped one: the separated voice offline, the
    steady-note suppressor live, one more offline net."""
    from audio.vowel_net import (
        FRONT_SEPARATION,
        HOP_DIM,
        LIVE_FRONT_STEADY,
        LIVE_OFFSETS,
        OFFLINE_OFFSETS,
        SEP_DIM,
        VowelNet,
    )

    rng = np.random.default_rng(seed)
    net = VowelNet(random_mlp((HOP_DIM + SEP_DIM) * len(LIVE_OFFSETS), rng),
                   random_mlp(2 * HOP_DIM * len(OFFLINE_OFFSETS), rng), info,
                   cmn_init=rng.standard_normal(HOP_DIM - 2), front=FRONT_SEPARATION,
                   live_front=LIVE_FRONT_STEADY)  # fmt: skip
    net.offline_more = [random_mlp(2 * HOP_DIM * len(OFFLINE_OFFSETS), rng)]
    return net


def test_reverb_copies_keep_the_dry_truth_and_add_a_fading_tail():
    tr = _track()
    rv = reverb_tracks([tr])
    assert len(rv) == len(REVERB_RT60)
    again = reverb_tracks([tr])
    tails = []
    for r, r2, rt in zip(rv, again, REVERB_RT60, strict=True):
        assert r.phones == tr.phones and r.voice is tr.voice  # the tail is not voice
        assert len(r.audio) == len(tr.audio)
        np.testing.assert_array_equal(r.audio, r2.audio)  # seeded
        s0, s1 = int(0.95 * SR), int(1.05 * SR)  # 50-150 ms after the first vowel ends
        dry, wet = _db(tr.audio[s0:s1]), _db(r.audio[s0:s1])
        assert wet > dry + 20, (rt, dry, wet)
        # and it fades: later in the pause quieter than early
        assert _db(r.audio[int(1.3 * SR) : int(1.45 * SR)]) < wet - 6
        # how long after the vowel's end the tail stays 10 dB above the dry floor
        lev = [
            _db(r.audio[i : i + SR // 100]) for i in range(int(0.9 * SR), int(1.5 * SR), SR // 100)
        ]
        tails.append(max(k for k, v in enumerate(lev) if v > _db(tr.audio[: int(0.4 * SR)]) + 10))
    assert tails == sorted(tails) and tails[0] >= 5, tails  # a longer room, a longer tail


def test_close_after_voice_counts_from_the_voice_end():
    tr = _track()
    dt = 0.01

    def engine(y):
        t = np.arange(0, len(y) / SR, dt)
        op = np.zeros(len(t))
        op[(t >= 0.4) & (t < 0.9 + 0.07)] = 0.8  # shuts 70 ms after the first vowel
        op[(t >= 1.5) & (t < 2.2)] = 0.8  # never shuts in the last pause
        return t, op, np.zeros((len(t), 6))

    calls = []

    def counted(y):
        calls.append(1)
        return engine(y)

    eng = _memo(counted)
    cl = close_after_voice(eng, [tr])
    close_after_voice(eng, [tr])
    assert len(calls) == 1  # one run per audio
    # the lead-in is no voice's end; the last pause counts its length (a lower bound)
    np.testing.assert_allclose(cl, [0.07, 0.39], atol=0.011)


def test_gate_constants_are_parsed_as_the_engines_types():
    """`--gate NAME=VALUE`: a `LiveLipSync` constant, of its own type; anything else refused
    (the tool stops with the reason before it builds or scores a net)."""
    got = parse_gate(["FADE_HOPS=4", "FADE_DB=5", "FADE_PV=0.9"])
    assert got == {"FADE_HOPS": 4, "FADE_DB": 5.0, "FADE_PV": 0.9}
    assert type(got["FADE_HOPS"]) is int and type(got["FADE_DB"]) is float
    assert parse_gate([]) == {}
    for bad in ("FADE_HOPS", "NO_SUCH=1", "hop_s=1", "FADE_HOPS=4.5"):
        with pytest.raises(ValueError, match="--gate"):
            parse_gate([bad])
    with pytest.raises(SystemExit):
        main(["--gate", "NO_SUCH=1"])


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
def test_held_vowels_joined_and_each_a_clip_of_its_own():
    """The held-note validation: each held-out voice's five sustained vowels, truth on the
    voiced part only (the mouth shut around it), once joined and once a clip per vowel."""
    from audio.calibration import HELDOUT_VOICES
    from audio.lipsync_eval import held_vowel_clips, held_vowel_track, held_vowels
    from audio.speech_corpus import labels_at

    voice = [HELDOUT_VOICES[0]]
    held = held_vowels(voice)
    clips = held_vowel_clips(held)
    assert [c.name for c in clips] == [f"{voice[0][0]} {v}" for v in "AIUEO"]
    for c, v in zip(clips, "AIUEO", strict=True):
        (a, b, lab), = [p for p in c.phones if p[2] != "-"]  # fmt: skip
        assert lab == v and 0.8 < b - a < 3.0  # espeak-ng holds it about 1.5 s
        t = np.arange(0, len(c.audio) / SR, 0.01)
        inside = labels_at(c.phones, t) == v
        loud = np.array([_db(c.audio[int(s * SR) : int(s * SR) + 160]) for s in t]) > -60
        assert np.mean(loud[inside]) > 0.97 and not loud[~inside].any()
    joined = held_vowel_track(held)
    assert [p[2] for p in joined.phones if p[2] != "-"] == list("AIUEO")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
def test_the_masks_held_vowels_are_the_training_voices_never_the_held_out_ones():
    """`MASK_HELD`'s tracks: the English and Japanese espeak-ng training voices' five vowels
    held; the voices the held-note validation sings are never among them."""
    from app.bench_lipsync_split import load_build_script
    from audio.calibration import HELDOUT_VOICES
    from audio.speech_corpus import VoiceSpec

    bdp = load_build_script()
    held_out = HELDOUT_VOICES[2][0]
    specs = [
        VoiceSpec("espeak-ng", held_out, "a", "ja", 60),
        VoiceSpec("espeak-ng", "en-us+f2", "b", "en", 55),
        VoiceSpec("espeak-ng", "es", "c", "es", 45),  # its vowels are not the English ones
        VoiceSpec("festival", "kal_diphone", "kal", "en", 0),
    ]
    (track,) = bdp._held(specs)
    assert track.name == "held vowels (espeak-ng:en-us+f2 p55)"
    assert [p[2] for p in track.phones if p[2] != "-"] == list("AIUEO")
    assert all(0.8 < b - a < 3.0 for a, b, lab in track.phones if lab != "-")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
def test_held_training_vowels_at_more_pitches_are_that_voices_notes_moved():
    """`HELD_STEPS` (`--held-steps`): each training voice's five vowels held at its pitch and
    at the pitches the steps move it to, in one track, each note its own."""
    from app.bench_lipsync_split import load_build_script
    from audio.calibration import synth_vowel
    from audio.lipsync_eval import held_vowels
    from audio.speech_corpus import VoiceSpec

    bdp = load_build_script()
    spec = VoiceSpec("espeak-ng", "en-us+f2", "b", "en", 55)
    (one,) = bdp._held([spec])
    (three,) = bdp._held([spec], (-15, 0, 15))
    assert [p[2] for p in three.phones if p[2] != "-"] == list("AIUEO") * 3
    # the moved pitches are other notes than the voice's own
    low = synth_vowel("en-us+f2", 40, "A", SR)
    own = synth_vowel("en-us+f2", 55, "A", SR)
    assert not np.array_equal(low, own)
    assert len(three.audio) > 2.5 * len(one.audio)
    # the first note is the lowest pitch's A, where the track's first phone says (under the
    # joined track's -70 dBFS noise floor)
    _, low_a, _ = held_vowels([("en-us+f2", 40)])[0]
    a = round(three.phones[0][0] * SR)
    np.testing.assert_allclose(three.audio[a : a + len(low_a)], low_a, atol=2e-3)


def test_the_held_set_sings_each_held_out_voice_at_three_pitches():
    from app.bench_lipsync_split import HELD_PITCH_STEP, held_voices
    from audio.calibration import HELDOUT_VOICES

    got = held_voices()
    assert len(got) == 3 * len(HELDOUT_VOICES)
    for voice, pitch in HELDOUT_VOICES:
        mine = sorted(p for v, p in got if v == voice)
        assert mine == [pitch - HELD_PITCH_STEP, pitch, pitch + HELD_PITCH_STEP]
    assert all(0 <= p <= 99 for _, p in got)  # espeak-ng's pitch range


def _first_examples(monkeypatch, mod, recipes) -> dict:
    """Per split-bench recipe, what `build_net` first hands `audio.vowel_net_train.examples`:
    (its tracks' names, its settings). It stops there: nothing is trained."""
    import audio.vowel_net_train as vnt
    from app.bench_lipsync_split import RECIPES

    class Got(Exception):
        pass

    def examples(tracks, init, **kw):
        raise Got([t.name for t in tracks], kw)

    monkeypatch.setattr(vnt, "examples", examples)
    got = {}
    for name in recipes:
        with pytest.raises(Got) as e:
            mod.build_net(cache={}, mask="", **RECIPES[name])
        got[name] = e.value.args
    return got


def test_a_recipes_augmentation_adds_to_the_shipped_recipes(monkeypatch):
    """A recipe's `aug` keeps the build's `AUG` (the styled backings) and adds its own keys: the
    split bench's recipes differ from `base` in what they name, nothing else."""
    from app.bench_lipsync_split import load_build_script

    mod = load_build_script()
    # the training tracks stand in for the corpus's: nothing is synthesized
    monkeypatch.setattr(mod, "_tracks", lambda specs, extra=False, sung=None: [_track()])
    got = {
        n: kw
        for n, (_, kw) in _first_examples(monkeypatch, mod, ("base", "lifter", "front-u")).items()
    }
    assert mod.AUG and all(got[n][k] == v for n in got for k, v in mod.AUG.items())
    assert got["lifter"]["lifter"] == 0.5 and "lifter" not in got["base"]
    assert got["front-u"]["front_u"] == 0.5 and "front_u" not in got["base"]


def test_held_tracks_join_the_vowel_nets_training_tracks(monkeypatch):
    """`held_tracks` (the `kokoro-en+held` recipe): the nets' examples are made from the
    sentences' and sung tracks and, after them, `_held`'s; without it from the first alone.
    `also_sung` False: the `also` source's voices speak but their vowels are not sung, in the
    more rounds of sung notes (`sung_rounds`) neither."""
    from app.bench_lipsync_split import load_build_script

    mod = load_build_script()
    speech, held, more_sung = _track(), _track(), _track()
    held.name, more_sung.name = "held", "more sung"
    sung_sources, more_sung_sources = [], []

    def tracks(specs, extra=False, sung=None):
        sung_sources.append({v.source for v in (specs if sung is None else sung)})
        return [speech]

    def more(specs, rounds):
        more_sung_sources.append({v.source for v in specs})
        return [more_sung] * rounds

    monkeypatch.setattr(mod, "_tracks", tracks)
    monkeypatch.setattr(mod, "_held", lambda specs, steps=(0,): [held])
    monkeypatch.setattr(mod, "_more_sung", more)
    names = ("kokoro-en", "kokoro-en+held", "kokoro-en+held-unsung", "kokoro-en+held-unsung+sung")
    got = {n: seen for n, (seen, _) in _first_examples(monkeypatch, mod, names).items()}
    assert got == {"kokoro-en": ["toy"], "kokoro-en+held": ["toy", "held"],
                   "kokoro-en+held-unsung": ["toy", "held"],
                   "kokoro-en+held-unsung+sung": ["toy", "more sung", "held"]}  # fmt: skip
    assert "kokoro" in sung_sources[0] and "kokoro" in sung_sources[1]
    assert "kokoro" not in sung_sources[2] and "espeak-ng" in sung_sources[2]
    assert "kokoro" not in more_sung_sources[3] and "festival" in more_sung_sources[3]


def test_bench_columns_say_what_a_recipe_trained_on():
    """`kagura bench lipsync`'s column roles: a source a build also trains on is no longer a
    test, and Kokoro's English in training takes its Japanese voices out of the tests too."""
    from app.bench_lipsync_corpus import _roles

    roles, tests = _roles(())
    assert tests == ("flite", "open-jtalk", "kokoro")
    assert roles["kokoro"] == " (test, Japanese)" and roles["piper"] == " (unheard; far validation)"
    roles, tests = _roles(("kokoro-en", "piper"))
    assert tests == ("flite", "open-jtalk")
    assert "English" in roles["kokoro"] and roles["piper"] == " (in training)"
    roles, tests = _roles(("open-jtalk",))
    assert tests == ("flite", "kokoro") and roles["open-jtalk"] == " (in training, Japanese)"
    # the shipped file's offline nets heard Kokoro's voices reading English
    roles, tests = _roles()
    assert tests == ("flite", "open-jtalk") and "English" in roles["kokoro"]


def _net(seed: int, info: str, **kw):
    from audio.vowel_net import HOP_DIM, LIVE_OFFSETS, OFFLINE_OFFSETS, VowelNet

    rng = np.random.default_rng(seed)
    n_live = len(kw.get("live_offsets", LIVE_OFFSETS))
    live = random_mlp(HOP_DIM * n_live, rng)
    offline = random_mlp(HOP_DIM * len(OFFLINE_OFFSETS), rng)
    return VowelNet(live, offline, info, cmn_init=rng.standard_normal(HOP_DIM - 2), **kw)


def test_keep_live_gives_a_build_another_files_live_net_and_start_mean(tmp_path):
    """`--keep-live FILE`: the build's live hop reads as FILE's (its live net and start mean),
    its offline net stays its own; a file whose live net reads other hops is named."""
    from app.bench_lipsync_split import load_build_script
    from audio.vowel_net import load_net

    bdp = load_build_script()
    _net(1, "shipped").save(tmp_path / "shipped.npz")
    net = _net(2, "candidate")
    offline, own = net.offline, net.live
    bdp.keep_live(net, tmp_path / "shipped.npz")
    shipped = load_net(tmp_path / "shipped.npz")
    x = np.random.default_rng(3).standard_normal((50, own.layers[0][0].shape[0]))
    assert not np.allclose(own.logits(x), shipped.live.logits(x), atol=1e-2)
    np.testing.assert_allclose(net.live.logits(x), shipped.live.logits(x), atol=1e-6)
    np.testing.assert_array_equal(net.cmn_init, shipped.cmn_init)
    assert net.offline is offline and "shipped.npz's" in net.info
    _net(4, "longer", live_offsets=(-12, -8, -6, -4, -2, -1, 0)).save(tmp_path / "longer.npz")
    with pytest.raises(ValueError, match=r"longer\.npz: expected a live net .*live_offsets"):
        bdp.keep_live(_net(5, "candidate"), tmp_path / "longer.npz")


def test_keep_live_without_its_file_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--recipe", "base", "--keep-live", str(tmp_path / "none.npz"), "--build-only",
              "--save-dir", str(tmp_path)])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--keep-live" in err and "none.npz" in err


def test_the_build_refuses_a_missing_keep_live_file_before_training(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "net.npz"
    r = subprocess.run(
        [sys.executable, str(root / "scripts/build_default_profile.py"), "--net-only",
         "--net", str(out), "--keep-live", str(tmp_path / "none.npz")],
        capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    assert r.returncode == 2 and not out.exists()
    assert "--keep-live" in r.stderr.strip().splitlines()[-1] and "none.npz" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_recipe_kept_on_a_live_net_of_other_hops_is_one_line_and_exit_2(tmp_path, capsys):
    from app.bench_lipsync_split import _keeping_live, load_build_script

    _net(4, "longer", live_offsets=(-12, -8, -6, -4, -2, -1, 0)).save(tmp_path / "longer.npz")
    made = _keeping_live(lambda: _net(5, "recipe"), load_build_script(), tmp_path / "longer.npz")
    with pytest.raises(SystemExit) as exc:
        made()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "longer.npz" in err[0] and "live_offsets" in err[0]


def test_live_only_beside_keeps_the_live_mlp_and_trains_a_mel_net(monkeypatch):
    """`--live-only --live-mel beside` (issue 15, thirty-second round): the base file's live MLP,
    start mean and offline nets are kept — the gate is the base's — and a causal net of mel and
    time convolutions is trained on the recipe's tracks beside the MLP (`VowelNet.live_more`)."""
    from app.bench_lipsync_split import load_build_script
    from audio.mel_conv import MelConv
    from audio.vowel_net import LIVE_OFFSETS

    mod = load_build_script()
    monkeypatch.setattr(mod, "_tracks", lambda specs, extra=False, sung=None: [_track()])
    base = _shipped_layout(7, "base")
    net = mod.build_net(base=base, cache={}, mask="", n_aug=1, epochs=1, live_mel="beside",
                        live_mel_fit={"run": 64, "channels": (4, 8), "hidden": (8,)})  # fmt: skip
    assert net.live is base.live and net.live_offsets == base.live_offsets
    assert net.offline is base.offline and net.offline_more == base.offline_more
    np.testing.assert_array_equal(net.cmn_init, base.cmn_init)
    [mel] = net.live_more
    assert isinstance(mel, MelConv) and mel.causal and mel.offsets == LIVE_OFFSETS
    assert mel.convs[0][0].shape[2] == 2  # the mix's block and the live front-end's
    assert "beside the MLP, kept" in net.info
    with pytest.raises(ValueError, match="live_mel: expected"):
        mod.build_net(base=base, cache={}, mask="", live_mel="after")


def test_voice_only_trains_the_p_voice_nets_and_keeps_the_live_and_vowel_nets(monkeypatch):
    """`--voice-only` (`build_net(voice_for=...)`, issue 15, thirty-sixth round): the recipe's
    offline nets become the given net's p(voice) nets; its live net, start mean and vowel nets
    stay, and no live net is trained."""
    import audio.vowel_net_train as vnt
    from app.bench_lipsync_split import load_build_script
    from audio.vowel_net import HOP_DIM, OFFLINE_OFFSETS, stack

    mod = load_build_script()
    monkeypatch.setattr(mod, "_tracks", lambda specs, extra=False, sung=None: [_track()])
    monkeypatch.setattr(vnt, "fit_live", lambda *a, **k: pytest.fail("a live net was trained"))
    shipped = _shipped_layout(8, "shipped")
    net = mod.build_net(voice_for=shipped, cache={}, mask="", n_aug=1, epochs=1,
                        more_without=(), offline_mel="")  # fmt: skip
    assert net.live is shipped.live and net.offline is shipped.offline
    assert net.offline_more == shipped.offline_more and not shipped.offline_voice
    np.testing.assert_array_equal(net.cmn_init, shipped.cmn_init)
    [voice] = net.offline_voice
    assert voice is not shipped.offline and net.voice_blocks == 2
    assert net.info.startswith("shipped; p(voice) from offline nets of their own (")
    v = np.random.default_rng(9).standard_normal((40, 2 * HOP_DIM)).astype(np.float32)
    pv, pw = net.offline_hop_probs(v)
    want_pv, _ = voice.predict(stack(v, OFFLINE_OFFSETS))
    np.testing.assert_allclose(pv, want_pv, rtol=1e-5)
    _, want_pw = shipped.offline_hop_probs(v)
    np.testing.assert_allclose(pw, want_pw, rtol=1e-6)
    with pytest.raises(ValueError, match="voice_for: not with base"):
        mod.build_net(voice_for=shipped, base=shipped, cache={}, mask="")


def test_voice_only_without_its_net_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from app.bench_lipsync_split import load_build_script

    mod = load_build_script()
    missing = tmp_path / "none.npz"
    monkeypatch.setattr("sys.argv", ["build", "--net-only", "--voice-only", "--net", str(missing)])
    assert mod.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"--net {missing}: expected a net file to retrain"]


def test_voice_only_on_a_net_of_other_inputs_is_one_line_and_exit_2(tmp_path, monkeypatch,
                                                                     capsys):  # fmt: skip
    """A --net file whose offline nets read other inputs (no separated voice) is named before
    anything is trained."""
    from app.bench_lipsync_split import load_build_script
    from audio.vowel_net import HOP_DIM, LIVE_OFFSETS, OFFLINE_OFFSETS, VowelNet

    mod = load_build_script()
    rng = np.random.default_rng(10)
    plain = VowelNet(random_mlp(HOP_DIM * len(LIVE_OFFSETS), rng),
                     random_mlp(HOP_DIM * len(OFFLINE_OFFSETS), rng), "plain",
                     cmn_init=rng.standard_normal(HOP_DIM - 2))  # fmt: skip
    path = tmp_path / "plain.npz"
    plain.save(path)
    before = path.read_bytes()
    monkeypatch.setattr(mod, "_tracks", lambda *a, **k: pytest.fail("tracks were made"))
    monkeypatch.setattr("sys.argv", ["build", "--net-only", "--voice-only", "--net", str(path)])
    assert mod.main() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"--voice-only --net {path}: expected a net whose offline nets read this "
                   "build's inputs (it differs in front)"]  # fmt: skip
    assert path.read_bytes() == before


def test_voice_seeds_average_the_p_voice_nets_of_each_seed(tmp_path, monkeypatch):
    """`--voice-only --voice-seeds 1 2` (the shipped file's fourth step): the file keeps its
    live and vowel nets and gets each seed's p(voice) nets, the first seed's first."""
    from app.bench_lipsync_split import load_build_script
    from audio.vowel_net import load_net

    mod = load_build_script()
    monkeypatch.setattr(mod, "_tracks", lambda specs, extra=False, sung=None: [_track()])
    shipped = _shipped_layout(11, "shipped")
    path, orig = tmp_path / "net.npz", tmp_path / "orig.npz"
    shipped.save(path)
    shipped.save(orig)
    seen = []
    build = mod.build_net

    def build_net(**kw):
        seen.append(kw["seed"])
        return build(**kw, n_aug=1, epochs=1, more_without=(), offline_mel="")

    monkeypatch.setattr(mod, "build_net", build_net)
    argv = ["build", "--net-only", "--voice-only", "--voice-seeds", "1", "2", "--net", str(path)]
    monkeypatch.setattr("sys.argv", argv)
    assert mod.main() == 0
    assert seen == [1, 2]
    net = load_net(path)
    assert len(net.offline_voice) == 2 and net.voice_blocks == 2
    assert net.info.endswith("; the p(voice) nets of training seeds [1, 2] averaged")
    assert net.info.startswith("shipped; p(voice) from offline nets of their own (")
    before = load_net(orig)
    for kept, was in ((net.live, before.live), (net.offline, before.offline)):
        np.testing.assert_array_equal(kept.layers[0][0], was.layers[0][0])
    monkeypatch.setattr("sys.argv", ["build", "--net-only", "--voice-seeds", "1", "2"])
    with pytest.raises(SystemExit) as e:
        mod.main()
    assert e.value.code == 2
