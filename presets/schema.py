"""The schema of a style preset (`presets/*.toml`).

A preset is data only. Who reads which part:
    palette, line   -> render/ (the idol's colours and outline)
    background      -> render/backgrounds.py (drawn behind the idol unless output is transparent)
    post            -> pipeline/stylize/ (the procedural post-process, in torch)
    diffusion       -> the latent-diffusion stage (prompt, strength, steps, seed)
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")


def _check_hex(value: str) -> str:
    if not _HEX.match(value):
        raise ValueError(f"expected a colour as '#rrggbb', got {value!r}")
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
    width: float = Field(ge=0.0, le=12.0, description="outline width in pixels at 720 lines of height")
    style: Literal["clean", "brush", "none"] = "clean"


class Background(Strict):
    kind: Literal["gradient", "paper", "city-glow"]
    colors: list[Color] = Field(min_length=1, max_length=6)


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


class Diffusion(Strict):
    prompt: str = Field(min_length=1)
    negative_prompt: str = ""
    strength: float = Field(0.5, gt=0.0, le=1.0)
    steps: int = Field(1, ge=1, le=8)
    seed: int = Field(0, ge=0, lt=2**32)
    guidance: float = Field(0.0, ge=0.0, le=20.0)


class Preset(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    description: str = ""
    palette: Palette
    line: LineStyle
    background: Background
    post: PostProcess
    diffusion: Diffusion
