"""Live MFCC lip-sync: accuracy on espeak-ng vowels, gate, lag, mappings, the JSON contract."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")

SR = 16000


@pytest.fixture(scope="module")
def profile():
    from audio.calibration import default_profile_path, load_profile

    return load_profile(default_profile_path())


def _accuracy(profile, voices):
    from audio.calibration import synth_vowel
    from audio.live_lipsync import LiveLipSync

    ok = tot = 0
    pad = np.zeros(SR // 4, np.float32)
    for voice, pitch in voices:
        for v in "AIUEO":
            x = np.concatenate([pad, synth_vowel(voice, pitch, v), pad])
            frames = [f for f in LiveLipSync(profile).process(x) if not f.silent]
            ok += sum(f.vowel == v for f in frames)
            tot += len(frames)
    return ok / tot


def test_vowel_accuracy_training_and_heldout_voices(profile):
    from audio.calibration import HELDOUT_VOICES, TRAIN_VOICES

    train = _accuracy(profile, TRAIN_VOICES[::3])
    held = _accuracy(profile, HELDOUT_VOICES)
    print(f"accuracy: training voices {train:.1%}, held-out voices {held:.1%}")
    # The default engine reads vowels with the shipped net (trained on sentences and sung
    # vowels, which it reads far better than the templates did); each sustained vowel here is
    # a fresh engine whose running cepstral mean starts from the training mean.
    # measured 84.3 % / 93.1 % before the live front-end, 80.7 % / 86.7 % after it (a vowel
    # held past ~0.3 s looks to it like a band's held chord; the template engine: 99 %+), and
    # 70.5 % / 88.3 % since the live mean starts light (50 hops): a fresh engine hearing one
    # held vowel takes part of that vowel as its mean — the price of adapting to a new voice
    # within a second (docs/BENCHMARKS.md, issue 15, fourth round); 73.7 % / 83.4 % with the
    # net trained over backings of several styles (seventh round: another draw of the live
    # half; on the corpus' clean sentences it reads as before)
    assert train >= 0.66
    assert held >= 0.8


def test_mfcc_batch_equals_stream():
    from audio.mfcc import MfccStream, mfcc_frames

    x = np.random.default_rng(0).standard_normal(SR).astype(np.float32) * 0.1
    f = mfcc_frames(x, SR)
    s = MfccStream(SR)
    got = []
    for i in range(0, len(x), 77):  # odd block size
        got += s.push(x[i : i + 77])
    assert len(got) == len(f)
    np.testing.assert_allclose(np.array([g[1] for g in got]), f.mfcc, atol=1e-4)
    assert [g[0] for g in got] == f.end.tolist()


def test_hop_features_are_the_batch_rows():
    """The live path's one-hop analysis (`analyse_hop`) is the batch `analyse` of that frame."""
    from audio.mfcc import MfccSettings, _plan
    from audio.vowel_net import NET_SETTINGS

    p, q = _plan(MfccSettings(), SR), _plan(NET_SETTINGS, SR)
    rng = np.random.default_rng(3)
    for scale in (1e-6, 1e-3, 0.5):
        fr = rng.standard_normal(p.win + 1) * scale
        want = p.analyse(fr[None, 1:], fr[:1], q)
        got = p.analyse_hop(fr, q)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w[0], rtol=1e-12, atol=0)
        assert p.analyse_hop(fr, q, cepstrum=False)[0] is None


def test_offline_gate_is_the_live_engines(profile):
    """The offline engine runs the live engine's gate on scalars: the same openness and the
    same classified hops as `_step` hop by hop."""
    from audio.calibration import synth_vowel
    from audio.live_lipsync import LiveLipSync
    from audio.mfcc import mfcc_frames
    from audio.offline_lipsync import MfccLipSync

    z = np.zeros(SR // 4, np.float32)
    x = np.concatenate([z, synth_vowel("ja+f5", 60, "A"), z, synth_vowel("en-us+m5", 50, "U"), z])
    x = x + np.random.default_rng(0).standard_normal(len(x)).astype(np.float32) * 1e-3
    _t, op, probs = MfccLipSync(profile, net=None).hops(x, SR)
    eng = LiveLipSync(profile, SR, net=None)
    f = mfcc_frames(x, SR, eng.stream.settings)
    tmpl = eng.matcher.probs(f.mfcc)
    want_op, want_p = [], []
    for k in range(len(f)):
        lev, flat, per = float(f.level_db[k]), float(f.flatness[k]), float(f.periodicity[k])
        fr = eng._step(int(f.end[k]), f.mfcc[k], lev, flat, per, template_probs=tmpl[k])
        want_op.append(fr.open)
        want_p.append(np.full(len(tmpl[k]), np.nan) if eng.last_probs is None else eng.last_probs)
    np.testing.assert_array_equal(op, want_op)
    np.testing.assert_array_equal(probs, np.array(want_p))  # NaN where no vowel was read
    assert op.max() > 0.5 and 50 < np.isfinite(probs[:, 0]).sum() < len(probs)


def test_onset_lag_silence_closes_and_noise_never_opens(profile):
    from app.bench_lipsync import _run_blocks, close_times, noise, onset_lags, onset_stream
    from audio.live_lipsync import LiveLipSync

    x, on, off, _ = onset_stream([("ja+f5", 60), ("en-us+m5", 50)], levels=(-25.0,))
    av, t, op = _run_blocks(LiveLipSync(profile).push, x)
    assert np.all(np.diff(t) > 0) and np.all(t <= av + 1e-9)
    lags = onset_lags(av, op, on, off)
    assert np.isfinite(lags).all() and np.median(lags) <= 0.030
    closes = close_times(av, op, off)
    assert np.isfinite(closes).all() and closes.max() <= 0.100
    for seed in (1, 2):
        _, _, op = _run_blocks(LiveLipSync(profile).push, noise(10.0, -40.0, seed))
        assert op.max() == 0.0
    # noise after speech (floor learnt low) must not open either
    eng = LiveLipSync(profile)
    eng.process(x[: 3 * SR])
    assert max(f.open for f in eng.process(noise(5.0, -40.0, 3))[20:]) == 0.0


def test_frames_and_mappings(profile):
    from audio.calibration import synth_vowel
    from audio.live_lipsync import (
        OVR_VISEMES,
        LiveLipSync,
        to_avatar_params,
        to_live2d,
        to_ovr_visemes,
        to_vrm,
    )
    from core.avatar import AvatarParams

    x = np.concatenate([np.zeros(SR // 4, np.float32), synth_vowel("ja+m1", 40, "I")])
    frames = LiveLipSync(profile).process(x)
    for f in frames:
        assert 0.0 <= f.open <= 1.0 and abs(f.vowels.sum() - 1.0) < 1e-5
        l2 = to_live2d(f)
        assert set(l2) == {"ParamMouthOpenY", "ParamMouthForm"}
        assert -1 <= l2["ParamMouthForm"] <= 1
        assert set(to_vrm(f)) == {"aa", "ih", "ou", "ee", "oh"}
        ovr = to_ovr_visemes(f)
        assert tuple(ovr) == OVR_VISEMES and abs(sum(ovr.values()) - 1) < 1e-5
        p = to_avatar_params(f, AvatarParams())
        assert p.mouth_open == pytest.approx(f.open)
    loud = [f for f in frames if f.open > 0.5]
    assert loud and to_live2d(loud[-1])["ParamMouthForm"] > 0.3  # I: wide mouth
    assert to_vrm(loud[-1])["ih"] > 0.5


def test_cost_per_hop(profile):
    import time

    from audio.live_lipsync import LiveLipSync

    eng = LiveLipSync(profile)
    x = np.random.default_rng(0).standard_normal(2 * SR).astype(np.float32) * 0.05
    t0 = time.perf_counter()
    n = len(eng.process(x, block=160))
    per_hop = (time.perf_counter() - t0) / n
    # goal 0.3 ms (bench; missed); the live separation front-end raised the cost from
    # ~0.5-0.7 to ~1.2-1.7 ms per hop on the shared 2-core machine: generous for a CI core
    assert per_hop < 0.0025


def _cli(argv):
    from app import cmd_lipsync

    ap = argparse.ArgumentParser()
    cmd_lipsync.add_parser(ap.add_subparsers(dest="cmd"))
    return cmd_lipsync.run(ap.parse_args(argv))


def test_json_contract_offline_and_live(tmp_path, profile):
    import scipy.io.wavfile

    from audio.calibration import synth_vowel

    x = np.concatenate(
        [np.zeros(SR // 2), synth_vowel("ja+f5", 60, "A"), synth_vowel("ja+f5", 60, "U")]
    ).astype(np.float32)
    wav = tmp_path / "v.wav"
    scipy.io.wavfile.write(wav, SR, x)
    docs = {}
    for mode in ("offline", "live"):
        out = tmp_path / f"{mode}.json"
        assert (
            _cli(["lipsync", str(wav), "--json", str(out)] + (["--live"] if mode == "live" else []))
            == 0
        )
        d = json.loads(out.read_text())
        assert d["rate_hz"] == 100
        fr = d["frames"]
        assert len(fr) >= 0.99 * len(x) / SR * 100
        t = np.array([f["t"] for f in fr])
        assert np.all(np.diff(t) > 0)
        for f in fr:
            assert set(f) == {"t", "open", "A", "I", "U", "E", "O", "N"}
            assert 0 <= f["open"] <= 1
            assert abs(sum(f[v] for v in "AIUEON") - 1) < 1e-3
        voiced = [f for f in fr if f["open"] > 0.5]
        assert len(voiced) > 100
        docs[mode] = t
    n = min(len(docs["offline"]), len(docs["live"]))
    assert np.all(docs["live"][:n] >= docs["offline"][:n])


def test_cli_errors_are_one_line(tmp_path):
    from audio.errors import AudioError

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(AudioError, match=r"bad\.json"):
        _cli(
            [
                "lipsync",
                str(tmp_path / "none.wav"),
                "--json",
                str(tmp_path / "o.json"),
                "--profile",
                str(bad),
            ]
        )
    with pytest.raises(AudioError, match=r"none\.wav"):
        _cli(["lipsync", str(tmp_path / "none.wav"), "--json", str(tmp_path / "o.json")])


def test_offline_engine_plugs_into_analyze_clip(profile):
    from audio.analysis import analyze_clip
    from audio.calibration import synth_vowel
    from audio.decode import AudioClip
    from audio.offline_lipsync import MfccLipSync
    from core.avatar import VOWELS

    x = np.concatenate([np.zeros(SR // 2), synth_vowel("ja+m1", 40, "O"), np.zeros(SR // 2)])
    clip = AudioClip(x[None].astype(np.float32), SR)
    track = analyze_clip(clip, 30, lipsync=MfccLipSync(profile))
    mo = track.scalars["mouth_open"]
    assert mo[:10].max() == 0.0 and mo.max() > 0.9
    dom = track.vowels.argmax(axis=1)
    open_frames = mo > 0.5
    assert np.mean(dom[open_frames] == VOWELS.index("O")) > 0.9
    # look-ahead: the offline mouth opens no later than the live one
    from audio.live_lipsync import LiveLipSync

    live = next(f for f in LiveLipSync(profile).process(x) if f.open >= 0.5).t
    assert np.argmax(mo >= 0.5) / 30 <= live


def _with_latches(eng, block_push):
    """Push in blocks; after each block the hops it completed, then a latch if there is one."""

    def push(block):
        out = list(block_push(block))
        lf = eng.latch()
        return out + ([lf] if lf is not None else [])

    return push


def test_latch_is_a_hop_ending_now_that_changes_nothing(profile):
    """latch(): the real hops come out exactly as without it; the mouth it reports opens
    sooner after an onset than the hops alone (it is at most one block old, not one hop); and
    noise never opens it."""
    from app.bench_lipsync import _run_blocks, noise, onset_lags, onset_stream
    from audio.live_lipsync import LiveLipSync

    x, on, off, _ = onset_stream([("ja+f5", 60), ("en-us+m5", 50)], levels=(-25.0,))
    plain = LiveLipSync(profile)
    hops = [f for i in range(0, len(x), 80) for f in plain.push(x[i : i + 80])]
    latched = LiveLipSync(profile)
    mixed = []
    for i in range(0, len(x), 80):  # 5 ms blocks at 16 kHz
        mixed += [("hop", f) for f in latched.push(x[i : i + 80])]
        lf = latched.latch()
        if lf is not None:
            mixed.append(("latch", lf))
    assert latched.latch().t == mixed[-1][1].t  # asked again: the same provisional hop
    again = [f for kind, f in mixed if kind == "hop"]
    assert len(again) == len(hops)
    for a, b in zip(hops, again, strict=True):
        assert (a.t, a.open, a.silent) == (b.t, b.open, b.silent)
        assert np.array_equal(a.vowels, b.vowels)
    assert sum(kind == "latch" for kind, _ in mixed) >= len(hops) * 0.9  # every other block
    # onset lag (when the mouth first reaches half open, from the block it was made in)
    lag_hops = onset_lags(*_run_blocks(LiveLipSync(profile).push, x)[::2], on, off)
    eng = LiveLipSync(profile)
    lag_latched = onset_lags(*_run_blocks(_with_latches(eng, eng.push), x)[::2], on, off)
    print(f"median onset lag: hops {np.median(lag_hops) * 1e3:.1f} ms, "
          f"with latches {np.median(lag_latched) * 1e3:.1f} ms")  # fmt: skip
    assert np.median(lag_latched) <= np.median(lag_hops) - 0.002
    eng = LiveLipSync(profile)
    eng.process(x[: 3 * SR])
    _, _, op = _run_blocks(_with_latches(eng, eng.push), noise(5.0, -40.0, 3))
    assert op[40:].max() == 0.0


def _gate_run(eng, hops):
    """`eng._gate_open` over (level dB, p(voice)) pairs of tonal hops -> (gate, openness) each."""
    out = []
    for lev, pv in hops:
        op = eng._gate_open(lev, True, pv)
        out.append((eng.gate, op))
    return out


def test_gate_closes_on_a_fading_level_and_holds_through_the_tail(profile):
    """FADE_HOPS (issue 15, eighteenth round): a level falling 1.5 dB a hop (a room's tail,
    rt60 0.4 s) with p(voice) still high closes the gate within a few hops where the gate
    without the rule (FADE_HOPS 0) keeps it open down to the floor; the still-fading tail does not reopen it, not
    even on the net alone (VOICE_SURE); a rise (the next voice) does; a confident net
    (p(voice) over FADE_PV) keeps it open; a steady level never closes it."""
    from audio.live_lipsync import LiveLipSync

    voice = [(-20.0, 0.95)] * 20
    tail = [(-20.0 - 1.5 * k, 0.88) for k in range(1, 25)]
    again = [(-22.0, 0.95)] * 10
    hops = [(-90.0, 0.0)] * 10 + voice + tail + again

    def fade(**kw):
        eng = LiveLipSync(profile, SR, net=None)
        eng.FADE_HOPS, eng.FADE_DB, eng.FADE_PV = 4, 5.0, 0.9
        for k, v in kw.items():
            setattr(eng, k, v)
        return eng

    plain = _gate_run(fade(FADE_HOPS=0), hops)
    faded = _gate_run(fade(), hops)
    t0 = 30  # the tail's first hop
    assert all(g for g, _ in plain[10 : t0 + len(tail)])  # without the rule: open all through
    shipped = _gate_run(LiveLipSync(profile, SR, net=None), hops)
    assert shipped == faded  # the rule as shipped (issue 15, eighteenth round)
    shut = [g for g, _ in faded[t0:]].index(False)
    assert shut <= 4  # 5 dB over 4 falling hops
    assert not any(g for g, _ in faded[t0 + shut : t0 + len(tail)])  # held shut in the tail
    assert all(op == 0.0 for _, op in faded[t0 + shut + 6 : t0 + len(tail)])
    assert faded[t0 + len(tail)][0]  # the next voice (a rise) reopens it at once
    # p(voice) over FADE_PV: the net is sure, the fade does not close the gate
    sure = _gate_run(fade(FADE_PV=0.85), hops)
    assert all(g for g, _ in sure[10 : t0 + len(tail)])
    # a steady level (or one falling by less than FADE_DB over FADE_HOPS) never closes it
    slow = [(-20.0 - 0.5 * k, 0.88) for k in range(40)]
    assert all(g for g, _ in _gate_run(fade(), [(-90.0, 0.0)] * 10 + voice + slow)[10:])


def test_gate_reopens_on_the_level_only_after_a_rise(profile):
    """REOPEN_DB: once the net has shut the gate (p(voice) under VOICE_OFF), p(voice) back over
    VOICE_OFF at a level still above the floor reopens it only after the level has risen
    REOPEN_DB over its lowest since the close; the net alone (over VOICE_SURE) reopens it as
    before."""
    from audio.live_lipsync import LiveLipSync

    hops = [(-90.0, 0.0)] * 10 + [(-20.0, 0.95)] * 10 + [(-30.0, 0.3)] * 3  # shut by the net
    flicker = [(-31.0, 0.7)] * 3  # the tail's p(voice) back over VOICE_OFF, no rise
    rise = [(-27.0, 0.7)]

    def engine(reopen_db: float):  # the fade rule off: this is REOPEN_DB's own effect
        eng = LiveLipSync(profile, SR, net=None)
        eng.FADE_HOPS, eng.REOPEN_DB = 0, reopen_db
        return eng

    plain = _gate_run(engine(0.0), hops + flicker + rise)
    held = _gate_run(engine(3.0), hops + flicker + rise)
    n = len(hops)
    assert not plain[n - 1][0] and not held[n - 1][0]
    assert plain[n][0]  # without REOPEN_DB the gate reopens on the flicker
    assert not any(g for g, _ in held[n : n + 3])
    assert held[n + 3][0]  # 4 dB over the lowest since the close
    assert _gate_run(engine(3.0), [*hops, (-31.0, 0.9)])[-1][0]  # sure: reopened


def test_a_long_deep_fall_closes_the_gate_whatever_the_net_says(profile):
    """FADE2_HOPS: beside the short fall under FADE_PV, a longer and deeper one (FADE2_DB over
    FADE2_HOPS hops, small rises allowed) closes the gate even where the net is sure of a voice
    (a room's tail it hears as the voice); a shallower fall does not."""
    from audio.live_lipsync import LiveLipSync

    wobble = [0.0, 1.0, -0.5, 0.5]  # the tail's own ripples, under FADE2_SLACK
    tail = [(-20.0 - 1.5 * k + wobble[k % 4], 0.97) for k in range(1, 25)]
    hops = [(-90.0, 0.0)] * 10 + [(-20.0, 0.97)] * 20 + tail

    def run(**kw):
        eng = LiveLipSync(profile, SR, net=None)
        eng.FADE_HOPS, eng.FADE_DB, eng.FADE_PV = 4, 5.0, 0.9
        for k, v in kw.items():
            setattr(eng, k, v)
        return [g for g, _ in _gate_run(eng, hops)]

    assert all(run()[10:])  # the net is sure (0.97 > FADE_PV): the short rule keeps it open
    long = run(FADE2_HOPS=10, FADE2_DB=12.0, FADE2_SLACK=2.0)
    shut = long[30:].index(False)
    assert 6 <= shut <= 10  # 12 dB under the voice, the window of 10 hops reaching back to it
    assert not any(long[30 + shut :])  # and held shut
    assert all(run(FADE2_HOPS=10, FADE2_DB=20.0, FADE2_SLACK=2.0)[10:])  # not that deep
