"""Idol designs beyond the built-in one, so the model learns to paint characters it never saw.

    design_look(palette, line, design) -> (Palette, LineStyle)   design 0: the preset's own
    TRAIN_DESIGNS                        the design ids training draws from (besides 0)
    HELDOUT_DESIGNS                      design ids training never draws: evaluated apart

A design recolours the idol and changes its line work, from a seeded stream per design id:
- hair (base, shadow, highlight), iris, outfit and accent rotated to a new hue, with new
  lightness and saturation (blondes, silver, black, pastel and saturated hair alike);
- outline 0.5x-1.8x as wide, sometimes in a coloured line instead of the preset's;
- a third of the designs are *flat* — shadows equal to the base colours, no hair highlight —
  like the cel-shaded layered drawings PNGTubers and PSD avatars are made of.
Whole designs are held out, not samples of a design: HELDOUT_DESIGNS come from the same
generator but their ids are never drawn in training, so their colour combinations are new.
"""

from __future__ import annotations

import colorsys

import numpy as np

from presets.schema import LineStyle, Palette

TRAIN_DESIGNS = range(1, 193)
HELDOUT_DESIGNS = (10_001, 10_002, 10_003, 10_004)
HAIR_KEYS = ("hair", "hair_shadow", "hair_highlight")
RECOLOURED = (("iris", "iris_dark"), ("outfit", "outfit_shadow"), ("accent",))


def _rgb(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.lstrip("#")
    return tuple(int(h[i : i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(min(1.0, max(0.0, c)) * 255):02x}" for c in rgb)


def _shift(hex_colour: str, hue: float, light: float, sat: float) -> str:
    """Set the hue, scale lightness by `light` and saturation by `sat`."""
    _hue, lum, s = colorsys.rgb_to_hls(*_rgb(hex_colour))
    return _hex(colorsys.hls_to_rgb(hue % 1.0, min(0.97, lum * light), min(1.0, s * sat)))


def design_look(palette: Palette, line: LineStyle, design: int) -> tuple[Palette, LineStyle]:
    """The palette and line style of `design` (0: unchanged)."""
    if design == 0:
        return palette, line
    rng = np.random.default_rng([7_777, int(design)])
    colours = palette.model_dump()
    hue = float(rng.random())
    light = float(np.exp(rng.uniform(np.log(0.35), np.log(2.6))))
    sat = float(rng.uniform(0.2, 1.6))
    for key in HAIR_KEYS:
        colours[key] = _shift(colours[key], hue, light, sat)
    for group in RECOLOURED:
        g_hue = float(rng.random())
        g_light = float(np.exp(rng.uniform(np.log(0.5), np.log(1.8))))
        g_sat = float(rng.uniform(0.3, 1.5))
        for key in group:
            colours[key] = _shift(colours[key], g_hue, g_light, g_sat)
    if rng.random() < 1.0 / 3.0:  # flat cel art: one tone per area
        colours["hair_shadow"] = colours["hair_highlight"] = colours["hair"]
        colours["outfit_shadow"] = colours["outfit"]
        colours["skin_shadow"] = colours["skin"]
    if rng.random() < 0.3:  # a coloured line, a darker shade of the hair
        colours["line"] = _shift(colours["hair"], hue, 0.35, 1.0)
    width = float(np.clip(line.width * rng.uniform(0.5, 1.8), 0.5, 12.0))
    return Palette(**colours), line.model_copy(update={"width": width})
