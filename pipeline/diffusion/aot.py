"""The UNet as AOTInductor packages on disk: a restart loads compiled code, it traces nothing.

    AotUnet(unet, cache_dir)         callable like the UNet (sample, timestep,
                                     encoder_hidden_states=..., return_dict=False,
                                     timestep_cond=...) -> (out,); one package per input shape
    AotUnet.built / .loaded          how many shapes were compiled / came from the disk
    package_key(unet, inputs) -> str what a package is keyed by (see below)

Why: torch.compile with inductor's on-disk caches (pipeline/diffusion/compile.py) still lets
Dynamo trace the UNet at every start — ~10 s for the SD-Turbo-size UNet on the H200 against
~70 s cold. An AOTInductor package is the compiled UNet of one input shape as a shared library
(torch.export, then inductor ahead of time); loading it is a library load.

Weights are NOT in the package (inductor's `aot_inductor.package_constants_in_so = False`,
and `use_runtime_constant_folding`, so that what inductor folds from the weights is computed
at load too): after loading, the package is pointed at the stage's own UNet tensors
(`load_constants`, user-managed: no copy). So one package serves every checkpoint of an
architecture, and a package can never bring weights that are not the loaded model's (tested:
a package built with one model's weights runs another's exactly).

Key: sha256 over the UNet's class and config, every parameter's and buffer's name, shape,
dtype and strides, every input's shape, dtype and strides (channels_last matters), the torch version and
the device (GPU name and compute capability, or "cpu"). A package for another shape, model
architecture, dtype, torch or GPU is a different file: never a wrong hit, only a miss.

No silent fallback: a shape that fails to export or compile raises CompileError with the
reason; the caller decides (the diffusion stage turns it into a setup error).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from pipeline.diffusion.compile import CompileError

__all__ = ["AotUnet", "package_key"]

FOLDED = "_FOLDED_CONST"  # inductor's name prefix for constants it folds from the weights


class _Forward(torch.nn.Module):
    """The UNet call the diffusion stage makes, with positional tensors only (what
    torch.export takes): (sample, timestep, encoder_hidden_states[, timestep_cond])."""

    def __init__(self, unet: torch.nn.Module) -> None:
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states, timestep_cond=None):
        kwargs = {} if timestep_cond is None else {"timestep_cond": timestep_cond}
        out = self.unet(
            sample, timestep, encoder_hidden_states=encoder_hidden_states, return_dict=False,
            **kwargs,
        )  # fmt: skip
        return out[0]


def _device_text(device: torch.device) -> str:
    if device.type != "cuda":
        return device.type
    major, minor = torch.cuda.get_device_capability(device)
    return f"cuda:{torch.cuda.get_device_name(device)}:sm{major}{minor}"


def package_key(unet: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> str:
    """The package file name's key for `unet` called with `inputs` (see the module doc)."""
    config = getattr(unet, "config", {})
    tensors = [
        (name, tuple(t.shape), str(t.dtype), tuple(t.stride()))
        for name, t in (*unet.named_parameters(), *unet.named_buffers())
    ]
    device = next(unet.parameters()).device
    parts = {
        "class": f"{type(unet).__module__}.{type(unet).__qualname__}",
        "config": {k: config[k] for k in sorted(config)} if config else None,
        "tensors": tensors,
        "inputs": [(tuple(x.shape), str(x.dtype), tuple(x.stride())) for x in inputs],
        "torch": torch.__version__,
        "device": _device_text(device),
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class AotUnet:
    """The UNet through AOTInductor packages in `cache_dir`, built or loaded per input shape
    at its first call (the diffusion stage calls every shape once at setup)."""

    def __init__(self, unet: torch.nn.Module, cache_dir: Path | str) -> None:
        self.unet = unet
        self.cache_dir = Path(cache_dir)
        self._forward = _Forward(unet).eval()
        self._runners: dict[tuple, object] = {}
        self.built = 0  # shapes compiled by this process
        self.loaded = 0  # shapes loaded from packages on disk
        self.seconds = 0.0  # time spent building or loading

    def __call__(self, sample, timestep, encoder_hidden_states=None, return_dict=False, **kw):
        inputs = [sample, timestep, encoder_hidden_states]
        if kw.get("timestep_cond") is not None:
            inputs.append(kw.pop("timestep_cond"))
        if kw:
            raise TypeError(f"AotUnet: unexpected arguments {sorted(kw)}")
        inputs = tuple(inputs)
        sig = tuple((tuple(x.shape), x.dtype, tuple(x.stride())) for x in inputs)
        runner = self._runners.get(sig)
        if runner is None:
            runner = self._runners[sig] = self._runner(inputs)
        return (runner(*inputs),)

    def _runner(self, inputs: tuple[torch.Tensor, ...]):
        t0 = time.perf_counter()
        path = self.cache_dir / f"unet-{package_key(self.unet, inputs)}.pt2"
        shape = "x".join(map(str, inputs[0].shape))
        if not path.exists():
            self._build(inputs, path, shape)
            self.built += 1
        else:
            self.loaded += 1
        try:
            runner = torch._inductor.aoti_load_package(str(path))
            own = dict(self._forward.state_dict(keep_vars=True))
            names = runner.get_constant_fqns()
            # the rest are what inductor folds from them, recomputed after this update
            missing = [n for n in names if n not in own and not n.startswith(FOLDED)]
            if missing:
                raise CompileError(
                    f"diffusion: AOTInductor package {path} wants tensors the UNet lacks: "
                    f"{missing[:3]}"
                )
            runner.load_constants(
                {n: own[n].detach() for n in names if n in own},
                check_full_update=False,
                user_managed=True,
            )
        except CompileError:
            raise
        except Exception as exc:
            raise CompileError(
                f"diffusion: AOTInductor package {path} for input {shape} did not load: "
                f"{type(exc).__name__}: " + " ".join(str(exc).split())[:300]
            ) from exc
        self.seconds += time.perf_counter() - t0
        return runner

    @torch.no_grad()
    def _build(self, inputs: tuple[torch.Tensor, ...], path: Path, shape: str) -> None:
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            program = torch.export.export(self._forward, inputs)
            # written beside, then renamed: a crash mid-build never leaves a half package
            fd, tmp = tempfile.mkstemp(suffix=".pt2", dir=self.cache_dir)
            os.close(fd)
            torch._inductor.aoti_compile_and_package(
                program,
                package_path=tmp,
                inductor_configs={
                    "aot_inductor.package_constants_in_so": False,
                    # constants folded from the weights (transposed, reshaped) are computed at
                    # load from the tensors given, not baked into the package
                    "aot_inductor.use_runtime_constant_folding": True,
                },
            )
            os.replace(tmp, path)
        except Exception as exc:
            if "tmp" in locals():
                Path(tmp).unlink(missing_ok=True)
            raise CompileError(
                f"diffusion: AOTInductor compile of the UNet for input {shape} failed "
                f"(cache {self.cache_dir}): {type(exc).__name__}: "
                + " ".join(str(exc).split())[:400]
            ) from exc
