"""A song's hop features made in time chunks on every core: the same numbers as in one piece.

The offline analysis of a long song is mostly work that reads a bounded neighbourhood of each
hop: STFTs, running minima and maxima over a few hundred milliseconds, per-hop transforms. Cut
into chunks that overlap by more than that reach, each chunk's middle is computed from exactly
the samples the whole song's pass reads, in the same order, so the parts put together are the
whole pass's arrays — bit for bit but for matrix products, whose rows can round differently in
the last bits with the number of rows multiplied (a silent hop's near-zero cepstrum, 1e-13
apart; tests/test_time_chunks.py). The render's first frame waits for the whole analysis; on
a machine with many cores the chunks run side by side (numpy and scipy's FFTs leave the GIL in
their array work).

A chunk's start is a multiple of `align` samples, so every frame grid of the computation (the
hops, the separation's STFT hops) lands where the whole pass puts it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np

from audio import fft
from audio.mfcc import FrameFeatures

__all__ = [
    "CORES",
    "Chunked",
    "ChunkedRows",
    "chunked_frames",
    "chunked_rows",
    "spans",
]

CORES = fft.CORES  # the chunks a song is cut into (tests set it)


def spans(n: int, parts: int, align: int, margin: int) -> list[tuple[int, int, int, int]]:
    """`parts` chunks of `n` samples: (read_lo, read_hi, keep_lo, keep_hi) each, the kept
    spans tiling [0, n) with starts on multiples of `align`, each read span reaching `margin`
    (rounded up to `align`) beyond its kept span, within [0, n)."""
    margin = -(-margin // align) * align
    step = max(-(-n // max(parts, 1)), 1)
    step = -(-step // align) * align
    out = []
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        out.append((max(0, lo - margin), min(n, hi + margin), lo, hi))
    return out


class Chunked:
    """Hop features being made in chunks on a pool; `result()` puts them together."""

    def __init__(self, pieces: list, hop: int, n: int) -> None:
        self._pieces, self._hop, self._n = pieces, hop, n

    def result(self):
        """The features (a `FrameFeatures`, or a tuple of them: what `frames_of` gives)."""
        got = []
        for r0, k0, k1, job in self._pieces:
            f = job.result() if hasattr(job, "result") else job
            first = f[0] if isinstance(f, tuple) else f
            # the hops that end in (k0, k1]; for the last chunk, every hop the whole pass has
            a = (k0 - r0) // self._hop
            b = (k1 - r0) // self._hop if k1 < self._n else len(first)
            got.append((f, a, b, r0))
        if len(got) == 1 and got[0][1] == 0:
            return got[0][0]
        if isinstance(got[0][0], tuple):
            return tuple(
                _joined([(f[i], a, b, r0) for f, a, b, r0 in got]) for i in range(len(got[0][0]))
            )
        return _joined(got)


def chunked_frames(
    frames_of: Callable[[np.ndarray], FrameFeatures | tuple[FrameFeatures, ...]],
    y: np.ndarray,
    hop: int,
    align: int,
    margin: int,
    pool: Executor | None,
    parts: int | None = None,
) -> Chunked:
    """`frames_of(y)` — hop features of `y` (or a tuple of them), hop k ending at sample
    (k + 1) * `hop` — started on `pool` in `parts` (the cores') chunks; call the answer's
    `result()` from a thread not of the pool. `frames_of` must read no further than `margin`
    samples around a hop's window, and its frame grids must repeat every `align` samples (a
    multiple of `hop`). Without a pool, or for a song too short to split, one call, made now."""
    if align % hop:
        raise ValueError(f"align {align} is not a multiple of the hop {hop}")
    n = len(y)
    chunks = spans(n, parts or CORES, align, margin)
    if pool is None or len(chunks) < 2:
        return Chunked([(0, 0, n, frames_of(y))], hop, n)
    pieces = [
        (r0, k0, k1, pool.submit(_one_core, frames_of, y[r0:r1])) for r0, r1, k0, k1 in chunks
    ]
    return Chunked(pieces, hop, n)


def _joined(pieces: list) -> FrameFeatures:
    def cat(name: str) -> np.ndarray | None:
        parts = [getattr(f, name) for f, _, _, _ in pieces]
        if parts[0] is None:
            return None
        return np.concatenate([p[a:b] for p, (_, a, b, _) in zip(parts, pieces, strict=True)])

    end = np.concatenate([f.end[a:b] + r0 for f, a, b, r0 in pieces])
    return FrameFeatures(
        end,
        cat("mfcc"),
        cat("level_db"),
        cat("flatness"),
        cat("periodicity"),
        power=cat("power"),
    )


class ChunkedRows:
    """Rows being made in chunks on a pool; `result()` puts them together."""

    def __init__(self, pieces: list) -> None:
        self._pieces = pieces

    def result(self) -> np.ndarray:
        got = []
        for r0, k0, k1, job in self._pieces:
            rows = job.result() if hasattr(job, "result") else job
            got.append(rows[k0 - r0 : k1 - r0])
        return got[0] if len(got) == 1 else np.concatenate(got)


def chunked_rows(
    rows_of: Callable[[int, int], np.ndarray],
    n: int,
    margin: int,
    pool: Executor | None,
    parts: int | None = None,
) -> ChunkedRows:
    """`rows_of(0, n)` — an array whose row k (of `n`) depends on rows of its input no further
    than `margin` away — started on `pool` as `rows_of(lo, hi)` of `parts` (the cores')
    overlapping chunks; call the answer's `result()` from a thread not of the pool."""
    chunks = spans(n, parts or CORES, 1, margin)
    if pool is None or len(chunks) < 2:
        return ChunkedRows([(0, 0, n, rows_of(0, n))])
    return ChunkedRows(
        [(r0, k0, k1, pool.submit(_one_core, rows_of, r0, r1)) for r0, r1, k0, k1 in chunks]
    )


def _one_core(fn: Callable, *args):
    """`fn(*args)` with this thread's transforms on one core: the chunks are the parallelism
    (each chunk's transforms spread again over every core asked for cores x cores threads)."""
    with fft.one_core():
        return fn(*args)
