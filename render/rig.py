"""The idol's rig: AvatarParams -> one 2D affine matrix per part, plus the hair springs.

The character is drawn in *design units* (y down, the face centre at the origin, the head about
200 units wide). Every part (back hair, body, face, each eye, mouth, bangs, …) is a rigid 2D
drawing placed by a 3x3 affine matrix, so a part's paths are built once and only the matrix
changes per frame — cheap to draw and exact to differentiate for the motion vectors.

Head yaw/pitch are faked in 2D (the classic Live2D "parallax" look): each head part has an
anchor point, a depth `z` (towards the viewer) and the slopes of the head surface at the anchor.
The part's matrix is the first-order (affine) approximation of rotating that bit of surface
with the head and projecting it orthographically. Parts far in front (bangs, nose) therefore
slide further than the face outline (small `z`), the back hair (negative `z`) slides the other
way, and the far eye is foreshortened while the near one is not. Roll then rotates the whole
head about the neck pivot; body yaw/roll/breath move the body and carry the head along.

Hair lags the head: each hair group has a damped spring that follows the head pose; the lag
(spring - pose) is fed back as a slightly older pose plus a swing about the hair's root.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.avatar import AvatarParams

HEAD_R = 100.0  # head "sphere" radius in design units
NECK = (0.0, 105.0)  # head roll pivot
HIP = (0.0, 650.0)  # body roll pivot (below the frame)
BODY_C = (0.0, 250.0)  # chest centre, the body's yaw "sphere"
BODY_R = 180.0


@dataclass(frozen=True)
class Part:
    name: str
    anchor: tuple[float, float]
    z: float  # depth towards the viewer (parallax strength)
    gx: float = 0.0  # dz/dx of the surface at the anchor (foreshortening with yaw)
    gy: float = 0.0  # dz/dy (foreshortening with pitch)
    body: bool = False  # placed by the body only (no head rotation)
    spring: str | None = None  # hair group, or None
    root: tuple[float, float] | None = None  # swing pivot for hair
    local: bool = False  # drawn around its anchor (eyes, mouth, …) rather than in design units


def _on_head(name: str, x: float, y: float, lift: float = 0.0, flat: float = 0.8) -> Part:
    """A part lying on the head surface at (x, y): depth and slopes of a (flattened) sphere."""
    z0 = math.sqrt(max(HEAD_R**2 - x * x - y * y, 35.0**2))
    return Part(name, (x, y), flat * z0 + lift, -flat * x / z0, -flat * y / z0, local=True)


def _mirror(p: Part, name: str) -> Part:
    root = None if p.root is None else (-p.root[0], p.root[1])
    spring = p.spring.replace("_r", "_l") if p.spring else None
    return Part(name, (-p.anchor[0], p.anchor[1]), p.z, -p.gx, p.gy, p.body, spring, root, p.local)


_tail_r = Part("tail_r", (125.0, -88.0), -40.0, spring="tail_r", root=(122.0, -92.0))
_side_r = Part("side_r", (96.0, -45.0), 70.0, -0.3, 0.0, spring="side", root=(96.0, -60.0))
_eye_r = _on_head("eye_r", 45.0, 15.0)
_brow_r = _on_head("brow_r", 45.0, -30.0, lift=8.0)
_cheek_r = _on_head("cheek_r", 56.0, 50.0)

# Back to front. The drawing order of the renderer follows this list.
PARTS: tuple[Part, ...] = (
    _mirror(_tail_r, "tail_l"),
    _tail_r,
    Part("back_hair", (0.0, -20.0), -35.0, spring="back", root=(0.0, -100.0)),
    Part("body", BODY_C, 40.0, body=True),
    Part("collar", (0.0, 240.0), 110.0, body=True),
    Part("bow", (0.0, 300.0), 160.0, body=True),
    Part("face", (0.0, 0.0), 22.0, 0.0, 0.3),  # gy > 0: the chin follows a turn
    _mirror(_cheek_r, "cheek_l"),
    _cheek_r,
    _mirror(_eye_r, "eye_l"),
    _eye_r,
    _on_head("nose", 0.0, 55.0, lift=6.0),
    _on_head("mouth", 0.0, 86.0),
    _mirror(_side_r, "side_l"),
    _side_r,
    Part("bangs", (0.0, -70.0), 112.0, 0.0, -0.35, spring="bangs", root=(0.0, -130.0)),
    Part("ahoge", (0.0, -150.0), 30.0, spring="ahoge", root=(2.0, -150.0)),
    _mirror(_brow_r, "brow_l"),
    _brow_r,
)
INDEX = {p.name: i for i, p in enumerate(PARTS)}

# per part, the same every frame: a body part about the chest centre (the body's yaw
# "sphere"), and a local part's move to its anchor
_ABOUT_CHEST = {
    i: Part(p.name, (p.anchor[0] - BODY_C[0], p.anchor[1] - BODY_C[1]), p.z)
    for i, p in enumerate(PARTS)
    if p.body
}
_AT_ANCHOR = {
    i: np.array([[1, 0, p.anchor[0]], [0, 1, p.anchor[1]], [0, 0, 1.0]])
    for i, p in enumerate(PARTS)
    if p.local and not p.body
}
_SHIFT = np.array([[1, 0, BODY_C[0]], [0, 1, BODY_C[1]], [0, 0, 1.0]])
_UNSHIFT = np.array([[1, 0, -BODY_C[0]], [0, 1, -BODY_C[1]], [0, 0, 1.0]])

# hair group -> (frequency Hz, damping ratio, pose lag gain, roll swing gain, yaw swing gain)
SPRINGS: dict[str, tuple[float, float, float, float, float]] = {
    "back": (2.2, 0.35, 0.5, 0.6, 0.15),
    "tail_l": (1.5, 0.25, 0.3, 1.4, 0.6),
    "tail_r": (1.5, 0.25, 0.3, 1.4, 0.6),
    "side": (2.6, 0.3, 0.4, 1.0, 0.3),
    "bangs": (3.5, 0.4, 0.35, 0.25, 0.1),
    "ahoge": (2.8, 0.2, 0.2, 2.0, 1.2),
}


def _rot(deg: float, cx: float, cy: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    # rotation about (cx, cy); positive = counter-clockwise on screen (y is down)
    return np.array([[c, s, cx - c * cx - s * cy], [-s, c, cy + s * cx - c * cy], [0, 0, 1.0]])


def _surface_affine(p: Part, yaw: float, pitch: float) -> np.ndarray:
    """First-order projection of the surface patch at p.anchor after yaw then pitch."""
    t, f = math.radians(yaw), math.radians(pitch)
    ct, st, cf, sf = math.cos(t), math.sin(t), math.cos(f), math.sin(f)
    ax, ay = p.anchor
    # anchor after rotation (x right, y down, z to the viewer); pitch > 0 looks up
    x1 = ax * ct + p.z * st
    z1 = -ax * st + p.z * ct
    y2 = ay * cf - z1 * sf
    # Jacobian d(x2, y2)/d(x, y) of the patch z = z0 + gx dx + gy dy
    a = ct + p.gx * st
    b = p.gy * st
    dz1x = -st + p.gx * ct
    dz1y = p.gy * ct
    c = -dz1x * sf
    d = cf - dz1y * sf
    # keep the near side from ballooning: mild clamp of the horizontal scale
    a = min(a, 1.04)
    return np.array([[a, b, x1 - a * ax - b * ay], [c, d, y2 - c * ax - d * ay], [0, 0, 1.0]])


class Spring:
    """Critically-ish damped spring on a small vector, stepped with sub-steps for stability."""

    def __init__(self, freq: float, zeta: float) -> None:
        self.w = 2.0 * math.pi * freq
        self.zeta = zeta
        self.pos: np.ndarray | None = None
        self.vel = np.zeros(0)

    def snap(self, target: np.ndarray) -> None:
        self.pos = target.copy()
        self.vel = np.zeros_like(target)

    def step(self, target: np.ndarray, dt: float) -> np.ndarray:
        if self.pos is None:
            self.snap(target)
            return self.pos
        n = max(1, math.ceil(dt / (1.0 / 240.0)))
        h = dt / n
        w2, c = self.w * self.w, 2.0 * self.zeta * self.w
        for _ in range(n):  # semi-implicit Euler
            self.vel += h * (w2 * (target - self.pos) - c * self.vel)
            self.pos += h * self.vel
        # settle exactly, so that a still head gives exactly zero hair motion
        if np.abs(self.pos - target).max() < 1e-3 and np.abs(self.vel).max() < 1e-2:
            self.snap(target)
        return self.pos


class Rig:
    """Turns params into part matrices (design units -> design units); owns the hair springs."""

    def __init__(self) -> None:
        self.springs = {k: Spring(f, z) for k, (f, z, *_rest) in SPRINGS.items()}
        self.last_pts: int | None = None
        # the springs' constants as columns, to step them all at once (`_step_springs`)
        ws = [s.w for s in self.springs.values()]
        zetas = [s.zeta for s in self.springs.values()]
        self._w2 = np.array([[w * w] for w in ws])
        self._c = np.array([[2.0 * z * w] for z, w in zip(zetas, ws, strict=True)])

    def reset(self) -> None:
        for s in self.springs.values():
            s.pos = None
        self.last_pts = None

    def matrices(self, p: AvatarParams) -> np.ndarray:
        """(n_parts, 3, 3) float64 matrices for params p; steps the springs by the pts gap."""
        dt = 0.0 if self.last_pts is None else (p.pts_ns - self.last_pts) * 1e-9
        dt = min(max(dt, 0.0), 0.1)
        self.last_pts = p.pts_ns

        # body: breath lifts the shoulders a little, roll swings about the hip, yaw slides
        lift = np.array([[1, 0, 0], [0, 1.0 + 0.012 * p.breath, -4.0 * p.breath], [0, 0, 1.0]])
        body = _rot(p.body_roll, *HIP) @ lift
        pose = np.array([p.head_yaw, p.head_pitch, p.head_roll, p.body_yaw, p.body_roll])
        lags = {name: pos - pose for name, pos in self._step_springs(pose, dt).items()}

        out = np.empty((len(PARTS), 3, 3))
        body_shift = body @ _SHIFT
        # the head rides on the body; body yaw moves the neck with the chest surface
        neck_slide = p.body_yaw * 1.2
        head = body @ np.array([[1, 0, neck_slide], [0, 1, 0], [0, 0, 1.0]])
        head_rolled = None  # head @ the head's roll, shared by the parts without a spring
        for i, part in enumerate(PARTS):
            if part.body:
                m = _surface_affine(_ABOUT_CHEST[i], p.body_yaw, 0.0)
                out[i] = body_shift @ m @ _UNSHIFT
                continue
            yaw, pitch, roll = p.head_yaw, p.head_pitch, p.head_roll
            swing = None
            if part.spring is not None:
                _f, _z, k_pose, k_roll, k_yaw = SPRINGS[part.spring]
                d = lags[part.spring]
                yaw += k_pose * d[0]
                pitch += k_pose * d[1]
                roll += k_pose * d[2]
                ang = k_roll * (d[2] + d[4]) - k_yaw * d[0] - 0.5 * k_yaw * d[3]
                swing = _rot(ang, *part.root) if ang != 0.0 else None
                rolled = head @ _rot(roll, *NECK)
            else:
                if head_rolled is None:
                    head_rolled = head @ _rot(roll, *NECK)
                rolled = head_rolled
            local = _surface_affine(part, yaw, pitch)
            if swing is not None:
                local = local @ swing
            out[i] = rolled @ local
            if part.local:
                out[i] = out[i] @ _AT_ANCHOR[i]
        return out

    def _step_springs(self, pose: np.ndarray, dt: float) -> dict[str, np.ndarray]:
        """Every spring's `Spring.step(pose, dt)`, stepped together as rows of one array:
        the same arithmetic element by element, a sixth of the numpy calls."""
        springs = self.springs
        if any(s.pos is None for s in springs.values()):
            return {name: s.step(pose, dt) for name, s in springs.items()}
        n = max(1, math.ceil(dt / (1.0 / 240.0)))
        h = dt / n
        pos = np.stack([s.pos for s in springs.values()])
        vel = np.stack([s.vel for s in springs.values()])
        w2, c = self._w2, self._c
        for _ in range(n):  # semi-implicit Euler, as Spring.step
            vel += h * (w2 * (pose - pos) - c * vel)
            pos += h * vel
        out = {}
        for i, (name, s) in enumerate(springs.items()):
            s.pos, s.vel = pos[i], vel[i]
            if np.abs(s.pos - pose).max() < 1e-3 and np.abs(s.vel).max() < 1e-2:
                s.snap(pose)
            out[name] = s.pos
        return out
