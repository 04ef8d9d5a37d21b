"""One configuration model for `kagura render`, `demo`, `still`, `live` and the benches.

    defaults (the fields below)  ←  the settings file  ←  the command-line flags
                                    (live: live_app.json; render, demo:
                                    render.toml or --config FILE, app/render_settings.py)

`layer()` is the one place the layers meet: a settings-file value is checked field by field
and a bad one falls back to its default with a notice (the file never blocks a start, as in
app/live_settings.py); a bad flag is a one-line `UsageError` (exit 2). The result is frozen
(pydantic, `frozen=True`): nothing downstream changes a parsed option, and the argparse
namespace is read once, here, and never written.

    GpuConfig       --device --diffusion/--no-diffusion/--diffusion-random --diffusion-size
                    --upscale --[no-]temporal --[no-]cuda-graphs (render, demo, live, benches)
    LiveGpuConfig   GpuConfig + --budget-ms --no-ladder --[no-]render-process --stream-batch (live)
    RenderConfig    render / demo (and still: its look options)  → `.request()` RenderRequest
    LiveConfig      kagura live                                   → LiveOptions + LiveGpu

`parse_size` is the one size parser: every command's --size (and --diffusion-size) goes
through it, so every command accepts and refuses the same sizes. `--device` is the compute
device only; the microphone is `--mic` (`kagura live --device NAME` still works, with a
deprecation notice). Each model carries `version` (CONFIG_VERSION) so a stored config (a farm
job's request, a bench's JSON line) says which schema wrote it.

Importing this module imports neither torch nor Qt.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from core.errors import UsageError

CONFIG_VERSION = 1
MAX_SIDE = 7680
MIN_SIDE = 64
DIFFUSION_KINDS = ("sd-turbo", "tiny")
UPSCALES = (1, 2, 3, 4)
CUDA_DIFFUSION_SIZE = (640, 360)  # the default diffusion size on cuda
COMPUTE_DEVICES = ("cpu", "cuda")
X264_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
)
MAX_WORKERS = 64
# the offline lip-sync models a user picks from: audio.vowel_net.LIPSYNC_MODELS's keys (not
# imported: this module stays light; tests/test_lipsync_model.py holds the two equal)
LipsyncModel = Literal["default", "japanese"]
LIPSYNC_MODEL_NAMES: tuple[str, ...] = get_args(LipsyncModel)
SEED_MAX = 2**32 - 1
LIVE_SIZE = (960, 540)  # kagura live's frame size without --size or GPU stages

Size = tuple[int, int]


# ---------------------------------------------------------------------------------------------
# the parsers every command shares


def parse_size(text: str | Size, option: str = "--size") -> Size:
    """'1280x720' → (1280, 720); even sides (4:2:0 video needs them), 64..7680. A (w, h) pair is
    checked by the same rule. The one size parser: every command's sizes come through here."""
    if isinstance(text, tuple):
        width, height = text
        text = f"{width}x{height}"
    else:
        parts = str(text).lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise UsageError(f"{option} {text!r}: expected WIDTHxHEIGHT, e.g. 1280x720")
        width, height = int(parts[0]), int(parts[1])
    for side in (width, height):
        if not MIN_SIDE <= side <= MAX_SIDE or side % 2:
            raise UsageError(
                f"{option} {text!r}: each side must be an even number of pixels from "
                f"{MIN_SIDE} to {MAX_SIDE}"
            )
    return width, height


def add_lipsync_model_option(p: argparse.ArgumentParser) -> None:
    """--lipsync-model (render, demo, lipsync): not given is None, so the settings' choice
    stands. The offline analysis only: the live engine keeps the default (docs/BENCHMARKS.md,
    issue 15, twenty-third round)."""
    p.add_argument(
        "--lipsync-model",
        choices=LIPSYNC_MODEL_NAMES,
        default=None,
        help="the offline lip-sync's model: default, or japanese (also trained on Japanese "
        "voices: reads Japanese better, English a little worse; docs/BENCHMARKS.md)",
    )


def check_lipsync_model_option(model: str) -> None:
    """UsageError naming --lipsync-model unless `model` is shipped and its file is here (a
    missing file: a broken install): render, still and lipsync check it before any work."""
    from audio.vowel_net import check_lipsync_model

    try:
        check_lipsync_model(model)
    except ValueError as exc:
        raise UsageError(f"--lipsync-model {model}: {exc}") from None


def expect_fps(fps: int) -> None:
    """The frame-rate rule of render's --fps and its settings file: ValueError says what is
    expected (the caller names the flag or the file)."""
    if not 1 <= fps <= 240:
        raise ValueError("expected a whole number of frames per second from 1 to 240")


def expect_seed(seed: int) -> None:
    """The seed rule of --seed and the settings file (see expect_fps)."""
    if not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"expected a whole number from 0 to {SEED_MAX}")


def expect_x264_preset(name: str) -> None:
    """The x264 preset rule of --x264-preset and the settings file (see expect_fps)."""
    if name not in X264_PRESETS:
        raise ValueError("expected one of " + ", ".join(X264_PRESETS))


def parse_workers(text: str, option: str) -> int | None:
    """'auto' → None; '4' → 4 (1..MAX_WORKERS); anything else is a one-line UsageError."""
    value = str(text).strip().lower()
    if value == "auto":
        return None
    if not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
        raise UsageError(
            f"{option} {text!r}: expected auto or a whole number from 1 to {MAX_WORKERS}"
        )
    return int(value)


def temporal_on(temporal: bool | None, diffusion_on: bool) -> bool:
    """--[no-]temporal: None (neither given) means on exactly when diffusion is on."""
    return diffusion_on if temporal is None else temporal


def graphs_on(device: str, cuda_graphs: bool | None) -> bool:
    """--[no-]cuda-graphs: on for cuda unless --no-cuda-graphs; never on the CPU."""
    return device == "cuda" and (cuda_graphs is None or cuda_graphs)


def resolve_sizes(
    size: str | Size | None,
    diffusion_size: str | Size | None,
    upscale: int,
    device: str,
    diffusion_on: bool,
) -> tuple[Size, Size | None]:
    """(output size, render size or None) from --size and --diffusion-size (texts or pairs).

    The rule: output size = render size × upscale, exactly. The render size is the diffusion
    size when given; else --size / upscale; else (no --size) 640x360 for diffusion on cuda and
    1280x720 / upscale otherwise. The output size is --size when given, else render × upscale.
    """
    if upscale not in UPSCALES:
        raise UsageError(f"--upscale {upscale}: expected 1, 2, 3 or 4")
    if diffusion_size is not None and not diffusion_on:
        raise UsageError("--diffusion-size needs --diffusion PATH or --diffusion-random KIND")
    render = None
    if diffusion_size is not None:
        render = parse_size(diffusion_size, "--diffusion-size")
    elif size is None and diffusion_on and device == "cuda":
        render = CUDA_DIFFUSION_SIZE
    if size is not None:
        out = parse_size(size)
    elif render is not None:
        out = (render[0] * upscale, render[1] * upscale)
    else:
        out = (1280, 720)
    if render is None and upscale != 1:
        if out[0] % upscale or out[1] % upscale:
            raise UsageError(
                f"--size {out[0]}x{out[1]}: must be the render size × --upscale {upscale} "
                f"(both sides divisible by {upscale})"
            )
        render = (out[0] // upscale, out[1] // upscale)
    if render is None and diffusion_on:
        render = out
    if render is not None:
        r = render
        if (r[0] * upscale, r[1] * upscale) != out:
            raise UsageError(
                f"--size {out[0]}x{out[1]}: must be the render size {r[0]}x{r[1]} × --upscale "
                f"{upscale} = {r[0] * upscale}x{r[1] * upscale}"
            )
        for side in r:
            if not MIN_SIDE <= side <= MAX_SIDE or side % 2:
                raise UsageError(
                    f"render size {r[0]}x{r[1]} (--size / --upscale): each side must be an even "
                    f"number of pixels from {MIN_SIDE} to {MAX_SIDE}"
                )
    return out, render


def _kagura() -> str:
    """What `--diffusion kagura` names (torch-free: the argument checks, and the audio analysis
    process's start on cuda, must not wait for torch)."""
    from pipeline.model_factory import KAGURA

    return KAGURA


# ---------------------------------------------------------------------------------------------
# the models


class Frozen(BaseModel):
    """A validated, immutable configuration: assigning to a field raises."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class GpuSwitches:
    """What the GPU fields mean, answered in one place for GpuConfig and the RenderRequest it
    becomes (app/render_job.py): each has the fields `device`, `diffusion`,
    `diffusion_random`, `temporal` and `cuda_graphs` (not annotated here: pydantic would take
    annotations for fields of its own)."""

    @property
    def diffusion_on(self) -> bool:
        return self.diffusion is not None or self.diffusion_random is not None

    @property
    def temporal_on(self) -> bool:
        return temporal_on(self.temporal, self.diffusion_on)

    @property
    def graphs_on(self) -> bool:
        return graphs_on(self.device, self.cuda_graphs)


class GpuConfig(GpuSwitches, Frozen):
    """The GPU stages, shared by render, demo, live and the benches (app/gpu_options.py's
    flags). `diffusion` is resolved: Kagura's own model on cuda unless --no-diffusion or
    --diffusion-random; none on the CPU unless asked."""

    device: Literal["cpu", "cuda"] = "cpu"
    diffusion: Path | str | None = None  # a diffusers checkpoint folder, or "kagura"
    diffusion_random: Literal["sd-turbo", "tiny"] | None = None  # RANDOM weights: timing only
    diffusion_size: Size | None = None  # the render (painted) size; None: from --size
    upscale: Literal[1, 2, 3, 4] = 1
    temporal: bool | None = None  # None: on when diffusion is on
    cuda_graphs: bool | None = None  # None: on for cuda

    @property
    def requested(self) -> bool:
        """Any GPU stage asked for (live: None of them keeps the CPU chain as it was)."""
        return self.device != "cpu" or self.diffusion_on or self.upscale != 1 or bool(self.temporal)

    def sizes(self, size: str | Size | None) -> tuple[Size, Size | None]:
        """(output size, render size or None) for --size `size` (resolve_sizes)."""
        return resolve_sizes(
            size, self.diffusion_size, self.upscale, self.device, self.diffusion_on
        )


class LiveGpuConfig(GpuConfig):
    """GpuConfig and the live quality ladder's options."""

    budget_ms: float | None = Field(None, allow_inf_nan=False)
    adaptive: bool = True  # False: --no-ladder
    render_process: bool = True
    stream_batch: bool = False  # --stream-batch: the diffusion steps batched, a frame late
    # the frame, publishing and render threads ask for real-time scheduling (core.priority);
    # False: `bench live --headless --no-realtime-priority`, the A/B arm
    realtime_priority: bool = True


class RenderConfig(Frozen):
    """`kagura render` / `demo` (and `still`'s look options)."""

    version: int = CONFIG_VERSION
    audio: Path
    output: Path
    preset: str = "studio"
    size: Size | None = None  # None: 1280x720, or the diffusion size × --upscale
    fps: int = 30
    start_s: float = 0.0
    seconds: float | None = None
    transparent: bool = False
    seed: int = 0
    overwrite: bool = False
    avatar: Path | None = None  # None: the built-in idol
    quiet: bool = False
    gpu: GpuConfig = GpuConfig()
    encoders: int | None = None  # None: auto
    render_workers: int | None = None  # None: auto
    x264_preset: str = "veryfast"
    lipsync_model: LipsyncModel = "default"

    def request(self):
        """The RenderRequest this config asks for (sizes resolved, the avatar loaded and checked;
        app.render_job.check_output_safety / check_request check the rest)."""
        from app.render_job import RenderRequest
        from render.avatar_source import avatar_spec

        (width, height), render_size = self.gpu.sizes(self.size)
        g = self.gpu
        return RenderRequest(
            audio=self.audio,
            output=self.output,
            preset=self.preset,
            width=width,
            height=height,
            fps=self.fps,
            start_s=self.start_s,
            seconds=self.seconds,
            transparent=self.transparent,
            seed=self.seed,
            device=g.device,
            diffusion=g.diffusion,
            diffusion_random=g.diffusion_random,
            render_size=render_size,
            upscale=g.upscale,
            temporal=g.temporal,
            cuda_graphs=g.cuda_graphs,
            encoders=self.encoders,
            render_workers=self.render_workers,
            x264_preset=self.x264_preset,
            overwrite=self.overwrite,
            avatar=avatar_spec(self.avatar),
            lipsync_model=self.lipsync_model,
        )


class LiveConfig(Frozen):
    """`kagura live`. `preset` and `mic` are layered over live_app.json (the preset the app
    starts with; mic None = the default input)."""

    version: int = CONFIG_VERSION
    audio_file: Path | None = None
    preset: str = "studio"
    mic: str | int | None = None
    size: Size | None = None  # None: 960x540, or the render size × --upscale with GPU stages
    fps: int = Field(30, ge=1, le=240)
    quit_after: float | None = None
    screenshot: Path | None = None
    play_out: bool | None = None  # False: --no-play-out; None: the saved setting
    stage_window: bool = False
    avatar: Path | None = None
    gpu: LiveGpuConfig = LiveGpuConfig()


# ---------------------------------------------------------------------------------------------
# the layers


def _option(key: str) -> str:
    return "--" + key.replace("_", "-")


def _why(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return " ".join(str(err.get("msg", "invalid")).split())


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "…"


def layer(
    model: type[Frozen],
    *,
    flags: Mapping[str, Any],
    file: Mapping[str, Any] | None = None,
    file_name: str = "settings",
    parse: Mapping[str, Callable[[Any], Any]] | None = None,
    checks: Mapping[str, Callable[[Any], None]] | None = None,
    base: Mapping[str, Any] | None = None,
    notices: list[str] | None = None,
) -> Frozen:
    """defaults ← `base` ← `file` ← `flags`, as one frozen `model`.

    `base`: the command's own defaults, where they differ from the model's (`kagura demo`'s
    x264 preset). `file`: the settings file's values by field name; each is checked on its own
    (`parse[field]` first if any, which turns the file's text into the field's value, then its
    type and range, then `checks[field]` if any; either raises ValueError to refuse it) and a
    bad one keeps the default, with a line in `notices` naming the file, the field and why.
    `flags`: the options given on the command line (None = not given); a bad one raises
    UsageError naming the flag. (The file's own version and healing: app/live_settings.py.)"""
    notices = notices if notices is not None else []
    fields = model.model_fields
    values: dict[str, Any] = {k: v for k, v in (base or {}).items() if v is not None}
    for key, value in (file or {}).items():
        if key not in fields or value is None:
            continue
        info = fields[key]
        try:
            good = parse[key](value) if parse and key in parse else value
            good = TypeAdapter(info.annotation).validate_python(good)
            if checks and key in checks:
                checks[key](good)
        except (ValidationError, ValueError) as exc:
            why = _why(exc) if isinstance(exc, ValidationError) else " ".join(str(exc).split())
            default = values.get(key, info.default)
            notices.append(f"{file_name}: {key}={_short(value)} ({why}; using {default!r})")
            continue
        values[key] = good
    for key, value in flags.items():
        if value is not None:
            values[key] = value
    try:
        return model(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "?"
        given = values.get(key)
        raise UsageError(f"{_option(key)} {_short(given)}: {_why(exc)}") from None


# ---------------------------------------------------------------------------------------------
# from the command line


DIFFUSION_CHOICE = ("diffusion", "diffusion_random", "no_diffusion")  # one of them, or none


def _gpu_given(args: argparse.Namespace, device: str | None) -> dict[str, Any]:
    """The GPU flags given on the command line (None: not given), each checked on its own."""
    device = device or getattr(args, "device", None)
    if device is not None and device not in COMPUTE_DEVICES:
        raise UsageError(f"--device {device!r}: expected cpu or cuda")
    diffusion = getattr(args, "diffusion", None)
    diffusion_random = getattr(args, "diffusion_random", None)
    if getattr(args, "no_diffusion", False):
        diffusion = None
    if diffusion is not None and diffusion_random is not None:
        raise UsageError("--diffusion and --diffusion-random: give one of them, not both")
    if diffusion_random is not None and diffusion_random not in DIFFUSION_KINDS:
        raise UsageError(
            f"--diffusion-random {diffusion_random!r}: expected one of "
            + ", ".join(DIFFUSION_KINDS)
        )
    upscale = getattr(args, "upscale", None)
    if upscale is not None and upscale not in UPSCALES:
        raise UsageError(f"--upscale {upscale}: expected 1, 2, 3 or 4")
    diffusion_size = getattr(args, "diffusion_size", None)
    return {
        "device": device,
        "diffusion": diffusion,
        "diffusion_random": diffusion_random,
        "diffusion_size": (
            None if diffusion_size is None else parse_size(diffusion_size, "--diffusion-size")
        ),
        "upscale": upscale,
        "temporal": getattr(args, "temporal", None),
        "cuda_graphs": getattr(args, "cuda_graphs", None),
    }


def gpu_config(
    args: argparse.Namespace,
    device: str | None = None,
    *,
    default_model: bool = True,
    file: Mapping[str, Any] | None = None,
    **file_options: Any,
) -> GpuConfig:
    """The GpuConfig of `args`'s GPU flags (app/gpu_options.py) over `file`'s GpuConfig keys
    (`file_options`: layer()'s file_name, parse, checks, notices), --diffusion resolved last:
    Kagura's own model on cuda unless a diffusion choice says otherwise (`default_model=False`:
    no diffusion unless asked, even on cuda — `bench offline`'s rule, which times the chain it
    is told to). The diffusion choice is one: a flag for it (--diffusion, --diffusion-random,
    --no-diffusion) replaces the file's `diffusion` / `diffusion_random`; `diffusion = false`
    in the file is --no-diffusion."""
    flags = _gpu_given(args, device)
    file = dict(file or {})
    no_diffusion = bool(getattr(args, "no_diffusion", False))
    if any(getattr(args, key, None) for key in DIFFUSION_CHOICE):
        file.pop("diffusion", None)
        file.pop("diffusion_random", None)
    elif file.get("diffusion") is False:
        del file["diffusion"]
        no_diffusion = True
    notices = file_options.setdefault("notices", [])
    gpu = layer(GpuConfig, flags=flags, file=file, **file_options)
    if gpu.diffusion is not None and gpu.diffusion_random is not None:  # both from the file
        name = file_options.get("file_name", "settings")
        notices.append(
            f"{name}: diffusion and diffusion_random: give one of them, not both (using neither)"
        )
        gpu = gpu.model_copy(update={"diffusion": None, "diffusion_random": None})
    if default_model and gpu.device == "cuda" and not (no_diffusion or gpu.diffusion_on):
        gpu = gpu.model_copy(update={"diffusion": _kagura()})  # Kagura's own model on cuda
    return gpu


def gpu_flags(
    args: argparse.Namespace, device: str | None = None, *, default_model: bool = True
) -> dict[str, Any]:
    """The GPU flags of `args` as GpuConfig fields, defaults filled in, --diffusion resolved
    (no settings file: `kagura live` and the benches)."""
    return dict(gpu_config(args, device, default_model=default_model))


def live_gpu_config(args: argparse.Namespace, device: str | None = None) -> LiveGpuConfig:
    """GpuConfig's flags, the quality ladder's (--budget-ms, --no-ladder) and the live chain's
    (--render-process, --stream-batch)."""
    budget = getattr(args, "budget_ms", None)
    if budget is not None and not (budget > 0 and math.isfinite(budget)):
        raise UsageError(f"--budget-ms {budget:g}: expected a positive number of ms")
    return LiveGpuConfig(
        **gpu_flags(args, device),
        budget_ms=budget,
        adaptive=not getattr(args, "no_ladder", False),
        render_process=getattr(args, "render_process", True),
        stream_batch=getattr(args, "stream_batch", False),
        realtime_priority=getattr(args, "realtime_priority", True),
    )


def render_config(
    args: argparse.Namespace,
    *,
    audio: Path | None = None,
    output: Path | None = None,
    default_model: bool = True,
    settings: Any = None,
    base: Mapping[str, Any] | None = None,
    notices: list[str] | None = None,
) -> RenderConfig:
    """The RenderConfig of `kagura render`/`demo`'s parsed options (`audio`, `output`: instead
    of args.audio / args.output, e.g. the demo song and its default file; `default_model`: see
    gpu_config) over `settings` (an app.render_settings.RenderSettings, or None for none): a
    bad file value keeps its default with a line in `notices`; an option whose flag was not
    given (None in `args`) comes from the file, else `base` (the command's own defaults), else
    the model's default."""
    file: dict[str, Any] = {}
    options: dict[str, Any] = {"notices": notices if notices is not None else []}
    if settings is not None:
        file = dict(settings.values)
        options.update(file_name=settings.name, parse=settings.parse, checks=settings.checks)
    gpu_file = {k: file.pop(k) for k in list(file) if k in GpuConfig.model_fields}
    gpu = gpu_config(args, default_model=default_model, file=gpu_file, **options)
    size = getattr(args, "size", None)
    encoders, workers = getattr(args, "encoders", None), getattr(args, "render_workers", None)
    for key, given in (("encoders", encoders), ("render_workers", workers)):
        if given is not None:  # `--encoders auto` (None once parsed) still wins over the file
            file.pop(key, None)
    flags = {
        "audio": audio if audio is not None else args.audio,
        "output": output if output is not None else args.output,
        "preset": args.preset,
        "size": None if size is None else parse_size(size),
        "fps": args.fps,
        "start_s": args.start,
        "seconds": args.seconds,
        "transparent": args.transparent,
        "seed": args.seed,
        "overwrite": args.overwrite,
        "avatar": getattr(args, "avatar", None),
        "quiet": getattr(args, "quiet", None),
        "gpu": gpu,
        "encoders": None if encoders is None else parse_workers(encoders, "--encoders"),
        "render_workers": None if workers is None else parse_workers(workers, "--render-workers"),
        "x264_preset": args.x264_preset,
        "lipsync_model": getattr(args, "lipsync_model", None),
    }
    return layer(RenderConfig, flags=flags, file=file, base=base, **options)


MIC_NOTICE = "kagura live: --device {name!r} for the microphone is deprecated; use --mic {name!r}"


def split_device(device: str | None, mic: str | None) -> tuple[str, str | None]:
    """(compute device, microphone) from --device / --mic. --device is the compute device; the
    older spelling `--device MICROPHONE` still picks the microphone, with a one-line notice."""
    if device is None or device in COMPUTE_DEVICES:
        return device or "cpu", mic
    print(MIC_NOTICE.format(name=device), file=sys.stderr)
    return "cpu", mic or device


def live_config(
    args: argparse.Namespace,
    settings: Any = None,
    notices: list[str] | None = None,
) -> LiveConfig:
    """`kagura live`'s options over the live app's settings (an app.live_settings.Settings, or
    None for none): a remembered preset that no longer exists falls back to studio with a
    notice; a bad flag is a one-line UsageError. (Whether the preset loads is the caller's to
    check: a broken one is refused, as `render` refuses it.)"""
    compute, mic = split_device(getattr(args, "device", None), getattr(args, "mic", None))
    size = getattr(args, "size", None)
    file = None
    if settings is not None:
        file = {"preset": settings["preset"], "mic": settings["device"]}
    flags = {  # (getattr: `bench live --headless` has no --audio-file, --quit-after, ...)
        "audio_file": getattr(args, "audio_file", None),
        "preset": args.preset,
        "mic": mic,
        "size": None if size is None else parse_size(size),
        "fps": args.fps,
        "quit_after": getattr(args, "quit_after", None),
        "screenshot": getattr(args, "screenshot", None),
        "play_out": False if getattr(args, "no_play_out", False) else None,
        "stage_window": getattr(args, "stage_window", False),
        "avatar": getattr(args, "avatar", None),
        "gpu": live_gpu_config(args, compute),
    }
    name = getattr(settings, "path", None)
    return layer(
        LiveConfig,
        flags=flags,
        file=file,
        file_name=f"settings: {Path(name).name}" if name else "settings",
        checks={"preset": _usable_preset},
        notices=notices,
    )


def _usable_preset(name: str) -> None:
    """A remembered preset must still exist (one deleted since: the default instead)."""
    from presets.loader import available_names

    if name not in available_names():
        raise ValueError("no such preset")
