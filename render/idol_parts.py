"""The idol's shapes, in design units (y down, face centre at the origin, head ~200 wide).

Static parts (hair, face, body, outfit) are built once as skia paths. The parts that change
shape (eyes, mouth, brows) are small point sets blended per frame and turned into paths — a
few dozen points, far cheaper than the rasterisation itself.

Points are given as (x, y) for smooth points and (x, y, 1) for sharp corners (hair tips); a
Catmull-Rom spline through them becomes the cubic Bézier path.
"""

from __future__ import annotations

import numpy as np
import skia


def spline(points, closed: bool = True, tension: float = 1.0) -> skia.Path:
    """Smooth path through `points`; a point with a third element 1 is a sharp corner."""
    pts = [(float(p[0]), float(p[1])) for p in points]
    sharp = [len(p) > 2 and bool(p[2]) for p in points]
    n = len(pts)
    path = skia.Path()
    path.moveTo(*pts[0])
    k = tension / 6.0
    last = n if closed else n - 1
    for i in range(last):
        p0, p1 = pts[(i - 1) % n], pts[i]
        p2, p3 = pts[(i + 1) % n], pts[(i + 2) % n]
        if not closed:
            p0 = pts[max(i - 1, 0)]
            p3 = pts[min(i + 2, n - 1)]
        t1 = (0.0, 0.0) if sharp[i] else ((p2[0] - p0[0]) * k, (p2[1] - p0[1]) * k)
        t2 = (0.0, 0.0) if sharp[(i + 1) % n] else ((p3[0] - p1[0]) * k, (p3[1] - p1[1]) * k)
        path.cubicTo(p1[0] + t1[0], p1[1] + t1[1], p2[0] - t2[0], p2[1] - t2[1], p2[0], p2[1])
    if closed:
        path.close()
    return path


def mirror(points) -> list:
    return [(-p[0], *p[1:]) for p in points]


def ellipse(cx: float, cy: float, rx: float, ry: float) -> skia.Path:
    return skia.Path().addOval(skia.Rect(cx - rx, cy - ry, cx + rx, cy + ry))


def union(*paths: skia.Path) -> skia.Path:
    out = skia.Path()
    for p in paths:
        out.addPath(p)
    return out


# --------------------------------------------------------------------------- static shapes

FACE = [
    (0, -112), (72, -98), (99, -45), (101, 12), (95, 52), (76, 86), (42, 114), (13, 127),
    (0, 129), (-13, 127), (-42, 114), (-76, 86), (-95, 52), (-101, 12), (-99, -45), (-72, -98),
]  # fmt: skip

# shadow the bangs cast on the forehead: follows the fringe, 10-14 units lower
FACE_SHADOW = [
    (-120, -130), (120, -130), (112, 0), (98, 50, 1), (88, -14), (70, 6, 1), (55, -26),
    (38, -2, 1), (22, -30), (8, 14, 1), (-5, -28), (-22, -2, 1), (-38, -28), (-58, 4, 1),
    (-75, -20), (-96, 46, 1), (-112, 0),
]  # fmt: skip

BANGS = [
    (-114, -10), (-112, -80), (-88, -130), (-45, -156), (0, -162), (45, -156), (88, -130),
    (112, -80), (114, -10), (100, 40, 1), (89, -26), (72, -6, 1), (56, -38), (39, -16, 1),
    (23, -42), (9, 2, 1), (-4, -40), (-21, -14, 1), (-38, -38), (-57, -10, 1), (-75, -32),
    (-97, 34, 1), (-105, -18),
]  # fmt: skip

# strand separations drawn as thin lines inside the fringe
BANG_STRANDS = [
    [(72, -6), (68, -50), (60, -95)],
    [(39, -16), (34, -60), (22, -105)],
    [(9, 2), (4, -48), (-6, -100)],
    [(-21, -14), (-26, -60), (-30, -105)],
    [(-57, -10), (-62, -55), (-70, -100)],
]

# "angel ring" highlight across the crown: a zig-zag band
HIGHLIGHT = [
    (-92, -108), (-70, -122), (-60, -112, 1), (-48, -128), (-30, -134), (-20, -122, 1),
    (-8, -138), (12, -138), (22, -124, 1), (34, -136), (52, -130), (62, -116, 1), (74, -124),
    (94, -108), (92, -100), (70, -108), (62, -98, 1), (50, -112), (32, -120), (22, -108, 1),
    (10, -124), (-8, -124), (-20, -108, 1), (-30, -120), (-48, -114), (-60, -98, 1),
    (-70, -108), (-90, -100),
]  # fmt: skip

SIDE_LOCK_R = [
    (84, -66), (108, -60), (121, -10), (124, 60), (117, 130), (104, 186, 1), (98, 120),
    (92, 40), (86, -20),
]  # fmt: skip

BACK_HAIR = [
    (-118, -90), (-80, -142), (0, -156), (80, -142), (118, -90), (132, 0), (138, 90),
    (130, 170), (118, 215, 1), (100, 180), (76, 214, 1), (40, 222), (0, 226), (-40, 222),
    (-76, 214, 1), (-100, 180), (-118, 215, 1), (-130, 170), (-138, 90), (-132, 0),
]  # fmt: skip

TAIL_R = [
    (108, -72), (118, -108), (160, -122), (206, -96), (236, -36), (250, 60), (246, 160),
    (232, 260), (210, 350), (184, 430, 1), (194, 350), (198, 256), (188, 150), (168, 60),
    (142, -10), (118, -48),
]  # fmt: skip
TAIL_SHADE_R = [
    (118, -48), (142, -10), (168, 60), (188, 150), (198, 256), (194, 350), (184, 430, 1),
    (206, 330), (214, 240), (206, 140), (186, 50), (160, -20), (128, -62),
]  # fmt: skip
TAIL_STRANDS_R = [
    [(170, -60), (214, 40), (222, 180), (206, 320)],
    [(150, -40), (184, 60), (196, 200), (196, 330)],
]

AHOGE = [(-4, -152), (-14, -186), (4, -214), (30, -216, 1), (10, -204), (2, -184), (8, -150)]

NECK_SHADOW = [(-29, 78), (29, 78), (28, 120), (0, 143), (-28, 120)]
# skin of neck, shoulders and arms in one silhouette (one clean outline); the outfit covers the
# torso, so what stays visible is the neck, the neckline and the arms beside the torso
SKIN_BODY = [
    (-27, 70), (27, 70), (30, 150), (40, 182), (70, 192), (124, 204), (160, 226), (180, 280),
    (192, 420), (200, 560), (198, 720), (192, 1400), (-192, 1400), (-198, 720), (-200, 560),
    (-192, 420), (-180, 280), (-160, 226), (-124, 204), (-70, 192), (-40, 182), (-30, 150),
]  # fmt: skip

# idol dress: fitted top to the waist, then a flared skirt (seen in portrait framings)
OUTFIT = [
    (-56, 196), (0, 224), (56, 196), (104, 204), (150, 224), (158, 300), (152, 420),
    (128, 520), (150, 560), (206, 700), (214, 1400), (-214, 1400), (-206, 700), (-150, 560),
    (-128, 520), (-152, 420), (-158, 300), (-150, 224), (-104, 204),
]  # fmt: skip
SKIRT_BAND = [(-131, 508, 1), (0, 514), (131, 508, 1), (147, 548, 1), (0, 556), (-147, 548, 1)]
OUTFIT_FOLDS = [
    [(110, 360), (116, 440), (110, 520)],
    [(-110, 360), (-116, 440), (-110, 520)],
    [(36, 400), (40, 470)],
]
SLEEVE_R = [(128, 212), (166, 214), (196, 246), (204, 300), (186, 330), (156, 322), (136, 280)]
SLEEVE_TRIM_R = [(156, 322), (186, 330), (204, 300), (203, 318), (186, 344), (152, 336)]

CHOKER = [(-30, 158), (30, 158), (31, 166), (-31, 166)]

COLLAR = [
    (-54, 190), (54, 190), (96, 202), (136, 220), (104, 258), (56, 292), (0, 318, 1),
    (-56, 292), (-104, 258), (-136, 220), (-96, 202),
]  # fmt: skip
COLLAR_STRIPE = [(-122, 226), (-96, 252), (-52, 284), (0, 306), (52, 284), (96, 252), (122, 226)]
DICKY = [(-40, 210), (0, 232), (40, 210), (26, 262), (0, 296, 1), (-26, 262)]

BOW_LOOP_R = [(4, 300), (40, 276), (66, 284), (62, 318), (30, 318)]
BOW_TAIL_R = [(6, 312), (30, 346), (46, 398, 1), (26, 384), (14, 396, 1), (0, 322)]
BOW_KNOT = [(-12, 298), (12, 298), (14, 320), (-14, 320)]

TIE_R = [(110, -102), (132, -124), (146, -110), (134, -88), (146, -66), (128, -58), (114, -80)]


# --------------------------------------------------------------------------- eyes

# right eye (screen right, +x outwards), local to the eye anchor; inner corner first
_EYE_SCALE = np.array([1.12, 1.16])
UPPER_OPEN = (
    np.array([(-25, 2), (-19, -15), (-5, -24), (11, -24), (23, -15), (29, -5)]) * _EYE_SCALE
)
LOWER_OPEN = np.array([(-25, 2), (-17, 20), (-1, 28), (14, 25), (24, 13), (29, -5)]) * _EYE_SCALE
CLOSED_DOWN = np.array([(-25, 10), (-15, 18), (0, 21), (14, 19), (24, 12), (29, 5)]) * _EYE_SCALE
CLOSED_UP = np.array([(-25, 16), (-15, 6), (0, 2), (14, 3), (24, 9), (29, 16)]) * _EYE_SCALE
LASH_T = np.array([1.5, 3.6, 5.2, 5.6, 6.2, 5.0])  # upper lash thickness, inner -> outer


def _smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


def _normals(pts: np.ndarray) -> np.ndarray:
    d = np.gradient(pts, axis=0)
    n = np.stack([d[:, 1], -d[:, 0]], axis=1)
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-6)


def eye_shapes(open_: float, smile: float, narrow: float, side: float) -> dict:
    """Paths of one eye. side=+1 right eye, -1 left (mirrored). open_ 0..1 (may exceed 1)."""
    smile = min(max(smile, 0.0), 1.0)
    closed = CLOSED_DOWN + (CLOSED_UP - CLOSED_DOWN) * smile
    e = min(max(open_, 0.0), 1.2) * (1.0 - smile) * (1.0 - 0.35 * narrow)
    upper = closed + (UPPER_OPEN - closed) * e
    lower = closed + (LOWER_OPEN - closed) * _smoothstep(e * 2.5)
    if side < 0:
        upper = upper * (-1, 1)
        lower = lower * (-1, 1)
    white = _poly_path(np.concatenate([upper, lower[::-1][1:-1]]), corners=(0, len(upper) - 1))
    # upper lash: the lid line thickened upwards, with a flick at the outer corner
    nrm = _normals(upper) * (1.0 if side > 0 else -1.0)
    t = LASH_T * (0.55 + 0.45 * min(e, 1.0))
    outer = upper + nrm * t[:, None]
    flick = upper[-1] + np.array([6.0 * side, -5.0 - 3.0 * e])
    lash = _poly_path(np.concatenate([upper, [flick], outer[::-1]]), corners=(0, len(upper)))
    low_lash = lower[2:5]
    return {"white": white, "lash": lash, "lower": _open_path(low_lash), "open": e, "upper": upper}


def _poly_path(pts: np.ndarray, corners=()) -> skia.Path:
    marked = [(x, y, 1) if i in corners else (x, y) for i, (x, y) in enumerate(pts)]
    return spline(marked, closed=True)


def _open_path(pts: np.ndarray) -> skia.Path:
    return spline([tuple(p) for p in pts], closed=False)


def brow_shape(raise_: float, tilt: float, side: float) -> skia.Path:
    """Tapered brow stroke; tilt > 0 lowers the inner end (angry), < 0 raises it (sad)."""
    cx = np.array([-22.0, -6.0, 10.0, 24.0])
    cy = np.array([2.0, -3.0, -3.0, 3.0]) - 7.0 * raise_
    cy[0] += 10.0 * tilt
    cy[1] += 4.0 * tilt
    cy[3] -= 4.0 * tilt
    th = np.array([1.6, 2.6, 2.3, 0.8])
    top = np.stack([cx * side, cy - th], axis=1)
    bot = np.stack([cx * side, cy + th], axis=1)
    return _poly_path(np.concatenate([top, bot[::-1]]), corners=(0, 3, 4, 7))


# --------------------------------------------------------------------------- mouth

# 8-point contours: left corner, upper-left, upper-mid, upper-right, right corner,
# lower-right, lower-mid, lower-left. Local to the mouth anchor, at full opening.
MOUTH = {
    "A": [(-15, 0), (-9, -5), (0, -4), (9, -5), (15, 0), (11, 14), (0, 19), (-11, 14)],
    "I": [(-20, 0), (-12, -3), (0, -3), (12, -3), (20, 0), (12, 5), (0, 6), (-12, 5)],
    "U": [(-7, 1), (-4, -4), (0, -5), (4, -4), (7, 1), (5, 7), (0, 9), (-5, 7)],
    "E": [(-18, -1), (-11, -4), (0, -4), (11, -4), (18, -1), (12, 9), (0, 12), (-12, 9)],
    "O": [(-10, 3), (-7, -6), (0, -7), (7, -6), (10, 3), (7, 13), (0, 16), (-7, 13)],
    "N": [(-11, 0), (-6, 0), (0, 0), (6, 0), (11, 0), (6, 0.5), (0, 0.8), (-6, 0.5)],
}
MOUTH_ARR = np.array([MOUTH[v] for v in ("A", "I", "U", "E", "O", "N")], float) * 1.35


def mouth_points(vowels: np.ndarray, open_: float, form: float) -> np.ndarray:
    """Blend the vowel contours, scale the opening, bend the corners for smile/frown."""
    w = np.asarray(vowels, float)
    w = w / max(w.sum(), 1e-6)
    pts = np.tensordot(w, MOUTH_ARR, axes=1)
    o = min(max(open_, 0.0), 1.0)
    # closing: flatten towards the corner line, and narrow a bit
    pts[:, 1] *= o
    pts[:, 0] *= 0.8 + 0.2 * o
    # smile lifts the corners and curves the whole line (a closed smile is a "‿")
    f = min(max(form, -1.0), 1.0)
    x = pts[:, 0] / 20.0
    pts[:, 1] += -5.0 * f * x * x + 2.0 * f
    pts[[0, 4], 0] *= 1.0 + 0.12 * max(f, 0.0)
    return pts


def mouth_path(pts: np.ndarray) -> skia.Path:
    return _poly_path(pts, corners=(0, 4))


def mouth_line(pts: np.ndarray) -> skia.Path:
    return _open_path(pts[[0, 1, 2, 3, 4]])
