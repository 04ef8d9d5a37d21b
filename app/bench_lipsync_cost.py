"""Lip-sync cost, this tree against an earlier revision, in one process (hand-run benchmark).

    python -m app.bench_lipsync_cost --base REV [--song-s 240] [--reps 3]

The earlier revision's `audio/` package is taken out of git (`git archive`) into a temporary
folder and imported next to this tree's (each engine runs with its own modules in place), so
both are timed interleaved, on the same audio, under the same load — the machine is shared, so
ratios measured this way are the comparable figures. Before timing, the outputs are compared:
the offline engine's mouth and vowels on the demo song (a band with a voice), and the live
engine's every hop on the bench's held-out vowels and on white noise. Printed, not written to
docs/BENCHMARKS.md (its paragraph there is hand-collected from this output).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

from core.stats import summary

ROOT = Path(__file__).resolve().parent.parent
SR = 16000


def _audio_modules() -> dict:
    return {k: m for k, m in sys.modules.items() if k == "audio" or k.startswith("audio.")}


@contextlib.contextmanager
def _swapped(mods: dict):
    """`mods` as the audio package while inside (lazy imports inside functions see them)."""
    mine = _audio_modules()
    for k in mine:
        del sys.modules[k]
    sys.modules.update(mods)
    try:
        yield
    finally:
        for k in _audio_modules():
            del sys.modules[k]
        sys.modules.update(mine)


def load_base(rev: str, folder: str) -> dict:
    """The `audio` modules of revision `rev` (imported from `folder`, where they are put)."""
    tar = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "audio"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(folder, filter="data")
    names = ["audio.live_lipsync", "audio.offline_lipsync", "audio.voice_separation"]
    with _swapped({}):
        sys.path.insert(0, folder)
        try:
            for n in names:
                importlib.import_module(n)
            # the modules imported lazily at call time, loaded now from the same tree
            for n in ("audio.vowel_net", "audio.mfcc", "audio.features", "audio.calibration"):
                importlib.import_module(n)
            base = _audio_modules()
        finally:
            sys.path.remove(folder)
    return base


def _song(seconds: float) -> tuple[np.ndarray, int]:
    from audio.decode import decode_audio
    from audio.demo_song import demo_song_path

    clip = decode_audio(demo_song_path())
    mono, sr = clip.mono(), clip.sample_rate
    n = int(seconds * sr)
    return np.tile(mono, int(np.ceil(n / len(mono))))[:n], sr


class _Side:
    """One tree's engines (built and run with its modules in place)."""

    def __init__(self, name: str, mods: dict) -> None:
        self.name, self.mods = name, mods
        with _swapped(mods):
            self.offline = mods["audio.offline_lipsync"].MfccLipSync
            self.live = mods["audio.live_lipsync"].LiveLipSync

    def analyze(self, mono, sr, fps=30):
        with _swapped(self.mods):
            n = int(len(mono) / sr * fps)
            t0 = time.perf_counter()
            r = self.offline().analyze(mono, sr, fps, n)
            return time.perf_counter() - t0, r

    def hops(self, x: np.ndarray):
        """Per-hop cost (s) of hop-sized pushes, and the frames."""
        with _swapped(self.mods):
            eng = self.live()
            hop = eng.stream.hop
            costs, frames = [], []
            for i in range(0, len(x) - hop + 1, hop):
                t0 = time.perf_counter_ns()
                frames += eng.push(x[i : i + hop])
                costs.append(time.perf_counter_ns() - t0)
            return np.array(costs) / 1e9, frames


def _live_diff(fa, fb) -> tuple[float, float, int]:
    op = max((abs(a.open - b.open) for a, b in zip(fa, fb, strict=True)), default=0.0)
    vw = max((float(np.abs(a.vowels - b.vowels).max()) for a, b in zip(fa, fb, strict=True)),
             default=0.0)  # fmt: skip
    gate = sum(a.silent != b.silent for a, b in zip(fa, fb, strict=True))
    return op, vw, gate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.bench_lipsync_cost")
    ap.add_argument("--base", required=True, help="the git revision to compare with")
    ap.add_argument("--song-s", type=float, default=240.0, help="offline song length (s)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    args = ap.parse_args(argv)

    from app.bench_lipsync import noise, onset_stream
    from audio.calibration import HELDOUT_VOICES

    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        import audio.live_lipsync
        import audio.offline_lipsync
        import audio.voice_separation  # noqa: F401

        new = _Side("this tree", _audio_modules())
        base = _Side(args.base, load_base(args.base, tmp))
        for side in (base, new):
            print(f"{side.name}: {side.mods['audio.offline_lipsync'].__file__}")
        speech = onset_stream(HELDOUT_VOICES)[0]
        white = np.random.default_rng(0).standard_normal(2 * SR).astype(np.float32) * 0.05
        quiet = noise(5.0, -40.0)
        # --- equivalence -------------------------------------------------------------------
        short, ssr = _song(30.0)
        _, rb = base.analyze(short, ssr)
        _, rn = new.analyze(short, ssr)
        print(
            f"offline, demo song 30 s: mouth max |diff| {np.abs(rb.open - rn.open).max():.3g}, "
            f"vowels max |diff| {np.abs(rb.vowels - rn.vowels).max():.3g}, "
            f"bit-identical: {np.array_equal(rb.open, rn.open) and np.array_equal(rb.vowels, rn.vowels)}"
        )
        rng = np.random.default_rng(5)
        for n in (1100, 2500, 4000, 20000):
            y = rng.standard_normal(n).astype(np.float32)
            with _swapped(base.mods):
                vb = base.mods["audio.voice_separation"].voice_residual(y)
            vn = new.mods["audio.voice_separation"].voice_residual(y)
            print(f"voice_residual, {n} samples of noise: bit-identical {np.array_equal(vb, vn)}")
        for label, x in (("held-out vowels", speech), ("white noise", white), ("-40 dBFS", quiet)):
            fb, fn = base.hops(x)[1], new.hops(x)[1]
            op, vw, gate = _live_diff(fb, fn)
            print(f"live, {label}: {len(fn)} hops, open max |diff| {op:.3g}, "
                  f"vowels max |diff| {vw:.3g}, gate differs on {gate} hops")  # fmt: skip
        # --- cost, interleaved -------------------------------------------------------------
        song, sr = _song(args.song_s)
        t_off = {new.name: [], base.name: []}
        c_sp = {new.name: [], base.name: []}
        c_wn = {new.name: [], base.name: []}
        for rep in range(args.reps):
            for side in (base, new) if rep % 2 == 0 else (new, base):
                c_sp[side.name].append(side.hops(speech)[0])
                c_wn[side.name].append(side.hops(white)[0])
                t_off[side.name].append(side.analyze(song, sr)[0])
        print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        for name in (base.name, new.name):
            sp, wn = np.concatenate(c_sp[name]) * 1e3, np.concatenate(c_wn[name]) * 1e3
            s = summary(sp.tolist())  # the one median / P99 (core.stats)
            print(
                f"{name}: live push of one hop, speech median {s['median']:.3f} ms "
                f"P99 {s['p99']:.3f} ms; white noise median {np.median(wn):.3f} ms; "
                f"offline analyze {args.song_s:.0f} s song: "
                + " / ".join(f"{t:.2f}" for t in t_off[name])
                + f" s (min {min(t_off[name]):.2f})"
            )
        b, n = base.name, new.name
        print(
            "ratios base/this: live speech "
            f"{np.median(np.concatenate(c_sp[b])) / np.median(np.concatenate(c_sp[n])):.2f}x, "
            f"white noise {np.median(np.concatenate(c_wn[b])) / np.median(np.concatenate(c_wn[n])):.2f}x, "
            f"offline {min(t_off[b]) / min(t_off[n]):.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
