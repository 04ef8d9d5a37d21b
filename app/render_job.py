"""Wiring for an offline render: audio file → AvatarTrack → idol → stylize → file.

With the GPU stages asked for (`--diffusion`/`--diffusion-random`, `--upscale`, `--temporal`),
the chain is

    idol (render size, CPU) → [upload] → stylize → diffusion → temporal → upscale → [readback]
    → file (output size = render size × upscale)

Parallel offline work (`--render-workers M`, `--encoders N`; both "auto" by default): the idol
render becomes `render.pool.PooledRenderStage` (M processes rendering ahead from the
AvatarTrack, identical pixels and motion) and the MP4 encoder becomes
`pipeline.sinks.segmented.SegmentedVideoSink` (N libx264 processes on chunks of the video,
joined losslessly). "auto" keeps one of each on machines with fewer than 8 cores and for clips
under `PARALLEL_MIN_SECONDS`, so small machines render exactly as before.

The render size is the diffusion size when diffusion is on. With `--device cuda` the frames go
to the GPU once (pinned, asynchronous upload of image + motion right after the idol render) and
come back once (one readback per batch, before the encoder); on the CPU every stage runs in
place. The default (no GPU option) is exactly the plain chain.

Only assembly lives here; every step is a stage or function of audio/, render/ or pipeline/.

The functions other modules build on (`kagura render`, `bench offline`; farm/ uses only these):
`build_graph` (decode, analyse, assemble), `decode_for_render` (the audio as the render muxes
it), `assemble_graph` (the graph from an AvatarTrack), `diffusion_models`, the checks
`check_output_safety` / `check_request`, and `note_kept`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import (  # the option rules, one place for every command (app/config.py)
    DIFFUSION_KINDS,
    MAX_WORKERS,
    UPSCALES,
    GpuSwitches,
    check_lipsync_model_option,
    expect_fps,
    expect_seed,
    expect_x264_preset,
)
from app.errors import UsageError
from core.clock import frame_count
from core.stage import Context, spec
from core.trace import step
from pipeline.cpu_threads import share_cores_with_other_stages
from pipeline.device_io import ReadbackStage, UploadStage
from pipeline.graph import Graph
from pipeline.model_factory import load_diffusion_models, notice, upscale_stage
from pipeline.sources import TRACK_GIVES, track_frames

if TYPE_CHECKING:
    from pipeline.resident import ResidentChains

NO_CUDA = "CUDA is not available: torch sees no GPU; use --device cpu"
PARALLEL_MIN_SECONDS = 10.0  # "auto" stays at one encoder / one renderer for shorter clips


@dataclass(frozen=True)
class RenderRequest(GpuSwitches):
    audio: Path
    output: Path
    preset: str = "studio"
    width: int = 1280
    height: int = 720
    fps: int = 30
    start_s: float = 0.0
    seconds: float | None = None
    transparent: bool = False
    seed: int = 0
    # the GPU stages (all off by default: the plain CPU chain)
    device: str = "cpu"
    diffusion: Path | str | None = None  # a diffusers checkpoint folder, or "kagura" (shipped)
    diffusion_random: str | None = None  # "sd-turbo" | "tiny": RANDOM weights, timing only
    render_size: tuple[int, int] | None = None  # None: (width, height) / upscale
    upscale: int = 1
    temporal: bool | None = None  # None: on when diffusion is on
    cuda_graphs: bool | None = None  # None: on for cuda
    # parallel offline work: None = auto (see resolve_workers)
    encoders: int | None = None
    render_workers: int | None = None
    x264_preset: str = "veryfast"
    overwrite: bool = False  # replace an existing output (--overwrite / -y)
    # the avatar: None = the built-in idol, else an AvatarSpec or a path (render/avatar_source)
    avatar: object = None
    lipsync_model: str = "default"  # a key of audio.vowel_net.LIPSYNC_MODELS

    # diffusion_on, temporal_on, graphs_on: GpuSwitches (app/config.py), as on GpuConfig

    @property
    def gpu_stages(self) -> bool:
        """Anything beyond the plain idol → stylize → file chain."""
        return self.device != "cpu" or self.diffusion_on or self.upscale != 1 or self.temporal_on

    def sizes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(render size, output size); render × upscale must equal the output."""
        out = (self.width, self.height)
        render = self.render_size or (self.width // self.upscale, self.height // self.upscale)
        return render, out


def check_workers(req: RenderRequest) -> None:
    for option, value in (("--encoders", req.encoders), ("--render-workers", req.render_workers)):
        if value is not None and not (isinstance(value, int) and 1 <= value <= MAX_WORKERS):
            raise UsageError(
                f"{option} {value!r}: expected auto or a whole number from 1 to {MAX_WORKERS}"
            )
    if req.encoders is not None and req.encoders > 1 and req.output.suffix.lower() != ".mp4":
        raise UsageError(
            f"--encoders {req.encoders}: parallel encoding writes MP4 (H.264 + AAC) only; "
            f"use --encoders 1 for {req.output.name}"
        )
    try:
        expect_x264_preset(req.x264_preset)
    except ValueError as exc:
        raise UsageError(f"--x264-preset {req.x264_preset!r}: {exc}") from None


def resolve_workers(req: RenderRequest, frames: int) -> tuple[int, int]:
    """(encoders, render workers) for a render of `frames` frames; explicit values win.

    auto: one of each below 8 usable cores or for clips under PARALLEL_MIN_SECONDS (the spawn of
    the worker processes costs about a second); else `auto_encoders` (a quarter of the cores at
    1080p, scaled by frame area, ≤ 8; MP4 only) and `auto_render_workers` (a quarter of the
    cores, 2..8).
    """
    from core.workers import usable_cores
    from pipeline.sinks.segmented import auto_encoders
    from render.pool import auto_render_workers

    short = frames < PARALLEL_MIN_SECONDS * req.fps
    cores = usable_cores()
    encoders = req.encoders
    if encoders is None:
        mp4 = req.output.suffix.lower() == ".mp4"
        encoders = 1 if short or not mp4 else auto_encoders(req.width, req.height, cores)
    workers = req.render_workers
    if workers is None:
        render, _ = req.sizes()
        workers = 1 if short else auto_render_workers(*render, cores)
    return encoders, workers


def check_request(req: RenderRequest, gpu: bool = True) -> None:
    """Fail fast, before any decoding or rendering, on arguments that cannot work. `gpu=False`:
    all but the GPU options (`check_gpu_options`, which imports torch on cuda)."""
    from pipeline.sinks.video_file import check_output_path

    try:
        check_output_path(req.output, req.transparent)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_seed(req.seed)
    check_lipsync_model_option(req.lipsync_model)
    try:
        expect_fps(req.fps)
    except ValueError as exc:
        raise UsageError(f"--fps {req.fps}: {exc}") from None
    if req.start_s < 0:
        raise UsageError(f"--start {req.start_s}: expected a time in seconds >= 0")
    if req.seconds is not None and req.seconds <= 0:
        raise UsageError(f"--seconds {req.seconds}: expected a duration in seconds > 0")
    if gpu:
        check_gpu_options(req)
    check_workers(req)
    if not req.output.parent.is_dir():
        try:
            req.output.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"{req.output}: cannot create the folder {req.output.parent}: {exc.strerror or exc}"
            ) from None


def request_inputs(req: RenderRequest) -> list[Path]:
    """The files a render reads (which its output must never be)."""
    inputs = [Path(req.audio)]
    for extra in (req.preset, req.diffusion):
        if isinstance(extra, (str, Path)) and extra != "kagura" and Path(extra).exists():
            inputs.append(Path(extra))
    return inputs


def check_output_safety(req: RenderRequest) -> None:
    """The output rules of `pipeline.sinks.output`, before any decoding: never an input, never a
    directory, an existing file only with --overwrite. (The user's commands call it; the
    benchmarks, which write their own scratch files, do not.)"""
    from pipeline.sinks.output import check_output

    check_output(req.output, request_inputs(req), overwrite=req.overwrite)


def check_seed(seed: int) -> None:
    try:
        expect_seed(seed)
    except ValueError as exc:
        raise UsageError(f"--seed {seed}: {exc}") from None


def kept_output(graph: Graph) -> Path | None:
    """Where the sink of a stopped render kept the frames it had written (None: nothing)."""
    return getattr(graph.sink, "kept", None)


def note_kept(exc: BaseException, graph: Graph) -> None:
    """Mark `exc` with the kept file, for the one error line (`app.errors.report`)."""
    kept = kept_output(graph)
    if kept is not None:
        with contextlib.suppress(AttributeError):  # an exception type without a __dict__
            exc.kagura_kept = kept


def run_graph(graph: Graph, ctx: Context, on_frame: Callable) -> str | None:
    """Run a render's graph, its first and last frames time-stamped (core.trace.FrameMarks).
    None once the file is written; the one line to print (exit 1) when a render or encoder
    process died, naming the frames kept. Any other error (Ctrl+C, SIGTERM, disk full, ...)
    is raised, marked with where the frames are (`note_kept`)."""
    from core.trace import FrameMarks
    from core.workers import WorkerProcessError

    frames = FrameMarks(on_frame)
    try:
        graph.run(ctx, on_frame=frames)
        frames.close()
    except WorkerProcessError as exc:
        kept = kept_output(graph)
        tail = f"; the frames written are kept in {kept}" if kept else ""
        return f"kagura: error: {' '.join(str(exc).split())}{tail}"
    except BaseException as exc:
        note_kept(exc, graph)
        raise
    return None


def _kagura() -> str:
    """What `--diffusion kagura` names (torch-free: `kagura --help`, the argument checks and
    the audio analysis process's start must not wait for torch)."""
    from pipeline.model_factory import KAGURA

    return KAGURA


def check_gpu_choice(
    device: str, diffusion: Path | str | None, diffusion_random: str | None, upscale: int
) -> None:
    """--device, --diffusion / --diffusion-random and --upscale, the same for `kagura render`
    and `kagura live` (app/live_gpu.py), before any model is loaded."""
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device!r}: expected cpu or cuda")
    if diffusion is not None and diffusion_random is not None:
        raise UsageError("--diffusion and --diffusion-random: give one of them, not both")
    if diffusion_random is not None and diffusion_random not in DIFFUSION_KINDS:
        raise UsageError(
            f"--diffusion-random {diffusion_random!r}: expected one of "
            + ", ".join(DIFFUSION_KINDS)
        )
    if upscale not in UPSCALES:
        raise UsageError(f"--upscale {upscale}: expected 1, 2, 3 or 4")
    if device == "cuda":
        import torch

        step("torch imported")
        if not torch.cuda.is_available():
            raise UsageError(NO_CUDA)
        _start_cuda_init(torch)
    if diffusion is not None and diffusion != _kagura():
        from pipeline.diffusion import ModelError

        if not Path(diffusion).is_dir():
            what = "is a file, not a folder" if Path(diffusion).exists() else "not found"
            raise ModelError(
                diffusion,
                f"{what} (expected a diffusers checkpoint folder with unet/, vae/, ...)",
            )


def _start_cuda_init(torch) -> None:
    """Create the CUDA context on a thread of its own: the driver's part of it runs without the
    GIL, beside this thread's imports and decoding; the first CUDA call here waits for it
    (torch's lazy-init lock). A failure is left for that call to raise."""

    def init() -> None:
        with contextlib.suppress(Exception):
            torch.cuda.init()

    threading.Thread(target=init, name="kagura-cuda-init", daemon=True).start()


def check_gpu_options(req: RenderRequest) -> None:
    """The GPU options, checked before any decoding or model loading."""
    check_gpu_choice(req.device, req.diffusion, req.diffusion_random, req.upscale)
    if req.gpu_stages:
        render, out = req.sizes()
        if (render[0] * req.upscale, render[1] * req.upscale) != out:
            raise UsageError(
                f"--size {out[0]}x{out[1]}: must be the render size {render[0]}x{render[1]} × "
                f"--upscale {req.upscale}"
            )


def diffusion_models(req: RenderRequest, on_notice: Callable[[str], None] | None = None):
    """The models `req` asks for (pipeline.model_factory.load_diffusion_models); None when
    Kagura's own weights cannot be loaded and the render goes on with the procedural look."""
    return load_diffusion_models(req.diffusion, req.diffusion_random, req.device, on_notice)


# the names of `gpu_stages`' stages, in the order a frame runs through them (each is there only
# when asked for): what the benches report per GPU stage
GPU_STAGE_NAMES = ("upload", "stylize", "diffusion", "temporal", "upscale", "readback")


def gpu_stages(req: RenderRequest, preset, models, i420: bool = False) -> list:
    """upload → stylize → diffusion → temporal → upscale → readback, each only when asked.
    `i420`: the readback hands the sink I420 planes instead of RGBA (see ReadbackStage)."""
    from pipeline.stylize import StylizeStage

    render, out = req.sizes()
    cuda = req.device == "cuda"
    stages: list = []
    if cuda:
        stages.append(UploadStage(render, req.device))
    stages.append(
        StylizeStage(preset, *render, transparent=req.transparent, for_model=models is not None)
    )
    if models is not None:
        from pipeline.diffusion import DiffusionStage

        # Offline: picture and audio must line up frame for frame. The stream batch lags the
        # output by steps - 1 frames, so it is used only for 1-step presets (no lag, the default
        # presets); a preset asking more steps runs them one after another per frame
        # (stream_batch=False: no lag, steps × the UNet cost).
        stages.append(
            DiffusionStage(
                models,
                preset,
                *render,
                device=req.device,
                dtype="float16",
                stream_batch=preset.diffusion.steps == 1,
                cuda_graph=req.graphs_on,
                capture_steps=(preset.diffusion.steps,),  # one preset for the whole song
            )
        )
    if req.temporal_on:
        from pipeline.temporal import TemporalStage

        stages.append(
            TemporalStage.for_preset(
                preset, device=req.device, cuda_graph=req.graphs_on, graph_sizes=[render]
            )
        )
    if req.upscale != 1:
        stages.append(
            upscale_stage(
                req.upscale,
                req.device,
                render,
                cuda_graph=req.graphs_on,
                random_ok=req.diffusion_random is not None,
            )
        )
    if cuda:
        stages.append(ReadbackStage(out, req.device, i420=i420))
    return stages


# the sample rates AAC (MP4) can carry; Opus (WebM) gets 48 kHz through the sink's resampler
AAC_RATES = (
    7350,
    8000,
    11025,
    12000,
    16000,
    22050,
    24000,
    32000,
    44100,
    48000,
    64000,
    88200,
    96000,
)
FALLBACK_RATE = 48_000


def encodable_rate(clip):
    """`clip`, resampled to 48 kHz when its rate is one the audio encoders refuse (1 Hz,
    7 kHz, 192 kHz, 768 kHz, ...), with a notice saying so."""
    if clip.sample_rate in AAC_RATES:
        return clip
    notice(
        f"{clip.path}: {clip.sample_rate} Hz audio is resampled to {FALLBACK_RATE} Hz "
        "(the rates MP4/AAC carry are 7350..96000 Hz in fixed steps)"
    )
    return clip.resampled(FALLBACK_RATE)


def decode_for_render(req: RenderRequest):
    """`req`'s audio as the render muxes it: its start/seconds cut, more than 2 channels
    downmixed to stereo (what the video files carry), a rate the encoders refuse resampled."""
    from audio.decode import decode_audio

    clip = decode_audio(req.audio, start_s=req.start_s, seconds=req.seconds, max_channels=2)
    return encodable_rate(clip)


class TrackInProgress:
    """`req`'s audio, decoded now, and its AvatarTrack being made elsewhere: `analyze` (same
    arguments as `analyze_clip`; the CLI's runs in its own process, app/early_analysis.py) is
    handed the clip at once, so it works on another core while this process imports torch,
    loads the model and builds the stages (a thread here only waits on the pipe)."""

    def __init__(self, req: RenderRequest, analyze: Callable) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.clip = decode_for_render(req)
        step("decoded")
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="analysis")
        self._pending = self._pool.submit(
            analyze, self.clip, req.fps, seed=req.seed, lipsync_model=req.lipsync_model
        )

    def track(self):
        try:
            return self._pending.result()
        finally:
            self._pool.shutdown(wait=False)

    def drop(self) -> None:
        """Not waiting for it (a bad preset or checkpoint): the caller ends the analysis
        process, which frees the thread."""
        self._pool.shutdown(wait=False)

    def pending(self, fps: int) -> PendingTrack:
        """The track as the graph can take it before it exists (`PendingTrack`)."""
        return PendingTrack(self, frame_count(self.clip.num_samples, self.clip.sample_rate, fps))


class PendingTrack:
    """The AvatarTrack a `TrackInProgress` is still making, handed to the graph before it is
    done, so every stage sets up (models to the GPU, graph captures, encoders) while the audio
    is analysed: a long song's analysis outlasts the set-up. Its length is the clip's frame
    count (what the analysis makes: `core.clock.frame_count`); the first read of a frame
    (the graph's source thread, at the first frame) waits for the track."""

    def __init__(self, early: TrackInProgress, frames: int) -> None:
        self._early, self._frames = early, frames
        self._track: Any = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._frames

    def resolve(self) -> Any:
        with self._lock:  # the source thread and a render pool's threads may ask at once
            if self._track is None:
                track = self._early.track()
                step("audio analysed")
                if len(track) != self._frames:
                    raise RuntimeError(
                        f"the audio analysis made {len(track)} frames, not {self._frames}"
                    )
                self._track = track
            return self._track

    @property
    def pts_ns(self) -> Any:
        return self.resolve().pts_ns

    def __getitem__(self, i: int) -> Any:
        return self.resolve()[i]


def build_graph(
    req: RenderRequest,
    sink_factory: Callable | None = None,
    analyze: Callable | None = None,
    early: TrackInProgress | None = None,
    resident: ResidentChains | None = None,
) -> tuple[Graph, Context, int]:
    """Decode, analyse and assemble; returns the graph, its context and the frame count.
    `analyze`: in place of `analyze_clip`, same arguments; `early`: the decoding and the
    analysis already under way (`TrackInProgress`). With either, the graph's source waits for
    the analysis (`PendingTrack`): whoever runs the analysis keeps it until the graph ran.
    `resident`: the models and GPU chains a long-lived process keeps (`kagura serve`)."""
    from presets.loader import load_preset

    def models_for() -> Any:
        if resident is None:
            return diffusion_models(req)
        key = (str(req.diffusion), req.diffusion_random, req.device)
        return resident.models(key, lambda: diffusion_models(req))

    if early is None and analyze is not None:
        early = TrackInProgress(req, analyze)
    if early is not None:
        clip = early.clip
        try:
            share_cores_with_other_stages()
            preset = load_preset(req.preset)
            models = models_for() if req.diffusion_on else None
            step("models loaded")
        except BaseException:
            early.drop()
            raise
        track = early.pending(req.fps)  # waited for at the first frame, after the set-up
    else:
        share_cores_with_other_stages()
        preset = load_preset(req.preset)
        # the checkpoint is loaded before the audio is decoded: a foreign folder fails first
        models = models_for() if req.diffusion_on else None
        clip = decode_for_render(req)
        from audio.analysis import analyze_clip

        track = analyze_clip(clip, req.fps, seed=req.seed, lipsync_model=req.lipsync_model)
    sink = sink_factory(req, clip) if sink_factory is not None else None
    return assemble_graph(
        req, preset, models, track, clip.samples, clip.sample_rate, sink, resident=resident
    )


def chain_shape(req: RenderRequest, preset, models, i420: bool) -> tuple:
    """Everything `gpu_stages` builds its parts from: two renders of one shape can run
    through the same set-up chain (pipeline/resident.py). The preset by its whole content (a
    user's preset file may change between two renders)."""
    return (
        req.device,
        req.sizes(),
        str(req.diffusion),
        req.diffusion_random,
        id(models),
        req.upscale,
        req.temporal_on,
        req.graphs_on,
        req.transparent,
        i420,
        preset.model_dump_json(),
    )


def assemble_graph(
    req: RenderRequest,
    preset,
    models,
    track,
    audio,
    sample_rate: int,
    sink=None,
    resident: ResidentChains | None = None,
) -> tuple[Graph, Context, int]:
    """The graph `kagura render` runs, from an AvatarTrack and the audio to mux (float32
    (channels, n)). Needs neither librosa nor the audio file: `kagura bench offline` calls it
    with a synthetic track. `resident`: GPU chains kept set up between renders, reused when
    this render's shape (`chain_shape`) is one of them."""
    from pipeline.stylize import StylizeStage
    from render.stage import RenderStage, drop_unread_motion

    w, h = req.width, req.height
    encoders, render_workers = resolve_workers(req, len(track))
    render, _ = req.sizes() if req.gpu_stages else ((w, h), (w, h))
    if render_workers > 1:
        from render.pool import PooledRenderStage

        first = PooledRenderStage(
            track, *render, preset.palette, preset.line, workers=render_workers, avatar=req.avatar
        )
    else:
        first = RenderStage(*render, preset.palette, preset.line, avatar=req.avatar)
    # the GPU hands the video file I420 planes when it is opaque (MP4, or WebM without alpha:
    # both encode yuv420p); a transparent WebM and a caller's own sink get RGBA
    i420 = req.device == "cuda" and not req.transparent and sink is None
    if req.gpu_stages:
        from pipeline.gpu_chain import chain_nodes

        def parts() -> list:
            return gpu_stages(req, preset, models, i420=i420)

        # the GPU chain as one node, issued as live issues it (pipeline/gpu_chain.py)
        if resident is None:
            stages = [first, *chain_nodes(parts(), req.device)]
        else:
            shape = chain_shape(req, preset, models, i420)
            stages = [first, *resident.nodes(shape, parts, req.device)]
    else:
        stages = [first, StylizeStage(preset, w, h, transparent=req.transparent)]
    # the CPU chain's own file sink: a look that makes I420 itself hands the encoder those
    # planes (no RGBA frame packed, no colour conversion in the encoder)
    i420 = i420 or (sink is None and not req.gpu_stages and stages[-1].give_i420())
    if sink is None:
        if encoders > 1:
            from pipeline.sinks.segmented import SegmentedVideoSink

            sink = SegmentedVideoSink(
                req.output,
                w,
                h,
                req.fps,
                audio,
                sample_rate,
                encoders=encoders,
                x264_preset=req.x264_preset,
            )
        else:
            from pipeline.sinks.video_file import VideoFileSink

            sink = VideoFileSink(
                req.output,
                w,
                h,
                req.fps,
                audio=audio,
                sample_rate=sample_rate,
                transparent=req.transparent,
                x264_preset=req.x264_preset,
            )
        if req.gpu_stages or i420:  # the encoder reads host memory
            picture = "i420" if i420 else "image"
            sink.needs = spec(picture, size=(w, h), device="cpu")
    step("stages built")
    drop_unread_motion(first, [*stages[1:], sink])  # the CPU path: no motion vectors drawn
    extras = {"device": req.device} if req.device != "cpu" else {}
    ctx = Context(w, h, req.fps, sample_rate, extras=extras)
    return Graph(track_frames(track), TRACK_GIVES, stages, sink), ctx, len(track)
