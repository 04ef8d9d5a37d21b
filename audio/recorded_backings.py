"""Recorded instrumental music as backings under training and validation voices.

Every other backing Kagura hears in training is one it synthesizes (`audio.augment.band`,
`audio.backings`): a user's music is recorded — real instruments, mixing, mastering, rooms.
Debian packages several games' soundtracks under free licences; these are instrumental, so a
voice mixed over them has the phone times of the voice alone as its truth.

The pools are split by package, as the voices are by synthesizer: the training draws from
`TRAIN`, the validation (where settings are chosen) from `VALID`, and `TEST` is only reported.
A package that is not installed is left out of its pool (`scripts/setup.sh` does not install
them: only a build or bench that asks for recorded backings needs them, and says which
packages to install when a pool is empty; `apt-get install $(python -m audio.recorded_backings)`
installs them all).

Decoded once (16 kHz mono float32) into the cache folder.
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.atomic_write import replacing

__all__ = ["POOLS", "TEST", "TRAIN", "VALID", "packages", "pool_tracks", "recorded_backing"]

SR = 16000
CACHE_VERSION = 1


@dataclass(frozen=True)
class Soundtrack:
    package: str  # the Debian package that installs it
    pattern: str  # its music files


TRAIN = (
    Soundtrack("hyperrogue-music", "/usr/share/hyperrogue/music/*.ogg"),
    Soundtrack("extremetuxracer-data", "/usr/share/games/etr/music/*.ogg"),
    Soundtrack("neverball-common", "/usr/share/games/neverball/bgm/*.ogg"),
    Soundtrack("torus-trooper-data", "/usr/share/games/torus-trooper/sounds/musics/*.ogg"),
    Soundtrack("mu-cade-data", "/usr/share/games/mu-cade/sounds/musics/*.ogg"),
    Soundtrack("tumiki-fighters-data", "/usr/share/games/tumiki-fighters/sounds/*.ogg"),
)
VALID = (Soundtrack("drascula-music", "/usr/share/scummvm/drascula/audio/*.ogg"),)
TEST = (Soundtrack("asc-music", "/usr/share/games/asc/music/*.mp3"),)
POOLS = {"train": TRAIN, "valid": VALID, "test": TEST}
MIN_TRACK_S = 20.0  # jingles and stingers shorter than this are left out


def _decode(path: str) -> np.ndarray:
    """One music file as float32 mono at 16 kHz (libsndfile reads every one of these; the
    FFmpeg in PyAV's wheel refuses a few of hyperrogue's Vorbis files)."""
    import soundfile

    from audio.features import resample_mono

    y, rate = soundfile.read(path, dtype="float32", always_2d=True)
    return resample_mono(y.mean(axis=1), rate, SR)


def _cached(path: str) -> np.ndarray:
    from core.paths import cache_dir

    st = os.stat(path)
    folder = cache_dir(f"recorded-backings-v{CACHE_VERSION}")
    key = f"{path}|{st.st_size}|{int(st.st_mtime)}"
    name = f"{Path(path).stem}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.npy"
    f = folder / name
    if f.is_file():
        return np.load(f)
    y = _decode(path)
    folder.mkdir(parents=True, exist_ok=True)
    with replacing(f) as tmp:  # two processes filling the same entry each write a whole file
        np.save(tmp, y)
    return y


_POOL_CACHE: dict[str, list[np.ndarray]] = {}


def pool_tracks(pool: str) -> list[np.ndarray]:
    """The pool's music (tracks of at least `MIN_TRACK_S`), each float32 mono at 16 kHz."""
    if pool not in _POOL_CACHE:
        files = sorted(f for s in POOLS[pool] for f in glob.glob(s.pattern))
        tracks = [y for y in (_cached(f) for f in files) if len(y) >= MIN_TRACK_S * SR]
        if not tracks:
            need = " ".join(s.package for s in POOLS[pool])
            raise FileNotFoundError(
                f"no recorded music for the {pool!r} backings: install the Debian packages {need}"
            )
        _POOL_CACHE[pool] = tracks
    return _POOL_CACHE[pool]


def recorded_backing(seconds: float, seed: int, pool: str = "train") -> np.ndarray:
    """`seconds` of the pool's music from a drawn track and place (tracks joined where one
    is too short), float32 mono at 16 kHz, peak ~0.5; deterministic in `seed`."""
    tracks = pool_tracks(pool)
    rng = np.random.default_rng(seed)
    lengths = np.array([len(t) for t in tracks], np.float64)
    n = round(seconds * SR)
    out = []
    while n > 0:
        t = tracks[int(rng.choice(len(tracks), p=lengths / lengths.sum()))]
        a = int(rng.integers(max(len(t) - n, 0) + 1))
        piece = t[a : a + n]
        out.append(piece)
        n -= len(piece)
    y = np.concatenate(out)
    peak = float(np.max(np.abs(y))) if len(y) else 0.0
    return (y * (0.5 / peak) if peak > 0 else y).astype(np.float32)


def packages() -> list[str]:
    """The Debian packages of every pool (`apt-get install $(python -m audio.recorded_backings)`)."""
    return [s.package for pool in POOLS.values() for s in pool]


if __name__ == "__main__":
    print(" ".join(packages()))
