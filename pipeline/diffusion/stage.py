"""The latent-diffusion img2img stage (StreamDiffusion-style, 1–4 steps).

    DiffusionStage(models, preset, width, height, device="cpu", dtype="float16",
                   stream_batch=True, *, max_steps=None, allow_cfg=None, cuda_graph=False,
                   latent_scale=1.0, compile_unet=False, compile_cache=None,
                   capture_steps=None)
        name "diffusion", needs spec("image", size=(width, height)),
        gives spec("image", size=work_size, device=device)
        models:  a DiffusionModels (pipeline/diffusion/models.py: load_models / random_weights)
        preset:  a Preset (its .diffusion is used) or a presets.schema.Diffusion
        setup(ctx): allocates every buffer, computes the per-stream constants, warms up and,
                 with cuda_graph=True on CUDA, captures one CUDA graph per reachable step shape
                 (see below) and checks each replay against eager; a failed capture or check
                 raises GraphCaptureError with the reason (never a silent slow path).
                 With compile_unet=True (CUDA, with cuda_graph=True) the UNet is compiled by
                 torch.compile first, then captured (see "Compiled UNet" below).
        compile_report: a CompileReport after setup with compile_unet (seconds, cache hit),
                 else None.
        process(frame) / process_batch(frames): one stream step per frame, in order.
        set_preset(preset): swaps prompt embeddings, strength/steps/seed constants IN PLACE.
        reset(): start a new stream (the next frame re-primes the in-flight latents).
        step(): one step on the input already staged (for benchmarks; no conversions).
        lag_frames: how many frames the output image lags the input (steps - 1 with stream
                 batch, else 0).

Sizes. At latent_scale 1 the work size is the input size: a side that is not a multiple of 8
(the autoencoder's factor; 1080p x2 paints at 960x540) is padded by repeating its edge pixels
up to the next multiple and the painted picture is cropped back, so no pixel is resampled.
Other scales (the quality ladder's smaller rungs) give the input size times `latent_scale`,
rounded to a multiple of 8 (`work_size_for`); the latent is the padded size / 8. When the work
size differs from the input, RGB, alpha and motion vectors are resized (bilinear; motion
vectors are rescaled too).

Constants per stream (computed once in set_preset, never per frame): the prompt embedding
(cached per prompt — the negative prompt is encoded only when guidance > 1, and only then does
the UNet run the unconditional half), the timesteps from strength and steps,
  t_i = floor(strength * T * (k - i) / k) - 1,   i = 0 .. k-1   (T = 1000 training steps;
  strength 1 and k = 4 gives 999, 749, 499, 249, the SD-Turbo/ADD steps),
sqrt(alphā_t), sqrt(1 - alphā_t), the LCM boundary scalings (c_skip, c_out with
sigma_data 0.5 and timestep scaling 10; c_skip = 0, c_out = 1 for "turbo") and one fixed noise
tensor per step slot, drawn from the preset's seed (the same noise every frame: stable video).

Stream batch (StreamDiffusion). With k steps, k frames are in flight: slot i holds a latent at
noise level t_i. One UNet call with batch k advances every slot by one step: the new frame
enters at t_0, the latent in slot k-1 leaves fully denoised and is decoded. So the picture
returned for input n is the one painted from input n - (k - 1): **the output lags the input by
k - 1 frames** (`lag_frames`). The stage returns the *current* frame (its pts and params)
carrying that lagged image, and the motion vectors *of the lagged picture* (the step from its
predecessor to it), so the temporal stage after it warps history and picture consistently; a
caller that needs picture and pts to match delays the audio / metadata by `lag_frames` frames.
No blank or brown start: on the first frame of a stream (and after reset() or a
steps/strength/seed change) the empty slots are primed with that frame's latent noised to each
slot's level, so outputs 0 .. k-2 are one-step results of frame 0.
With stream_batch=False each frame runs its k UNet calls (batch 1) one after another: no lag,
k times the UNet cost.

Image-conditioned UNets (Kagura's own model, pipeline/diffusion/kagura_model.py): a UNet whose
in_channels are twice its out_channels gets the clean latent of the frame it paints stacked
onto the noisy one. With stream batch slot i paints frame n - i, so the stage keeps the input
latents of the frames in flight beside their noisy latents (`_zbuf`, primed like `_xbuf`).
prediction_type "sample": the UNet returns the clean latent itself — or, with the scheduler
config's "image_residual" (Kagura's model), the clean latent minus the input image's latent: the
picture starts from the input and the UNet paints the difference.

Guidance. guidance <= 1 (the SD-Turbo/LCM case): one conditional UNet pass, nothing else.
guidance > 1: classifier-free guidance with the negative prompt, both halves in ONE batched
UNet call (batch 2k): eps = eps_neg + g (eps_pos - eps_neg). StreamDiffusion's residual CFG
(no second half at all) is not implemented. A UNet with `time_cond_proj_dim` (LCM-distilled)
gets the guidance as its w-embedding instead (w = g - 1; g = 8.5 when the preset says 0).

Preset switching. set_preset() copies the new embeddings and constants into the same tensors:
no model, buffer or CUDA graph is rebuilt. A prompt-only change keeps the frames in flight
(they finish under the new prompt); a change of steps, strength or seed re-primes from the
next frame, so no blank frame either way. Buffers are allocated for `max_steps` slots
(default: the first preset's steps) and CUDA graphs are captured for every k <= max_steps,
or only for the `capture_steps` given (and for the CFG batch when allow_cfg, default: the first
preset's guidance > 1); a preset outside that raises ValueError naming the argument to raise —
nothing is rebuilt behind the caller's back.

Threads: set_preset()/reset() write the tensors the step reads; call them between frames on
the thread that runs the stage (e.g. from the graph's control queue), not concurrently.

Alpha. Diffusion paints RGB only. The RGB planes go in premultiplied (= the idol composited
over black, an ordinary opaque picture) and the painted RGB is clamped to 0 <= rgb <= alpha on
the way out, so it is valid premultiplied again; the alpha channel is the input's (resized
only when the work size differs): transparent pixels stay exactly transparent.

Compiled UNet (compile_unet=True; pipeline/diffusion/compile.py). At setup, before the CUDA
graphs are captured, the UNet forward is wrapped with torch.compile (inductor, default mode,
fullgraph=True, dynamic=False) and called once for every shape the graphs will use (one per
stream-batch size k <= max_steps, and the CFG batch when allow_cfg), so the captured graphs
replay inductor's fused kernels (H200, SD-Turbo-size UNet: 9.1 ms graphed -> 5.1 ms compiled
then graphed). Inductor's FX-graph, AOTAutograd and triton caches live in `compile_cache`
(default core.paths.cache_dir("inductor")): the first start pays the compile
(~70 s on the H200), later starts load it. `compile_report` says how long it took and whether
it was a cache hit. A failed compile raises CompileError with the reason — never a silent
eager fallback. compile_unet needs device="cuda" and cuda_graph=True: on the CPU (or without
graphs) the constructor raises ValueError (a compiled UNet is only worth its start-up cost
inside a replayed CUDA graph). The models are not modified: the compiled wrapper belongs to
the stage, so an eager stage on the same models stays eager.

dtype: float16 / bfloat16 / float32 on CUDA; float32 on the CPU (models are loaded that way
too). Latents and images are channels_last; scheduler arithmetic is done in float32.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from core.frame import Frame
from core.stage import BaseStage, Context, spec
from core.trace import step
from pipeline.diffusion.compile import CompileError, CompileReport

__all__ = [
    "CompileError",
    "CompileReport",
    "DiffusionStage",
    "GraphCaptureError",
    "guidance_embedding",
    "timesteps_for",
]

T_TRAIN = 1000
SIGMA_DATA = 0.5  # LCM boundary condition
TIMESTEP_SCALING = 10.0
LCM_DEFAULT_GUIDANCE = 8.5
EMBED_CACHE = 32  # prompt embeddings kept (prompt, negative) -> tensors


class GraphCaptureError(RuntimeError):
    """CUDA-graph capture of the diffusion step failed or its replay did not match eager."""


def timesteps_for(strength: float, steps: int, num_train: int = T_TRAIN) -> list[int]:
    """t_i = floor(strength * T * (k - i) / k) - 1, clamped to [0, T - 1]."""
    return [
        min(num_train - 1, max(0, math.floor(strength * num_train * (steps - i) / steps) - 1))
        for i in range(steps)
    ]


def guidance_embedding(w: float, dim: int) -> torch.Tensor:
    """Sinusoidal embedding of the guidance scale w (scaled by 1000), as LCM-distilled UNets
    take it through `timestep_cond`. float32 (1, dim)."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))
    arg = torch.tensor([w * 1000.0])[:, None] * freqs[None]
    emb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
    if dim % 2:
        emb = F.pad(emb, (0, 1))
    return emb


def work_size_for(size: tuple[int, int], latent_scale: float) -> tuple[int, int]:
    """The size DiffusionStage paints at for an input of `size` (see "Sizes" above)."""
    if latent_scale == 1.0:
        return (int(size[0]), int(size[1]))
    return tuple(max(1, round(side * latent_scale / 8)) * 8 for side in size)


def _diffusion_of(preset: Any):
    d = getattr(preset, "diffusion", preset)
    for key in ("prompt", "negative_prompt", "strength", "steps", "seed", "guidance"):
        if not hasattr(d, key):
            raise TypeError(
                f"diffusion: expected a Preset or its Diffusion section, got {preset!r}"
            )
    return d


def _channels_last(module: torch.nn.Module) -> bool:
    """Whether every 4-d weight of `module` is already in channels-last memory format."""
    return all(
        p.is_contiguous(memory_format=torch.channels_last)
        for p in module.parameters()
        if p.dim() == 4
    )


class DiffusionStage(BaseStage):
    name = "diffusion"
    needs = spec("image")
    gives = spec("image")
    max_batch = 1

    def __init__(
        self,
        models,
        preset,
        width: int,
        height: int,
        device: str = "cpu",
        dtype: str | torch.dtype = "float16",
        stream_batch: bool = True,
        *,
        max_steps: int | None = None,
        allow_cfg: bool | None = None,
        cuda_graph: bool = False,
        latent_scale: float = 1.0,
        compile_unet: bool = False,
        compile_cache: Path | str | None = None,
        capture_steps: Sequence[int] | None = None,
    ):
        from pipeline.diffusion.models import _dtype

        self.models = models
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"diffusion: device must be 'cpu' or 'cuda', got {device!r}")
        self.dtype = _dtype(dtype, self.device)
        if models.device.type != self.device.type or models.dtype != self.dtype:
            raise ValueError(
                f"diffusion: models are {models.dtype} on {models.device}, the stage wants "
                f"{self.dtype} on {self.device} (load them with the same dtype/device)"
            )
        d = _diffusion_of(preset)
        self.stream_batch = bool(stream_batch)
        self.max_steps = int(max_steps if max_steps is not None else d.steps)
        if not 1 <= self.max_steps <= 8:
            raise ValueError(f"diffusion: max_steps must be 1..8, got {self.max_steps}")
        # the step counts the graphs are captured for: every k <= max_steps unless told (an
        # offline render keeps its preset's steps, so one capture is all it replays)
        self.capture_steps = tuple(
            sorted(set(capture_steps)) if capture_steps else range(1, self.max_steps + 1)
        )
        if not all(1 <= k <= self.max_steps for k in self.capture_steps):
            raise ValueError(
                f"diffusion: capture_steps {tuple(capture_steps or ())} must lie in 1..max_steps "
                f"({self.max_steps})"
            )
        self.lcm_w = models.unet.config.get("time_cond_proj_dim") is not None
        # a UNet with twice the latent channels in stacks the clean input latent onto the noisy
        # one (InstructPix2Pix-style image conditioning; Kagura's own model)
        self.image_cond = int(models.unet.config.in_channels) == 2 * int(
            models.unet.config.out_channels
        )
        self.image_residual = self.image_cond and models.image_residual
        # a guided decoder (Kagura's own model) paints onto the full-resolution input picture
        self.guided = bool(getattr(models.vae, "guided", False))
        self.allow_cfg = bool(allow_cfg if allow_cfg is not None else self._wants_cfg(d))
        self.cuda_graph = bool(cuda_graph) and self.device.type == "cuda"
        self.compile_unet = bool(compile_unet)
        if self.compile_unet and self.device.type != "cuda":
            raise ValueError(
                f"diffusion: compile_unet=True is CUDA-only (device is {self.device.type!r}); "
                "on the CPU the UNet runs eager — drop compile_unet"
            )
        if self.compile_unet and not self.cuda_graph:
            raise ValueError(
                "diffusion: compile_unet=True needs cuda_graph=True (the compiled UNet is "
                "captured in the CUDA graphs; compiled without graphs it is not supported)"
            )
        self.compile_cache = Path(compile_cache) if compile_cache is not None else None
        self.compile_report: CompileReport | None = None
        self._unet_fn = models.unet  # the compiled wrapper after setup with compile_unet
        self.in_size = (int(width), int(height))
        self.work_size = work_size_for(self.in_size, latent_scale)
        lw, lh = (-(-side // 8) for side in self.work_size)
        self.latent_size = (lw, lh)
        self.pad_size = (lw * 8, lh * 8)  # the autoencoder's size; cropped to work_size
        self.needs = spec("image", size=self.in_size)
        self.gives = spec("image", size=self.work_size, device=self.device.type)
        self._preset = d
        self._active: Any = None  # the Diffusion section whose constants are in the buffers
        self._k = d.steps
        self._cfg = False
        self._embeds: OrderedDict[tuple[str, str | None], tuple] = OrderedDict()
        self._graphs: dict[tuple[int, bool], torch.cuda.CUDAGraph] = {}
        # the motion vectors of the frames since the stream (re)started: see process()
        self._motions: deque = deque(maxlen=9)
        self._buffers_ready = False
        self.setup_done = False

    # -- helpers ------------------------------------------------------------------------------

    def _wants_cfg(self, d) -> bool:
        return d.guidance > 1.0 and not self.lcm_w

    @property
    def steps(self) -> int:
        return self._k

    @property
    def lag_frames(self) -> int:
        return self._k - 1 if self.stream_batch else 0

    @property
    def preset(self):
        return self._preset

    def _allocate(self) -> None:
        if self._buffers_ready:
            return
        m, dev, dt = self.models, self.device, self.dtype
        lw, lh = self.latent_size
        w, h = self.work_size
        pw, ph = self.pad_size
        n = self.max_steps
        cl = torch.channels_last
        tok_len = min(
            int(m.tokenizer.model_max_length), int(m.text_encoder.config.max_position_embeddings)
        )
        self._tok_len = tok_len
        dim = m.cross_attention_dim
        f32 = {"dtype": torch.float32, "device": dev}
        self._img = torch.zeros(1, 3, ph, pw, dtype=dt, device=dev).to(memory_format=cl)
        self._alpha = torch.zeros(h, w, dtype=torch.uint8, device=dev)
        self._out = torch.zeros(h, w, 4, dtype=torch.uint8, device=dev)
        self._cond = torch.zeros(1, tok_len, dim, dtype=dt, device=dev)
        self._uncond = torch.zeros(1, tok_len, dim, dtype=dt, device=dev)
        self._guid = torch.zeros((), **f32)
        self._t = torch.zeros(n, dtype=torch.long, device=dev)
        self._sa = torch.ones(n, 1, 1, 1, **f32)  # sqrt(alphā_t)
        self._s1a = torch.zeros(n, 1, 1, 1, **f32)  # sqrt(1 - alphā_t)
        self._cskip = torch.zeros(n, 1, 1, 1, **f32)
        self._cout = torch.ones(n, 1, 1, 1, **f32)
        self._noise = torch.zeros(n, 4, lh, lw, **f32).to(memory_format=cl)
        self._xbuf = torch.zeros(n, 4, lh, lw, **f32).to(memory_format=cl)  # slots 1..k-1
        # the input latents of the frames in slots 1..k-1 (image-conditioned UNets only)
        self._zbuf = torch.zeros(n if self.image_cond else 1, 4, lh, lw, **f32)
        # ... and the input pictures of those frames, for a guided decoder
        self._gbuf = torch.zeros(n if self.guided else 1, 3, ph, pw, dtype=dt, device=dev)
        self._fresh = torch.ones((), dtype=torch.bool, device=dev)
        proj = m.unet.config.get("time_cond_proj_dim")
        self._wemb = torch.zeros(1, proj, dtype=dt, device=dev) if proj else None
        self._seed: int | None = None
        self._buffers_ready = True
        self._apply_preset(self._preset, first=True)

    # -- prompt embeddings ---------------------------------------------------------------------

    @torch.no_grad()
    def _encode_text(self, text: str) -> torch.Tensor:
        tok = self.models.tokenizer(
            text,
            padding="max_length",
            max_length=self._tok_len,
            truncation=True,
            return_tensors="pt",
        )
        ids = tok.input_ids.to(self.device)
        return self.models.text_encoder(ids)[0].to(self.dtype)

    def _embeddings(self, d, cfg: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = (d.prompt, d.negative_prompt if cfg else None)
        hit = self._embeds.get(key)
        if hit is None:
            cond = self._encode_text(d.prompt)
            uncond = self._encode_text(d.negative_prompt) if cfg else None
            hit = self._embeds[key] = (cond, uncond)
            while len(self._embeds) > EMBED_CACHE:
                self._embeds.popitem(last=False)
        else:
            self._embeds.move_to_end(key)
        return hit

    # -- preset constants ----------------------------------------------------------------------

    def set_preset(self, preset) -> None:
        """Switch style mid-stream: same buffers, same graphs, new constants (see module doc)."""
        d = _diffusion_of(preset)
        if d.steps > self.max_steps:
            raise ValueError(
                f"diffusion: preset wants {d.steps} steps, this stage was built for at most "
                f"{self.max_steps} (pass max_steps={d.steps} when creating it)"
            )
        if self._wants_cfg(d) and not self.allow_cfg:
            raise ValueError(
                f"diffusion: preset wants guidance {d.guidance} (> 1, a negative-prompt pass); "
                "create the stage with allow_cfg=True"
            )
        if not self._buffers_ready:
            self._preset, self._k = d, d.steps
            return
        self._apply_preset(d)

    @torch.no_grad()
    def _apply_preset(self, d, first: bool = False) -> None:
        cfg = self._wants_cfg(d)
        cond, uncond = self._embeddings(d, cfg)
        self._cond.copy_(cond)
        if uncond is not None:
            self._uncond.copy_(uncond)
        g = d.guidance
        self._guid.fill_(g)
        if self._wemb is not None:
            w = (g if g > 0 else LCM_DEFAULT_GUIDANCE) - 1.0
            self._wemb.copy_(guidance_embedding(w, self._wemb.shape[1]))
        old = self._active
        k = d.steps
        restart = (
            first
            or old is None
            or (old.steps, old.strength, old.seed)
            != (
                d.steps,
                d.strength,
                d.seed,
            )
        )
        if restart:
            ts = timesteps_for(d.strength, k, len(self.models.alphas_cumprod))
            ts += [ts[-1]] * (self.max_steps - k)  # unused slots: harmless copies
            ac = self.models.alphas_cumprod[ts]  # float64
            scaled = torch.tensor(ts, dtype=torch.float64) * TIMESTEP_SCALING
            if self.models.sampler == "lcm":
                cskip = SIGMA_DATA**2 / (scaled**2 + SIGMA_DATA**2)
                cout = scaled / (scaled**2 + SIGMA_DATA**2).sqrt()
            else:
                cskip, cout = torch.zeros_like(scaled), torch.ones_like(scaled)
            col = (-1, 1, 1, 1)
            self._t.copy_(torch.tensor(ts, dtype=torch.long))
            self._sa.copy_(ac.sqrt().view(col))
            self._s1a.copy_((1.0 - ac).sqrt().view(col))
            self._cskip.copy_(cskip.view(col))
            self._cout.copy_(cout.view(col))
            if self._seed != d.seed:
                gen = torch.Generator().manual_seed(int(d.seed))
                lw, lh = self.latent_size
                for i in range(self.max_steps):  # row by row: the same noise for any max_steps
                    self._noise[i].copy_(torch.randn(4, lh, lw, generator=gen))
                self._seed = d.seed
            self._restart_stream()
        self._k, self._cfg, self._active, self._preset = k, cfg, d, d

    # -- the step -------------------------------------------------------------------------------

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        vae = self.models.vae
        if self.models.vae_kind == "tiny":
            z = vae.encode(x, return_dict=False)[0]
        else:
            z = vae.encode(x, return_dict=False)[0].mean
        return z.float() * self.models.vae_scale

    def _decode(self, z: torch.Tensor, guide: torch.Tensor) -> torch.Tensor:
        z = (z / self.models.vae_scale).to(self.dtype).contiguous(memory_format=torch.channels_last)
        if self.guided:
            return self.models.vae.decode(z, guide, return_dict=False)[0]
        return self.models.vae.decode(z, return_dict=False)[0]

    def _unet(
        self, x: torch.Tensor, t: torch.Tensor, cfg: bool, image: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x float32 (b, 4, lh, lw) at timesteps t (b,) -> x0 prediction (denoised), float32.
        `image`: the clean input latents (b, 4, lh, lw) a conditioned UNet stacks onto x."""
        b = x.shape[0]
        x_in = torch.cat([x, image], dim=1) if self.image_cond else x
        xin = x_in.to(self.dtype).contiguous(memory_format=torch.channels_last)
        emb = self._cond.expand(b, -1, -1)
        tt = t
        if cfg:
            xin = torch.cat([xin, xin])
            tt = torch.cat([t, t])
            emb = torch.cat([self._uncond.expand(b, -1, -1), emb])
        kwargs = {}
        if self._wemb is not None:
            kwargs["timestep_cond"] = self._wemb.expand(xin.shape[0], -1)
        out = self._unet_fn(xin, tt, encoder_hidden_states=emb, return_dict=False, **kwargs)
        out = out[0].float()
        if cfg:
            neg, pos = out.chunk(2)
            out = neg + self._guid * (pos - neg)
        n = x.shape[0]
        sa, s1a = self._sa_for, self._s1a_for
        if self.models.prediction_type == "sample":
            x0 = out + image.float() if self.image_residual else out
        elif self.models.prediction_type == "v_prediction":
            x0 = sa[:n] * x - s1a[:n] * out
        else:
            x0 = (x - s1a[:n] * out) / sa[:n]
        return self._cout_for[:n] * x0 + self._cskip_for[:n] * x

    def _run(self, k: int, cfg: bool) -> None:
        """Reads the staged input (_img, _alpha), writes _out; advances the stream state.
        Only static tensors in, static tensors out: this is what a CUDA graph captures."""
        z = self._encode(self._img)  # (1, 4, lh, lw) float32
        sa, s1a, noise = self._sa, self._s1a, self._noise
        guide = self._img  # the picture the decoded latent belongs to
        if self.stream_batch:
            self._sa_for, self._s1a_for = sa, s1a
            self._cskip_for, self._cout_for = self._cskip, self._cout
            x = sa[:1] * z + s1a[:1] * noise[:1]
            image = z
            if k > 1:
                primed = sa[1:k] * z + s1a[1:k] * noise[1:k]
                x = torch.cat([x, torch.where(self._fresh, primed, self._xbuf[1:k])])
                if self.image_cond:  # slot i paints frame n - i: its own input latent
                    older = torch.where(self._fresh, z.expand(k - 1, -1, -1, -1), self._zbuf[1:k])
                    image = torch.cat([z, older])
                if self.guided:  # the output is slot k-1's frame: decode onto its picture
                    pics = torch.where(
                        self._fresh, self._img.expand(k - 1, -1, -1, -1), self._gbuf[1:k]
                    )
                    pics = torch.cat([self._img, pics])
                    guide = pics[k - 1 : k]
            den = self._unet(x, self._t[:k], cfg, image)
            if k > 1:
                self._xbuf[1:k].copy_(sa[1:k] * den[: k - 1] + s1a[1:k] * noise[1:k])
                if self.image_cond:
                    self._zbuf[1:k].copy_(image[: k - 1])
                if self.guided:
                    self._gbuf[1:k].copy_(pics[: k - 1])
            self._fresh.fill_(False)
            lat = den[k - 1 : k]
        else:
            x = sa[:1] * z + s1a[:1] * noise[:1]
            for i in range(k):
                self._sa_for, self._s1a_for = sa[i : i + 1], s1a[i : i + 1]
                self._cskip_for, self._cout_for = self._cskip[i : i + 1], self._cout[i : i + 1]
                lat = self._unet(x, self._t[i : i + 1], cfg, z)
                if i + 1 < k:
                    x = sa[i + 1 : i + 2] * lat + s1a[i + 1 : i + 2] * noise[i + 1 : i + 2]
        w, h = self.work_size
        y = self._decode(lat, guide)[..., :h, :w]  # (1, 3, h, w) in [-1, 1], padding cropped
        a = self._alpha.to(torch.float32)
        rgb = ((y[0].float() + 1.0) * 127.5).clamp_(0.0, 255.0)
        rgb = torch.minimum(rgb, a).add_(0.5).floor_()
        self._out[..., :3].copy_(rgb.permute(1, 2, 0))
        self._out[..., 3].copy_(self._alpha)

    @torch.no_grad()
    def step(self) -> None:
        """One step on the staged input: graph replay when captured, else eager."""
        graph = self._graphs.get((self._k, self._cfg))
        if graph is not None:
            graph.replay()
        elif self.cuda_graph:  # never fall back to eager silently
            raise GraphCaptureError(
                f"diffusion: no CUDA graph for steps={self._k} cfg={self._cfg} "
                + ("(not captured)" if self.setup_done else "(call setup() first)")
            )
        else:
            self._run(self._k, self._cfg)

    # -- graph capture ------------------------------------------------------------------------

    def _state(self) -> list[torch.Tensor]:
        return [self._xbuf.clone(), self._fresh.clone(), self._zbuf.clone(), self._gbuf.clone()]

    def _restore(self, state: list[torch.Tensor]) -> None:
        self._xbuf.copy_(state[0])
        self._fresh.copy_(state[1])
        self._zbuf.copy_(state[2])
        self._gbuf.copy_(state[3])

    @torch.no_grad()
    def _capture(self, k: int, cfg: bool, pool) -> torch.cuda.CUDAGraph:
        dev = self.device
        state = self._state()
        try:
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                for _ in range(2):  # warm-up outside capture (cuDNN/cuBLAS pick algorithms)
                    self._restore(state)
                    self._run(k, cfg)
            torch.cuda.current_stream(dev).wait_stream(side)
            ref_out = self._out.clone()  # eager result of one step from `state`
            ref_buf = self._state()
            self._restore(state)
            graph = torch.cuda.CUDAGraph()
            # thread_local, on a stream of its own: a live chain prepares its lower rungs
            # while its frame thread keeps issuing frames (pipeline/live_gpu.py)
            with torch.cuda.graph(graph, pool=pool, stream=side, capture_error_mode="thread_local"):
                self._run(k, cfg)
            graph.replay()
            torch.cuda.synchronize(dev)
        except Exception as exc:
            raise GraphCaptureError(
                f"diffusion: CUDA-graph capture failed for steps={k} cfg={cfg} at "
                f"{self.work_size[0]}x{self.work_size[1]}: {type(exc).__name__}: "
                + " ".join(str(exc).split())[:300]
            ) from exc
        diff = (self._out.int() - ref_out.int()).abs().float().mean().item()
        bdiff = (self._xbuf - ref_buf[0]).abs().max().item() if k > 1 else 0.0
        self._restore(state)
        if not diff <= 1.0 or not bdiff <= 0.05 * max(1.0, ref_buf[0].abs().max().item()):
            raise GraphCaptureError(
                f"diffusion: CUDA-graph replay for steps={k} cfg={cfg} does not match eager "
                f"(mean |Δ| {diff:.3f} on the image, max |Δ| {bdiff:.4f} on the latents)"
            )
        return graph

    # -- compiled UNet -------------------------------------------------------------------------

    def _shapes(self) -> list[tuple[int, bool]]:
        cfgs = [False, True] if self.allow_cfg else [False]
        return [(k, cfg) for cfg in cfgs for k in self.capture_steps]

    @torch.no_grad()
    def _compile(self) -> None:
        """torch.compile the UNet and call it once per shape the graphs will capture (the
        compile happens at those first calls); fills compile_report. Raises CompileError."""
        from pipeline.diffusion.compile import (
            cache_counters,
            compile_module,
            release_compile_workers,
            use_compile_cache,
        )

        root = use_compile_cache(self.compile_cache)
        shapes = self._shapes()
        before = cache_counters()
        state = self._state()
        t0 = time.perf_counter()
        try:
            self._unet_fn = compile_module(self.models.unet, shapes=len(shapes))
            for k, cfg in shapes:
                self._restore(state)
                self._run(k, cfg)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            self._unet_fn = self.models.unet
            raise CompileError(
                f"diffusion: torch.compile of the UNet failed at "
                f"{self.work_size[0]}x{self.work_size[1]} (cache {root}): "
                f"{type(exc).__name__}: " + " ".join(str(exc).split())[:400]
            ) from exc
        finally:
            self._restore(state)
        self.compile_report = CompileReport.from_counters(
            time.perf_counter() - t0, root, len(shapes), before, cache_counters()
        )
        release_compile_workers()

    # -- life cycle ---------------------------------------------------------------------------

    @torch.no_grad()
    def setup(self, ctx: Context | None = None) -> None:
        self._allocate()
        m = self.models
        if self.device.type == "cuda":
            # once per model: a live chain sets up its lower rungs' stages while the frame
            # thread runs the same modules (pipeline/ladder/prepare.py)
            for module in (m.unet, m.vae):
                if not _channels_last(module):
                    module.to(memory_format=torch.channels_last)
        # warm-up on a mid-grey opaque frame, for the current shape
        self._img.fill_(0.0)
        self._alpha.fill_(255)
        if self.compile_unet:
            self._compile()
        self._run(self._k, self._cfg)
        size = f"{self.work_size[0]}x{self.work_size[1]}"
        step(f"diffusion {size} warmed")
        if self.cuda_graph:
            self._graphs.clear()
            pool = torch.cuda.graph_pool_handle()
            for k, cfg in self._shapes():
                self._graphs[(k, cfg)] = self._capture(k, cfg, pool)
                step(f"diffusion {size} graph steps={k}{' cfg' if cfg else ''} captured")
        self._restart_stream()  # the warm-up frame is not part of the stream
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.setup_done = True

    def reset(self) -> None:
        """A new stream: the next frame primes the in-flight slots (no blank frame)."""
        if self._buffers_ready:
            self._restart_stream()

    def _restart_stream(self) -> None:
        """The next step primes the in-flight slots; the lagged motion starts afresh."""
        self._fresh.fill_(True)
        self._motions.clear()

    def close(self) -> None:
        self._graphs.clear()
        self._unet_fn = self.models.unet
        self._embeds.clear()
        self._buffers_ready = False
        self.setup_done = False

    # -- frames ---------------------------------------------------------------------------------

    @torch.no_grad()
    def _stage_input(self, img: torch.Tensor) -> None:
        w, h = self.work_size
        x = img.to(self.device, non_blocking=True).permute(2, 0, 1)[None]  # (1, 4, H, W)
        rgb = x[:, :3].to(self.dtype)
        if (img.shape[1], img.shape[0]) != (w, h):
            rgb = F.interpolate(rgb, size=(h, w), mode="bilinear", align_corners=False)
            a = F.interpolate(x[:, 3:].float(), size=(h, w), mode="bilinear", align_corners=False)
            self._alpha.copy_(a[0, 0].add_(0.5).clamp_(0, 255))
        else:
            self._alpha.copy_(x[0, 3])
        pw, ph = self.pad_size
        if (pw, ph) != (w, h):  # edge pixels repeated: no seam for the convolutions to paint
            rgb = F.pad(rgb.float(), (0, pw - w, 0, ph - h), mode="replicate")
        self._img.copy_(rgb.div_(127.5).sub_(1.0))

    def _motion(self, motion: torch.Tensor | None, src: tuple[int, int]) -> torch.Tensor | None:
        w, h = self.work_size
        if motion is None or src == (w, h):
            return motion
        m = motion.permute(2, 0, 1)[None].float()
        m = F.interpolate(m, size=(h, w), mode="bilinear", align_corners=False)[0]
        scale = torch.tensor([w / src[0], h / src[1]], device=m.device).view(2, 1, 1)
        return (m * scale).permute(1, 2, 0).contiguous()

    def apply(self, image: torch.Tensor) -> torch.Tensor:
        """uint8 (H, W, 4) premultiplied -> uint8 (h, w, 4) premultiplied on `device` (a new
        tensor): one stream step. The picture lags by `lag_frames` (see module doc)."""
        if image.dtype != torch.uint8 or image.ndim != 3 or image.shape[-1] != 4:
            raise ValueError(
                f"diffusion: expected uint8 (H, W, 4), got {image.dtype} {tuple(image.shape)}"
            )
        self._allocate()
        self._stage_input(image)
        self.step()
        return self._out.clone()

    def process(self, frame: Frame) -> Frame:
        t0 = time.perf_counter()
        img = frame.image
        if img is None:
            raise ValueError(f"diffusion: frame {frame.index} has no image")
        out = self.apply(img)  # a stream (re)started by it has cleared _motions
        motion = self._motion(frame.motion, (img.shape[1], img.shape[0]))
        if self.lag_frames:
            self._motions.append(motion)
            # the picture is frame n - lag's: its motion is the one that arrived lag frames ago
            # (a primed stream repeats its first picture, which has no motion: zero)
            lag = self.lag_frames
            if len(self._motions) > lag:
                motion = self._motions[-1 - lag]
            elif motion is not None:
                motion = torch.zeros_like(motion)
        ms = (time.perf_counter() - t0) * 1000.0
        return frame.with_(image=out, motion=motion).timed(self.name, ms)
