"""`VirtualCameraSink`: the idol as a webcam (OBS, Zoom, Discord, ...) through pyvirtualcam.

Backends (docs/ARCHITECTURE.md, "Outside facts"): the OBS Virtual Camera on Windows and macOS (installed with
OBS; start it once from OBS so the system registers it), v4l2loopback on Linux (a kernel
module that creates /dev/videoN devices). One virtual camera per machine.

**No alpha.** A virtual camera carries opaque video (NV12/UYVY inside OBS's camera), so the
sink composites the premultiplied RGBA frames over a background colour or image first. For a
transparent idol in OBS use the transparent Kagura window with OBS window/game capture, or
render a WebM with alpha (`pipeline.sinks.video_file.VideoFileSink(..., transparent=True)`).

`virtual_camera_status()` says whether a backend is usable here and, if not, how to get one,
without opening (and so without claiming) the camera where that can be avoided.
"""

from __future__ import annotations

import contextlib
import glob
import os
import platform
from collections.abc import Callable
from typing import Any

import numpy as np

from core.frame import Frame
from core.stage import Context, spec

__all__ = [
    "VirtualCameraError",
    "VirtualCameraSink",
    "composite_over",
    "how_to_get_a_virtual_camera",
    "virtual_camera_status",
]

LINUX_MODPROBE = 'sudo modprobe v4l2loopback devices=1 exclusive_caps=1 card_label="Kagura"'


class VirtualCameraError(RuntimeError):
    """No virtual camera could be opened; one line saying why and what to do."""


def how_to_get_a_virtual_camera(system: str | None = None) -> str:
    """Plain-words instructions for the platform `system` (platform.system() by default)."""
    system = system or platform.system()
    if system == "Linux":
        return (
            "Linux needs the v4l2loopback kernel module: install it (Debian/Ubuntu: "
            "sudo apt install v4l2loopback-dkms) and load it with "
            f"{LINUX_MODPROBE}, then restart Kagura"
        )
    if system in ("Windows", "Darwin"):
        return (
            "install OBS Studio (28 or newer) from obsproject.com, open it and click "
            "'Start Virtual Camera' once (this registers the camera), then stop it there and "
            "restart Kagura"
        )
    return f"pyvirtualcam has no virtual-camera backend for {system or 'this system'}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _linux_loopback_devices(sysfs: str = "/sys/devices/virtual/video4linux") -> list[str]:
    """/dev/videoN of the v4l2loopback devices (virtual video4linux devices), sorted."""
    found = []
    for entry in sorted(glob.glob(os.path.join(sysfs, "video*"))):
        dev = "/dev/" + os.path.basename(entry)
        if os.path.exists(dev):
            found.append(dev)
    return found


def virtual_camera_status() -> tuple[bool, str | None, str]:
    """(available, backend name, how-to) — never raises.

    Linux: looks for v4l2loopback devices in sysfs (nothing is opened). Windows/macOS: opens
    the OBS camera for a moment at 320x240 (the only reliable check there) and closes it;
    that fails while another program is sending to the camera, and the how-to says so.
    When available, `how_to` says where the picture appears (the device, or the camera name).
    """
    system = platform.system()
    try:
        import pyvirtualcam
    except Exception as exc:  # ImportError, or a native library that does not load
        return (
            False,
            None,
            f"the pyvirtualcam package is not usable ({_one_line(exc)}); "
            "pip install pyvirtualcam — then: " + how_to_get_a_virtual_camera(system),
        )
    backends = list(getattr(pyvirtualcam.camera, "BACKENDS", {}))
    if not backends:
        return False, None, how_to_get_a_virtual_camera(system)
    if system == "Linux":
        devices = _linux_loopback_devices()
        if not devices:
            return False, None, how_to_get_a_virtual_camera(system)
        writable = [d for d in devices if os.access(d, os.W_OK)]
        if not writable:
            return (
                False,
                None,
                f"{', '.join(devices)} exist but this user cannot write to them; add yourself "
                "to the 'video' group (sudo usermod -aG video $USER) and log in again",
            )
        return (
            True,
            "v4l2loopback",
            f"Kagura sends to {writable[0]}; in OBS add a 'Video Capture Device (V4L2)' source "
            "and pick it",
        )
    try:
        with pyvirtualcam.Camera(320, 240, 30, backend=backends[0]) as cam:
            device = cam.device
    except Exception as exc:
        return (
            False,
            None,
            f"{how_to_get_a_virtual_camera(system)} (if OBS's own virtual camera is running, "
            f"stop it first; pyvirtualcam said: {_one_line(exc)})",
        )
    return True, backends[0], f"Kagura sends to {device!r}; pick it as the camera in your app"


# --------------------------------------------------------------------------------------------
# compositing


def _background_lut(rgb: tuple[int, int, int]) -> np.ndarray:
    """(256, 3) uint8: round(bg · (255 − a) / 255) for every alpha a."""
    a = np.arange(256, dtype=np.int32)[:, None]
    bg = np.asarray(rgb, np.int32)[None, :]
    return ((bg * (255 - a) + 127) // 255).astype(np.uint8)


def composite_over(
    rgba: np.ndarray,
    background: tuple[int, int, int] | np.ndarray = (0, 0, 0),
    *,
    _lut: np.ndarray | None = None,
) -> np.ndarray:
    """Premultiplied uint8 (H, W, 4) RGBA over an opaque background → uint8 (H, W, 3) RGB.

    ``out = colour + background · (1 − alpha)`` per channel (the premultiplied "over"),
    rounded to nearest and saturated at 255. `background`: an (r, g, b) colour or a uint8
    (H, W, 3) image. Opaque frames cost one slice copy.
    """
    rgba = np.asarray(rgba)
    if rgba.dtype != np.uint8 or rgba.ndim != 3 or rgba.shape[2] != 4:
        raise ValueError(f"expected uint8 (H, W, 4) RGBA, got {rgba.dtype} {rgba.shape}")
    colour, alpha = rgba[..., :3], rgba[..., 3]
    if alpha.min() == 255:
        return np.ascontiguousarray(colour)
    if isinstance(background, np.ndarray):
        bg = np.asarray(background)
        if bg.shape != colour.shape or bg.dtype != np.uint8:
            raise ValueError(
                f"background image must be uint8 {colour.shape}, got {bg.dtype} {bg.shape}"
            )
        inv = 255 - alpha[..., None].astype(np.uint16)
        under = ((bg.astype(np.uint16) * inv + 127) // 255).astype(np.uint8)
    else:
        lut = _lut if _lut is not None else _background_lut(tuple(background))
        under = lut[alpha]  # (H, W, 3)
    # saturating add in uint8: colour ≤ alpha for valid premultiplied data, so this only
    # clips malformed input
    np.minimum(under, 255 - colour, out=under)
    under += colour
    return under


# --------------------------------------------------------------------------------------------
# the sink


class VirtualCameraSink:
    """Send frames to the system's virtual camera (see the module notes: no alpha).

    `background`: (r, g, b) colour, or a uint8 (height, width, 3) image, shown where the idol
    is transparent. `pace`: call pyvirtualcam's `sleep_until_next_frame()` after each frame
    (only for a producer that is not already paced by the live clock). `backend` / `device`:
    passed to pyvirtualcam (None: its default). `camera_factory`: what opens the camera
    (default `pyvirtualcam.Camera`; tests pass a fake).
    """

    name = "virtual_camera"

    def __init__(
        self,
        width: int,
        height: int,
        fps: float,
        *,
        background: tuple[int, int, int] | np.ndarray = (0, 0, 0),
        pace: bool = False,
        backend: str | None = None,
        device: str | None = None,
        camera_factory: Callable[..., Any] | None = None,
    ) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"virtual camera size {width}x{height} must be positive")
        if fps <= 0:
            raise ValueError(f"virtual camera fps must be > 0, got {fps}")
        if isinstance(background, np.ndarray):
            if background.shape != (height, width, 3) or background.dtype != np.uint8:
                raise ValueError(
                    f"background image must be uint8 ({height}, {width}, 3), "
                    f"got {background.dtype} {background.shape}"
                )
            self._lut = None
        else:
            background = tuple(int(c) for c in background)
            if len(background) != 3 or not all(0 <= c <= 255 for c in background):
                raise ValueError(f"background colour must be (r, g, b) in 0..255, got {background}")
            self._lut = _background_lut(background)
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.background = background
        self.pace = pace
        self.backend, self.device = backend, device
        self.camera_factory = camera_factory
        self.needs = spec("image", size=(self.width, self.height))
        self.frames_sent = 0
        self._cam: Any = None
        self._state = "new"  # new → open → done | aborted

    @property
    def camera_device(self) -> str | None:
        """Where the picture goes (e.g. /dev/video2, "OBS Virtual Camera"), once open."""
        return None if self._cam is None else str(self._cam.device)

    def setup(self, ctx: Context) -> None:
        if abs(float(ctx.fps) - self.fps) > 1e-6:
            raise ValueError(f"virtual camera made for {self.fps:g} fps, graph runs at {ctx.fps}")
        factory = self.camera_factory
        fmt_kw: dict[str, Any] = {}
        if factory is None:
            try:
                import pyvirtualcam
            except Exception as exc:
                raise VirtualCameraError(
                    f"no virtual camera: pyvirtualcam is not usable ({_one_line(exc)}); "
                    "pip install pyvirtualcam"
                ) from None
            factory = pyvirtualcam.Camera
            fmt_kw["fmt"] = pyvirtualcam.PixelFormat.RGB
        kw: dict[str, Any] = dict(fmt_kw)
        if self.backend:
            kw["backend"] = self.backend
        if self.device:
            kw["device"] = self.device
        try:
            self._cam = factory(self.width, self.height, self.fps, **kw)
        except Exception as exc:
            raise VirtualCameraError(
                f"no virtual camera: {how_to_get_a_virtual_camera()} "
                f"(pyvirtualcam: {_one_line(exc)})"
            ) from None
        self._state = "open"

    def write(self, frame: Frame) -> None:
        if self._state != "open":
            raise RuntimeError(f"virtual camera: write() on a sink that is {self._state}")
        image = frame.image
        if image is None:
            raise ValueError(f"virtual camera: frame {frame.index} carries no image")
        if hasattr(image, "detach"):  # a torch tensor, maybe on the GPU
            image = image.detach().to("cpu").numpy()
        rgba = np.asarray(image)
        if rgba.shape != (self.height, self.width, 4):
            raise ValueError(
                f"virtual camera: frame {frame.index} image is {rgba.shape}, "
                f"expected ({self.height}, {self.width}, 4) RGBA"
            )
        rgb = composite_over(rgba, self.background, _lut=self._lut)
        self._cam.send(rgb)
        self.frames_sent += 1
        if self.pace:
            self._cam.sleep_until_next_frame()

    def finish(self) -> None:
        self._close("done")

    def abort(self) -> None:
        self._close("aborted")

    def _close(self, state: str) -> None:
        if self._state in ("done", "aborted"):
            return
        cam, self._cam = self._cam, None
        self._state = state
        if cam is not None:
            with contextlib.suppress(Exception):
                cam.close()
