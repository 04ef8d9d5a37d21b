"""torch.compile for the diffusion UNet, with inductor's caches on disk.

    default_compile_cache() -> Path   core.paths.cache_dir("inductor")
    use_compile_cache(path) -> Path   points inductor (TORCHINDUCTOR_CACHE_DIR) and triton
                                      (TRITON_CACHE_DIR, <path>/triton) at `path` and turns on
                                      the FX graph cache and the AOTAutograd cache
    compile_module(module, cache)     torch.compile(module, mode="default", fullgraph=True,
                                      dynamic=False); nothing compiles until the first call
    cache_counters() -> dict          inductor / AOTAutograd cache hit and miss counters
    CompileReport                     what a compile cost: seconds, hits, misses, cache_hit
    CompileError                      the compile failed; the message says why

Why: on an H200 the SD-Turbo-size UNet step is 9.1 ms as a CUDA graph and 5.1 ms when it is
compiled by inductor (default mode) and then captured as a CUDA graph — but the compile takes
~70 s. With the caches on disk, the next process start reuses the compiled kernels (FX graph
cache: the generated code; AOTAutograd cache: the traced graph; triton: the kernel binaries);
Dynamo still traces the module at every start (seconds, not a minute).
`mode="max-autotune"` never finished in minutes, so it is not offered.

The cache location is a process-wide setting (environment variables read by inductor at each
compile); the last `use_compile_cache` wins. The caches are keyed by inductor on the graph,
the shapes, the torch/triton versions and the GPU, so a stale entry is never reused for a
different model, resolution or machine — it is simply a miss.

No silent fallback: `fullgraph=True` turns any graph break into an error, dynamo's
`suppress_errors` is left off, and the recompile limit is raised to the number of shapes the
caller will compile (one per stream-batch size), so dynamo never gives up and runs eager.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "CompileError",
    "CompileReport",
    "cache_counters",
    "compile_module",
    "default_compile_cache",
    "release_compile_workers",
    "use_compile_cache",
]


class CompileError(RuntimeError):
    """torch.compile of the UNet failed (the reason is in the message)."""


def default_compile_cache() -> Path:
    from core.paths import cache_dir

    return cache_dir("inductor")


def use_compile_cache(path: Path | str | None) -> Path:
    """Point inductor's and triton's on-disk caches at `path` (default: default_compile_cache())
    and enable the FX graph cache and the AOTAutograd cache. Returns the absolute folder."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    root = Path(path if path is not None else default_compile_cache()).expanduser().resolve()
    try:
        (root / "triton").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CompileError(f"diffusion: compile cache {root} is not writable: {exc}") from exc
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root)
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    inductor_config.fx_graph_cache = True
    inductor_config.fx_graph_remote_cache = False
    functorch_config.enable_autograd_cache = True
    return root


def release_compile_workers() -> None:
    """Stop inductor's pool of compile worker processes once every shape is compiled.

    Why: the pool (one process per core by default) outlives the compile, and the host side
    of the compiled chain was slower: on the H200 machine its CPU idol render took 12.1 ms
    median / 29.6 ms P99 against 7.7 / 15.2 in the same run without the compile, and its first
    frame's wall time 1.59x the steady one (`kagura bench pipeline --compile-unet`). Nothing
    compiles after setup (the graphs replay), and a later compile simply starts a new pool."""
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:  # an older torch: no pool to stop
        return
    shutdown_compile_workers()


def cache_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    ind, aot = counters["inductor"], counters["aot_autograd"]
    return {
        "fx_hit": int(ind["fxgraph_cache_hit"]),
        "fx_miss": int(ind["fxgraph_cache_miss"]),
        "fx_bypass": int(ind["fxgraph_cache_bypass"]),
        "aot_hit": int(aot["autograd_cache_hit"]),
        "aot_miss": int(aot["autograd_cache_miss"]),
    }


def compile_module(module: torch.nn.Module, shapes: int = 1) -> torch.nn.Module:
    """torch.compile(module) in inductor's default mode, fullgraph, static shapes. `shapes`: how
    many input shapes will be compiled (the recompile limit is raised to cover them)."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.suppress_errors = False
    need = int(shapes) + 2
    if getattr(dynamo_config, "recompile_limit", need) < need:
        dynamo_config.recompile_limit = need
    elif getattr(dynamo_config, "cache_size_limit", need) < need:  # older torch
        dynamo_config.cache_size_limit = need
    try:
        return torch.compile(module, mode="default", fullgraph=True, dynamic=False)
    except Exception as exc:  # torch.compile itself only validates its arguments
        raise CompileError(f"diffusion: torch.compile of the UNet failed: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: " + " ".join(str(exc).split())[:400]


@dataclass
class CompileReport:
    """What compiling the UNet cost at setup. `seconds`: wall time of the first calls of every
    compiled shape (tracing + inductor, or loading from the cache), minus nothing; `cache_hit`:
    every compiled graph came from the on-disk cache (no miss)."""

    seconds: float
    cache_dir: Path
    shapes: int
    fx_hit: int = 0
    fx_miss: int = 0
    fx_bypass: int = 0
    aot_hit: int = 0
    aot_miss: int = 0

    @classmethod
    def from_counters(
        cls, seconds: float, cache_dir: Path, shapes: int, before: dict, after: dict
    ) -> CompileReport:
        delta = {k: after[k] - before.get(k, 0) for k in after}
        return cls(seconds, cache_dir, shapes, **delta)

    @property
    def cache_hit(self) -> bool:
        return self.fx_miss == 0 and self.aot_miss == 0 and (self.fx_hit + self.aot_hit) > 0

    def __str__(self) -> str:
        state = "cache hit" if self.cache_hit else "cache miss (compiled)"
        return (
            f"UNet compile {self.seconds:.1f} s, {state}: {self.shapes} shape(s); FX graph cache "
            f"{self.fx_hit} hit / {self.fx_miss} miss / {self.fx_bypass} bypass, AOTAutograd "
            f"cache {self.aot_hit} hit / {self.aot_miss} miss; cache {self.cache_dir}"
        )

    def as_dict(self) -> dict:
        return {
            "seconds": round(self.seconds, 2),
            "cache_hit": self.cache_hit,
            "cache_dir": str(self.cache_dir),
            "shapes": self.shapes,
            "fx_hit": self.fx_hit,
            "fx_miss": self.fx_miss,
            "fx_bypass": self.fx_bypass,
            "aot_hit": self.aot_hit,
            "aot_miss": self.aot_miss,
        }
