"""Virtual camera: status and how-to without a backend, compositing, the sink's life cycle."""

from __future__ import annotations

import platform
from typing import ClassVar

import numpy as np
import pytest

from core.avatar import AvatarParams
from core.frame import Frame
from core.stage import Context
from pipeline.sinks import virtual_camera as vc
from pipeline.sinks.virtual_camera import (
    VirtualCameraError,
    VirtualCameraSink,
    composite_over,
    how_to_get_a_virtual_camera,
    virtual_camera_status,
)

W, H = 64, 48


def frame(image, index=0):
    return Frame(pts_ns=index * 33_333_333, index=index, params=AvatarParams(), image=image)


def premultiply(straight: np.ndarray) -> np.ndarray:
    a = straight[..., 3:4].astype(np.int32)
    out = straight.copy()
    out[..., :3] = (straight[..., :3].astype(np.int32) * a + 127) // 255
    return out


@pytest.mark.skipif(platform.system() != "Linux", reason="this machine's check is for Linux")
def test_status_without_a_backend_says_how_to_get_one():
    if vc._linux_loopback_devices():
        pytest.skip("this machine has a v4l2loopback device")
    available, backend, how_to = virtual_camera_status()
    assert available is False and backend is None
    assert "sudo modprobe v4l2loopback devices=1 exclusive_caps=1" in how_to
    assert "\n" not in how_to


def test_how_to_for_each_platform():
    assert "modprobe v4l2loopback" in how_to_get_a_virtual_camera("Linux")
    for system in ("Windows", "Darwin"):
        text = how_to_get_a_virtual_camera(system)
        assert "OBS" in text and "Start Virtual Camera" in text


def test_status_finds_a_loopback_device(tmp_path, monkeypatch):
    monkeypatch.setattr(vc.platform, "system", lambda: "Linux")
    monkeypatch.setattr(vc, "_linux_loopback_devices", lambda: ["/dev/video7"])
    monkeypatch.setattr(vc.os, "access", lambda path, mode: True)
    if "v4l2loopback" not in __import__("pyvirtualcam").camera.BACKENDS:
        pytest.skip("pyvirtualcam has no Linux backend here")
    available, backend, how_to = virtual_camera_status()
    assert (available, backend) == (True, "v4l2loopback") and "/dev/video7" in how_to


def test_setup_without_a_backend_is_one_clear_line():
    if virtual_camera_status()[0]:
        pytest.skip("this machine has a virtual camera")
    sink = VirtualCameraSink(W, H, 30)
    assert sink.needs.fields == frozenset({"image"}) and sink.needs.size == (W, H)
    with pytest.raises(VirtualCameraError) as info:
        sink.setup(Context(W, H, 30, 16000, mode="live"))
    msg = str(info.value)
    assert msg.startswith("no virtual camera:") and "\n" not in msg
    assert how_to_get_a_virtual_camera() in msg
    sink.abort()  # nothing to release, and no error


def test_composite_over_colour_matches_float_reference():
    rng = np.random.default_rng(1)
    straight = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)
    straight[0, 0, 3], straight[0, 1, 3] = 0, 255  # fully transparent / opaque pixels
    pre = premultiply(straight)
    bg = (20, 200, 90)
    out = composite_over(pre, bg)
    assert out.dtype == np.uint8 and out.shape == (H, W, 3)
    a = pre[..., 3:4] / 255.0
    ref = pre[..., :3] + np.asarray(bg) * (1 - a)
    assert np.abs(out.astype(float) - ref).max() <= 1.0
    assert tuple(out[0, 0]) == bg  # transparent → background
    assert tuple(out[0, 1]) == tuple(pre[0, 1, :3])  # opaque → the idol


def test_composite_over_image_and_opaque_fast_path():
    rng = np.random.default_rng(2)
    pre = premultiply(rng.integers(0, 256, (H, W, 4), dtype=np.uint8))
    bg = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    out = composite_over(pre, bg)
    ref = pre[..., :3] + bg * (1 - pre[..., 3:4] / 255.0)
    assert np.abs(out.astype(float) - ref).max() <= 1.0
    opaque = pre.copy()
    opaque[..., 3] = 255
    np.testing.assert_array_equal(composite_over(opaque, (1, 2, 3)), opaque[..., :3])
    bad = pre.copy()
    bad[..., :3] = 255
    bad[..., 3] = 10  # not premultiplied: saturates instead of wrapping around
    assert composite_over(bad, (255, 255, 255)).min() == 255
    with pytest.raises(ValueError, match="RGBA"):
        composite_over(pre[..., :3])


class FakeCamera:
    opened: ClassVar[list[FakeCamera]] = []

    def __init__(self, width, height, fps, **kw):
        self.args = (width, height, fps, kw)
        self.sent: list[np.ndarray] = []
        self.sleeps = 0
        self.closed = False
        self.device = "/dev/video-fake"
        FakeCamera.opened.append(self)

    def send(self, rgb):
        assert rgb.dtype == np.uint8 and rgb.shape == (H, W, 3)
        self.sent.append(rgb.copy())

    def sleep_until_next_frame(self):
        self.sleeps += 1

    def close(self):
        self.closed = True


@pytest.mark.parametrize("pace", [False, True])
def test_sink_sends_composited_rgb(pace):
    sink = VirtualCameraSink(W, H, 30, background=(0, 255, 0), pace=pace, camera_factory=FakeCamera)
    sink.setup(Context(W, H, 30, 16000, mode="live"))
    cam = FakeCamera.opened[-1]
    assert cam.args[:3] == (W, H, 30.0) and sink.camera_device == "/dev/video-fake"
    img = np.zeros((H, W, 4), np.uint8)
    img[: H // 2] = (200, 0, 0, 255)  # opaque red top half, transparent bottom half
    sink.write(frame(img))
    sink.write(frame(img, 1))
    assert sink.frames_sent == 2 and len(cam.sent) == 2
    assert tuple(cam.sent[0][0, 0]) == (200, 0, 0)
    assert tuple(cam.sent[0][-1, -1]) == (0, 255, 0)
    assert cam.sleeps == (2 if pace else 0)
    with pytest.raises(ValueError, match="expected"):
        sink.write(frame(np.zeros((H, W + 2, 4), np.uint8)))
    sink.finish()
    assert cam.closed
    with pytest.raises(RuntimeError, match="done"):
        sink.write(frame(img))


def test_sink_rejects_a_different_fps_and_bad_background():
    sink = VirtualCameraSink(W, H, 30, camera_factory=FakeCamera)
    with pytest.raises(ValueError, match="30 fps"):
        sink.setup(Context(W, H, 60, 16000))
    with pytest.raises(ValueError, match="background"):
        VirtualCameraSink(W, H, 30, background=(0, 0, 300))
