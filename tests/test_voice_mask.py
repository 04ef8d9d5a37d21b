"""The learned voice mask: trained on mixes it learns to keep a voice and drop a band; the vowel
net's file carries it; the offline engine runs with it."""

from __future__ import annotations

import numpy as np
import pytest

from audio import augment
from audio.backings import backing
from audio.mfcc import mfcc_frames
from audio.offline_lipsync import MfccLipSync
from audio.voice_mask import (
    VoiceMask,
    load_mask_file,
    log_spectra,
    masked_features,
    pooled_means,
    save_mask_file,
)
from audio.voice_mask_train import fit_mask, mask_examples, mask_loss
from audio.vowel_net import (
    FRONT_BOTH,
    FRONT_MASK,
    FRONT_SEPARATION,
    HOP_DIM,
    NET_SETTINGS,
    VowelNet,
    load_net,
    offline_inputs,
)
from tests.tiny_nets import random_mlp

SR = 16000


def _voice(seconds: float, seed: int) -> np.ndarray:
    """A sung-like voice: a gliding harmonic tone with vibrato, formant-shaped, in phrases."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    f0 = (
        rng.uniform(150, 300)
        * 2 ** (0.3 * np.sin(2 * np.pi * 0.7 * t))
        * (1 + 0.02 * np.sin(2 * np.pi * 5.5 * t))
    )
    ph = 2 * np.pi * np.cumsum(f0) / SR
    formants = rng.uniform([500, 1100], [800, 1800])
    y = sum(np.sin(k * ph) / k * (1 + 3 * np.exp(-(((k * f0 - formants[0]) / 200) ** 2))
            + 2 * np.exp(-(((k * f0 - formants[1]) / 300) ** 2))) for k in range(1, 20))  # fmt: skip
    phrase = (np.sin(2 * np.pi * 0.4 * t + rng.uniform(0, 6)) > -0.2).astype(float)
    return (0.1 * y * phrase).astype(np.float32)


@pytest.fixture(scope="module")
def trained() -> tuple[VoiceMask, list[np.ndarray]]:
    voices = [_voice(3.0, s) for s in range(6)]
    ex = mask_examples(voices, n_aug=3, seed=0, band_share=1.0)
    return fit_mask(ex, hidden=(64,), epochs=6, seed=0, batch=256, device="cpu"), voices


def test_mask_learns_to_keep_the_voice_and_drop_the_band(trained):
    mask, _ = trained
    # voices and bands it never trained on, a style it never heard
    held = [_voice(3.0, 100 + s) for s in range(3)]
    vex = mask_examples(held, n_aug=2, seed=5, styles=("keys",), band_share=1.0)
    keep = VoiceMask(mask.mean, mask.std, [(np.zeros((len(mask.mean), mask.bins), np.float32),
                                            np.full(mask.bins, 30.0, np.float32))], mask.offsets)  # fmt: skip
    assert mask_loss(mask, vex) < 0.6 * mask_loss(keep, vex)
    # a band alone is mostly dropped, a voice alone mostly kept
    band = backing(3.0, seed=11, style="rock")
    voice = held[0]
    for y, lo, hi in ((band, 0.0, 0.5), (voice, 0.6, 1.0)):
        p = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True).power
        m = mask.masks(p)
        kept = float((m * p).sum() / p.sum())
        assert lo <= kept <= hi, kept


def test_inputs_do_not_depend_on_the_gain():
    y = augment.mix_at(_voice(2.0, 1), backing(2.1, seed=2), 0.0)
    p = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True).power
    np.testing.assert_allclose(log_spectra(p * 0.01), log_spectra(p), atol=1e-4)


def test_mix_parts_add_up_to_the_mix():
    v, b = _voice(2.0, 3), backing(2.1, seed=4)
    pv, pb = augment.mix_parts(v, b, 3.0)
    np.testing.assert_allclose(pv + pb, augment.mix_at(v, b, 3.0), atol=1e-6)
    assert np.abs(pv + pb).max() <= 0.9 + 1e-6


def test_masked_features_need_the_spectra_and_read_only_what_is_kept(trained):
    mask, voices = trained
    f = mfcc_frames(voices[0], SR, NET_SETTINGS)
    with pytest.raises(ValueError, match="power spectra"):
        masked_features(f, SR, mask, NET_SETTINGS)
    band = backing(3.1, seed=8, style="edm")
    fv = mfcc_frames(voices[0], SR, NET_SETTINGS, keep_power=True)
    fm = mfcc_frames(augment.mix_at(voices[0], band, 0.0), SR, NET_SETTINGS, keep_power=True)
    gv, gm = (
        masked_features(fv, SR, mask, NET_SETTINGS),
        masked_features(fm, SR, mask, NET_SETTINGS),
    )
    loud = fv.level_db > np.percentile(fv.level_db, 50)
    # the kept voice's cepstra are nearer the clean voice's than the mix's are
    d_masked = np.abs(gm.mfcc[loud] - gv.mfcc[loud]).mean()
    d_mix = np.abs(fm.mfcc[loud] - fv.mfcc[loud]).mean()
    assert d_masked < d_mix


@pytest.mark.parametrize("front", [FRONT_MASK, FRONT_BOTH])
def test_net_file_carries_the_mask_and_the_engine_runs_it(trained, tmp_path, front):
    mask, voices = trained
    rng = np.random.default_rng(0)
    dim = (3 if front == FRONT_BOTH else 2) * HOP_DIM  # the mix's, then each separated voice's

    def mlp(d):
        return random_mlp(d, rng)

    net = VowelNet(mlp(HOP_DIM * 6), mlp(dim * 11), "test", front=front, mask=mask)
    path = tmp_path / "net.npz"
    net.save(path)
    back = load_net(path)
    assert back.front == front and back.needs_power
    y = augment.mix_at(voices[1], backing(3.1, seed=9), 3.0)
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    # the file keeps float16 weights: the same mask rounded so gives the same inputs
    f16 = [(w.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32))
           for w, b in mask.layers]  # fmt: skip
    rounded = VoiceMask(mask.mean, mask.std, f16, mask.offsets)
    want = offline_inputs(y, SR, f, None, front, mask=rounded)
    got = offline_inputs(y, SR, f, None, front, mask=back.mask)
    assert got.shape == (len(f), dim * 11)  # each of the 11 offsets
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if front == FRONT_BOTH:  # the mask's voice follows the harmonic/percussive one's
        one = offline_inputs(y, SR, f, None, front, offsets=(0,), mask=back.mask)
        sep = offline_inputs(y, SR, f, None, FRONT_SEPARATION, offsets=(0,))
        np.testing.assert_array_equal(one[:, : 2 * HOP_DIM], sep)
    with pytest.raises(ValueError, match="needs its mask"):
        offline_inputs(y, SR, f, None, front)
    res = MfccLipSync(net=back).analyze(y, SR, 30, 90)
    assert res.open.shape == (90,) and np.isfinite(res.vowels).all()
    # each separated voice's training mean and spread: kept by the file, they move the
    # separated voices' vectors and leave the mix's alone
    from audio.lipsync_eval import Track
    from audio.vowel_net_train import front_priors

    priors = front_priors([Track("v", None, v, [], v) for v in voices[:2]], front, mask)
    assert len(priors) == (2 if front == FRONT_BOTH else 1)
    net.front_priors = priors
    net.save(path)
    assert len(load_net(path).front_priors) == len(priors)
    plain = offline_inputs(y, SR, f, None, front, offsets=(0,), mask=rounded)
    primed = offline_inputs(y, SR, f, None, front, offsets=(0,), mask=rounded, front_priors=priors)
    np.testing.assert_array_equal(primed[:, :HOP_DIM], plain[:, :HOP_DIM])
    for b in range(1, len(priors) + 1):
        blk = slice(b * HOP_DIM, b * HOP_DIM + NET_SETTINGS.n_coefs)
        assert np.abs(primed[:, blk] - plain[:, blk]).max() > 1e-3, b


def test_a_broken_mask_file_is_named(trained, tmp_path):
    mask, _ = trained
    path = tmp_path / "mask.npz"
    save_mask_file(path, mask)
    assert load_mask_file(path).bins == mask.bins
    with np.load(path) as z:
        arrays = dict(z)
    arrays["mask_offsets"] = np.array([0, 1], np.int64)  # fewer offsets than the inputs hold
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(ValueError, match=r"bad\.npz"):
        load_mask_file(bad)


def test_voice_nets_give_p_voice_from_the_blocks_before_the_mask(trained, tmp_path):
    mask, voices = trained
    rng = np.random.default_rng(1)

    def mlp(d):
        return random_mlp(d, rng)

    main = mlp(3 * HOP_DIM * 11)
    voice = mlp(2 * HOP_DIM * 11)  # reads the mix's and the harmonic/percussive voice's blocks
    net = VowelNet(mlp(HOP_DIM * 6), main, "test", front=FRONT_BOTH, mask=mask,
                   offline_voice=[voice], voice_blocks=2)  # fmt: skip
    path = tmp_path / "net.npz"
    net.save(path)
    back = load_net(path)
    assert back.voice_blocks == 2 and len(back.offline_voice) == 1 and not back.offline_more
    y = augment.mix_at(voices[2], backing(3.1, seed=12), 0.0)
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    v = offline_inputs(y, SR, f, None, FRONT_BOTH, offsets=(0,), mask=back.mask)
    pv, pw = back.offline_hop_probs(v)
    want_pv, _ = back.offline_voice[0].predict(offline_inputs(y, SR, f, None, FRONT_SEPARATION))
    _, want_pw = back.offline.predict(offline_inputs(y, SR, f, None, FRONT_BOTH, mask=back.mask))
    np.testing.assert_allclose(pv, want_pv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pw, want_pw, rtol=1e-5, atol=1e-6)
    assert np.abs(pv - back.offline.predict(
        offline_inputs(y, SR, f, None, FRONT_BOTH, mask=back.mask))[0]).max() > 1e-3  # fmt: skip


def test_build_reads_a_given_or_cached_mask_without_training(trained, tmp_path, monkeypatch):
    import hashlib
    from types import SimpleNamespace

    from app.bench_lipsync_split import load_build_script

    bdp = load_build_script()
    mask, _ = trained
    given = tmp_path / "given.npz"
    save_mask_file(given, mask, "test")
    tracks = [SimpleNamespace(name="voice a"), SimpleNamespace(name="voice b")]
    got = bdp._voice_mask(str(given), tracks)
    np.testing.assert_array_equal(got.mean, mask.mean)
    # "cached": the split bench's light builds share one mask per set of training tracks
    monkeypatch.setenv("KAGURA_CACHE_DIR", str(tmp_path / "cache"))
    key = hashlib.sha1(b"voice a|voice b").hexdigest()[:12]
    cached = tmp_path / "cache" / "voice-mask" / f"{key}.npz"
    cached.parent.mkdir(parents=True)
    save_mask_file(cached, mask, "test")
    assert bdp._voice_mask("cached", tracks).bins == mask.bins
    # a mask that hears spans is another mask: its cache name differs, so the plain one is
    # not read for it
    spans = hashlib.sha1(b"voice a|voice b|pools [(7, 30)]").hexdigest()[:12]
    save_mask_file(cached.parent / f"{spans}.npz", mask, "test")
    assert bdp._voice_mask("cached", tracks, ((7, 30),)).bins == mask.bins
    assert spans != key
    with pytest.raises(ValueError, match="mask: expected"):
        bdp.build_net(mask="sideways")


def test_a_weight_without_its_bias_is_named(trained, tmp_path):
    mask, _ = trained
    path = tmp_path / "mask.npz"
    save_mask_file(path, mask)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != "mask_b1"}
    bad = tmp_path / "nobias.npz"
    np.savez(bad, **arrays)
    with pytest.raises(ValueError, match=r"nobias\.npz: mask_b1: missing"):
        load_mask_file(bad)


def test_pooled_means_are_each_spans_mean_cut_to_the_clip():
    lp = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    got = pooled_means(lp, ((-3, -1), (2, 5), (60, 70)))
    assert got.shape == (50, 12)
    np.testing.assert_allclose(got[10, :4], lp[7:10].mean(0), atol=1e-6)
    np.testing.assert_allclose(got[10, 4:8], lp[12:16].mean(0), atol=1e-6)
    np.testing.assert_allclose(got[1, :4], lp[0:1].mean(0), atol=1e-6)  # cut at the start
    np.testing.assert_allclose(got[46, 4:8], lp[48:50].mean(0), atol=1e-6)  # cut at the end
    np.testing.assert_allclose(got[5, 8:], lp[49], atol=1e-6)  # wholly past the end: the edge
    assert pooled_means(lp, ()).shape == (50, 0)


def test_a_mask_with_spans_hears_far_hops_and_its_file_keeps_them(trained, tmp_path):
    _, voices = trained
    ex = mask_examples(voices[:3], n_aug=1, seed=1, band_share=1.0)
    spans = ((-30, -7), (7, 30))
    m = fit_mask(ex, hidden=(32,), epochs=2, seed=0, batch=256, device="cpu", pools=spans)
    assert m.pools == spans and len(m.mean) == (len(m.offsets) + 2) * m.bins
    y = augment.mix_at(voices[3], backing(3.1, seed=13), 0.0)
    p = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True).power.astype(np.float64)
    far = p.copy()  # hops 115-125 and 125-135 swapped: beyond hop 100's offsets, within a span
    far[115:125], far[125:135] = p[125:135], p[115:125]  # (the clip's loudest hops unchanged)
    plain = VoiceMask(m.mean[: len(m.offsets) * m.bins], m.std[: len(m.offsets) * m.bins],
                      [(m.layers[0][0][: len(m.offsets) * m.bins], m.layers[0][1]),
                       *m.layers[1:]], m.offsets)  # fmt: skip
    assert np.abs(m.masks(far)[100] - m.masks(p)[100]).max() > 1e-3
    np.testing.assert_allclose(plain.masks(far)[100], plain.masks(p)[100], atol=1e-5)
    path = tmp_path / "spans.npz"
    save_mask_file(path, m)
    back = load_mask_file(path)
    assert back.pools == spans
    np.testing.assert_allclose(back.masks(p), m.masks(p), atol=2e-2)  # float16 weights
    with np.load(path) as z:
        arrays = dict(z)
    for bad, match in (
        (np.array([[30, 7]]), r"reversed\.npz: mask_pools: expected"),
        (np.array([[7, 30]]), r"reversed\.npz: mask: expected layers"),  # one span too few
    ):
        np.savez(tmp_path / "reversed.npz", **{**arrays, "mask_pools": bad})
        with pytest.raises(ValueError, match=match):
            load_mask_file(tmp_path / "reversed.npz")


def test_the_build_keeps_a_shipped_files_offline_nets_as_p_voice(trained, tmp_path):
    """`--keep-voice`: the vowels come from the mask's nets, p(voice) from another file's
    offline nets (the mouth opens and shuts as that file's), or from the p(voice) nets it kept
    itself; a file that cannot read the first blocks is named."""
    from app.bench_lipsync_split import load_build_script

    bdp = load_build_script()
    mask, voices = trained
    rng = np.random.default_rng(2)

    def mlp(d):
        return random_mlp(d, rng)

    shipped = VowelNet(mlp(HOP_DIM * 6), mlp(2 * HOP_DIM * 11), "shipped", front=FRONT_SEPARATION,
                       offline_more=[mlp(2 * HOP_DIM * 11)])  # fmt: skip
    shipped.save(tmp_path / "shipped.npz")
    net = VowelNet(mlp(HOP_DIM * 6), mlp(3 * HOP_DIM * 11), "mask", front=FRONT_BOTH, mask=mask)
    net.offline_voice, net.voice_blocks = bdp.kept_voice(net, tmp_path / "shipped.npz")
    assert net.voice_blocks == 2 and len(net.offline_voice) == 2
    y = augment.mix_at(voices[4], backing(3.1, seed=14), 0.0)
    f = mfcc_frames(y, SR, NET_SETTINGS, keep_power=True)
    v = offline_inputs(y, SR, f, None, FRONT_BOTH, offsets=(0,), mask=mask)
    kept = load_net(tmp_path / "shipped.npz")
    want, _ = kept.offline_hop_probs(offline_inputs(y, SR, f, None, FRONT_SEPARATION, offsets=(0,)))
    pv, pw = net.offline_hop_probs(v)
    np.testing.assert_allclose(pv, want, rtol=1e-5, atol=1e-6)
    _, own = VowelNet(None, net.offline, front=FRONT_BOTH, mask=mask).offline_hop_probs(v)
    np.testing.assert_allclose(pw, own, rtol=1e-5, atol=1e-6)
    # a file that kept another's p(voice) gives those nets again (a rebuild of its vowels)
    net.save(tmp_path / "kept.npz")
    again = VowelNet(mlp(HOP_DIM * 6), mlp(3 * HOP_DIM * 11), "again", front=FRONT_BOTH, mask=mask)
    again.offline_voice, again.voice_blocks = bdp.kept_voice(again, tmp_path / "kept.npz")
    assert again.voice_blocks == 2 and len(again.offline_voice) == 2
    np.testing.assert_allclose(again.offline_hop_probs(v)[0], want, rtol=1e-5, atol=1e-6)
    masked = VowelNet(mlp(HOP_DIM * 6), mlp(3 * HOP_DIM * 11), "masked", front=FRONT_BOTH,
                      mask=mask)  # fmt: skip
    masked.save(tmp_path / "masked.npz")
    with pytest.raises(ValueError, match=r"masked\.npz: expected a net without a mask"):
        bdp.kept_voice(net, tmp_path / "masked.npz")


@pytest.mark.parametrize("span", ["7:3", "abc"])
def test_train_voice_mask_refuses_a_bad_span_with_exit_2(span, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "mask.npz"
    r = subprocess.run(
        [sys.executable, str(root / "scripts/train_voice_mask.py"), "--out", str(out), "--pools",
         "7:30", span],
        capture_output=True, text=True, cwd=root, env={"PYTHONPATH": str(root), "PATH": ""},
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 2
    assert "--pools: expected" in r.stderr and repr(span) in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
