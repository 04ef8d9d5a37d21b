"""The temporal stage with one more weight, tried and not shipped: the model *input's* own warp
agreement. The model paints from a deterministic picture (`pipeline.stylize.model_input`), so
|warp(input[i-1]) - input[i]| says exactly where the motion vectors miss, free of the model's
frame-to-frame noise; the history's weight falls to 0 (from tol/2 to tol levels, worst of a
`gate` x `gate` neighbourhood) where they do. Also: the same weight on the residual (painting
minus input) instead of the painting. Prints flicker / ghosting / Laplacian RMS ÷ model alone.

    python scripts/temporal_guide_variants.py FRAMES PRESETS [song|speech]

Results and reading: docs/BENCHMARKS.md, "The model input as the temporal stage's guide".
"""

import sys

import torch
import torch.nn.functional as F

import pipeline.temporal.stage as S
from pipeline.diffusion import load_models
from pipeline.diffusion.kagura_model import KAGURA_WEIGHTS
from presets.loader import load_preset
from training.evaluate import clip_frames
from training.poses import CLIP_FILE, SPEECH_CLIP_FILE, load_heldout_clip

CPU = torch.device("cpu")


class GuidedStage(S.TemporalStage):
    """The shipped blend (exact clamp, smoothed corrections on edges) times the guide weight."""

    gtol, ggate = 8.0, 9
    guide = prev_guide = None

    def _blend(self, cur, hist, motion):
        warped, inside = S.warp(hist, motion, self.interp)
        w = S._ramp((warped[:, 3:] - cur[:, 3:]).abs_(), self.alpha_tol).mul_(inside)
        cdiff = (warped[:, :3] - cur[:, :3]).abs_().amax(dim=1, keepdim=True)
        w.mul_(S._ramp(cdiff, self.color_tol))
        if self.guard:
            w.mul_(1.0 - S._near_motion_jumps(motion, self.guard, cur.shape[0]))
        wg, _ = S.warp(self.prev_guide, motion, "bicubic")
        d = (wg - self.guide).abs().amax(1, keepdim=True)
        d = F.max_pool2d(d, self.ggate, stride=1, padding=self.ggate // 2)
        w.mul_(S._ramp(d, self.gtol / 255.0)).mul_(self.blend)
        hi = F.max_pool2d(cur, 3, stride=1, padding=1)
        lo = F.max_pool2d(cur.neg(), 3, stride=1, padding=1).neg_()
        fix = torch.minimum(torch.maximum(warped, lo), hi).sub_(cur).mul_(w)
        k = self.smooth
        smoothed = F.avg_pool2d(fix, k, stride=1, padding=k // 2, count_include_pad=False)
        edge = (hi[:, :3] - lo[:, :3]).amax(dim=1, keepdim=True) > self.edge_tol
        return cur + torch.where(edge, smoothed, fix)


def guided(preset, model, inp, motion, gtol, ggate, blend=None):
    t = GuidedStage.for_preset(preset)
    t.gtol, t.ggate = gtol, ggate
    if blend is not None:
        t.blend = blend
    t.reset()
    out = []
    for i in range(len(model)):
        t.guide = S._to_float(inp[i], CPU)
        out.append(t.apply(model[i], motion[i], i))
        t.prev_guide = t.guide
    return torch.stack(out)


def residual(model, inp, motion, blend, gtol, ggate):
    """No clamp: the residual's history, where the guide agrees, averaged in at `blend`."""
    hist = prev = None
    out = []
    for i in range(len(model)):
        cur, g = S._to_float(model[i], CPU), S._to_float(inp[i], CPU)
        res = cur - g
        if hist is not None:
            wg, inside = S.warp(prev, motion[i], "bicubic")
            d = F.max_pool2d((wg - g).abs().amax(1, keepdim=True), ggate, 1, ggate // 2)
            w = S._ramp(d, gtol / 255.0) * inside * blend
            wh, _ = S.warp(hist, motion[i], "bicubic")
            res = res + (wh - res) * w
        hist, prev = res, g
        y = g + res
        y[:, 3:] = cur[:, 3:]
        out.append(S._to_u8(y)[0])
    return torch.stack(out)


def main() -> None:
    torch.set_num_threads(2)
    n, names = int(sys.argv[1]), sys.argv[2].split(",")
    clip = sys.argv[3] if len(sys.argv) > 3 else "song"
    m = load_models(KAGURA_WEIGHTS, dtype="float32", device="cpu")
    track = load_heldout_clip(CLIP_FILE if clip == "song" else SPEECH_CLIP_FILE)
    for name in names:
        p = load_preset(name)
        fr = clip_frames(m, p, (640, 360), "cpu", n, track)
        model, ref, motion, inp = fr["model"], fr["reference"], fr["motion"], fr["input"]
        lap0 = S.laplacian_rms(model)

        def show(label, out, motion=motion, ref=ref, lap0=lap0):
            print(
                f"  {label}: {S.flicker(out, motion):.3f} / {S.ghosting(out, ref, motion):.3f}"
                f" lap {S.laplacian_rms(out) / lap0:.3f}",
                flush=True,
            )

        print(
            f"{clip} {name} ({n}): flicker / ghosting off {S.flicker(model, motion):.3f} / "
            f"{S.ghosting(model, ref, motion):.3f}; reference flicker {S.flicker(ref, motion):.3f};"
            f" the model input's flicker {S.flicker(inp, motion):.3f}",
            flush=True,
        )
        t = S.TemporalStage.for_preset(p)
        t.reset()
        show("shipped", torch.stack([t.apply(model[i], motion[i], i) for i in range(n)]))
        for gtol, ggate, blend in ((8, 5, None), (8, 9, None), (16, 9, None), (16, 5, 0.85)):
            show(
                f"guide tol {gtol} gate {ggate} blend {blend or 'preset'}",
                guided(p, model, inp, motion, gtol, ggate, blend),
            )
        for gtol, ggate in ((8, 1), (8, 9)):
            show(
                f"residual tol {gtol} gate {ggate} blend 0.7",
                residual(model, inp, motion, 0.7, gtol, ggate),
            )


if __name__ == "__main__":
    main()
