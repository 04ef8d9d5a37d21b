"""The schema of a style preset (`presets/*.toml`).

A preset is data only. Who reads which part:
    palette, line   -> render/ (the idol's colours and outline)
    background      -> render/backgrounds.py (drawn behind the idol unless output is transparent)
    post            -> pipeline/stylize/ (the procedural post-process, in torch)
    diffusion       -> the latent-diffusion stage (prompt, strength, steps, seed)
    temporal        -> the temporal stage (how much history, how far from part boundaries)
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


def _check_hex(value: str) -> str:
    if not _HEX.match(value):
        shown = repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
        raise ValueError(f"expected a colour as '#rrggbb', got {shown}")
    return value.lower()


Color = Annotated[str, AfterValidator(_check_hex)]


def rgb(color: str) -> tuple[int, int, int]:
    """'#rrggbb' -> (r, g, b) in 0..255."""
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Palette(Strict):
    skin: Color
    skin_shadow: Color
    blush: Color
    hair: Color
    hair_shadow: Color
    hair_highlight: Color
    iris: Color
    iris_dark: Color
    eye_white: Color
    mouth: Color
    outfit: Color
    outfit_shadow: Color
    accent: Color
    line: Color


class LineStyle(Strict):
    width: float = Field(
        ge=0.0, le=12.0, description="outline width in pixels at 720 lines of height"
    )
    style: Literal["clean", "brush", "none"] = "clean"


class Background(Strict):
    """What render/backgrounds.py draws behind the idol (see that module for each kind).

    `colors` by kind (missing ones get a sensible default derived from the first):
        gradient   [top, bottom, spotlight]
        paper      [paper, ink, seal]                      (seal: the small red hanko stamp)
        city-glow  [sky top, horizon glow, buildings, windows, neon 1, neon 2]
    """

    kind: Literal["gradient", "paper", "city-glow"]
    colors: tuple[Color, ...] = Field(min_length=1, max_length=6)
    detail: float = Field(0.5, ge=0.0, le=1.0, description="amount of bokeh / fibres / windows")


class PostProcess(Strict):
    kind: Literal["toon", "ink-wash", "cyberpunk"]
    # 0 disables an effect; the kind decides which effects exist and how they combine.
    bloom: float = Field(0.0, ge=0.0, le=3.0)
    rim_light: float = Field(0.0, ge=0.0, le=3.0)
    scanlines: float = Field(0.0, ge=0.0, le=1.0)
    grain: float = Field(0.0, ge=0.0, le=1.0)
    vignette: float = Field(0.0, ge=0.0, le=1.0)
    posterize: int = Field(0, ge=0, le=32, description="colour levels per channel, 0 = off")
    ink_bleed: float = Field(0.0, ge=0.0, le=3.0)
    accent: Color | None = None
    # Added for the three built-in looks (all optional, 0 / None = off or the kind's default).
    saturation: float = Field(1.0, ge=0.0, le=2.0, description="1 = unchanged")
    shading: float = Field(0.0, ge=0.0, le=1.0, description="toon: soft inner-edge shading")
    wet_edges: float = Field(0.0, ge=0.0, le=3.0, description="ink-wash: pigment pooling at edges")
    paper: float = Field(0.0, ge=0.0, le=1.0, description="ink-wash: paper texture multiplied in")
    ink: Color | None = Field(None, description="ink-wash: the ink colour (default near-black)")
    chromatic: float = Field(0.0, ge=0.0, le=8.0, description="cyberpunk: RGB split in px at 720p")
    rim_color: Color | None = Field(None, description="cyberpunk: key rim light colour")
    rim_color2: Color | None = Field(None, description="cyberpunk: opposite rim light colour")


class Diffusion(Strict):
    prompt: str = Field(min_length=1)
    negative_prompt: str = ""
    strength: float = Field(0.5, gt=0.0, le=1.0)
    steps: int = Field(1, ge=1, le=8)
    seed: int = Field(0, ge=0, lt=2**32)
    guidance: float = Field(0.0, ge=0.0, le=20.0)


class Temporal(Strict):
    """The temporal stage's settings for this look (pipeline/temporal/stage.py): a flat, clean
    look shows a history misplaced at a part boundary sooner than a textured one does."""

    blend: float = Field(
        0.7, ge=0.0, lt=1.0, description="history weight (where nothing moves, with moving_blend)"
    )
    moving_blend: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="history weight near motion (None: `blend` everywhere); a still ground "
        "can average more of a model's flicker than a moving part can without an echo",
    )
    guard: int = Field(
        4, ge=0, le=16, description="px around part boundaries where no history is used"
    )
    tolerance: float = Field(
        0.0,
        ge=0.0,
        le=64.0,
        description="0-255 levels of history/current disagreement the history is trusted within "
        "(0: off, the exact 3x3 clamp)",
    )


class Preset(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    description: str = ""
    palette: Palette
    line: LineStyle
    background: Background
    post: PostProcess
    diffusion: Diffusion
    temporal: Temporal = Temporal()
