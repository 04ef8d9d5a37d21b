"""What the idol does in training pictures: random poses, held-out poses, the held-out clip.

    random_params(rng) -> AvatarParams        one pose/viseme/expression/gaze/blink draw
    random_framing(rng) -> Framing            zoom, offset and mirror of the bust shot
    sample_spec(seed, index) -> SampleSpec    the whole draw for training sample `index`
    motion_spec(seed, index) -> (SampleSpec, AvatarParams)
                                              a training sample and the idol's pose one
                                              frame later (temporal pairs)
    heldout_specs(n_per_preset, design=0)      fixed poses that training never draws (of the
                                              built-in design, or of a held-out design)
    load_heldout_clip(path=CLIP_FILE) -> AvatarTrack
                                              an audio-driven clip (the demo song, 8 s;
                                              SPEECH_CLIP_FILE: 8 s of synthesized speech)

Training draws from the stream `seed` and held-out poses from a separate stream (HELDOUT_SEED),
both seeded per sample index, so any sample can be re-made from (seed, index) alone — in any
worker process, in any order — which is what makes the data reproducible and resumable.

The held-out clip is the demo song's motion from 12 s to 20 s (audio/analysis.analyze_clip at
30 fps), stored in training/heldout_clip.npz by scripts/build_heldout_clip.py: the GPU machine
has no librosa, and the evaluation must not depend on re-running the analysis. The second clip,
training/heldout_clip_speech.npz, is 8 s of espeak-ng speech (another source): settings chosen on
the first are confirmed on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.avatar import EXPRESSIONS, RANGES, VOWELS, AvatarParams, AvatarTrack
from pipeline.diffusion.kagura_model import STYLE_PRESETS as PRESETS

HELDOUT_SEED = 1_000_003
CLIP_FILE = Path(__file__).resolve().parent / "heldout_clip.npz"
# a second held-out motion from another audio source (speech), nothing is tuned on
SPEECH_CLIP_FILE = Path(__file__).resolve().parent / "heldout_clip_speech.npz"
N_BACKGROUNDS = 4  # background variants (make_background seeds) per preset in training


@dataclass(frozen=True)
class Framing:
    scale: float = 1.0  # > 1 zooms in
    dx: float = 0.0  # offset, fraction of the width
    dy: float = 0.0  # offset, fraction of the height (> 0 moves the idol down)
    mirror: bool = False

    @property
    def identity(self) -> bool:
        return self == Framing()


@dataclass(frozen=True)
class SampleSpec:
    preset: str
    params: AvatarParams
    framing: Framing
    background: int  # make_background seed
    design: int = 0  # training/designs.py: 0 the preset's own idol, else a recoloured one


def _clip(name: str, value: float) -> float:
    lo, hi, _ = RANGES[name]
    return float(np.clip(value, lo, hi))


def random_params(rng: np.random.Generator) -> AvatarParams:
    """A plausible live pose, weighted towards what singing looks like (mouth often open,
    eyes mostly open, head near frontal) but covering the whole Live2D range."""
    n = rng.normal
    blink = rng.random()
    eye = 1.0 if blink < 0.65 else (0.0 if blink < 0.8 else rng.random())
    wink = rng.random() < 0.05
    mouth = 0.0 if rng.random() < 0.25 else rng.random() ** 0.7
    vowels = rng.dirichlet(np.full(len(VOWELS), 0.3)).astype(np.float32)
    if mouth == 0.0:
        vowels = np.eye(len(VOWELS), dtype=np.float32)[VOWELS.index("N")]
    expressions = {}
    if rng.random() < 0.35:
        expressions[str(rng.choice(EXPRESSIONS))] = float(rng.random())
    return AvatarParams(
        head_yaw=_clip("head_yaw", n(0.0, 12.0)),
        head_pitch=_clip("head_pitch", n(0.0, 8.0)),
        head_roll=_clip("head_roll", n(0.0, 8.0)),
        body_yaw=_clip("body_yaw", n(0.0, 4.0)),
        body_roll=_clip("body_roll", n(0.0, 4.0)),
        eye_open_l=eye,
        eye_open_r=0.0 if wink else eye,
        eye_smile=float(rng.random()) if rng.random() < 0.25 else 0.0,
        gaze_x=float(rng.uniform(-0.8, 0.8)),
        gaze_y=float(rng.uniform(-0.6, 0.6)),
        brow_l=_clip("brow_l", n(0.0, 0.4)),
        brow_r=_clip("brow_r", n(0.0, 0.4)),
        mouth_open=float(mouth),
        mouth_form=float(rng.uniform(-0.6, 0.8)),
        breath=float(rng.random()),
        cheek=float(rng.random()) if rng.random() < 0.3 else 0.0,
        vowels=vowels,
        expressions=expressions,
    ).clamped()


def random_framing(rng: np.random.Generator) -> Framing:
    """Half the draws keep the default bust shot (what the app shows); the rest zoom from a
    wide shot (0.7) to a close-up (1.4), move the idol around and mirror her."""
    if rng.random() < 0.5:
        return Framing(mirror=bool(rng.random() < 0.5))
    return Framing(
        scale=float(np.exp(rng.uniform(np.log(0.7), np.log(1.4)))),
        dx=float(rng.uniform(-0.18, 0.18)),
        dy=float(rng.uniform(-0.08, 0.15)),
        mirror=bool(rng.random() < 0.5),
    )


def sample_spec(seed: int, index: int) -> SampleSpec:
    from training.designs import TRAIN_DESIGNS

    rng = np.random.default_rng([int(seed), int(index)])
    spec = SampleSpec(
        preset=PRESETS[int(rng.integers(len(PRESETS)))],
        params=random_params(rng),
        framing=random_framing(rng),
        background=int(rng.integers(N_BACKGROUNDS)),
    )
    # a separate stream, so the poses above stay what they were before designs existed
    drng = np.random.default_rng([int(seed), int(index), 1])
    if drng.random() < DESIGN_SHARE:
        design = TRAIN_DESIGNS[int(drng.integers(len(TRAIN_DESIGNS)))]
        spec = SampleSpec(spec.preset, spec.params, spec.framing, spec.background, design)
    return spec


DESIGN_SHARE = 0.6  # of training samples that show another design than the built-in idol

MOTION_BASE = 1 << 40  # temporal pairs draw their first frame from this far into the stream
FRAME_NS = 33_333_333  # one frame at 30 fps, the step between a temporal pair's two frames


def next_params(rng: np.random.Generator, p: AvatarParams) -> AvatarParams:
    """The pose one frame (30 fps) after `p`: head and body turned by what singing moves in a
    frame, the mouth and gaze a little on; eyes and expressions mostly held, sometimes
    blinking (shape changes the motion vectors do not describe happen live too)."""
    n = rng.normal
    blink = rng.random() < 0.1
    return AvatarParams(
        pts_ns=p.pts_ns + FRAME_NS,
        head_yaw=p.head_yaw + n(0.0, 1.5),
        head_pitch=p.head_pitch + n(0.0, 1.0),
        head_roll=p.head_roll + n(0.0, 1.0),
        body_yaw=p.body_yaw + n(0.0, 0.5),
        body_roll=p.body_roll + n(0.0, 0.5),
        eye_open_l=p.eye_open_l * (0.5 if blink else 1.0),
        eye_open_r=p.eye_open_r * (0.5 if blink else 1.0),
        eye_smile=p.eye_smile,
        gaze_x=p.gaze_x + n(0.0, 0.05),
        gaze_y=p.gaze_y + n(0.0, 0.05),
        brow_l=p.brow_l,
        brow_r=p.brow_r,
        mouth_open=p.mouth_open + n(0.0, 0.08),
        mouth_form=p.mouth_form + n(0.0, 0.05),
        breath=p.breath + 0.03,
        cheek=p.cheek,
        vowels=p.vowels,
        expressions=dict(p.expressions),
    ).clamped()


def motion_spec(seed: int, index: int) -> tuple[SampleSpec, AvatarParams]:
    """Temporal pair `index`: a training sample (from a part of the stream single pictures
    never reach) and the pose of the frame after it; same framing, background and design."""
    spec = sample_spec(seed, MOTION_BASE + index)
    rng = np.random.default_rng([int(seed), int(index), 2])
    return spec, next_params(rng, spec.params)


def heldout_specs(n_per_preset: int = 12, design: int = 0) -> list[SampleSpec]:
    """Fixed evaluation poses: the default framing and background 0 (what a user sees), every
    preset with the same poses, drawn from a stream training never uses; `design` 0 is the
    built-in idol, a training/designs.HELDOUT_DESIGNS id one training never saw."""
    out = []
    for i in range(n_per_preset):
        rng = np.random.default_rng([HELDOUT_SEED, i])
        params = random_params(rng)
        for preset in PRESETS:
            out.append(SampleSpec(preset, params, Framing(), 0, design))
    return out


def save_clip(track: AvatarTrack, path: Path = CLIP_FILE) -> None:
    arrays = {f"s_{k}": v for k, v in track.scalars.items()}
    arrays.update({f"e_{k}": v for k, v in track.expressions.items()})
    np.savez_compressed(
        path, fps=np.int64(track.fps), pts_ns=track.pts_ns, vowels=track.vowels, **arrays
    )


def load_heldout_clip(path: Path = CLIP_FILE) -> AvatarTrack:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: the held-out clip is missing (rebuild it: scripts/build_heldout_clip.py)"
        )
    with np.load(path) as z:
        scalars = {k[2:]: z[k].astype(np.float32) for k in z.files if k.startswith("s_")}
        expr = {k[2:]: z[k].astype(np.float32) for k in z.files if k.startswith("e_")}
        track = AvatarTrack(
            fps=int(z["fps"]),
            pts_ns=z["pts_ns"].astype(np.int64),
            scalars=scalars,
            vowels=z["vowels"].astype(np.float32),
            expressions=expr,
        )
    track.validate()
    return track
