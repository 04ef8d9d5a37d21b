"""Export a torch module to ONNX and check it numerically against torch with onnxruntime (CPU).

    export_onnx(module, example, path, *, opset=18, dynamic_batch=False) -> ExportResult
    check_onnx(path, module, example, *, min_psnr_db=None) -> OnnxCheck
    onnx_bytes_hash(path) -> str      (sha256 of the file; one input of the TensorRT cache key)

The exporter: torch 2.13's default, `torch.onnx.export(dynamo=True)` (torch.export + onnxscript),
writing one self-contained file (`external_data=False`; models above 2 GiB need
`external_data=True`). Where the dynamo exporter fails, the TorchScript exporter
(`dynamo=False`) is tried and the result says which one wrote the file and why the first failed
— never silently: `ExportResult.exporter` / `.note`.

The check runs the ONNX file with onnxruntime's CPUExecutionProvider on `example` and compares
with the module in float32 on the CPU: max absolute error and PSNR over the reference's value
range (peak = max - min of the torch output). `min_psnr_db` turns a low PSNR into an
`OnnxCheckError`. onnx/onnxruntime are imported inside the functions, so importing this module
is cheap.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn


class OnnxExportError(RuntimeError):
    """Neither exporter could write the model."""


class OnnxCheckError(AssertionError):
    """onnxruntime's result does not match torch closely enough."""


@dataclass(frozen=True)
class ExportResult:
    path: Path
    exporter: str  # "dynamo" | "torchscript"
    opset: int
    note: str = ""  # why the dynamo exporter was not used, when it was not


@dataclass(frozen=True)
class OnnxCheck:
    max_abs_error: float
    psnr_db: float
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return (
            f"onnxruntime vs torch on {self.shape}: max abs error {self.max_abs_error:.3g}, "
            f"PSNR {self.psnr_db:.1f} dB"
        )


def export_onnx(
    module: nn.Module,
    example: torch.Tensor,
    path: str | Path,
    *,
    opset: int = 18,
    dynamic_batch: bool = False,
    input_name: str = "x",
    output_name: str = "y",
) -> ExportResult:
    """Write `module` (eval mode, CPU, float32) as ONNX to `path`, traced with `example`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    example = example.detach()
    note = ""
    try:
        # positional (a tuple): torch.export keys dict forms by forward()'s parameter names
        dynamic_shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic_batch else None
        prog = torch.onnx.export(
            module,
            (example,),
            None,
            dynamo=True,
            opset_version=opset,
            input_names=[input_name],
            output_names=[output_name],
            dynamic_shapes=dynamic_shapes,
            external_data=False,
            optimize=True,
            verbose=False,
        )
        if prog is None:
            raise OnnxExportError("the dynamo exporter returned nothing")
        prog.save(str(path), external_data=False)
        return ExportResult(path, "dynamo", opset)
    except Exception as exc:  # the fallback below says what happened
        note = f"dynamo exporter failed ({type(exc).__name__}: {str(exc).splitlines()[0][:300]})"
    try:
        torch.onnx.export(
            module,
            (example,),
            str(path),
            dynamo=False,
            opset_version=opset,
            input_names=[input_name],
            output_names=[output_name],
            dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}}
            if dynamic_batch
            else None,
        )
    except Exception as exc:
        raise OnnxExportError(f"{note}; the TorchScript exporter failed too: {exc}") from exc
    return ExportResult(path, "torchscript", opset, note)


def check_onnx(
    path: str | Path,
    module: nn.Module,
    example: torch.Tensor,
    *,
    min_psnr_db: float | None = None,
) -> OnnxCheck:
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = example.detach().cpu().float()
    got = sess.run(None, {name: x.numpy()})[0]
    with torch.inference_mode():
        ref = module.eval().cpu().float()(x).numpy()
    if got.shape != ref.shape:
        raise OnnxCheckError(f"onnxruntime gives shape {got.shape}, torch {ref.shape}")
    diff = got.astype(np.float64) - ref.astype(np.float64)
    max_err = float(np.abs(diff).max())
    mse = float(np.mean(diff * diff))
    peak = float(ref.max() - ref.min()) or 1.0
    psnr = math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)
    res = OnnxCheck(max_err, psnr, tuple(ref.shape))
    if min_psnr_db is not None and not psnr >= min_psnr_db:
        raise OnnxCheckError(f"{path}: {res} (needs >= {min_psnr_db} dB)")
    return res


def onnx_bytes_hash(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
