"""The display paths on a real X display: a private Xvfb, lavapipe (Vulkan on the CPU) and Qt xcb.

Each check runs in a child process (`python -m app.present.check`): a QApplication's platform is
fixed for the life of a process, and other tests may already have made an offscreen one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.xvfb import XvfbUnavailable, xvfb_display

ROOT = Path(__file__).resolve().parents[1]


def _vulkan_devices() -> list[str]:
    try:
        import vulkan as vk
    except ImportError:
        return []
    try:
        inst = vk.vkCreateInstance(
            vk.VkInstanceCreateInfo(pApplicationInfo=vk.VkApplicationInfo(apiVersion=0)), None
        )
    except Exception:
        return []
    try:
        return [
            vk.vkGetPhysicalDeviceProperties(d).deviceName
            for d in vk.vkEnumeratePhysicalDevices(inst)
        ]
    finally:
        vk.vkDestroyInstance(inst, None)


@pytest.fixture(scope="module")
def display():
    try:
        with xvfb_display(800, 600) as d:
            yield d
    except XvfbUnavailable as exc:
        pytest.skip(str(exc))


def _run(args: list[str], env_extra: dict[str, str], timeout: float = 50.0) -> dict:
    env = {**os.environ, **env_extra}
    proc = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_vulkan_fifo_swapchain_on_xvfb_pixels_match(display):
    if not _vulkan_devices():
        pytest.skip("Vulkan has no physical device at all (not even lavapipe)")
    res = _run(
        ["-m", "app.present.check", "--frames", "12", "--size", "320x180", "--paths", "vulkan"],
        {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb"},
    )
    vk_res = res["vulkan"]
    assert "error" not in vk_res, vk_res
    assert "FIFO" in vk_res["name"]
    assert vk_res["readback_match"], "swapchain image read back != last frame"
    assert vk_res["screen_match"], "X server pixels (QScreen.grabWindow) != last frame"
    assert "present" in vk_res["timing"]


def test_qt_widget_on_xvfb_pixels_match(display):
    res = _run(
        ["-m", "app.present.check", "--frames", "12", "--size", "320x180", "--paths", "qt"],
        {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb"},
    )
    assert res["qt"]["ok"], res["qt"]


FALLBACK = """
import json, numpy as np
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.present import create_presenter
import os
allow = os.environ.get("ALLOW_CPU_DEVICE") == "1"
p, widget, text = create_presenter((64, 36), allow_cpu_device=allow)
p.present(np.zeros((36, 64, 4), np.uint8))
print(json.dumps({"text": text, "name": p.name}))
"""


def test_fallback_to_qt_says_why():
    # the offscreen platform has no X11 window to make a Vulkan surface for
    res = _run(["-c", FALLBACK], {"QT_QPA_PLATFORM": "offscreen"})
    assert res["name"].startswith("qt")
    assert "Vulkan unavailable" in res["text"] and "xcb" in res["text"], res["text"]


def test_create_presenter_picks_vulkan_on_x11(display):
    if not _vulkan_devices():
        pytest.skip("Vulkan has no physical device at all (not even lavapipe)")
    env = {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "ALLOW_CPU_DEVICE": "1"}
    res = _run(["-c", FALLBACK], env)
    assert res["name"].startswith("vulkan"), res["text"]


def test_a_cpu_rasterizer_is_not_preferred(display):
    """lavapipe presents by a software copy (~4.6 ms of UI thread per 720p frame): the app
    falls back to Qt's ~1 ms raster path by default, and says why."""
    if not _vulkan_devices():
        pytest.skip("Vulkan has no physical device at all (not even lavapipe)")
    res = _run(["-c", FALLBACK], {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb"})
    if res["name"].startswith("vulkan"):
        pytest.skip(f"this machine has a real Vulkan GPU: {res['text']}")
    assert res["name"].startswith("qt") and "CPU rasterizer" in res["text"], res["text"]
