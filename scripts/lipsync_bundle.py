"""The lip-sync corpus, sustained vowels and onset signal, packed to travel to a machine without
the synthesizers.

    python scripts/lipsync_bundle.py pack DIR      # here: DIR/corpus.tar.xz, onsets.npz, vowels.npz
    python scripts/lipsync_bundle.py unpack DIR    # there: the corpus into its cache folder
    python scripts/lipsync_bundle.py split DIR ARGS...   # there: app.bench_lipsync_split ARGS

The lent GPU machine has 16 cores but no espeak-ng, festival or flite, and a call carries 64 MiB
with the working tree. The corpus cache (`audio.speech_corpus.cache_dir`, int16 audio in
compressed npz) is too large as it is; as FLAC it fits. Both directions are lossless: the same
samples and phone strings, so a build there trains on exactly the tracks it would here.
`split` runs the split bench with the onset-lag signal (`app.bench_lipsync.onset_stream`, made
from espeak-ng vowels) and espeak-ng's sustained vowels (the held-note sets, the `held_tracks`
recipes' training: `audio.calibration.ESPEAK_VOWELS`) read from DIR instead of synthesized.
scripts/build_lipsync_bundle.sh and scripts/gpu_lipsync_split.sh are the two ends.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import numpy as np


def pack_corpus(cache: Path, out: Path, keys: set[str] | None = None) -> int:
    """The cache entries of `cache` (those named in `keys`, else all) as NAME.flac + NAME.json
    in the xz tar `out`; the count."""
    import soundfile as sf

    from audio.speech_corpus import SR

    files = sorted(f for f in cache.glob("*.npz") if keys is None or f.stem in keys)
    with tarfile.open(out, "w:xz") as tar:
        for f in files:
            with np.load(f) as z:
                audio, phones = z["audio"], z["phones"]
            flac = io.BytesIO()
            sf.write(flac, audio, SR, format="FLAC", subtype="PCM_16", compression_level=1.0)
            for name, data in (
                (f.stem + ".flac", flac.getvalue()),
                (f.stem + ".json", json.dumps(phones.tolist()).encode()),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return len(files)


def unpack_corpus(packed: Path, cache: Path) -> int:
    """`pack_corpus`'s tar back into npz entries in `cache` (the corpus's own format)."""
    import soundfile as sf

    cache.mkdir(parents=True, exist_ok=True)
    with tarfile.open(packed) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    n = 0
    for name, data in members.items():
        if not name.endswith(".flac"):
            continue
        stem = name[: -len(".flac")]
        audio, _ = sf.read(io.BytesIO(data), dtype="int16")
        phones = np.array(json.loads(members[stem + ".json"]), dtype=str)
        np.savez_compressed(cache / (stem + ".npz"), audio=audio, phones=phones)
        n += 1
    return n


def corpus_keys() -> set[str]:
    """The cache entries the split bench's recipes read, synthesized here where missing: the
    training voices' sentences and the validation and test tracks. Not the build settings'
    extra sentences and speakers (`EXTRA_TEXTS`, `extra_voices`): with them the bundle would
    not fit a call, so the recipes `extra-*` run here only. The Japanese sources' voices (the
    `jtalk` and `kokoro` recipes' training, the split's tests) and Kokoro's English (the
    `kokoro-en` recipe's) are small and travel."""
    from app.bench_lipsync_split import load_build_script, split_voices
    from audio.speech_corpus import JAPANESE, _key, synthesize

    specs = load_build_script().training_voices(also=(*JAPANESE, "kokoro-en"))
    specs += [v for vs in split_voices().values() for v in vs]
    return {_key(u.spec, u.text) for spec in specs for u in synthesize(spec)}


def vowel_keys() -> set[tuple[str, int, str]]:
    """The espeak-ng sustained vowels the split bench and its recipes read (the held-note sets'
    voices, `app.bench_lipsync_split.held_voices`; the training voices' held vowels of the
    `held_tracks` recipes, the build script's `_held`), made here by `synth_vowel`."""
    from app.bench_lipsync_split import held_voices, load_build_script
    from audio.calibration import ESPEAK_VOWELS, synth_vowel

    build = load_build_script()
    build._held(build.training_voices())
    for voice, pitch in held_voices():
        for v in "AIUEO":
            synth_vowel(voice, pitch, v)
    return set(ESPEAK_VOWELS)


def save_vowels(out: Path, keys: set[tuple[str, int, str]] | None = None) -> int:
    """The sustained vowels `keys` (default `vowel_keys`) as espeak-ng wrote them, into `out`."""
    from audio.calibration import espeak_vowel

    keys = sorted(vowel_keys() if keys is None else keys)
    arrays = {}
    for voice, pitch, v in keys:
        sr, x = espeak_vowel(voice, pitch, v)
        arrays[f"{voice}|{pitch}|{v}"], arrays[f"{voice}|{pitch}|{v}|sr"] = x, np.asarray(sr)
    np.savez_compressed(out, **arrays)
    return len(keys)


def load_vowels(path: Path) -> int:
    """`save_vowels`' file into `audio.calibration.ESPEAK_VOWELS` (espeak-ng not run for them)."""
    from audio.calibration import ESPEAK_VOWELS

    with np.load(path) as z:
        names = [n for n in z.files if not n.endswith("|sr")]
        for name in names:
            voice, pitch, v = name.split("|")
            x = z[name]
            x.setflags(write=False)
            ESPEAK_VOWELS[voice, int(pitch), v] = (int(z[name + "|sr"]), x)
    return len(names)


def save_onsets(out: Path) -> None:
    from app.bench_lipsync import onset_stream
    from audio.calibration import HELDOUT_VOICES

    x, on, off, labels = onset_stream(HELDOUT_VOICES)
    np.savez_compressed(out, x=x, onsets=on, offsets=off, labels=np.array(labels))


def load_onsets(path: Path) -> tuple:
    with np.load(path) as z:
        return z["x"], z["onsets"], z["offsets"], [str(s) for s in z["labels"]]


def main(argv: list[str]) -> int:
    from audio.speech_corpus import cache_dir

    if len(argv) < 2 or argv[0] not in ("pack", "unpack", "split"):
        print("usage: lipsync_bundle.py pack|unpack|split DIR [bench arguments]", file=sys.stderr)
        return 2
    cmd, folder = argv[0], Path(argv[1])
    if cmd == "pack":
        folder.mkdir(parents=True, exist_ok=True)
        n = pack_corpus(cache_dir(), folder / "corpus.tar.xz", corpus_keys())
        save_onsets(folder / "onsets.npz")
        k = save_vowels(folder / "vowels.npz")
        print(f"{n} corpus entries, {k} sustained vowels and the onset signal packed into {folder}")
    elif cmd == "unpack":
        n = unpack_corpus(folder / "corpus.tar.xz", cache_dir())
        print(f"{n} corpus entries unpacked into {cache_dir()}")
    else:
        import app.bench_lipsync_split as split

        split._ONSETS.append(load_onsets(folder / "onsets.npz"))
        load_vowels(folder / "vowels.npz")
        return split.main(argv[2:])
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
