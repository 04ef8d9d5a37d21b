"""The temporal alignment stage: stylized history warped by the renderer's exact motion vectors.

    TemporalStage(blend=0.7, device="cpu", *, alpha_tol=0.25, color_tol=0.35,
                  interp="bicubic", clamp_margin=0.0, smooth=3, edge_tol=0.15, guard=4,
                  tolerance=0.0, gate=3, moving_blend=None, moving_reach=8, max_batch=4,
                  cuda_graph=False, graph_sizes=())
    TemporalStage.for_preset(preset, device, **kw): blend, moving_blend, guard and tolerance
        from the preset's [temporal] section (what render, live and the model's evaluation
        use); use_preset(p) switches them on a running stage.
        name "temporal", needs spec("image", "motion"), gives spec("image", device=device)
        process_batch(frames): frame by frame, in order (frame i blends with frame i-1's
            *output*, also inside one batch); images stay on `device`.
        set_enabled(on): refinement on/off (the quality ladder); off drops the history and
            passes images through unchanged (only moved to `device`), at no cost beyond that.
        reset(): forget the history (scene cut, preset switch). Also done automatically when
            the frame size changes or the frame index does not follow the last one (a dropped
            frame: its motion vectors no longer describe the step from the history).
        capture(sizes): with cuda_graph on a CUDA device, capture the blend for each (w, h)
            (checked against eager, pipeline.accel.GraphCache); setup() captures
            `graph_sizes`; a frame of another size is captured when it first comes (logged).

    warp(prev, motion) -> (warped, inside)      backward warp, see below
    flicker(frames, motions) -> float           mean |frame - warped predecessor| (0..255)
    sharpness(frames) -> float                  mean gradient magnitude of luminance (0..255)
    laplacian_rms(frames) -> float              RMS of the luminance Laplacian (0..255)
    ghosting(frames, references, motions) -> float
                                                mean |frame - reference| beside moving edges

Method. `Frame.motion[p]` says the surface point under pixel p was at p - motion[p] one frame
ago, so the previous output is sampled there (`grid_sample`, pixel centres at i + 0.5,
`align_corners=False`) and mixed with the current stylized frame:

    out = cur + fix,   fix = w * (clamp(warped) - cur), box-smoothed on the current frame's edges
    w = blend * inside * agree_alpha * agree_colour * away_from_part_boundaries

`inside` is 0 where the source point lies outside the previous frame; `agree_alpha` falls from
1 to 0 as |warped alpha - current alpha| grows from alpha_tol/2 to alpha_tol (disocclusion: the
silhouette uncovered or covered something); `agree_colour` does the same for the largest RGB
difference against color_tol (shape changes *inside* a part that are not motion — blinks, mouth
shapes — would otherwise leave ghosts; stylizer flicker is far below that tolerance). There the
current frame is used alone.

Neighbourhood clamp. Before the blend the warped history is clamped, channel by channel, to the
range the *current* frame spans in the 3x3 pixels around each pixel, widened by `clamp_margin`
(the colour-box clamp of temporal anti-aliasing; None: no clamp). Where the motion vectors
miss — a thin hair strand whose spring bends it inside its part, part boundaries that the 4x4
part-ID blocks round off, a picture that lags its vectors — the history holds a line where the
current frame has none; unclamped, the 0.7 blend kept 0.7, 0.49, 0.34 ... of that line for
frames: parallel echo lines beside every moving edge (the ghost trails). A history colour the
current neighbourhood cannot explain is pulled to the nearest colour it can, so a stale line
disappears within one frame. A margin would let low-amplitude flicker (a stylizer's colour
jitter of a few levels) be averaged a little more, but on the model's painting it let a faint
echo through beside every moving edge — the ghosting measure rose above the stage switched off
— so the default is none ("The picture" in docs/BENCHMARKS.md has the comparison).

Agreement gate (`tolerance` > 0, levels of 0..255). The clamp above treats every pixel alike:
on flat ground, where a model's flicker lives, the current 3x3 range is a few levels wide, so
the history is pulled almost onto the current frame and little flicker is averaged; at a
misplaced edge the range is wide, so part of the wrong history gets through. With a tolerance
the weight depends on how well the warped history agrees with the current frame: `agree` falls
from 1 to 0 as the largest RGB difference in the 3x3 neighbourhood (`gate`) grows from
tolerance/2 to tolerance; the weight is multiplied by it and the clamp is widened by
agree * tolerance. History that differs by what the model's frame-to-frame noise explains is
averaged in full; history that differs by more (a line the current frame has elsewhere, a
shading the vectors do not carry) is not used at all instead of being pulled into range.
Measured on the model's painting ("The temporal stage's agreement gate" in docs/BENCHMARKS.md),
it trades flicker for ghosting like every other weight does and does not beat the exact clamp's
trade on any preset, so no shipped preset sets it (0: the stage as before).

Still and moving pixels (`moving_blend`). Echo lines can only appear where something moves;
a still ground (the background, a part at rest) can average more of the model's flicker. With
`moving_blend` set, pixels within `moving_reach` px of a pixel that moved half a pixel or more
take that weight and the others take `blend` (the weights of temporal anti-aliasing that lower
the history's share with the motion). None: `blend` everywhere.

Part boundaries. The renderer's vectors are rigid per part and blocky (4x4) at part
boundaries, so within `guard` pixels of a jump in the motion field (more than half a pixel
between neighbours) the history is not used at all: that is where it lands in the wrong part.

Detail from the current frame. On the current frame's edges (its 3x3 colour range wider than
`edge_tol`) the correction w * (history - current) is smoothed by a `smooth` x `smooth` box
(1: never smoothed) before it is added: what the history fixes is flicker of colour and
shading, which is smooth; the lines, eyes and highlights come from the current frame as it is.
Elsewhere the correction is added at full resolution, so grain flicker is averaged too.
Resampling the history every frame softens its edges (bicubic at fractional offsets); added at
full resolution there, that history cost the idol's edges a part of their Laplacian energy
(figures in docs/BENCHMARKS.md, "The picture").

Everything is premultiplied RGBA in float32 0..1; the history is kept in float32 (no 8-bit
rounding accumulates), the output is rounded to uint8 with 0 <= rgb <= alpha. The history is resampled every frame, so the kernel matters: bilinear blurs
it cumulatively (an unstylized 640x360 clip lost 12 % of its gradient through the stage at
blend 0.7), bicubic keeps it (-1.6 %), hence the default.

Cost (docs/BENCHMARKS.md, "Temporal alignment: flicker and cost" and "Where a frame's time
goes"): launch-bound (some fifty small kernels a frame with the conversions in and out), not
bandwidth-bound: issued eagerly, the live frame thread spent longer issuing this stage than any
other. With `cuda_graph` the conversions and the blend of a frame are one CUDA graph per frame
size (three copies in, one replay, one copy out). The look's history weights are device
scalars the graph reads, so a preset switch needs no new capture; a change of the guard or the
tolerance (the computation's shape) drops the graphs, which are captured again on first use.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from core.frame import Frame
from core.stage import BaseStage, Context, spec
from pipeline.accel.graphs import GraphCache

_GRIDS: dict[tuple[int, int, str], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _pixel_grid(h: int, w: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(pixel centres float (1, H, W, 2) at i + 0.5, the frame's (w, h), the (2 / w, 2 / h)
    that maps a position to grid_sample's -1..1), cached per size and device: `warp` runs every
    frame, and each operation it saves is one kernel launch less on the live frame thread."""
    key = (h, w, str(device))
    g = _GRIDS.get(key)
    if g is None:
        xs = torch.arange(w, dtype=torch.float32, device=device).add_(0.5)
        ys = torch.arange(h, dtype=torch.float32, device=device).add_(0.5)
        centres = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).unsqueeze(0)
        # filled on the device, not copied from a host list (that copy would wait for the GPU)
        size, scale = (
            torch.stack([torch.full((), v, dtype=torch.float32, device=device) for v in pair])
            for pair in ((float(w), float(h)), (2.0 / w, 2.0 / h))
        )
        g = _GRIDS[key] = (centres, size, scale)
        if len(_GRIDS) > 16:
            _GRIDS.pop(next(iter(_GRIDS)))
    return g


def warp(
    prev: torch.Tensor, motion: torch.Tensor, mode: str = "bilinear"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backward-warp `prev` float (B, C, H, W) onto the current frame.

    motion float (B, H, W, 2) or (H, W, 2), (x, y) pixels: pixel p samples `prev` at
    p - motion[p] (`mode` "bilinear" or "bicubic", edge pixels repeated). Returns (warped (B, C, H, W),
    inside float (B, 1, H, W): 1 where the source point lies within the previous frame)."""
    if motion.ndim == 3:
        motion = motion.unsqueeze(0)
    b, _, h, w = prev.shape
    motion = motion.to(prev.device, torch.float32)
    centres, size, scale = _pixel_grid(h, w, prev.device)
    src = centres - motion  # (B, H, W, 2) source positions, pixel centres at i + 0.5
    inside = ((src >= 0) & (src <= size)).all(dim=-1).unsqueeze(1).to(prev.dtype)
    grid = src.mul_(scale).sub_(1.0)
    if grid.shape[0] != b:
        grid = grid.expand(b, -1, -1, -1)
    warped = F.grid_sample(prev, grid, mode=mode, padding_mode="border", align_corners=False)
    return warped, inside


def _near_motion_jumps(motion: torch.Tensor, radius: int, batch: int) -> torch.Tensor:
    """float (B, 1, H, W): 1 within `radius` px of a jump of more than half a pixel between
    neighbouring motion vectors (a part boundary), else 0."""
    m = (motion if motion.ndim == 4 else motion.unsqueeze(0)).permute(0, 3, 1, 2).float()
    dx = F.pad((m[..., :, 1:] - m[..., :, :-1]).abs().amax(1, keepdim=True), (0, 1, 0, 0))
    dy = F.pad((m[..., 1:, :] - m[..., :-1, :]).abs().amax(1, keepdim=True), (0, 0, 0, 1))
    jumps = ((dx + dy) > 0.5).float()
    near = F.max_pool2d(jumps, 2 * radius + 1, stride=1, padding=radius)
    return near.expand(batch, -1, -1, -1) if near.shape[0] != batch else near


def _near_moving(motion: torch.Tensor, reach: int, batch: int) -> torch.Tensor:
    """bool (B, 1, H, W): within `reach` px of a pixel that moved half a pixel or more."""
    m = motion if motion.ndim == 4 else motion.unsqueeze(0)
    speed = m.float().norm(dim=-1).unsqueeze(1)  # px per frame
    if reach:  # the fastest within reach (a square max is two 1-D ones): fewer kernels to launch
        k = 2 * reach + 1
        speed = F.max_pool2d(speed, (1, k), stride=1, padding=(0, reach))
        speed = F.max_pool2d(speed, (k, 1), stride=1, padding=(reach, 0))
    near = speed >= 0.5
    return near.expand(batch, -1, -1, -1) if near.shape[0] != batch else near


def _ramp(diff: torch.Tensor, tol: float) -> torch.Tensor:
    """1 below tol/2, 0 above tol, linear between."""
    return ((tol - diff) * (2.0 / tol)).clamp_(0.0, 1.0)


def _to_float(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """uint8 (H, W, 4) or (B, H, W, 4) -> float32 (B, 4, H, W) in 0..1 on `device`."""
    if images.ndim == 3:
        images = images.unsqueeze(0)
    x = images.to(device, non_blocking=True).permute(0, 3, 1, 2)
    return x.float().div_(255.0) if x.dtype == torch.uint8 else x.float()


def _to_u8(x: torch.Tensor) -> torch.Tensor:
    """float (B, 4, H, W) premultiplied 0..1 -> uint8 (B, H, W, 4) with 0 <= rgb <= alpha."""
    y = x.clamp(0.0, 1.0)  # alpha <= 1, so min(rgb clamped to 0..1, alpha) = min(rgb >= 0, alpha)
    torch.minimum(y[:, :3], y[:, 3:], out=y[:, :3])
    y.mul_(255.0).add_(0.5).clamp_(0.0, 255.0)
    return y.to(torch.uint8).permute(0, 2, 3, 1).contiguous()


class TemporalStage(BaseStage):
    name = "temporal"
    needs = spec("image", "motion")
    gives = spec("image")

    def __init__(
        self,
        blend: float = 0.7,
        device: str = "cpu",
        *,
        alpha_tol: float = 0.25,
        color_tol: float | None = 0.35,
        interp: str = "bicubic",
        clamp_margin: float | None = 0.0,
        smooth: int = 3,
        edge_tol: float = 0.15,
        guard: int = 4,
        tolerance: float = 0.0,
        gate: int = 3,
        moving_blend: float | None = None,
        moving_reach: int = 8,
        max_batch: int = 4,
        cuda_graph: bool = False,
        graph_sizes: Sequence[tuple[int, int]] = (),
    ):
        if not 0.0 <= blend < 1.0:
            raise ValueError(f"temporal: blend (history weight) must be in [0, 1), got {blend}")
        if not 0.0 < alpha_tol <= 1.0:
            raise ValueError(f"temporal: alpha_tol must be in (0, 1], got {alpha_tol}")
        if color_tol is not None and not 0.0 < color_tol <= 1.0:
            raise ValueError(f"temporal: color_tol must be in (0, 1] or None, got {color_tol}")
        if interp not in ("bilinear", "bicubic"):
            raise ValueError(f"temporal: interp must be 'bilinear' or 'bicubic', got {interp!r}")
        self.interp = interp
        if clamp_margin is not None and not 0.0 <= clamp_margin <= 1.0:
            raise ValueError(
                f"temporal: clamp_margin must be in [0, 1] or None, got {clamp_margin}"
            )
        self.clamp_margin = clamp_margin
        if smooth < 1 or smooth % 2 == 0:
            raise ValueError(f"temporal: smooth must be an odd box size >= 1, got {smooth}")
        self.smooth = int(smooth)
        self.edge_tol, self.guard = float(edge_tol), max(0, int(guard))
        if not 0.0 <= tolerance <= 64.0:
            raise ValueError(f"temporal: tolerance must be in [0, 64] levels, got {tolerance}")
        if gate < 1 or gate % 2 == 0:
            raise ValueError(f"temporal: gate must be an odd window size >= 1, got {gate}")
        self.tolerance, self.gate = float(tolerance), int(gate)
        if moving_blend is not None and not 0.0 <= moving_blend < 1.0:
            raise ValueError(
                f"temporal: moving_blend must be in [0, 1) or None, got {moving_blend}"
            )
        if not 0 <= moving_reach <= 32:
            raise ValueError(f"temporal: moving_reach must be in [0, 32] px, got {moving_reach}")
        self.moving_blend, self.moving_reach = moving_blend, int(moving_reach)
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"temporal: device must be 'cpu' or 'cuda', got {device!r}")
        self.blend, self.alpha_tol, self.color_tol = float(blend), float(alpha_tol), color_tol
        self.max_batch = max(1, int(max_batch))
        self.gives = spec("image", device=self.device.type)
        self.enabled = True  # the quality ladder may switch refinement off (history is reset)
        self.resets = 0  # how many times the history was dropped (diagnostics)
        self._history: torch.Tensor | None = None  # float32 (1, 4, H, W) premultiplied
        self._last_index: int | None = None
        self.cuda_graph = bool(cuda_graph) and self.device.type == "cuda"
        self.graph_sizes = [tuple(s) for s in graph_sizes]  # captured by setup()
        self._graphs: GraphCache | None = None
        self._captured: set[tuple[int, int]] = set()  # (w, h) the current GraphCache holds
        # warp's pixel grid of each graphed size: a graph reads it by address, and warp's own
        # cache keeps only the latest sizes
        self._grids: dict[tuple[int, int], tuple[torch.Tensor, ...]] = {}
        self._graphed_shape: tuple | None = None  # what the captured graphs computed with
        # (blend, moving_blend) as the graphs read them; filled before the next replay
        self._weights: torch.Tensor | None = None
        self._weights_set: tuple[float, float] | None = None

    # -- life cycle -------------------------------------------------------------------------

    def setup(self, ctx: Context) -> None:
        self.reset()
        # load the kernels once so the first real frame is not slow
        x = torch.zeros(1, 4, 8, 8, device=self.device)
        self._blend(x, x, torch.zeros(1, 8, 8, 2, device=self.device))
        self.capture(self.graph_sizes)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self.reset()
        if self._graphs is not None:
            self._graphs.clear()
        self._captured.clear()
        self._grids.clear()

    def reset(self) -> None:
        """Forget the history: the next frame passes through unchanged (scene cut, preset)."""
        if self._history is not None:
            self.resets += 1
        self._history = None
        self._last_index = None

    @classmethod
    def for_preset(cls, preset, device: str = "cpu", **kw) -> TemporalStage:
        """The stage with `preset.temporal`'s settings (presets/schema.py Temporal)."""
        stage = cls(device=device, **kw)
        stage.use_preset(preset)
        return stage

    def use_preset(self, preset) -> None:
        """A look's history weights, part-boundary guard and agreement tolerance, from the next
        frame on (the history itself carries over); a preset without that section (None, a
        caller's own object) leaves them as they are."""
        t = getattr(preset, "temporal", None)
        if t is not None:
            self.blend, self.guard = float(t.blend), int(t.guard)
            self.tolerance, self.moving_blend = float(t.tolerance), t.moving_blend

    def set_enabled(self, on: bool) -> None:
        if not on:
            self.reset()
        self.enabled = bool(on)

    # -- the blend as CUDA graphs -------------------------------------------------------------

    def _shape(self) -> tuple:
        """What the graphs' kernels depend on besides the weights (use_preset may change it)."""
        return (self.guard, self.tolerance, self.moving_reach)

    def _graph_cache(self) -> GraphCache:
        if self._graphs is None or self._graphed_shape != self._shape():
            if self._graphs is not None:
                # the history may live in a dropped graph's output: keep a copy of its own
                if self._history is not None:
                    self._history = self._history.clone()
                self._graphs.clear()
            self._captured.clear()
            self._graphs = GraphCache(
                self._graphed_step,
                self.device,
                name="temporal",
                clone_output=False,
                capture_on_miss=True,
            )
            self._graphed_shape = self._shape()
        return self._graphs

    def _weights_now(self) -> torch.Tensor:
        """The device scalars the graphs read, filled (on the current stream) when the look's
        weights changed since the last frame."""
        want = (self.blend, self.blend if self.moving_blend is None else self.moving_blend)
        if self._weights is None:
            self._weights = torch.zeros(2, dtype=torch.float32, device=self.device)
        if self._weights_set != want:
            self._weights[0].fill_(want[0])
            self._weights[1].fill_(want[1])
            self._weights_set = want
        return self._weights

    def _graphed_step(
        self, image: torch.Tensor, motion: torch.Tensor, hist: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What one graph replays: uint8 (1, H, W, 4) + motion (1, H, W, 2) + history float
        (1, 4, H, W) -> (the new history, uint8 (1, H, W, 4))."""
        # never _weights_now() here: a fill inside a capture would replay the old weights
        weights = self._weights
        if weights is None:
            raise RuntimeError("temporal: the graph's weights were not filled before capture")
        out = self._blend(_to_float(image, self.device), hist, motion, (weights[0], weights[1]))
        return out, _to_u8(out)

    def capture(self, sizes) -> None:
        """Capture the blend for each (w, h) of `sizes` (cuda_graph on a CUDA device; else
        nothing). Raises GraphCaptureError when a graph cannot be captured or does not match
        the eager blend."""
        if not self.cuda_graph:
            return
        cache = self._graph_cache()
        self._weights_now()
        g = torch.Generator(device=self.device).manual_seed(0)
        dev = self.device
        for w, h in dict.fromkeys(tuple(s) for s in sizes):
            if (w, h) in self._captured:  # a ladder prepares its start rung's size twice
                continue
            self._hold_grid(w, h)
            # examples made on the device: a frame, vectors of a few px and a history
            image = torch.randint(0, 256, (1, h, w, 4), generator=g, device=dev).to(torch.uint8)
            motion = torch.rand(1, h, w, 2, generator=g, device=dev).sub_(0.5).mul_(6.0)
            hist = torch.rand(1, 4, h, w, generator=g, device=dev)
            cache.capture(image, motion, hist)
            self._captured.add((w, h))

    def _hold_grid(self, w: int, h: int) -> None:
        """Keep warp's pixel grid of (w, h) for as long as this stage's graphs may read it."""
        if (w, h) not in self._grids:
            self._grids[(w, h)] = _pixel_grid(h, w, self.device)

    def _blend(
        self,
        cur: torch.Tensor,
        hist: torch.Tensor,
        motion: torch.Tensor,
        weights: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """`weights`: (blend, moving_blend) as device scalars (the graphed path, which always
        tells moving from still pixels); None: this stage's own numbers."""
        warped, inside = warp(hist, motion, self.interp)
        # the agreement tests look at the history as warped; the blend uses it clamped
        w = _ramp((warped[:, 3:] - cur[:, 3:]).abs_(), self.alpha_tol).mul_(inside)
        if self.color_tol is not None:
            cdiff = (warped[:, :3] - cur[:, :3]).abs_().amax(dim=1, keepdim=True)
            w.mul_(_ramp(cdiff, self.color_tol))
        else:
            cdiff = None
        if self.guard:
            near = _near_motion_jumps(motion.to(cur.device), self.guard, cur.shape[0])
            w.mul_(1.0 - near)
        margin = self.clamp_margin
        if self.tolerance:
            # trust the history only as far as the model's own frame-to-frame noise explains its
            # difference from the current frame (worst channel, worst of the 3x3 neighbourhood):
            # there the clamp is widened by up to `tolerance`, beyond it the history's weight
            # falls to 0 — a misplaced line is dropped, not pulled into the current range
            tol = self.tolerance / 255.0
            if cdiff is None:
                cdiff = (warped[:, :3] - cur[:, :3]).abs_().amax(dim=1, keepdim=True)
            if self.gate > 1:
                g = self.gate
                cdiff = F.max_pool2d(cdiff, g, stride=1, padding=g // 2)
            agree = _ramp(cdiff, tol)
            w.mul_(agree)
            margin = agree.mul_(tol) if margin is None else agree.mul_(tol).add_(margin)
        if weights is None and self.moving_blend not in (None, self.blend):
            weights = (self.blend, self.moving_blend)
        if weights is None:  # one weight everywhere: no need to tell moving pixels apart
            w.mul_(self.blend)
        else:
            moving = _near_moving(motion.to(cur.device), self.moving_reach, cur.shape[0])
            w.mul_(torch.where(moving, weights[1], weights[0]))
        hi = F.max_pool2d(cur, 3, stride=1, padding=1)
        lo = F.max_pool2d(cur.neg(), 3, stride=1, padding=1).neg_()
        if isinstance(margin, float) and margin == 0.0:  # the exact clamp (the default)
            warped = warped.clamp_(lo, hi)
        elif margin is not None:
            warped = torch.minimum(torch.maximum(warped, lo - margin), hi + margin)
        fix = warped.sub_(cur).mul_(w)
        if self.smooth == 1:
            return cur + fix
        k = self.smooth
        smoothed = F.avg_pool2d(fix, k, stride=1, padding=k // 2, count_include_pad=False)
        edge = (hi[:, :3] - lo[:, :3]).amax(dim=1, keepdim=True) > self.edge_tol
        return cur + torch.where(edge, smoothed, fix)

    def apply(self, image: torch.Tensor, motion: torch.Tensor, index: int | None = None):
        """One frame: uint8 (H, W, 4) premultiplied + motion (H, W, 2) -> uint8 (H, W, 4) on
        `device`, blended with the history (which it then replaces)."""
        if image.dtype != torch.uint8 or image.ndim != 3 or image.shape[-1] != 4:
            raise ValueError(
                f"temporal: expected uint8 (H, W, 4), got {image.dtype} {tuple(image.shape)}"
            )
        h, w = image.shape[:2]
        if tuple(motion.shape) != (h, w, 2):
            raise ValueError(
                f"temporal: motion is {tuple(motion.shape)}, expected ({h}, {w}, 2) for the image"
            )
        if not self.enabled:  # refinement off (quality ladder): pass through, no float round trip
            return image.to(self.device, non_blocking=True)
        with torch.inference_mode():
            hist = self._history
            follows = index is None or self._last_index is None or index == self._last_index + 1
            if hist is not None and (tuple(hist.shape) != (1, 4, h, w) or not follows):
                self.reset()
                hist = None
            self._last_index = index
            if hist is None:
                self._history = cur = _to_float(image, self.device)
                return _to_u8(cur)[0]
            if self.cuda_graph:
                self._weights_now()  # before the replay, on the stream that replays it
                self._hold_grid(w, h)  # a size not captured yet is captured in the call below
                # the new history is the graph's output: valid until the graph replays next,
                # by when it has been copied into the graph's input
                self._history, u8 = self._graph_cache()(image[None], motion[None], hist)
                return u8[0].clone()
            self._history = out = self._blend(_to_float(image, self.device), hist, motion)
            return _to_u8(out)[0]

    def process(self, frame: Frame) -> Frame:
        return self.process_batch([frame])[0]

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        t0 = time.perf_counter()
        out = []
        for f in frames:  # sequential on purpose: frame i needs frame i-1's output
            if f.image is None or f.motion is None:
                raise ValueError(f"temporal: frame {f.index} has no image or no motion")
            out.append(f.with_(image=self.apply(f.image, f.motion, f.index)))
        ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(frames))
        return [f.timed(self.name, ms) for f in out]


# -- measurements -----------------------------------------------------------------------------


def _stack(frames: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    return frames if isinstance(frames, torch.Tensor) else torch.stack(list(frames))


def flicker(
    frames: Sequence[torch.Tensor] | torch.Tensor,
    motions: Sequence[torch.Tensor] | torch.Tensor,
    alpha_tol: float = 0.1,
) -> float:
    """Mean absolute RGB difference (0..255 scale) between each frame and its predecessor
    warped by the frame's motion vectors, over *covered* pixels: the source point lies inside
    the previous frame, the current pixel is not transparent and the warped alpha agrees with
    the current alpha within `alpha_tol` (disocclusions are not flicker).

    frames uint8 (N, H, W, 4) premultiplied (or a list); motions float (N, H, W, 2) where
    motions[i] leads from frame i-1 to frame i (motions[0] is unused)."""
    x = _stack(frames)
    m = _stack(motions)
    if x.shape[0] < 2:
        raise ValueError("flicker: needs at least two frames")
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(1, x.shape[0]):
            prev = _to_float(x[i - 1], x.device)
            cur = _to_float(x[i], x.device)
            warped, inside = warp(prev, m[i])
            covered = (
                (inside > 0) & (cur[:, 3:] > 0) & ((warped[:, 3:] - cur[:, 3:]).abs() <= alpha_tol)
            )
            diff = (warped[:, :3] - cur[:, :3]).abs().mean(dim=1, keepdim=True)
            total += float(diff[covered].sum())
            count += int(covered.sum())
    return 255.0 * total / max(1, count)


def sharpness(frames: Sequence[torch.Tensor] | torch.Tensor) -> float:
    """Mean gradient magnitude (0..255 per pixel step) of the luminance of premultiplied frames
    (the idol over black), over pixels that are not transparent, averaged over the frames."""
    x = _stack(frames)
    if x.ndim == 3:
        x = x.unsqueeze(0)
    vals = []
    with torch.inference_mode():
        for i in range(x.shape[0]):
            f = _to_float(x[i], x.device)
            y = _luma(f)  # (1, H, W)
            gx = y[:, :-1, 1:] - y[:, :-1, :-1]
            gy = y[:, 1:, :-1] - y[:, :-1, :-1]
            mag = torch.sqrt(gx * gx + gy * gy)
            mask = f[:, 3, :-1, :-1] > 0
            vals.append(float(mag[mask].mean()) if bool(mask.any()) else 0.0)
    return 255.0 * sum(vals) / len(vals)


def _luma(f: torch.Tensor) -> torch.Tensor:
    return 0.299 * f[:, 0] + 0.587 * f[:, 1] + 0.114 * f[:, 2]


def laplacian_rms(frames: Sequence[torch.Tensor] | torch.Tensor) -> float:
    """RMS of the 4-neighbour Laplacian of the luminance (0..255 scale), over pixels that are
    not transparent, averaged over the frames: how much fine detail (lines, grain, edges) a
    picture has. uint8 (N, H, W, 4) premultiplied or (N, H, W, 3)."""
    x = _stack(frames)
    if x.ndim == 3:
        x = x.unsqueeze(0)
    k = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3)
    vals = []
    with torch.inference_mode():
        for i in range(x.shape[0]):
            f = x[i].permute(2, 0, 1)[None].float().div_(255.0)
            lap = F.conv2d(_luma(f)[:, None], k.to(f.device))[0, 0]
            mask = f[0, 3, 1:-1, 1:-1] > 0 if f.shape[1] == 4 else torch.ones_like(lap, dtype=bool)
            vals.append(float(lap[mask].square().mean().sqrt()) if bool(mask.any()) else 0.0)
    return 255.0 * sum(vals) / len(vals)


def ghosting(
    frames: Sequence[torch.Tensor] | torch.Tensor,
    references: Sequence[torch.Tensor] | torch.Tensor,
    motions: Sequence[torch.Tensor] | torch.Tensor,
    band: int = 8,
    min_motion: float = 0.5,
) -> float:
    """Mean |frame - reference| (RGB, 0..255) in the band up to `band` pixels beside the
    reference's *moving* edges, excluding the edges themselves: where echo lines of a moving
    part appear when history is blended in at the wrong place. Compare a stage's output with
    its input (or with the reference painter's frames) against the same measure without the
    stage: ghost trails raise it, clean smoothing lowers it.

    frames, references uint8 (N, H, W, 4) or (N, H, W, 3); motions float (N, H, W, 2)."""
    x, r, m = _stack(frames), _stack(references), _stack(motions)
    if x.shape[:3] != r.shape[:3]:
        raise ValueError(f"ghosting: frames {tuple(x.shape)} and references {tuple(r.shape)}")
    total, count = 0.0, 0
    with torch.inference_mode():
        for i in range(1, x.shape[0]):
            f = x[i].permute(2, 0, 1)[None, :3].float()
            g = r[i].permute(2, 0, 1)[None, :3].float()
            y = _luma(g / 255.0)[:, None]
            gx = F.pad((y[..., :, 1:] - y[..., :, :-1]).abs(), (0, 1, 0, 0))
            gy = F.pad((y[..., 1:, :] - y[..., :-1, :]).abs(), (0, 0, 0, 1))
            edge = (gx + gy) > 0.1
            moving = m[i].to(f.device).float().norm(dim=-1)[None, None] > min_motion
            src = (edge & moving).float()
            near = F.max_pool2d(src, 2 * band + 1, stride=1, padding=band) > 0
            on_edge = F.max_pool2d(edge.float(), 3, stride=1, padding=1) > 0
            sel = near & ~on_edge
            diff = (f - g).abs().mean(dim=1, keepdim=True)
            total += float(diff[sel].sum())
            count += int(sel.sum())
    return total / max(1, count)
