"""I420 made in torch (what the GPU readback hands the encoders) against swscale, and the file
sinks fed I420 frames: the same video as when they convert RGBA themselves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from av.video.frame import VideoFrame
from av.video.reformatter import ColorRange, Colorspace

from app.bench_stylize import idol_frames
from core.avatar import AvatarParams
from core.clock import frame_pts_ns
from core.frame import Frame
from core.stage import Context
from pipeline.accel.i420 import i420_shape, rgba_to_i420
from pipeline.media_probe import decode_video, probe
from pipeline.sinks.segmented import SegmentedVideoSink
from pipeline.sinks.video_file import VideoFileSink
from pipeline.stylize import StylizeStage
from presets.loader import load_preset

W, H, FPS, SR = 320, 180, 30, 48000


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def swscale_i420(rgba: np.ndarray) -> np.ndarray:
    """What the file sinks do with an RGBA frame (VideoFileSink._encode_image)."""
    vf = VideoFrame.from_ndarray(np.ascontiguousarray(rgba), format="rgba").reformat(
        format="yuv420p", dst_colorspace=Colorspace.ITU709, dst_color_range=ColorRange.MPEG
    )
    return vf.to_ndarray()


@pytest.fixture(scope="module")
def styled() -> torch.Tensor:
    """Six finished frames: the idol rendered and stylized (studio), opaque."""
    preset = load_preset("studio")
    stage = StylizeStage(preset, W, H)
    stage.setup(Context(W, H, FPS, SR))
    return stage.apply(idol_frames(W, H, 6, preset))


def test_planes_match_swscale(styled):
    ours = rgba_to_i420(styled).numpy()
    assert ours.shape == (6, H * 3 // 2, W) and ours.dtype == np.uint8
    for i in range(styled.shape[0]):
        ref = swscale_i420(styled[i].numpy())
        luma, chroma = (ours[i, :H], ref[:H]), (ours[i, H:], ref[H:])
        assert np.abs(luma[0].astype(int) - luma[1]).max() <= 1  # same BT.709 luma, rounding
        assert psnr(*chroma) >= 38.0  # chroma: swscale's subsampling filter, not a box


def test_pure_colours_exact():
    """BT.709 limited range: the corners of the RGB cube land where the standard puts them."""
    colours = {(255, 255, 255): (235, 128, 128), (0, 0, 0): (16, 128, 128),
               (255, 0, 0): (63, 102, 240), (0, 0, 255): (32, 240, 118)}  # fmt: skip
    for rgb, (y, u, v) in colours.items():
        img = torch.zeros(1, 4, 4, 4, dtype=torch.uint8)
        img[..., :3] = torch.tensor(rgb, dtype=torch.uint8)
        img[..., 3] = 255
        out = rgba_to_i420(img)[0]
        assert (int(out[0, 0]), int(out[4, 0]), int(out[5, 0])) == (y, u, v), rgb


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="even width and height"):
        i420_shape(321, 180)
    with pytest.raises(ValueError, match=r"uint8 \(B, H, W, 4\)"):
        rgba_to_i420(torch.zeros(2, 4, 4, 3, dtype=torch.uint8))


def _write(sink, pictures, kind: str) -> None:
    sink.setup(Context(W, H, FPS, SR))
    try:
        for i, p in enumerate(pictures):
            extra = {"i420": p} if kind == "i420" else {"image": p}
            sink.write(Frame(frame_pts_ns(i, FPS), i, AvatarParams(), **extra))
        sink.finish()
    except BaseException:
        sink.abort()
        raise


@pytest.mark.parametrize("encoders", [1, 2])
def test_sinks_encode_i420_frames_like_rgba(tmp_path, styled, encoders):
    frames = styled.repeat(3, 1, 1, 1)  # 18 frames: several chunks with 2 encoders
    planes = rgba_to_i420(frames)
    audio = np.zeros((2, round(len(frames) / FPS * SR)), np.float32)
    decoded = {}
    for kind, pictures in (("rgba", frames), ("i420", planes)):
        path = tmp_path / f"{kind}.mp4"
        if encoders == 1:
            sink = VideoFileSink(path, W, H, FPS, audio=audio, sample_rate=SR)
        else:
            sink = SegmentedVideoSink(path, W, H, FPS, audio, SR, encoders=2, gop_frames=5)
        _write(sink, pictures, kind)
        info = probe(path)
        assert info.video_frames == len(frames) and info.video[0].pix_fmt == "yuv420p"
        assert abs(info.audio_seconds - info.video_seconds) < 1 / FPS
        decoded[kind], _ = decode_video(path)
    # as faithful to the picture that went in as the sink's own conversion, frame by frame
    for i, source in enumerate(frames[..., :3].numpy()):
        via_rgba, via_i420 = psnr(decoded["rgba"][i], source), psnr(decoded["i420"][i], source)
        assert via_i420 >= 30.0 and via_i420 >= via_rgba - 0.5, (i, via_rgba, via_i420)


def test_i420_frames_of_the_wrong_size_or_into_alpha_video(tmp_path, styled):
    planes = rgba_to_i420(styled)
    sink = VideoFileSink(tmp_path / "a.mp4", W, H, FPS, audio=None, sample_rate=SR)
    sink.setup(Context(W, H, FPS, SR))
    with pytest.raises(ValueError, match=r"a\.mp4: frame 0 I420 picture is \(270, 160\)"):
        sink.write(Frame(0, 0, AvatarParams(), i420=planes[0, :270, :160]))
    sink.abort()
    webm = tmp_path / "alpha.webm"
    sink = VideoFileSink(webm, W, H, FPS, audio=None, sample_rate=SR, transparent=True)
    with pytest.raises(ValueError, match=r"alpha\.webm: frame 0 is I420, which has no alpha"):
        _write(sink, planes[:1], "i420")
    assert not webm.exists()
