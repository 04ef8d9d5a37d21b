"""`kagura render` through the GPU stages (diffusion → temporal → upscale), on the CPU with the
test-sized random-weight architecture; the option checks; one CUDA run (marked gpu)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import av
import pytest

from tests.cli import kagura

FPS = 24
SECONDS = 1.5
CHAIN = ["--diffusion-random", "tiny", "--upscale", "2", "--size", "256x144"]
CHAIN += ["--diffusion-size", "128x72"]


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> Path:
    """About 2 s of real speech from espeak-ng (the renders take its first 1.5 s)."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is missing: run scripts/setup.sh (it installs it)")
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    subprocess.run(
        [
            "espeak-ng",
            "-v",
            "en-us+f3",
            "-s",
            "150",
            "-w",
            str(path),
            "Hello everyone, sing with me tonight!",
        ],
        check=True,
    )
    return path


def video_info(path: Path) -> tuple[int, int, int, tuple[int, int]]:
    """(video streams, audio streams, decoded frames, (width, height))."""
    with av.open(str(path)) as c:
        nv, na = len(c.streams.video), len(c.streams.audio)
        v = c.streams.video[0]
        size = (v.codec_context.width, v.codec_context.height)
        frames = sum(1 for _ in c.decode(video=0))
    return nv, na, frames, size


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kagura: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_cpu_chain_renders_mp4(speech, tmp_path):
    out = tmp_path / "gpu_chain.mp4"
    done = kagura(
        "render", str(speech), "-o", str(out), "--device", "cpu", *CHAIN,
        "--seconds", str(SECONDS), "--fps", str(FPS), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "RANDOM weights" in done.stderr  # the loud notice
    nv, na, frames, size = video_info(out)
    assert (nv, na) == (1, 1)
    assert size == (256, 144)
    assert abs(frames - SECONDS * FPS) <= 1


def test_cpu_chain_transparent_webm_keeps_alpha(speech, tmp_path):
    out = tmp_path / "gpu_chain.webm"
    done = kagura(
        "render", str(speech), "-o", str(out), "--device", "cpu", *CHAIN,
        "--seconds", str(SECONDS), "--fps", str(FPS), "--transparent", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with av.open(str(out)) as c:
        assert len(c.streams.video) == 1 and len(c.streams.audio) == 1
        codec = av.CodecContext.create("libvpx-vp9", "r")
        alphas = [
            frame.to_ndarray(format="rgba")[..., 3]
            for packet in c.demux(video=0)
            for frame in codec.decode(packet)
        ]
    assert abs(len(alphas) - SECONDS * FPS) <= 1
    alpha = alphas[len(alphas) // 2]
    assert alpha.shape == (144, 256)
    assert alpha[:8, :8].max() < 16, "corners should stay transparent"
    assert 0.05 < (alpha > 128).mean() < 0.9, "the idol should stay opaque, the rest clear"


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_gpu_is_a_usage_error(speech, tmp_path):
    out = tmp_path / "x.mp4"
    line = one_line_error(kagura("render", str(speech), "-o", str(out), "--device", "cuda"))
    assert "CUDA is not available: torch sees no GPU; use --device cpu" in line
    assert not out.exists()


def test_missing_diffusion_folder(speech, tmp_path):
    missing = tmp_path / "no-such-checkpoint"
    out = tmp_path / "x.mp4"
    line = one_line_error(
        kagura("render", str(speech), "-o", str(out), "--diffusion", str(missing))
    )
    assert str(missing) in line
    assert not out.exists()


def test_foreign_diffusion_folder(speech, tmp_path):
    folder = tmp_path / "not-a-checkpoint"
    folder.mkdir()
    line = one_line_error(
        kagura("render", str(speech), "-o", str(tmp_path / "x.mp4"), "--diffusion", str(folder))
    )
    assert str(folder) in line


@pytest.mark.parametrize(
    "args",
    [
        # --size is not the diffusion size × --upscale
        [
            "--diffusion-random",
            "tiny",
            "--upscale",
            "2",
            "--size",
            "256x144",
            *["--diffusion-size", "128x80"],
        ],
        ["--upscale", "3", "--size", "256x144"],  # not divisible by 3
        ["--diffusion-size", "128x72"],  # without diffusion
    ],
)
def test_bad_sizes(speech, tmp_path, args):
    out = tmp_path / "x.mp4"
    line = one_line_error(kagura("render", str(speech), "-o", str(out), *args))
    assert "size" in line
    assert not out.exists()


@pytest.mark.gpu
def test_cuda_sd_turbo_1080p(speech, tmp_path):
    """2 s at 1920x1080: 640x360 diffusion (random sd-turbo weights) × 3 upscale, on CUDA."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import time

    out = tmp_path / "cuda.mp4"
    t0 = time.perf_counter()
    done = kagura(
        "render", str(speech), "-o", str(out), "--device", "cuda",
        "--diffusion-random", "sd-turbo", "--upscale", "3", "--size", "1920x1080",
        "--seconds", "2", "--fps", str(FPS), "--quiet",
        timeout=600,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    nv, na, frames, size = video_info(out)
    print(f"cuda render: {frames} frames 1920x1080 in {wall:.1f} s wall (incl. setup)")
    assert (nv, na) == (1, 1)
    assert size == (1920, 1080)
    assert abs(frames - 2 * FPS) <= 1
