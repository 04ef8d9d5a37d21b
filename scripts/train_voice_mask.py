"""Train the learned voice mask (`audio.voice_mask`) on the training voices over the training
backing styles; report its error on the validation voices (festival's kal and slt, never
trained) over the style never trained on (`audio.backings.VALID_STYLE`).

    python scripts/train_voice_mask.py --out FILE [--n-aug 8] [--epochs 12] [--seed 0]
        [--hidden 512 512] [--workers N] [--pools LO:HI ...] [--held]

Runs where torch is (CUDA if there is one). Prints one JSON line. scripts/build_default_profile.py
calls `train_mask` on its own training tracks when its build hears the mask and is given none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKERS = max((os.cpu_count() or 2) - 1, 1)


def train_mask(tracks: list, n_aug: int = 8, epochs: int = 12, seed: int = 0,
               hidden: tuple[int, ...] = (512, 512), workers: int = WORKERS,
               pools: tuple[tuple[int, int], ...] = ()):  # fmt: skip
    """(the mask, a line saying how it was made) from the training `tracks` (their clean
    voices) over the training backing styles; it hears the spans `pools` too."""
    from audio.voice_mask_train import fit_mask, mask_examples

    ex = mask_examples([t.voice for t in tracks], n_aug, seed, workers=workers)
    mask = fit_mask(ex, tuple(hidden), epochs, seed, pools=tuple(pools))
    info = (f"scripts/train_voice_mask.py: {len(ex.lengths)} clips, {len(ex.inputs)} hops of "
            f"{len(tracks)} training tracks ({n_aug} mixed copies), hidden {list(hidden)}, "
            f"{epochs} epochs, seed {seed}" + (f", spans {list(pools)}" if pools else ""))  # fmt: skip
    return mask, info


def _span(text: str) -> tuple[int, int]:
    """An argparse type: a bad span is its one-line error, exit 2."""
    try:
        lo, hi = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected LO:HI in hops (e.g. 7:30), got {text!r}"
        ) from None
    if lo > hi:
        raise argparse.ArgumentTypeError(f"expected LO <= HI, got {text!r}")
    return lo, hi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-aug", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, nargs="+", default=[512, 512])
    ap.add_argument("--workers", type=int, default=WORKERS)
    ap.add_argument(
        "--pools",
        nargs="*",
        type=_span,
        default=None,
        metavar="LO:HI",
        help="spans of hops the mask also hears (default: the build's MASK_POOLS)",
    )
    ap.add_argument(
        "--held",
        action="store_true",
        help="the training voices' flat held vowels too (the build's MASK_HELD)",
    )
    a = ap.parse_args(argv)

    import numpy as np

    from app.bench_lipsync_split import load_build_script, split_voices
    from audio.backings import VALID_STYLE
    from audio.lipsync_eval import speech_track
    from audio.voice_mask import VoiceMask, save_mask_file
    from audio.voice_mask_train import mask_examples, mask_loss

    t0 = time.time()
    bdp = load_build_script()  # its training voices: every source but flite, less its speakers
    specs = bdp.training_voices()
    tracks = bdp.mask_tracks(specs, bdp._tracks(specs), held=True if a.held else None)
    pools = bdp.MASK_POOLS if a.pools is None else tuple(a.pools)
    m, info = train_mask(tracks, a.n_aug, a.epochs, a.seed, tuple(a.hidden), a.workers, pools)
    t1 = time.time()
    save_mask_file(a.out, m, info)
    valid = [speech_track(v) for v in split_voices()["valid"]]
    vex = mask_examples([t.voice for t in valid], 2, 7, styles=(VALID_STYLE,), band_share=1.0,
                        workers=a.workers)  # fmt: skip
    # the mask that keeps everything (no front-end): the error to beat
    keep = [(np.zeros((len(m.mean), m.bins), np.float32), np.full(m.bins, 30.0, np.float32))]
    ones = VoiceMask(m.mean, m.std, keep, m.offsets)
    print(json.dumps({
        "out": a.out, "train_s": round(t1 - t0, 1),
        "valid_loss": round(mask_loss(m, vex), 5),
        "valid_loss_keep_all": round(mask_loss(ones, vex), 5),
        "valid_hops": len(vex.inputs), "info": info,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
