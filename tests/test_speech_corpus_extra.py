"""The extra training sentences (`audio.speech_corpus.EXTRA_TEXTS`) reach the training voices'
tracks only: the validation (festival kal/slt) and test (flite) tracks keep exactly `TEXTS`.

The synthesizers are replaced by a recorder (no audio is made), so this runs in a second and
checks the very functions the build and the split bench call.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from app.bench_lipsync_corpus import N_TEXTS
from app.bench_lipsync_split import RECIPES, load_build_script, split_tracks, split_voices
from audio import speech_corpus as sc

SR = 16000
_PHONES = [(0.0, 0.1, "pau"), (0.1, 0.3, "aa"), (0.3, 0.4, "k"), (0.4, 0.5, "pau")]


@pytest.fixture
def spoken(monkeypatch, tmp_path):
    """{voice spec: [texts its synthesizer was asked to speak]}; a fresh, empty cache."""
    monkeypatch.setenv("KAGURA_CACHE_DIR", str(tmp_path))
    said: dict = defaultdict(list)
    x = (0.1 * np.sin(np.arange(int(0.5 * SR)) * 0.1)).astype(np.float32)

    def file_synth(spec, texts, tmp):
        said[spec] += texts
        return [(x, SR, sc._ends_to_phones([(p, b) for _, b, p in _PHONES])) for _ in texts]

    class FakeEspeak:
        def say(self, voice, pitch, rate, text):
            spec = next(v for v in sc.voices("espeak-ng") if v.voice == voice and v.pitch == pitch)
            said[spec].append(text)
            return x, SR, [(0.0, 0.5, "A")]

    monkeypatch.setattr(sc, "_flite", file_synth)
    monkeypatch.setattr(sc, "_festival", file_synth)
    monkeypatch.setattr(sc, "_open_jtalk", file_synth)
    monkeypatch.setattr(sc, "_kokoro", file_synth)
    monkeypatch.setattr(sc, "_piper", lambda spec, texts: file_synth(spec, texts, None))
    monkeypatch.setattr(sc._Espeak, "get", classmethod(lambda cls: FakeEspeak()))
    return said


def _extra() -> set[str]:
    return {t for ts in sc.EXTRA_TEXTS.values() for t in ts}


def test_extra_sentences_are_new_plain_text():
    for lang, extra in sc.EXTRA_TEXTS.items():
        assert lang in sc.TEXTS
        assert not set(extra) & set(sc.TEXTS[lang]), lang  # new utterances, not repeats
        assert len(set(extra)) == len(extra), lang
        for t in extra:
            assert t.isascii() and '"' not in t and "\\" not in t, t
    assert len(sc.EXTRA_TEXTS["en"]) >= 3 * len(sc.TEXTS["en"])


def test_extra_sentences_reach_training_voices_only(spoken, monkeypatch):
    mod = load_build_script()
    import audio.lipsync_eval as le

    monkeypatch.setattr(le, "sung_track", lambda *a, **k: None)  # its envelopes: TEXTS' own
    train = mod.training_voices()
    mod._tracks(train, extra=True)
    for v in train:  # every training voice speaks all of its sentences, the extra ones after
        assert spoken[v] == list(sc.TEXTS[v.lang]) + list(sc.EXTRA_TEXTS.get(v.lang, ())), v
    held = {v for vs in split_voices().values() for v in vs}
    assert not held & set(spoken)  # no validation or test voice was synthesized at all
    assert not {v.speaker for v in held} & {v.speaker for v in spoken}

    spoken.clear()
    split_tracks()  # the validation's and the test's tracks, as the split bench scores them
    valid = set(split_voices()["valid"]) | set(split_voices()["valid-far"])  # all sentences
    assert set(spoken) == held
    for v, texts in spoken.items():
        assert not set(texts) & _extra(), v
        n = None if v in valid else N_TEXTS
        assert texts == list(sc.TEXTS[v.lang])[:n], v


def test_the_build_settings_switch_the_training_tracks(monkeypatch):
    """`build_net(extra_texts=..., extra_voices=...)` (a recipe's keys, else the script's
    `EXTRA_TEXTS` / `EXTRA_VOICES`) is what `_tracks` gets: the training voices, with festival's
    other Czech speakers only when asked, and never a validation or test voice."""
    mod = load_build_script()

    class Got(Exception):
        pass

    def tracks(specs, extra=False, sung=None):
        raise Got(specs, extra)

    monkeypatch.setattr(mod, "_tracks", tracks)
    base = mod.training_voices()
    held = {v for vs in split_voices().values() for v in vs}
    for recipe, texts, more in (
        ("base", False, []),
        ("extra-texts", True, []),
        ("extra-voices", False, sc.extra_voices()),
        ("extra-texts+voices", True, sc.extra_voices()),
    ):
        with pytest.raises(Got) as got:
            mod.build_net(cache={}, **RECIPES[recipe])
        specs, extra = got.value.args
        assert extra is texts, recipe
        assert specs == base + more, recipe
        assert not held & set(specs), recipe
        assert not {v.speaker for v in held} & {v.speaker for v in specs}, recipe
    assert not set(sc.extra_voices()) & set(sc.voices())  # the benches' corpus is unchanged
    assert mod.EXTRA_TEXTS is False and mod.EXTRA_VOICES is False  # the shipped build, as it was
    # a Japanese source in training: its own test set is trained on, the other stays unheard
    sets = split_voices()
    for recipe, more, other in (
        ("jtalk", sc.jtalk_voices(), sets["test-kokoro"]),
        ("kokoro", sc.kokoro_voices(), sets["test-jtalk"]),
    ):
        with pytest.raises(Got) as got:
            mod.build_net(cache={}, **RECIPES[recipe])
        specs, _ = got.value.args
        assert specs == base + more, recipe
        assert not set(other) & set(specs) and not set(sets["valid"]) & set(specs), recipe
