"""ONNX export checked against torch with onnxruntime on the CPU (runs in CI)."""

from __future__ import annotations

import pytest
import torch

from pipeline.accel.onnx_export import (
    OnnxCheckError,
    check_onnx,
    export_onnx,
    onnx_bytes_hash,
)
from pipeline.upscale.animevideov3 import SRVGGNetCompact


@pytest.fixture(scope="module")
def small_sr():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = SRVGGNetCompact(num_feat=16, num_conv=4).eval()  # same layers, fewer of them
    for m in net.modules():  # random PReLU slopes too, not the 0.25 default
        if isinstance(m, torch.nn.PReLU):
            m.weight.data.uniform_(0.0, 0.5)
    return net


def test_srvgg_exports_and_matches_onnxruntime(small_sr, tmp_path):
    x = torch.rand(1, 3, 24, 32)
    res = export_onnx(small_sr, x, tmp_path / "sr.onnx")
    assert res.path.is_file() and res.exporter in ("dynamo", "torchscript")
    check = check_onnx(res.path, small_sr, x, min_psnr_db=60.0)
    assert check.shape == (1, 3, 96, 128)
    assert check.psnr_db >= 60.0 and check.max_abs_error < 1e-4
    print(res.exporter, check)  # shown with -s
    h = onnx_bytes_hash(res.path)
    assert h == onnx_bytes_hash(res.path) and len(h) == 64


def test_dynamic_batch_and_failed_check(small_sr, tmp_path):
    res = export_onnx(small_sr, torch.rand(1, 3, 16, 16), tmp_path / "b.onnx", dynamic_batch=True)
    x3 = torch.rand(3, 3, 16, 16)
    assert check_onnx(res.path, small_sr, x3).shape == (3, 3, 64, 64)
    other = SRVGGNetCompact(num_feat=16, num_conv=4).eval()  # other random weights
    with pytest.raises(OnnxCheckError, match="PSNR"):
        check_onnx(res.path, other, x3, min_psnr_db=60.0)
