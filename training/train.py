"""`kagura train`: Kagura's own latent-diffusion model, trained on its own renders.

    TrainConfig(...)                 every knob, saved in each checkpoint
    train(cfg, log=print) -> Path    runs (or resumes) to cfg.steps; returns the checkpoint

The run, on one GPU (or, slowly, the CPU for tests):
1. Data: raw idol renders from worker processes (training/data.RenderPool) at random poses,
   visemes, expressions, framings and backgrounds; on the device the preset's procedural look
   (the model's input) and its reference look (the target) — a PairBank of `bank` pairs of which
   `fresh` per step are replaced (`fresh * refresh_every` at a time, so the painters run batched).
2. Autoencoder first (`ae_steps`): the guided decoder (pipeline/diffusion/kagura_model.py)
   reconstructs the reference picture from its latent onto the fast picture, and the fast
   picture from its own latent (L1 + multi-scale gradient losses).
3. Then the denoiser (encoder frozen, decoder keeps learning): a timestep t from the DDPM
   schedule (half the draws at the timesteps the presets use live), a noisy latent
   x_t = sqrt(a_t) z_src + sqrt(1 - a_t) eps where z_src is the fast render's latent (what the
   stage's first stream slot sees) or the reference's (what later slots see), and the UNet,
   given x_t, the fast render's clean latent and the preset's prompt embedding, predicts the
   reference latent z_ref as z_fast + its output (the stage's "image_residual") — an x0
   (rectified) objective valid from any noise level, so one or two steps paint a frame. Losses
   on the decoded prediction (decoded onto the fast picture) against the reference picture:
   pixel L1, gradient L1 at full, half and quarter size ("edge": lines and texture must be
   where the reference has them, not averaged away), and from `gan_start` a patch
   discriminator's hinge loss ("gan", a small PatchGAN that judges 35-pixel patches: blur is
   what it learns to spot); plus latent MSE to z_ref and the decoder's reconstruction of z_ref.
   Optional: "texture" (texture_l1), "line" (line_edge_l1) and "shift" (shift_l1: a quarter
   of the batch painted again from its input rolled by a few pixels must give the rolled
   painting — the 8-pixel latent grid otherwise paints a moving part differently frame by
   frame, which is flicker no still picture shows).
4. An exponential moving average of the weights is what gets evaluated and exported.

Runs go on across machines: `init` names a weights folder (e.g. the shipped one) whose
weights start the run — every tensor whose name and shape match, the UNet and the encoder
included — and whose `train_state.json` (written by every export) continues the step count and
the data stream, so a fresh GPU machine carries on from the last exported model.

Seeded (torch, numpy and the data stream: sample i is a pure function of (seed, i)); resumable
from `out/last.pt` (written every `ckpt_every` steps and when `max_minutes` runs out); every step
group is logged to `out/log.jsonl`, the curves are plotted to `out/curves.png`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from training.data import (
    MotionBank,
    PairBank,
    PairMaker,
    RenderPool,
    default_workers,
    motion_pairs,
    preset_ids,
    to_unit,
)
from training.poses import PRESETS


@dataclass
class TrainConfig:
    out: str = "runs/kagura"
    size: tuple[int, int] = (640, 360)
    steps: int = 6000
    ae_steps: int = 800
    batch: int = 16
    lr: float = 4e-4
    warmup: int = 200
    ema: float = 0.998
    bank: int = 1536
    fresh: int = 4  # new pairs per step, on average
    refresh_every: int = 32  # ... made `fresh * refresh_every` at a time: the reference
    # painters cost 40-90 ms per call at batch 1 on an H200 but ~3-8 ms per frame batched
    workers: int = -1  # render processes; -1: all cores but two
    seed: int = 0
    device: str = "cuda"
    max_minutes: float | None = None  # stop (with a checkpoint) before this much wall time
    ckpt_every: int = 500
    eval_every: int = 500
    eval_poses: int = 4  # held-out poses per preset for the running evaluation
    log_every: int = 25
    loss_weights: dict[str, float] = field(
        default_factory=lambda: {
            "pix": 1.0,
            "edge": 1.0,
            "lat": 0.25,
            "rec": 0.5,
            "gan": 0.05,
            "texture": 0.0,
            "line": 0.0,
            "shift": 0.0,
            "motion": 0.0,
        }
    )
    motion_bank: int = 384  # temporal pairs kept on the device (when the "motion" loss is on)
    motion_fresh: int = 16  # ... of which this many are replaced every `refresh_every` steps
    motion_batch: int = 4  # temporal pairs per step
    motion_presets: dict[str, float] = field(default_factory=dict)  # preset -> factor on its
    # pairs' motion loss (1 for a preset not named)
    gan_start: int = 1500  # discriminator from this step on (after the decoder has settled)
    init: str | None = None  # weights folder to start from (see module doc)
    step0: int = 0  # steps done before this run (from init's train_state.json)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> TrainConfig:
        d = dict(d)
        d["size"] = tuple(d["size"])
        return cls(**{k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}})


def live_timesteps() -> tuple[list[int], list[int]]:
    """(every timestep the built-in presets run at in the diffusion stage — their strength and
    steps — plus the full-strength 1- and 2-step schedules; the first-slot ones among them,
    where the stage noises the *fast* latent)."""
    from pipeline.diffusion.stage import timesteps_for
    from presets.loader import load_preset

    schedules = [timesteps_for(1.0, 1), timesteps_for(1.0, 2)]
    for name in PRESETS:
        d = load_preset(name).diffusion
        schedules.append(timesteps_for(d.strength, d.steps))
    return sorted({t for ts in schedules for t in ts}), sorted({ts[0] for ts in schedules})


def edges(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x[..., :, 1:] - x[..., :, :-1], x[..., 1:, :] - x[..., :-1, :]


def edge_l1(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (ax, ay), (bx, by) = edges(a), edges(b)
    return F.l1_loss(ax, bx) + F.l1_loss(ay, by)


def multiscale(
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    a: torch.Tensor,
    b: torch.Tensor,
    scales: int,
) -> torch.Tensor:
    """The mean of loss(a, b) at full size and `scales - 1` halvings of both."""
    total = loss(a, b)
    for _ in range(scales - 1):
        a, b = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
        total = total + loss(a, b)
    return total / scales


def multiscale_edge_l1(a: torch.Tensor, b: torch.Tensor, scales: int = 3) -> torch.Tensor:
    """edge_l1 at full, half and quarter size: thin lines and broad strokes alike."""
    return multiscale(edge_l1, a, b, scales)


def line_edge_l1(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Gradient L1 weighted by the reference b's own gradient magnitude (mean weight 1): line
    art is a small share of the pixels and most of the detail, so a softened line costs here
    what a softened flat area costs nowhere."""
    total = a.new_zeros(())
    for ga, gb in zip(edges(a), edges(b), strict=True):
        w = gb.abs().mean(1, keepdim=True)
        w = w / w.mean().clamp(min=1e-6)
        total = total + (w * (ga - gb).abs()).mean()
    return total


YCBCR = ((0.299, 0.587, 0.114), (-0.169, -0.331, 0.5), (0.5, -0.419, -0.081))


def detail_energy(x: torch.Tensor, window: int = 8) -> torch.Tensor:
    """Local RMS of the 4-neighbour Laplacian of luma and of each chroma channel over window x
    window cells: how much fine detail each part of the picture has, wherever exactly it lies.
    Luma and chroma apart, so grey texture is not paid for with colour noise."""
    x = torch.einsum("bchw,dc->bdhw", x, x.new_tensor(YCBCR))
    k = x.new_tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3)
    c = x.shape[1]
    lap = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), k.expand(c, 1, 3, 3), groups=c)
    return F.avg_pool2d(lap.square(), window).add(1e-6).sqrt()


def texture_l1(a: torch.Tensor, b: torch.Tensor, scales: int = 2) -> torch.Tensor:
    """L1 between the detail energies of a and b at full and half size. Texture the input does
    not determine (paper grain, dry-brush strands, film) has no one right place, so pixel and
    gradient L1 reward averaging it away; this rewards the right *amount* of it in each cell."""
    return multiscale(lambda x, y: F.l1_loss(detail_energy(x), detail_energy(y)), a, b, scales)


def shift_l1(
    painted_shifted: torch.Tensor, painted: torch.Tensor, dy: int, dx: int
) -> torch.Tensor:
    """L1 between the painting of an input rolled by (dy, dx) pixels and the painting rolled by
    the same, `SHIFT_MARGIN` pixels clear of the wrap seam and of the frame's edges. The latent
    grid is 8 pixels: a model that paints a part differently as it moves by a pixel flickers
    when the idol moves, though every still frame is right; a shift-equivariant one gives 0."""
    h, w = painted.shape[-2:]
    m = SHIFT_MARGIN
    rolled = torch.roll(painted, (dy, dx), dims=(2, 3))
    rows, cols = slice(dy + m, h - m), slice(dx + m, w - m)
    return F.l1_loss(painted_shifted[..., rows, cols], rolled[..., rows, cols])


SHIFT_MARGIN = 16  # pixels: beyond the reach of the wrap seam through the autoencoder


def motion_l1(
    painted: torch.Tensor,
    ref: torch.Tensor,
    motion: torch.Tensor,
    cover: torch.Tensor,
    pair_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """painted, ref (n, 2, 3, H, W) of two consecutive frames, motion (n, H, W, 2) from the first
    to the second, cover (n, 1, H, W): mean over covered pixels of |e1 - warp(e0)|, e = painted -
    ref. Zero when the painting changes from frame to frame exactly as the reference does
    (whatever its still error), so it charges the flicker the model adds, not the
    reference's own motion, blinks or resampling at edges. pair_weight (n,) scales each pair's
    pixels (a preset whose flicker is further from its goal is charged more)."""
    from pipeline.temporal.stage import warp

    err = painted - ref
    moved, _ = warp(err[:, 0], motion, "bilinear")
    diff = (err[:, 1] - moved).abs().mean(1, keepdim=True)
    if pair_weight is not None:
        diff = diff * pair_weight.view(-1, 1, 1, 1).to(diff)
    return (diff * cover).sum() / cover.sum().clamp(min=1.0)


class PatchDiscriminator(torch.nn.Module):
    """A small PatchGAN: (B, 3, H, W) in [-1, 1] -> (B, 1, H/8, W/8) realism logits, each
    judging a ~35-pixel patch. Spectral norm keeps it from overpowering the generator."""

    def __init__(self, ch: int = 32):
        super().__init__()
        sn = torch.nn.utils.parametrizations.spectral_norm
        act = torch.nn.LeakyReLU(0.2)
        self.net = torch.nn.Sequential(
            sn(torch.nn.Conv2d(3, ch, 4, 2, 1)),
            act,
            sn(torch.nn.Conv2d(ch, ch * 2, 4, 2, 1)),
            act,
            sn(torch.nn.Conv2d(ch * 2, ch * 4, 4, 2, 1)),
            act,
            sn(torch.nn.Conv2d(ch * 4, 1, 3, 1, 1)),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def prompt_embeddings(models, device) -> torch.Tensor:
    """(len(PRESETS), tokens, dim) — exactly what the diffusion stage feeds the UNet."""
    from pipeline.diffusion.kagura_model import style_prompts

    prompts = style_prompts()
    tok_len = min(
        int(models.tokenizer.model_max_length),
        int(models.text_encoder.config.max_position_embeddings),
    )
    ids = models.tokenizer(
        [prompts[p] for p in PRESETS],
        padding="max_length",
        max_length=tok_len,
        truncation=True,
        return_tensors="pt",
    ).input_ids
    with torch.no_grad():
        return models.text_encoder(ids.to(device))[0].float()


class Trainer:
    def __init__(self, cfg: TrainConfig, log: Callable[[str], None] = print):
        from pipeline.diffusion.kagura_model import build_kagura

        self.cfg, self.log = cfg, log
        self.dev = torch.device(cfg.device)
        if self.dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("kagura train: --device cuda but torch sees no CUDA device")
        torch.manual_seed(cfg.seed)
        self.samples_made = 0  # data stream position (sample index)
        self.models = build_kagura(cfg.seed)
        m = self.models
        m.unet.to(self.dev).train().requires_grad_(True)
        m.vae.to(self.dev).train().requires_grad_(True)
        m.text_encoder.to(self.dev)
        if self.dev.type == "cuda":
            m.unet.to(memory_format=torch.channels_last)
            m.vae.to(memory_format=torch.channels_last)
        self.emb = prompt_embeddings(m, self.dev)
        ac = m.alphas_cumprod.float().to(self.dev)
        self.sa, self.s1a = ac.sqrt(), (1.0 - ac).sqrt()
        live_t, first_t = live_timesteps()
        self.live_t = torch.tensor(live_t, device=self.dev)
        self.first_t = torch.tensor(first_t, device=self.dev)
        self.frozen_encoder = False
        if cfg.init:
            self.frozen_encoder = self._init_from(Path(cfg.init))
        self.opt = torch.optim.AdamW(
            [*m.unet.parameters(), *m.vae.parameters()], lr=cfg.lr, weight_decay=0.01
        )
        self.disc = PatchDiscriminator().to(self.dev)
        self.opt_d = torch.optim.AdamW(
            self.disc.parameters(), lr=cfg.lr, betas=(0.5, 0.9), weight_decay=0.0
        )
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        self.ema_unet = AveragedModel(m.unet, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema))
        self.ema_vae = AveragedModel(m.vae, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema))
        self.step = 0
        self.gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.amp = self.dev.type == "cuda"
        self.motion_bank = None  # a training/data.MotionBank when the "motion" loss is on
        self.motion_made = 0  # temporal pairs made (their own stream position)

    def _init_from(self, folder: Path) -> bool:
        """Start from a weights folder: every tensor whose name and shape match. True when
        the encoder came along (the UNet learned in its latent space: it stays frozen)."""
        from safetensors.torch import load_file

        m, got = self.models, {}
        for part, mod in (("unet", m.unet), ("vae", m.vae)):
            f = folder / part / "diffusion_pytorch_model.safetensors"
            if not f.is_file():
                raise FileNotFoundError(f"{f}: no weights to start from (--init {folder})")
            own = mod.state_dict()
            src = load_file(str(f))
            keep = {k: v.float() for k, v in src.items() if k in own and own[k].shape == v.shape}
            mod.load_state_dict(keep, strict=False)
            got[part] = (len(keep), len(own))
        te = folder / "text_encoder" / "model.safetensors"
        if te.is_file():  # the frozen prompt tower the UNet learned with, not a fresh draw
            m.text_encoder.load_state_dict({k: v.float() for k, v in load_file(str(te)).items()})
            self.emb = prompt_embeddings(m, self.dev)
        state = folder / "train_state.json"
        if state.is_file():
            st = json.loads(state.read_text())
            self.cfg.step0 = int(st.get("steps_total", 0))
            self.samples_made = int(st.get("samples_made", 0))
        enc = [k for k in m.vae.state_dict() if k.startswith("encoder.")]
        enc_loaded = got["vae"][0] >= len(enc) and got["unet"][0] == got["unet"][1]
        self.log(
            f"init from {folder}: unet {got['unet'][0]}/{got['unet'][1]} tensors, "
            f"vae {got['vae'][0]}/{got['vae'][1]}; {self.cfg.step0} steps before this run"
            + (" (encoder frozen: the UNet's latent space)" if enc_loaded else "")
        )
        return enc_loaded

    # -- checkpoints ------------------------------------------------------------------------

    @property
    def ckpt_path(self) -> Path:
        return self.out / "last.pt"

    def save(self) -> Path:
        m = self.models
        state = {
            "config": self.cfg.to_json(),
            "step": self.step,
            "samples_made": self.samples_made,
            "motion_made": self.motion_made,
            "unet": m.unet.state_dict(),
            "vae": m.vae.state_dict(),
            "text_encoder": m.text_encoder.state_dict(),
            "ema_unet": self.ema_unet.state_dict(),
            "ema_vae": self.ema_vae.state_dict(),
            "opt": self.opt.state_dict(),
            "disc": self.disc.state_dict(),
            "opt_d": self.opt_d.state_dict(),
            "gen": self.gen.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if self.dev.type == "cuda" else None,
        }
        tmp = self.ckpt_path.with_suffix(".pt.partial")
        torch.save(state, tmp)
        os.replace(tmp, self.ckpt_path)  # never a half-written last.pt
        return self.ckpt_path

    def load(self, path: Path) -> None:
        state = torch.load(path, map_location=self.dev, weights_only=False)
        m = self.models
        m.unet.load_state_dict(state["unet"])
        m.vae.load_state_dict(state["vae"])
        m.text_encoder.load_state_dict(state["text_encoder"])
        self.ema_unet.load_state_dict(state["ema_unet"])
        self.ema_vae.load_state_dict(state["ema_vae"])
        self.opt.load_state_dict(state["opt"])
        if "disc" in state:
            self.disc.load_state_dict(state["disc"])
            self.opt_d.load_state_dict(state["opt_d"])
        self.gen.set_state(state["gen"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and self.dev.type == "cuda":
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.step, self.samples_made = int(state["step"]), int(state["samples_made"])
        self.motion_made = int(state.get("motion_made", 0))

    # -- one step -------------------------------------------------------------------------

    def lr_at(self, step: int) -> float:
        c = self.cfg
        if step < c.warmup:
            return c.lr * (step + 1) / c.warmup
        p = (step - c.warmup) / max(1, c.steps - c.warmup)
        return c.lr * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, p))))

    def _autocast(self):
        return torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=self.amp)

    def losses(
        self, fast_u8: torch.Tensor, ref_u8: torch.Tensor, pid: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        m, w = self.models, self.cfg.loss_weights
        cl = self._memory_format()
        fast = to_unit(fast_u8).contiguous(memory_format=cl)
        ref = to_unit(ref_u8).contiguous(memory_format=cl)
        out: dict[str, torch.Tensor] = {}
        with self._autocast():
            if self.step < self.cfg.ae_steps:
                both = torch.cat([fast, ref])
                rec = m.vae(both, torch.cat([fast, fast])).float()
                out["rec"] = F.l1_loss(rec, both)
                out["edge"] = multiscale_edge_l1(rec, both)
                out["loss"] = out["rec"] + w["edge"] * out["edge"]
                return out
            with torch.no_grad():
                z = m.vae.encode(torch.cat([fast, ref]))[0].float()
            z_fast, z_ref = z.chunk(2)
            n = fast.shape[0]
            dev = self.dev
            g = torch.Generator(device="cpu").manual_seed(int(self.step * 7919 + self.cfg.seed))
            pick_live = torch.rand(n, generator=g) < 0.5
            t_uniform = torch.randint(0, 1000, (n,), generator=g)
            t_live = self.live_t.cpu()[torch.randint(0, len(self.live_t), (n,), generator=g)]
            t = torch.where(pick_live, t_live, t_uniform).to(dev)
            first = torch.isin(t, self.first_t)
            from_fast = torch.where(first, torch.ones_like(first), torch.rand(n, device=dev) < 0.5)
            z_src = torch.where(from_fast.view(-1, 1, 1, 1), z_fast, z_ref)
            eps = torch.randn_like(z_src)
            pred, img = self._paint(fast, z_fast, z_src, eps, t, pid)
            rec = m.vae.decode(z_ref.contiguous(memory_format=cl), fast)[0].float()
            out["lat"] = F.mse_loss(pred, z_ref)
            out["pix"] = F.l1_loss(img, ref)
            out["edge"] = multiscale_edge_l1(img, ref)
            out["rec"] = F.l1_loss(rec, ref)
            out["loss"] = (
                w["pix"] * out["pix"]
                + w["edge"] * out["edge"]
                + w["lat"] * out["lat"]
                + w["rec"] * out["rec"]
            )
            if w.get("line", 0.0) > 0:
                out["line"] = line_edge_l1(img, ref)
                out["loss"] = out["loss"] + w["line"] * out["line"]
            if w.get("texture", 0.0) > 0:
                out["texture"] = texture_l1(img, ref)
                out["loss"] = out["loss"] + w["texture"] * out["texture"]
            if w.get("shift", 0.0) > 0:
                out["shift"] = self._shift_loss(fast, img, eps, t, from_fast, pid, g)
                out["loss"] = out["loss"] + w["shift"] * out["shift"]
            if w.get("motion", 0.0) > 0 and self.motion_bank is not None:
                out["motion"] = self._motion_loss(g)
                out["loss"] = out["loss"] + w["motion"] * out["motion"]
            if self.gan_on:
                out["gan"] = -self.disc(img).mean()  # hinge generator loss
                out["loss"] = out["loss"] + w.get("gan", 0.0) * out["gan"]
                self._fake = img.detach()
        return out

    def _shift_loss(self, fast, img, eps, t, from_fast, pid, g) -> torch.Tensor:
        """shift_l1 on a quarter of the batch painted from the fast latent: the same input rolled
        by 1-7 pixels each way, under the same noise (live, the idol moves under a stream's
        fixed noise)."""
        rows = from_fast.nonzero().flatten()[: max(1, fast.shape[0] // 4)]
        if rows.numel() == 0:
            return img.new_zeros(())
        dy, dx = (int(v) for v in torch.randint(1, 8, (2,), generator=g))
        moved = torch.roll(fast[rows], (dy, dx), dims=(2, 3))
        moved = moved.contiguous(memory_format=self._memory_format())
        with torch.no_grad():
            z = self.models.vae.encode(moved)[0].float()
        _, painted = self._paint(moved, z, z, eps[rows], t[rows], pid[rows])
        return shift_l1(painted, img[rows], dy, dx)

    def _motion_loss(self, g: torch.Generator) -> torch.Tensor:
        """motion_l1 on `motion_batch` temporal pairs, both frames painted from their own fast
        latent under one noise and one first-slot timestep (a live stream's fixed noise)."""
        inp, ref, motion, cover, pid = self.motion_bank.sample(self.cfg.motion_batch, self.gen)
        n, _, c, h, w = inp.shape
        cl = self._memory_format()
        fast = to_unit(inp.reshape(2 * n, c, h, w)).contiguous(memory_format=cl)
        with torch.no_grad():
            z = self.models.vae.encode(fast)[0].float()
        first = self.first_t.cpu()
        t = first[torch.randint(0, len(first), (n,), generator=g)].to(self.dev).repeat_interleave(2)
        eps = torch.randn(n, *z.shape[1:], generator=g).to(self.dev).repeat_interleave(2, 0)
        _, painted = self._paint(fast, z, z, eps, t, pid.repeat_interleave(2))
        target = to_unit(ref.reshape(2 * n, c, h, w))
        factor = torch.tensor([self.cfg.motion_presets.get(name, 1.0) for name in PRESETS])
        return motion_l1(
            painted.view(n, 2, c, h, w),
            target.view(n, 2, c, h, w),
            motion,
            cover,
            factor[pid.cpu()],
        )

    def _paint(self, fast, z_fast, z_src, eps, t, pid) -> tuple[torch.Tensor, torch.Tensor]:
        """(predicted latent, its picture decoded onto `fast`): the UNet on the noisy latent
        x_t = sqrt(a_t) z_src + sqrt(1 - a_t) eps beside the fast render's latent."""
        m, cl = self.models, self._memory_format()
        x_t = self.sa[t].view(-1, 1, 1, 1) * z_src + self.s1a[t].view(-1, 1, 1, 1) * eps
        x_in = torch.cat([x_t, z_fast], dim=1).contiguous(memory_format=cl)
        pred = m.unet(x_in, t, encoder_hidden_states=self.emb[pid]).sample.float() + z_fast
        return pred, m.vae.decode(pred.contiguous(memory_format=cl), fast)[0].float()

    def _memory_format(self):
        return torch.channels_last if self.dev.type == "cuda" else torch.contiguous_format

    @property
    def gan_on(self) -> bool:
        return self.cfg.loss_weights.get("gan", 0.0) > 0 and self.step >= max(
            self.cfg.gan_start, self.cfg.ae_steps
        )

    def disc_step(self, ref_u8: torch.Tensor) -> float:
        """One hinge step of the patch discriminator: reference pictures real, paintings fake."""
        real = to_unit(ref_u8)
        with self._autocast():
            d_real, d_fake = self.disc(real).float(), self.disc(self._fake).float()
            loss = F.relu(1.0 - d_real).mean() + F.relu(1.0 + d_fake).mean()
        self.opt_d.zero_grad(set_to_none=True)
        loss.backward()
        self.opt_d.step()
        return float(loss.detach())

    def train_step(self, bank: PairBank) -> dict[str, float]:
        m = self.models
        final = self.frozen_encoder or self.step >= self.cfg.ae_steps
        if final and next(m.vae.encoder.parameters()).requires_grad:
            # the encoder is final from here on (or came with the model it started from):
            # latents stop moving, and the exported (EMA) encoder must be exactly the one the
            # denoiser learned on
            m.vae.encoder.requires_grad_(False)
            self.ema_vae.module.encoder.load_state_dict(m.vae.encoder.state_dict())
        for group in self.opt.param_groups:
            group["lr"] = self.lr_at(self.step)
        fast, ref, pid = bank.sample(self.cfg.batch, self.gen)
        gan = self.gan_on
        if gan:
            self.disc.requires_grad_(False)
        out = self.losses(fast, ref, pid)
        self.opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_([*m.unet.parameters(), *m.vae.parameters()], 1.0)
        self.opt.step()
        if gan:
            self.disc.requires_grad_(True)
            out["disc"] = torch.tensor(self.disc_step(ref))
        self.ema_vae.update_parameters(m.vae)
        if self.step >= self.cfg.ae_steps:
            self.ema_unet.update_parameters(m.unet)
        self.step += 1
        return {k: float(v.detach()) for k, v in out.items()}

    # -- the exported model -----------------------------------------------------------------

    def ema_models(self):
        """A DiffusionModels with the EMA weights (eval mode, no grad), for evaluation/export."""
        import copy

        m = copy.copy(self.models)
        m.unet = copy.deepcopy(self.ema_unet.module).eval().requires_grad_(False)
        m.vae = copy.deepcopy(self.ema_vae.module).eval().requires_grad_(False)
        if self.step <= self.cfg.ae_steps:  # the UNet's EMA has not started: use the live one
            m.unet = copy.deepcopy(self.models.unet).eval().requires_grad_(False)
        m.unet.to(memory_format=torch.contiguous_format)
        m.vae.to(memory_format=torch.contiguous_format)
        m.device = self.dev
        m.random = False
        m.label = f"Kagura model, step {self.step}"
        return m


def _fill(
    trainer: Trainer, pool: RenderPool, maker: PairMaker, bank: PairBank, n: int, ahead: int
) -> None:
    """Make n new pairs into the bank; start rendering the next `ahead` in the background."""
    cfg = trainer.cfg
    raw, specs = pool.fetch(cfg.seed, trainer.samples_made, n)
    trainer.samples_made += n
    pool.prefetch(cfg.seed, trainer.samples_made, ahead)
    idx = torch.arange(trainer.samples_made - n, trainer.samples_made, dtype=torch.int64)
    fast, ref = maker.make(raw, specs, idx)
    bank.add(fast, ref, preset_ids(specs))


def _fill_motion(trainer: Trainer, pool: RenderPool, maker: PairMaker, n: int) -> None:
    """Make n new temporal pairs into the trainer's motion bank."""
    raw0, raw1, motion, specs = pool.fetch_motion(trainer.cfg.seed, trainer.motion_made, n)
    # the looks' grain index: its own range, two frames per pair
    idx0 = 2 * torch.arange(trainer.motion_made, trainer.motion_made + n, dtype=torch.int64)
    trainer.motion_made += n
    inp, ref, m, cover = motion_pairs(maker, raw0, raw1, motion, specs, idx0)
    trainer.motion_bank.add(inp, ref, m, cover, preset_ids(specs))


def train(
    cfg: TrainConfig,
    *,
    resume: bool = True,
    log: Callable[[str], None] = print,
    on_eval: Callable[[Trainer], dict] | None = None,
) -> Trainer:
    """Run to cfg.steps (resuming from out/last.pt when present and `resume`). Returns the
    Trainer (its ema_models() are the result). on_eval(trainer) -> metrics, every eval_every."""
    t_start = time.monotonic()
    trainer = Trainer(cfg, log)
    if resume and trainer.ckpt_path.is_file():
        trainer.load(trainer.ckpt_path)
        log(f"resumed from {trainer.ckpt_path} at step {trainer.step}")
    log_file = trainer.out / "log.jsonl"
    workers = default_workers() if cfg.workers < 0 else cfg.workers
    pool = RenderPool(cfg.size, workers)
    try:
        maker = PairMaker(cfg.size, cfg.device)
        bank = PairBank(cfg.bank, cfg.size, cfg.device)
        t0 = time.monotonic()
        chunk = max(1, cfg.fresh * cfg.refresh_every)
        while bank.filled < bank.capacity:
            n = min(256, bank.capacity - bank.filled)
            left = bank.capacity - bank.filled - n
            _fill(trainer, pool, maker, bank, n, min(256, left) if left else chunk)
        log(f"bank of {bank.capacity} pairs made in {time.monotonic() - t0:.1f} s")
        motion_on = cfg.loss_weights.get("motion", 0.0) > 0
        if motion_on:
            t0 = time.monotonic()
            trainer.motion_bank = MotionBank(cfg.motion_bank, cfg.size, cfg.device)
            while trainer.motion_bank.filled < trainer.motion_bank.capacity:
                left = trainer.motion_bank.capacity - trainer.motion_bank.filled
                _fill_motion(trainer, pool, maker, min(128, left))
            log(f"motion bank of {cfg.motion_bank} pairs made in {time.monotonic() - t0:.1f} s")
        window: list[dict[str, float]] = []
        t_log = time.monotonic()
        stopped = False
        while trainer.step < cfg.steps:
            if cfg.fresh > 0 and trainer.step % cfg.refresh_every == 0:
                _fill(trainer, pool, maker, bank, chunk, chunk)
                if motion_on and cfg.motion_fresh > 0:
                    _fill_motion(trainer, pool, maker, cfg.motion_fresh)
            window.append(trainer.train_step(bank))
            step = trainer.step
            out_of_time = (
                cfg.max_minutes is not None and time.monotonic() - t_start > cfg.max_minutes * 60
            )
            if step % cfg.log_every == 0 or step == cfg.steps or out_of_time:
                now = time.monotonic()
                rec = {
                    "step": step,
                    "lr": trainer.lr_at(step - 1),
                    "elapsed_s": round(now - t_start, 2),
                    "steps_per_s": round(len(window) / max(1e-9, now - t_log), 3),
                    "samples_made": trainer.samples_made,
                }
                for key in window[-1]:
                    vals = [w[key] for w in window if key in w]
                    rec[key] = sum(vals) / len(vals)
                with log_file.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                log(
                    f"step {step}/{cfg.steps} loss {rec['loss']:.4f} "
                    f"({rec['steps_per_s']:.1f} steps/s, {rec['elapsed_s']:.0f} s)"
                )
                window, t_log = [], now
            if on_eval is not None and (step % cfg.eval_every == 0 or step == cfg.steps):
                metrics = on_eval(trainer)
                with log_file.open("a") as f:
                    f.write(json.dumps({"step": step, "eval": metrics}) + "\n")
            if step % cfg.ckpt_every == 0:
                trainer.save()
            if out_of_time:
                log(f"time limit ({cfg.max_minutes} min) at step {step}: checkpoint, resume later")
                stopped = True
                break
        trainer.save()
        trainer.stopped_early = stopped
    finally:
        pool.close()
    return trainer


def read_log(path: Path) -> tuple[list[dict], list[dict]]:
    steps, evals = [], []
    if path.is_file():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            (evals if "eval" in rec else steps).append(rec)
    return steps, evals


def plot_curves(log_path: Path, png: Path) -> Path:
    """Loss terms and held-out PSNR per preset against the step, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, evals = read_log(log_path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), dpi=100)
    for key in ("loss", "pix", "edge", "lat", "rec"):
        pts = [(r["step"], r[key]) for r in steps if key in r]
        if pts:
            ax1.plot(*zip(*pts, strict=True), label=key, linewidth=1.2)
    ax1.set_yscale("log")
    ax1.set_xlabel("step")
    ax1.set_title("training losses")
    ax1.legend()
    ax1.grid(alpha=0.3)
    for preset in PRESETS:
        pts = [(r["step"], r["eval"]["psnr"][preset]) for r in evals if "psnr" in r["eval"]]
        if pts:
            ax2.plot(*zip(*pts, strict=True), marker="o", label=preset)
    ax2.set_xlabel("step")
    ax2.set_ylabel("dB")
    ax2.set_title("held-out PSNR vs reference painter")
    ax2.legend()
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return png
