"""The vowel net's front-ends: the live one hop by hop gives what training saw; files keep them."""

from __future__ import annotations

import numpy as np
import pytest

from audio import augment
from audio.mfcc import MfccStream, mfcc_frames
from audio.voice_separation import SteadySuppressor, suppress_steady
from audio.vowel_net import (
    FRONT_SEPARATION,
    HOP_DIM,
    LIVE_FRONT_PITCH,
    LIVE_FRONT_STEADY,
    NET_SETTINGS,
    PITCH_DIM,
    SEP_DIM,
    VOICED_P,
    LiveNet,
    Mlp,
    VowelNet,
    live_inputs,
    load_net,
    offline_inputs,
)

SR = 16000
OFFS = (-6, -2, -1, 0)


def _mlp(dim: int, rng: np.random.Generator) -> Mlp:
    return Mlp(
        rng.standard_normal(dim).astype(np.float32),
        np.ones(dim, np.float32) * 3,
        [
            (rng.standard_normal((dim, 8)).astype(np.float32) * 0.2, np.zeros(8, np.float32)),
            (rng.standard_normal((8, 6)).astype(np.float32), np.zeros(6, np.float32)),
        ],
    )


def _signal() -> np.ndarray:
    """A band with a gliding tone entering half-way (something for the front-end to keep)."""
    y = augment.band(1.5, seed=3)
    t = np.arange(len(y)) / SR
    tone = 0.2 * np.sin(2 * np.pi * np.cumsum(200 + 80 * t) / SR) * (t > 0.75)
    return (y + tone).astype(np.float32)


def test_suppressor_hop_by_hop_is_the_batch():
    p = mfcc_frames(_signal(), SR, NET_SETTINGS, keep_power=True).power.astype(np.float64)
    s = SteadySuppressor()
    rows = []
    for r in p:
        s.step(r, commit=False)  # a look that must change nothing
        rows.append(s.step(r))
    np.testing.assert_allclose(np.stack(rows), suppress_steady(p), rtol=1e-9, atol=0)
    # a sound that has been there all along is taken out, a new one is kept
    steady = np.tile(p[:1], (40, 1))
    assert suppress_steady(steady)[-1].sum() < 1e-3 * steady[-1].sum()


def test_live_net_stream_matches_training_features():
    rng = np.random.default_rng(0)
    mlp = _mlp((HOP_DIM + SEP_DIM) * len(OFFS), rng)
    cmn = np.linspace(-3.0, 3.0, NET_SETTINGS.n_coefs)  # far from the signal's: the start counts
    y = _signal()
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    want, _ = mlp.predict(live_inputs(f, SR, cmn, OFFS, LIVE_FRONT_STEADY, cmn_prior=10))
    heavy, _ = mlp.predict(live_inputs(f, SR, cmn, OFFS, LIVE_FRONT_STEADY))
    assert np.abs(want - heavy).max() > 1e-3  # the start weight reaches the net's input
    # also_cepstrum=False: the net computes the mix's cepstrum with the cleaned one's; the
    # compiled hop (audio.live_net_kernels) and the numpy one both give the batch's numbers
    cases = ((False, True, True), (True, True, True), (False, False, True), (True, False, False))
    for voiced, also_cep, compiled in cases:
        net = LiveNet(
            mlp, cmn, OFFS, LIVE_FRONT_STEADY, SR, cmn_prior=10, cmn_voiced=voiced,
            compiled=compiled,
        )  # fmt: skip
        assert (net.compiled is not None) == compiled
        stream = MfccStream(SR, NET_SETTINGS, NET_SETTINGS, also_cepstrum=also_cep)
        got = []
        for i in range(0, len(y), 80):  # 5 ms blocks, as a device gives them
            for _end, _cep, lev, flat, per, ncep, power in stream.push(y[i : i + 80]):
                net.step(ncep, lev, per, flat, False, power)  # a look that must change nothing
                got.append(net.step(ncep, lev, per, flat, True, power)[0])
        got = np.array(got)
        exp = want
        if voiced:  # the mean moved only after hops the net heard a voice in
            mask = np.r_[False, got[:-1] > VOICED_P]
            assert 0 < mask.sum() < len(mask) - 5
            exp, _ = mlp.predict(
                live_inputs(f, SR, cmn, OFFS, LIVE_FRONT_STEADY, cmn_prior=10, voiced=mask)
            )
        np.testing.assert_allclose(got, exp[: len(got)], atol=1e-4)  # float32 power in batch
        assert len(got) == len(exp)


def test_front_ends_survive_the_file(tmp_path):
    rng = np.random.default_rng(1)
    live = _mlp((HOP_DIM + SEP_DIM) * len(OFFS), rng)
    off = _mlp(HOP_DIM * 2 * 3, rng)
    net = VowelNet(live, off, "test", np.zeros(NET_SETTINGS.n_coefs), front=FRONT_SEPARATION,
                   live_offsets=OFFS, live_front=LIVE_FRONT_STEADY, live_cmn_prior=10,
                   live_cmn_voiced=True)  # fmt: skip
    path = tmp_path / "net.npz"
    net.save(path)
    back = load_net(path)
    got = (back.front, back.live_front, back.live_offsets, back.live_cmn_prior)
    assert got == (FRONT_SEPARATION, LIVE_FRONT_STEADY, OFFS, 10)
    assert back.live_cmn_voiced is True
    with np.load(path) as z:
        arrays = dict(z)
    old = tmp_path / "old.npz"  # a file from before the live mean's start was stored
    np.savez(old, **{k: v for k, v in arrays.items() if not k.startswith("live_cmn")})
    assert (load_net(old).live_cmn_prior, load_net(old).live_cmn_voiced) == (200, False)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**arrays, "live_cmn_prior": np.asarray(0)})
    with pytest.raises(ValueError, match=r"bad\.npz.*live_cmn_prior must be 1\.\.1000 hops"):
        load_net(bad)
    arrays["front"] = np.array("magic")
    np.savez(bad, **arrays)
    with pytest.raises(ValueError, match=r"bad\.npz.*unknown front-end 'magic'"):
        load_net(bad)


def test_shared_pass_and_running_mean_are_the_plain_ones():
    """One FFT pass for two settings gives what two passes give; the batch running mean is
    `RunningCmn.update` hop after hop (the numbers the net was trained on)."""
    from audio.mfcc import MfccSettings, mfcc_frames_pair
    from audio.vowel_net import RunningCmn, running_cmn

    y = _signal()
    prof = MfccSettings()
    a, b = mfcc_frames_pair(y, SR, prof, NET_SETTINGS, keep_power=True)
    pa = mfcc_frames(y, SR, prof)
    pb = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    for got, want in ((a, pa), (b, pb)):
        for name in ("end", "mfcc", "level_db", "flatness", "periodicity"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    np.testing.assert_array_equal(b.power, pb.power)
    with pytest.raises(ValueError, match="share window"):
        mfcc_frames_pair(y, SR, prof, MfccSettings(win_ms=40.0))
    init = np.linspace(-1, 1, NET_SETTINGS.n_coefs)
    r = RunningCmn(init)
    want = np.stack([r.update(c, lv) for c, lv in zip(pb.mfcc, pb.level_db, strict=True)])
    np.testing.assert_array_equal(running_cmn(pb, init), want)


def test_offline_nets_averaged_and_kept_in_the_file(tmp_path):
    """A net file with a second offline net: the offline probabilities are the two nets' mean,
    and the second net survives the file."""
    rng = np.random.default_rng(2)
    offs = (-2, 0, 2)
    live = _mlp(HOP_DIM * 2, rng)
    a, b = _mlp(HOP_DIM * 3, rng), _mlp(HOP_DIM * 3, rng)
    kw = dict(cmn_init=np.zeros(NET_SETTINGS.n_coefs), live_offsets=(-1, 0), offline_offsets=offs)
    both = VowelNet(live, a, "test", offline_more=[b], **kw)
    y = _signal()[: SR // 2]
    _, pv, pw = both.offline_probs(y, SR)
    _, pva, pwa = VowelNet(live, a, "test", **kw).offline_probs(y, SR)
    _, pvb, pwb = VowelNet(live, b, "test", **kw).offline_probs(y, SR)
    assert np.abs(pwa - pwb).max() > 1e-3  # the two nets differ
    np.testing.assert_allclose(pw, (pwa + pwb) / 2, rtol=1e-6)
    # p(voice) is sqrt(offline's * live's): the mean of the offline ones is inside
    np.testing.assert_allclose(2 * pv**2, pva**2 + pvb**2, rtol=1e-5, atol=1e-12)
    path = tmp_path / "net.npz"
    both.save(path)
    back = load_net(path)
    assert len(back.offline_more) == 1
    w16 = b.layers[0][0].astype(np.float16).astype(np.float32)  # the file keeps float16
    np.testing.assert_array_equal(back.offline_more[0].layers[0][0], w16)


def test_clip_spread_undoes_a_cepstral_gain_and_survives_the_file(tmp_path):
    """Divided by the clip's spread, cepstra scaled per coefficient (a smoother or sharper
    spectrum) read the same; a short clip keeps near the training's spread; files keep it."""
    from audio.vowel_net import clip_cmn, clip_cvn, clip_spread

    y = _signal()
    f = mfcc_frames(y, SR, NET_SETTINGS)
    x = clip_cmn(f)
    gain = np.exp(np.linspace(0.0, -0.7, NET_SETTINGS.n_coefs)).astype(np.float32)
    np.testing.assert_allclose(clip_cvn(x * gain, f), clip_cvn(x, f), rtol=1e-4, atol=1e-5)
    prior = np.full(NET_SETTINGS.n_coefs, 5.0)
    fs = mfcc_frames(y[: 6 * 160 + 400], SR, NET_SETTINGS)
    assert len(fs) < 10
    own, sp = clip_spread(clip_cmn(fs), fs), clip_spread(clip_cmn(fs), fs, prior)
    assert np.all(np.abs(sp - 5.0) < 0.2 * np.abs(own - 5.0)), (own, sp)
    rng = np.random.default_rng(4)
    net = VowelNet(_mlp(HOP_DIM * 2, rng), _mlp(HOP_DIM * 3, rng), "test",
                   np.zeros(NET_SETTINGS.n_coefs), live_offsets=(-1, 0),
                   offline_offsets=(-2, 0, 2), offline_cvn=prior)  # fmt: skip
    path = tmp_path / "net.npz"
    net.save(path)
    np.testing.assert_array_equal(load_net(path).offline_cvn, prior)
    _, _, pw = net.offline_probs(y, SR)
    _, _, pw0 = VowelNet(net.live, net.offline, "test", net.cmn_init, live_offsets=(-1, 0),
                         offline_offsets=(-2, 0, 2)).offline_probs(y, SR)  # fmt: skip
    assert np.abs(pw - pw0).max() > 1e-3  # the spread reaches the net's input
    with np.load(path) as z:
        arrays = dict(z)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**arrays, "offline_cvn": -prior})
    with pytest.raises(ValueError, match=r"bad\.npz.*offline_cvn must be 20 positive"):
        load_net(bad)
    del arrays["offline_cvn"]
    np.savez(bad, **arrays)
    assert load_net(bad).offline_cvn is None  # files from before: mean normalisation only


def test_lifter_rows_scale_the_cepstra_only():
    """The training's cepstral-gain augmentation touches each stacked hop vector's cepstra and
    nothing else (periodicity, flatness, the front-end's kept energy)."""
    from audio.vowel_net_train import lifter_rows

    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, HOP_DIM * 4)).astype(np.float32)
    gain = np.linspace(1.0, 0.5, NET_SETTINGS.n_coefs)
    y = lifter_rows(x.copy(), gain)
    nc = NET_SETTINGS.n_coefs
    for b in range(4):
        blk = slice(b * HOP_DIM, (b + 1) * HOP_DIM)
        np.testing.assert_allclose(y[:, blk][:, :nc], x[:, blk][:, :nc] * gain, rtol=1e-6)
        np.testing.assert_array_equal(y[:, blk][:, nc:], x[:, blk][:, nc:])


def test_validation_voices_are_neither_trained_nor_the_test():
    """The voices training settings are chosen on (app/bench_lipsync_split) are outside the
    shipped training and outside the test synthesizer: flite is scored, never chosen on."""
    import importlib.util
    from pathlib import Path

    from app.bench_lipsync_split import split_voices

    path = Path(__file__).resolve().parent.parent / "scripts" / "build_default_profile.py"
    spec = importlib.util.spec_from_file_location("build_default_profile", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sets = split_voices()
    trained = set(mod.training_voices())
    assert sets["valid"] and not trained & set(sets["valid"])
    assert {v.source for v in sets["valid"]} == {"festival"}
    assert {v.source for v in sets["test"]} == {"flite"} and not trained & set(sets["test"])
    assert {v.speaker for v in sets["valid"]} == {"kal", "slt"}
    assert {v.speaker for v in sets["test-other-speakers"]} == {"awb", "rms"}


def _two_nets_on_a_clip(seed: int):
    """A random live and offline net, half a second of signal, its features, and each net's
    own (p(voice), p(vowel)) on it."""
    rng = np.random.default_rng(seed)
    kw = dict(cmn_init=np.zeros(NET_SETTINGS.n_coefs), live_offsets=(-1, 0), offline_offsets=(0,))
    net = VowelNet(_mlp(HOP_DIM * 2, rng), _mlp(HOP_DIM, rng), "test", **kw)
    y = _signal()[: SR // 2]
    f = mfcc_frames(y, SR, NET_SETTINGS)
    live = net.live.predict(live_inputs(f, SR, net.cmn_init, net.live_offsets))
    off = net.offline.predict(offline_inputs(y, SR, f, net.cmn_init, offsets=(0,)))
    return net, y, f, live, off


def test_live_weight_in_offline_voice_probability():
    """p(voice) offline = offline^(1 - w) * live^w: w = 0 is the offline net alone, 1/2 the
    geometric mean (as before the weight was a setting), 1/4 between them."""
    net, y, f, (pl, _), (off, _) = _two_nets_on_a_clip(4)
    _, p0, _ = net.offline_probs(y, SR, f, live_weight=0.0)
    _, ph, _ = net.offline_probs(y, SR, f, live_weight=0.5)
    _, pq, _ = net.offline_probs(y, SR, f, live_weight=0.25)
    assert np.abs(pl - off).max() > 1e-2  # the two nets disagree somewhere
    np.testing.assert_allclose(p0, off, rtol=1e-6)
    np.testing.assert_allclose(ph, np.sqrt(off * pl), rtol=1e-6)
    np.testing.assert_allclose(pq, off**0.75 * pl**0.25, rtol=1e-5)


def test_live_vowel_weight_in_offline_vowel_probability():
    """p(vowel) offline ∝ offline^(1 - w) * live^w, each hop's five summing to one: w = 0 is
    the offline nets' alone (the live net not run where p(voice) does not ask for it either),
    1 the live net's; p(voice) stays as its own weight makes it."""
    net, y, f, (_, plw), (_, ow) = _two_nets_on_a_clip(5)
    _, pv0, pw0 = net.offline_probs(y, SR, f, live_weight=0.0)
    _, pv3, pw3 = net.offline_probs(y, SR, f, live_weight=0.0, vowel_weight=0.3)
    _, _, pw1 = net.offline_probs(y, SR, f, live_weight=0.0, vowel_weight=1.0)
    assert np.abs(plw - ow).max() > 1e-2  # the two nets disagree somewhere
    np.testing.assert_allclose(pw0, ow, rtol=1e-6)
    np.testing.assert_allclose(pw1, plw, rtol=1e-5)
    mix = ow**0.7 * plw**0.3
    np.testing.assert_allclose(pw3, mix / mix.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(pw3.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(pv3, pv0)


def test_pitch_front_hop_by_hop_is_the_batch():
    """The pitch cue (`LIVE_FRONT_PITCH`): the live stream gives the rows training saw, and the
    cue tells the gliding tone from the band it enters over."""
    rng = np.random.default_rng(2)
    dim = HOP_DIM + SEP_DIM + PITCH_DIM
    mlp = _mlp(dim * len(OFFS), rng)
    cmn = np.zeros(NET_SETTINGS.n_coefs)
    y = _signal()
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    rows = live_inputs(f, SR, cmn, (0,), LIVE_FRONT_PITCH, cmn_prior=10)
    assert rows.shape[1] == dim
    harm, f0 = rows[:, -2], 200.0 * 2.0 ** rows[:, -1]
    n = len(rows)
    tone = slice(n * 3 // 5, n - 5)  # the glide runs 260 -> 320 Hz there
    assert np.median(harm[tone]) > np.median(harm[5 : n // 2 - 5]) + 0.2
    assert np.median(np.abs(f0[tone] / (200 + 80 * np.arange(n)[tone] * 0.01) - 1)) < 0.1
    want, _ = mlp.predict(live_inputs(f, SR, cmn, OFFS, LIVE_FRONT_PITCH, cmn_prior=10))
    net = LiveNet(mlp, cmn, OFFS, LIVE_FRONT_PITCH, SR, cmn_prior=10)
    stream = MfccStream(SR, NET_SETTINGS, NET_SETTINGS, also_cepstrum=False)
    got = []
    for i in range(0, len(y), 80):
        for _end, _cep, lev, flat, per, ncep, power in stream.push(y[i : i + 80]):
            net.step(ncep, lev, per, flat, False, power)
            got.append(net.step(ncep, lev, per, flat, True, power)[0])
    np.testing.assert_allclose(np.array(got), want[: len(got)], atol=1e-4)
    assert len(got) == len(want)


def _held_vowel(f1: float, f2: float, seconds: float, f0: float = 130.0) -> np.ndarray:
    """A flat-pitched vowel: harmonics of `f0` shaped by two formants, with a little jitter."""
    rng = np.random.default_rng(int(f1))
    t = np.arange(int(seconds * SR)) / SR
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.003 * rng.standard_normal(len(t)))) / SR
    y = np.zeros(len(t))
    for k in range(1, int(7000 / f0)):
        fk = k * f0
        amp = sum(1.0 / (1.0 + ((fk - f) / 90.0) ** 2) for f in (f1, f2)) / k**0.5
        y += amp * np.sin(k * phase)
    return (0.1 * y / np.abs(y).max()).astype(np.float32)


def test_front_priors_keep_a_held_vowel_in_the_separated_voice(tmp_path):
    """A short clip of one held vowel: normalised by its own mean alone, the separated voice's
    cepstra are the vowel less itself (nothing); starting from the training mean
    (`front_priors`, as the mix's `clip_cmn` prior does) they read near the same vowel heard
    among others. The file keeps the priors and refuses broken ones by name."""
    from audio.lipsync_eval import Track
    from audio.vowel_net_train import front_priors

    formants = [(750, 1200), (300, 2300), (350, 900), (500, 1900), (450, 800)]
    gap = np.zeros(SR // 4, np.float32)
    long = np.concatenate([p for f1, f2 in formants for p in (_held_vowel(f1, f2, 0.6), gap)])
    priors = front_priors([Track("five", None, long, [], long)], FRONT_SEPARATION)
    assert len(priors) == 1 and all(p.shape == (NET_SETTINGS.n_coefs,) for p in priors[0])
    pad = np.zeros(SR // 2, np.float32)
    short = np.concatenate([pad, _held_vowel(*formants[3], 1.5), pad])
    nc = NET_SETTINGS.n_coefs

    def separated(y, fp, start=0.0, end=None, weight=200):  # the separated voice, loud hops
        f = mfcc_frames(y, SR, NET_SETTINGS)
        v = offline_inputs(y, SR, f, None, FRONT_SEPARATION, offsets=(0,), front_priors=fp,
                           front_prior_hops=weight)  # fmt: skip
        t = f.end / SR
        keep = (f.level_db > f.level_db.max() - 10) & (t > start + 0.1) & (t < (end or 1e9))
        return np.median(v[keep, HOP_DIM : HOP_DIM + nc], axis=0)

    step = 0.6 + len(gap) / SR
    ref = separated(long, priors, 3 * step, 3 * step + 0.6)  # the vowel among the others
    alone = separated(short, None)
    primed = separated(short, priors)
    assert np.linalg.norm(alone[1:]) < 0.5 * np.linalg.norm(ref[1:])  # its own mean erased it
    assert np.linalg.norm(primed - ref) < 0.5 * np.linalg.norm(alone - ref)

    rng = np.random.default_rng(6)
    kw = dict(live_offsets=(-1, 0), offline_offsets=(-2, 0, 2), front=FRONT_SEPARATION)
    net = VowelNet(_mlp(HOP_DIM * 2, rng), _mlp(HOP_DIM * 6, rng), "test",
                   np.zeros(nc), front_priors=priors, **kw)  # fmt: skip
    _, _, pw = net.offline_probs(short, SR)
    _, _, pw0 = VowelNet(net.live, net.offline, "test", net.cmn_init, **kw).offline_probs(short, SR)
    assert np.abs(pw - pw0).max() > 1e-3  # the priors reach the net's input
    path = tmp_path / "net.npz"
    net.save(path)
    back = load_net(path).front_priors
    for got, want in zip(back[0], priors[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with np.load(path) as z:
        arrays = dict(z)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**arrays, "front0_cvn": -arrays["front0_cvn"]})
    with pytest.raises(ValueError, match=r"bad\.npz: front0_cmn / _cvn must be 20 means"):
        load_net(bad)
    np.savez(
        bad, **{**arrays, "front1_cmn": arrays["front0_cmn"], "front1_cvn": arrays["front0_cvn"]}
    )
    with pytest.raises(ValueError, match=r"bad\.npz: 2 front priors for front-end 'separation'"):
        load_net(bad)
    np.savez(bad, **{k: a for k, a in arrays.items() if k != "front0_cvn"})
    with pytest.raises(ValueError, match=r"bad\.npz: front0_cvn: missing"):
        load_net(bad)
    np.savez(bad, **{k: a for k, a in arrays.items() if not k.startswith("front0")})
    assert load_net(bad).front_priors == []  # files from before: the clip's own statistics
    # what the priors are worth: fewer hops, nearer the clip's own statistics; kept by the file
    light = separated(short, priors, weight=50)
    assert np.linalg.norm(light - alone) < np.linalg.norm(primed - alone)
    net.front_prior_hops = 50
    net.save(path)
    assert load_net(path).front_prior_hops == 50
    np.savez(bad, **{**arrays, "front_prior_hops": np.asarray(0)})
    with pytest.raises(ValueError, match=r"bad\.npz: front_prior_hops must be 1\.\.1000"):
        load_net(bad)
    # a voice without a prior (None: its clip's own statistics, FRONT_PRIORS "mask" leaves the
    # harmonic/percussive voice so) is kept as one, and reads as no prior at all
    net.front_priors = [None]
    net.save(path)
    assert load_net(path).front_priors == [None]
    _, _, none = load_net(path).offline_probs(short, SR)
    np.savez(bad, **{k: a for k, a in arrays.items() if not k.startswith("front0")})
    _, _, plain = load_net(bad).offline_probs(short, SR)  # the same weights, no priors
    np.testing.assert_array_equal(none, plain)
    np.savez(bad, **{**arrays, "front0_cvn": np.zeros(0, np.float32)})  # a mean, no spread
    with pytest.raises(ValueError, match=r"bad\.npz: front0_cmn / _cvn must be 20 means"):
        load_net(bad)
