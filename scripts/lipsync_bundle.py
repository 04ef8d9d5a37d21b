"""The lip-sync corpus and onset signal, packed to travel to a machine without the synthesizers.

    python scripts/lipsync_bundle.py pack DIR      # here: DIR/corpus.tar.xz, DIR/onsets.npz
    python scripts/lipsync_bundle.py unpack DIR    # there: the corpus into its cache folder
    python scripts/lipsync_bundle.py split DIR ARGS...   # there: app.bench_lipsync_split ARGS

The lent GPU machine has 16 cores but no espeak-ng, festival or flite, and a call carries 64 MiB
with the working tree. The corpus cache (`audio.speech_corpus.cache_dir`, int16 audio in
compressed npz) is too large as it is; as FLAC it fits. Both directions are lossless: the same
samples and phone strings, so a build there trains on exactly the tracks it would here.
`split` runs the split bench with the onset-lag signal (`app.bench_lipsync.onset_stream`, made
from espeak-ng vowels) read from DIR instead of synthesized. scripts/build_lipsync_bundle.sh
and scripts/gpu_lipsync_split.sh are the two ends.
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
        print(f"{n} corpus entries and the onset signal packed into {folder}")
    elif cmd == "unpack":
        n = unpack_corpus(folder / "corpus.tar.xz", cache_dir())
        print(f"{n} corpus entries unpacked into {cache_dir()}")
    else:
        import app.bench_lipsync_split as split

        split._ONSETS.append(load_onsets(folder / "onsets.npz"))
        return split.main(argv[2:])
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
