"""`AvatarParams`: the rig-independent control vector of the idol at one instant.

Ranges follow Live2D's standard parameters (docs/ARCHITECTURE.md, "Outside facts") so a Live2D model can be
driven without translation tables:

    head_yaw / head_pitch / head_roll  -30..30 degrees (yaw > 0: face turns to screen-right,
                                       pitch > 0: looks up, roll > 0: head tilts
                                       counter-clockwise on screen, Live2D AngleZ)
    body_yaw / body_roll               -10..10 degrees (body sway, Live2D BodyAngleX/Z)
    eye_open_l / eye_open_r             0..1 (1 = open)     eye_smile 0..1
    gaze_x / gaze_y                    -1..1                brow_l / brow_r -1..1 (raise > 0)
    mouth_open                          0..1                mouth_form -1..1 (smile > 0)
    vowels                              weights of A I U E O N (N = closed/hum), sum 1
    breath 0..1, cheek 0..1 (blush), expressions: name -> 0..1

`AvatarTrack` is the same data for a whole clip as arrays (struct of arrays), which is what
offline analysis produces and what tests correlate against audio.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

VOWELS: tuple[str, ...] = ("A", "I", "U", "E", "O", "N")
EXPRESSIONS: tuple[str, ...] = ("happy", "sad", "surprised", "angry")

# name -> (low, high, neutral)
RANGES: dict[str, tuple[float, float, float]] = {
    "head_yaw": (-30.0, 30.0, 0.0),
    "head_pitch": (-30.0, 30.0, 0.0),
    "head_roll": (-30.0, 30.0, 0.0),
    "body_yaw": (-10.0, 10.0, 0.0),
    "body_roll": (-10.0, 10.0, 0.0),
    "eye_open_l": (0.0, 1.0, 1.0),
    "eye_open_r": (0.0, 1.0, 1.0),
    "eye_smile": (0.0, 1.0, 0.0),
    "gaze_x": (-1.0, 1.0, 0.0),
    "gaze_y": (-1.0, 1.0, 0.0),
    "brow_l": (-1.0, 1.0, 0.0),
    "brow_r": (-1.0, 1.0, 0.0),
    "mouth_open": (0.0, 1.0, 0.0),
    "mouth_form": (-1.0, 1.0, 0.0),
    "breath": (0.0, 1.0, 0.0),
    "cheek": (0.0, 1.0, 0.0),
}
SCALARS: tuple[str, ...] = tuple(RANGES)


def _neutral_vowels() -> np.ndarray:
    v = np.zeros(len(VOWELS), np.float32)
    v[VOWELS.index("N")] = 1.0
    return v


@dataclass(frozen=True, slots=True)
class AvatarParams:
    """Controls at time `pts_ns` (master clock). Immutable: use `dataclasses.replace`."""

    pts_ns: int = 0
    head_yaw: float = 0.0
    head_pitch: float = 0.0
    head_roll: float = 0.0
    body_yaw: float = 0.0
    body_roll: float = 0.0
    eye_open_l: float = 1.0
    eye_open_r: float = 1.0
    eye_smile: float = 0.0
    gaze_x: float = 0.0
    gaze_y: float = 0.0
    brow_l: float = 0.0
    brow_r: float = 0.0
    mouth_open: float = 0.0
    mouth_form: float = 0.0
    breath: float = 0.0
    cheek: float = 0.0
    vowels: np.ndarray = field(default_factory=_neutral_vowels)
    expressions: dict[str, float] = field(default_factory=dict)

    def vowel(self, name: str) -> float:
        return float(self.vowels[VOWELS.index(name)])

    def dominant_vowel(self) -> str:
        return VOWELS[int(np.argmax(self.vowels))]

    def clamped(self) -> AvatarParams:
        """A copy with every scalar inside its Live2D range and vowel weights normalised."""
        values = {
            name: float(np.clip(getattr(self, name), lo, hi))
            for name, (lo, hi, _) in RANGES.items()
        }
        v = np.clip(np.asarray(self.vowels, np.float32), 0.0, None)
        total = float(v.sum())
        v = v / total if total > 0 else _neutral_vowels()
        expr = {k: float(np.clip(w, 0.0, 1.0)) for k, w in self.expressions.items()}
        return AvatarParams(pts_ns=self.pts_ns, vowels=v, expressions=expr, **values)


@dataclass
class AvatarTrack:
    """AvatarParams for a whole clip at a constant frame rate, one array per parameter."""

    fps: int
    pts_ns: np.ndarray  # int64 (n,)
    scalars: dict[str, np.ndarray]  # name -> float32 (n,), one entry per name in SCALARS
    vowels: np.ndarray  # float32 (n, 6), rows sum to 1
    expressions: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def neutral(cls, pts_ns: np.ndarray, fps: int) -> AvatarTrack:
        n = len(pts_ns)
        scalars = {
            name: np.full(n, neutral, np.float32) for name, (_, _, neutral) in RANGES.items()
        }
        vowels = np.tile(_neutral_vowels(), (n, 1))
        return cls(fps=fps, pts_ns=np.asarray(pts_ns, np.int64), scalars=scalars, vowels=vowels)

    def __len__(self) -> int:
        return len(self.pts_ns)

    def __getitem__(self, i: int) -> AvatarParams:
        values = {name: float(arr[i]) for name, arr in self.scalars.items()}
        expr = {name: float(arr[i]) for name, arr in self.expressions.items()}
        return AvatarParams(
            pts_ns=int(self.pts_ns[i]), vowels=self.vowels[i].copy(), expressions=expr, **values
        )

    def validate(self) -> None:
        n = len(self.pts_ns)
        missing = set(SCALARS) - set(self.scalars)
        if missing:
            raise ValueError(f"AvatarTrack lacks parameters: {sorted(missing)}")
        for name, arr in [*self.scalars.items(), *self.expressions.items()]:
            if arr.shape != (n,):
                raise ValueError(f"AvatarTrack.{name} has shape {arr.shape}, expected ({n},)")
        if self.vowels.shape != (n, len(VOWELS)):
            raise ValueError(
                f"AvatarTrack.vowels has shape {self.vowels.shape}, expected ({n}, {len(VOWELS)})"
            )


assert {f.name for f in fields(AvatarParams)} >= set(SCALARS)
