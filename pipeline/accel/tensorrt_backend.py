"""TensorRT engines built from ONNX, cached under a key that cannot silently match the wrong
engine, and run behind the same call signature as the torch module.

    tensorrt_status() -> str      one plain sentence: which TensorRT, or that it is not installed
    tensorrt_available() -> bool
    engine_cache_key(model_hash, input_shape, dtype, trt_version, gpu_name,
                     compute_capability) -> str        (pure; sha256 hex)
    current_key_parts(device) -> (trt_version, gpu_name, compute_capability)
    build_engine(onnx_path, input_shape, dtype="float16", cache_dir=..., device="cuda") -> Path
    TrtModule(engine_path, device="cuda")(x) -> tensor          like module(x)
    TrtModule.from_onnx(onnx_path, input_shape, dtype, cache_dir, device) -> TrtModule

The key (docs/ARCHITECTURE.md, "Outside facts": StreamDiffusion users' engines were cached under a key ignoring
resolution, TensorRT version, GPU and LoRA, so a wrong engine was reused silently) hashes:
the ONNX bytes (so weights, LoRA merged into them and opset all count), the input shape (batch
included), the precision, the TensorRT version, the GPU name and its compute capability. The
engine file is `<cache_dir>/<key>.engine` with a `<key>.json` beside it holding the parts;
`TrtModule` checks the parts against the running TensorRT and GPU when it loads and refuses a
mismatch (`TrtEngineError`) rather than running a stale engine. A failed build raises
`TrtBuildError` with the parser's / builder's messages — never a silent eager fallback; the
caller decides (and says) what to do where TensorRT is absent (`tensorrt_status()`).

`tensorrt` is imported inside the functions; this module imports on machines without it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

NOT_INSTALLED = "TensorRT is not installed: using eager/CUDA graphs"
DEFAULT_CACHE = Path(os.environ.get("KAGURA_TRT_CACHE", Path.home() / ".cache" / "kagura" / "trt"))
PRECISIONS = ("float32", "float16", "bfloat16")


class TrtBuildError(RuntimeError):
    """The ONNX could not be parsed or the engine could not be built (messages included)."""


class TrtEngineError(RuntimeError):
    """An engine file cannot be used here (missing, corrupt, built for another TRT/GPU)."""


def _trt():
    import tensorrt as trt

    return trt


def tensorrt_available() -> bool:
    try:
        _trt()
    except Exception:
        return False
    return True


def tensorrt_status() -> str:
    try:
        trt = _trt()
    except ImportError:
        return NOT_INSTALLED
    except Exception as exc:  # installed but broken (missing libnvinfer, ...)
        return f"TensorRT is installed but cannot be imported ({exc}): using eager/CUDA graphs"
    if not torch.cuda.is_available():
        return f"TensorRT {trt.__version__} is installed but there is no CUDA device: using eager"
    return f"TensorRT {trt.__version__} is available on {torch.cuda.get_device_name()}"


def engine_cache_key(
    model_hash: str,
    input_shape: tuple[int, ...],
    dtype: str,
    trt_version: str,
    gpu_name: str,
    compute_capability: tuple[int, int],
) -> str:
    """sha256 (hex) of every component; any change gives another key, same inputs the same."""
    if dtype not in PRECISIONS:
        raise ValueError(f"dtype must be one of {PRECISIONS}, got {dtype!r}")
    parts = _parts(model_hash, input_shape, dtype, trt_version, gpu_name, compute_capability)
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _parts(model_hash, input_shape, dtype, trt_version, gpu_name, compute_capability) -> dict:
    return {
        "model_sha256": str(model_hash),
        "input_shape": [int(v) for v in input_shape],
        "dtype": str(dtype),
        "tensorrt": str(trt_version),
        "gpu": str(gpu_name),
        "compute_capability": [int(v) for v in compute_capability],
    }


def current_key_parts(device: torch.device | str = "cuda") -> tuple[str, str, tuple[int, int]]:
    trt = _trt()
    dev = torch.device(device)
    cc = torch.cuda.get_device_capability(dev)
    return trt.__version__, torch.cuda.get_device_name(dev), (int(cc[0]), int(cc[1]))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_engine(
    onnx_path: str | Path,
    input_shape: tuple[int, ...],
    dtype: str = "float16",
    cache_dir: str | Path = DEFAULT_CACHE,
    device: torch.device | str = "cuda",
    workspace_gib: float = 4.0,
) -> Path:
    """The cached engine for (ONNX bytes, shape, dtype, TRT, GPU); built when missing."""
    trt = _trt()
    onnx_path = Path(onnx_path)
    trt_version, gpu, cc = current_key_parts(device)
    model_hash = _file_sha256(onnx_path)
    key = engine_cache_key(model_hash, input_shape, dtype, trt_version, gpu, cc)
    cache_dir = Path(cache_dir)
    engine_path = cache_dir / f"{key}.engine"
    if engine_path.is_file() and engine_path.with_suffix(".json").is_file():
        return engine_path
    cache_dir.mkdir(parents=True, exist_ok=True)

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    major = int(trt.__version__.split(".")[0])
    flags = 0 if major >= 10 else 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise TrtBuildError(f"{onnx_path}: TensorRT cannot parse the ONNX: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gib * (1 << 30)))
    if dtype == "float16":
        config.set_flag(trt.BuilderFlag.FP16)
    elif dtype == "bfloat16":
        config.set_flag(trt.BuilderFlag.BF16)
    if network.num_inputs != 1:
        raise TrtBuildError(f"{onnx_path}: {network.num_inputs} inputs; TrtModule takes one")
    profile = builder.create_optimization_profile()
    name = network.get_input(0).name
    shape = tuple(int(v) for v in input_shape)
    profile.set_shape(name, shape, shape, shape)
    config.add_optimization_profile(profile)
    with torch.cuda.device(torch.device(device)):
        blob = builder.build_serialized_network(network, config)
    if blob is None:
        raise TrtBuildError(
            f"{onnx_path}: TensorRT {trt_version} failed to build an engine for {shape} "
            f"{dtype} on {gpu} (see the TensorRT log above)"
        )
    tmp = engine_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(bytes(blob))
    os.replace(tmp, engine_path)
    meta = _parts(model_hash, shape, dtype, trt_version, gpu, cc) | {"key": key}
    engine_path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return engine_path


_TORCH_DTYPES = {
    "FLOAT": torch.float32,
    "HALF": torch.float16,
    "BF16": torch.bfloat16,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "INT8": torch.int8,
    "UINT8": torch.uint8,
    "BOOL": torch.bool,
}


class TrtModule:
    """A deserialized engine with one input and one output: `TrtModule(path)(x) -> y`, run on
    the current CUDA stream (capturable in a CUDA graph like any kernel launch)."""

    def __init__(self, engine_path: str | Path, device: torch.device | str = "cuda"):
        trt = _trt()
        self.path = Path(engine_path)
        self.device = torch.device(device)
        meta_path = self.path.with_suffix(".json")
        if not self.path.is_file() or not meta_path.is_file():
            raise TrtEngineError(f"{self.path}: engine or its .json description is missing")
        meta = json.loads(meta_path.read_text())
        trt_version, gpu, cc = current_key_parts(self.device)
        here = {"tensorrt": trt_version, "gpu": gpu, "compute_capability": list(cc)}
        stale = {k: (meta.get(k), v) for k, v in here.items() if meta.get(k) != v}
        if stale:
            raise TrtEngineError(f"{self.path}: built for another setup {stale}; rebuild it")
        self.meta = meta
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(self.path.read_bytes())
        if self.engine is None:
            raise TrtEngineError(f"{self.path}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        mode = trt.TensorIOMode
        ins = [n for n in names if self.engine.get_tensor_mode(n) == mode.INPUT]
        outs = [n for n in names if self.engine.get_tensor_mode(n) == mode.OUTPUT]
        if len(ins) != 1 or len(outs) != 1:
            raise TrtEngineError(f"{self.path}: {len(ins)} inputs / {len(outs)} outputs, want 1/1")
        self.input_name, self.output_name = ins[0], outs[0]
        self.input_dtype = _TORCH_DTYPES[self.engine.get_tensor_dtype(ins[0]).name]
        self.output_dtype = _TORCH_DTYPES[self.engine.get_tensor_dtype(outs[0]).name]

    @classmethod
    def from_onnx(
        cls,
        onnx_path: str | Path,
        input_shape: tuple[int, ...],
        dtype: str = "float16",
        cache_dir: str | Path = DEFAULT_CACHE,
        device: torch.device | str = "cuda",
    ) -> TrtModule:
        return cls(build_engine(onnx_path, input_shape, dtype, cache_dir, device), device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, self.input_dtype).contiguous()
        ctx = self.context
        if not ctx.set_input_shape(self.input_name, tuple(x.shape)):
            raise ValueError(f"{self.path}: the engine does not accept shape {tuple(x.shape)}")
        ctx.set_tensor_address(self.input_name, x.data_ptr())
        out_shape = tuple(ctx.get_tensor_shape(self.output_name))
        y = torch.empty(out_shape, dtype=self.output_dtype, device=self.device)
        ctx.set_tensor_address(self.output_name, y.data_ptr())
        stream = torch.cuda.current_stream(self.device)
        if not ctx.execute_async_v3(stream.cuda_stream):
            raise RuntimeError(f"{self.path}: TensorRT execution failed")
        return y
