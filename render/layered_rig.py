"""The automatic rig of a layered avatar: AvatarParams -> one affine matrix per layer.

Like render/rig.py for the built-in idol, every layer is a rigid picture placed by a 3x3 matrix
in canvas pixels, so motion vectors are exact per layer (render/motion.py). What the rig guesses
from the layers (the manifest can set each, docs/AVATARS.md):

- the parts: background stays put; head, eyes, mouths, brows, hair and the other layers whose
  centre lies above the neck ride with the head; the rest is the body;
- the neck pivot: the bottom centre of the head layer (lifted by a tenth of its height), or
  below the mouth when there is no head layer; the head radius: half the head's width;
- depth (in head radii towards the viewer) by role, and for other layers (and other hair) by
  their place in the layer order, behind or in front of the head layer: a head turn slides
  each layer by sin(yaw) x depth x radius (the Live2D-style parallax), a nod by
  sin(pitch) x depth x radius;
- hair layers hang from their top centre and lag the head on a damped spring (rig.Spring), the
  lag fed back as a slightly older pose plus a swing about the root;
- the body sways about a hip below the body (body roll), slides with body yaw, breathes, and
  bounces down on the beat nods (the head pitch dips the motion track puts on beats).
"""

from __future__ import annotations

import math

import numpy as np

from core.avatar import AvatarParams
from render.avatar_doc import AvatarDoc
from render.avatar_roles import HAIR_ROLES, HEAD_ROLES
from render.rig import Spring, _rot

# role -> default depth (head radii towards the viewer)
DEPTHS = {
    "hair_back": -0.5,
    "head": 0.0,
    "blush": 0.12,
    "eyes_open": 0.25,
    "eyes_half": 0.25,
    "eyes_closed": 0.25,
    "brows": 0.3,
    "hair_front": 0.42,
    "expr_happy": 0.22,
    "expr_sad": 0.22,
    "expr_surprised": 0.22,
    "expr_angry": 0.22,
    "expr_wink": 0.25,  # in place of the eyes
}
MOUTH_DEPTH = 0.2
# hair role -> (frequency Hz, damping ratio, pose lag gain, roll swing gain, yaw swing gain)
HAIR_SPRINGS = {
    "hair_back": (2.2, 0.35, 0.5, 0.7, 0.2),
    "hair_front": (3.5, 0.4, 0.35, 0.35, 0.12),
    "hair": (2.6, 0.3, 0.4, 1.1, 0.35),
}


def _translate(dx: float, dy: float) -> np.ndarray:
    return np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1.0]])


def _scale_about(sx: float, sy: float, cx: float, cy: float) -> np.ndarray:
    return np.array([[sx, 0, cx - sx * cx], [0, sy, cy - sy * cy], [0, 0, 1.0]])


class LayeredRig:
    """Layer matrices (canvas pixels -> canvas pixels) of `doc`; owns the hair springs."""

    def __init__(self, doc: AvatarDoc) -> None:
        layers = doc.layers
        self.n = len(layers)
        bounds = [layer.bounds for layer in layers]
        cfg = doc.manifest.avatar
        self.turn, self.bounce = cfg.turn, cfg.bounce
        self.canvas_h = float(doc.height)
        heads = doc.by_role("head")
        face = [i for i, layer in enumerate(layers) if layer.role.startswith(("mouth", "eyes"))]
        if heads:
            hb = _union([bounds[i] for i in heads])
            neck = ((hb[0] + hb[2]) / 2.0, hb[3] - 0.1 * (hb[3] - hb[1]))
            self.radius = (hb[2] - hb[0]) / 2.0
        else:
            fb = _union([bounds[i] for i in face])
            mouths = _union(
                [bounds[i] for i, lr in enumerate(layers) if lr.role.startswith("mouth")]
            )
            eyes_y = (fb[1] + fb[3]) / 2.0
            neck = ((fb[0] + fb[2]) / 2.0, mouths[3] + 0.8 * max(mouths[3] - eyes_y, 1.0))
            self.radius = max(fb[2] - fb[0], 8.0) * 0.8
        self.neck = tuple(cfg.pivot) if cfg.pivot else neck
        self.hip = tuple(cfg.hip) if cfg.hip else (self.neck[0], doc.height * 1.4)
        head_at = heads[0] if heads else (face[0] if face else 0)

        self.part: list[str] = []  # "static" | "body" | "head"
        self.depth: list[float] = []
        self.springs: list[tuple[Spring, tuple, tuple[float, float]] | None] = []
        for i, layer in enumerate(layers):
            s = layer.settings
            b = bounds[i]
            if layer.role == "background":
                part = "static"
            elif layer.role in HEAD_ROLES or layer.role.startswith("mouth"):
                part = "head"
            elif layer.role == "body":
                part = "body"
            else:  # other layers: with the head when their centre is above the neck
                part = "head" if (b[1] + b[3]) / 2.0 < self.neck[1] else "body"
            depth = DEPTHS.get(layer.role, MOUTH_DEPTH if layer.role.startswith("mouth") else None)
            if depth is None or layer.role == "hair":  # by its place in the layer order
                if i < head_at:  # behind the face: further back the earlier it is drawn
                    depth = -0.15 - 0.35 * (head_at - i) / max(1, head_at)
                else:  # in front: nearer the viewer the later it is drawn
                    depth = 0.05 + 0.4 * (i - head_at) / max(1, len(layers) - 1 - head_at)
            if s is not None and s.depth is not None:
                depth = s.depth
            spring = None
            if layer.role in HAIR_ROLES and part == "head":
                freq, zeta, *gains = HAIR_SPRINGS[layer.role]
                if s is not None and s.spring is not None:
                    freq = s.spring
                if s is not None and s.damping is not None:
                    zeta = s.damping
                spring = (Spring(freq, zeta), tuple(gains), ((b[0] + b[2]) / 2.0, float(b[1])))
            self.part.append(part)
            self.depth.append(float(depth))
            self.springs.append(spring)
        self.last_pts: int | None = None

    def reset(self) -> None:
        for s in self.springs:
            if s is not None:
                s[0].pos = None
        self.last_pts = None

    def matrices(self, p: AvatarParams) -> np.ndarray:
        """(n_layers, 3, 3) float64 matrices for params p; steps the springs by the pts gap."""
        dt = 0.0 if self.last_pts is None else (p.pts_ns - self.last_pts) * 1e-9
        dt = min(max(dt, 0.0), 0.1)
        self.last_pts = p.pts_ns
        h = self.canvas_h
        nod = max(0.0, -p.head_pitch) / 5.0  # beat nods dip the pitch ~5 degrees
        breath = _scale_about(1.0, 1.0 + 0.01 * p.breath, self.hip[0], self.hip[1])
        slide = _translate(p.body_yaw * 0.003 * h, 0.012 * h * self.bounce * nod)
        body = slide @ _rot(p.body_roll, *self.hip) @ breath
        pose = np.array([p.head_yaw, p.head_pitch, p.head_roll, p.body_yaw, p.body_roll])
        nx, ny = self.neck
        neck_slide = _translate(p.body_yaw * 0.004 * h, 0.0)
        out = np.empty((self.n, 3, 3))
        rigid = {}  # (yaw, pitch, roll) -> the head's matrix without a layer's own slide
        for i in range(self.n):
            part = self.part[i]
            if part == "static":
                out[i] = np.eye(3)
                continue
            if part == "body":
                out[i] = body
                continue
            yaw, pitch, roll = p.head_yaw, p.head_pitch, p.head_roll
            swing = None
            spring = self.springs[i]
            if spring is not None:
                sp, (k_pose, k_roll, k_yaw), root = spring
                d = sp.step(pose, dt) - pose
                yaw += k_pose * d[0]
                pitch += k_pose * d[1]
                roll += k_pose * d[2]
                ang = k_roll * (d[2] + d[4]) - k_yaw * d[0] - 0.5 * k_yaw * d[3]
                swing = _rot(ang, *root) if ang != 0.0 else None
            key = (yaw, pitch, roll)
            if key not in rigid:
                sy_, sp_ = math.sin(math.radians(yaw)), math.sin(math.radians(pitch))
                narrow = _scale_about(1.0 - 0.1 * abs(sy_), 1.0 - 0.05 * abs(sp_), nx, ny)
                rigid[key] = (body @ neck_slide @ _rot(roll, nx, ny), narrow, sy_, sp_)
            head, narrow, sy_, sp_ = rigid[key]
            # the whole head turns a little (and narrows), each layer slides by its depth
            r, z = self.radius * self.turn, self.depth[i]
            local = _translate(sy_ * (0.15 + z) * r, -sp_ * z * r) @ narrow
            if swing is not None:
                local = local @ swing
            out[i] = head @ local
        return out


def _union(boxes: list[tuple[int, int, int, int]]) -> tuple[float, float, float, float]:
    if not boxes:
        return (0.0, 0.0, 1.0, 1.0)
    return (
        float(min(b[0] for b in boxes)),
        float(min(b[1] for b in boxes)),
        float(max(b[2] for b in boxes)),
        float(max(b[3] for b in boxes)),
    )
