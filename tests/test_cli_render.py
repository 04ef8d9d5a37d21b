"""End to end: the `kagura` command renders real audio into real files, checked with av."""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import numpy as np
import pytest
from scipy.stats import spearmanr

from app.cli import main
from tests.cli import REPO, kagura, probe
from tests.signals import espeak_speech

FPS = 24


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> Path:
    """~4 s of real speech with pauses, from espeak-ng, as a 22.05 kHz WAV."""
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    text = "Hello everyone. [[_:_:_:_:]] Welcome to my stage tonight! [[_:_:_:_:]] Are you ready to sing with me?"
    return espeak_speech(path, text)


def decode_rgb(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def audio_duration(path: Path) -> float:
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        return sum(f.samples for f in c.decode(audio=0)) / s.rate


@pytest.fixture(scope="module")
def speech_mp4(speech, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("render") / "speech.mp4"
    done = kagura(
        "render", str(speech), "-o", str(out), "--size", "480x270", "--fps", str(FPS), "--quiet"
    )
    assert done.returncode == 0, done.stderr
    return out


def test_mp4_streams_frames_and_sync(speech, speech_mp4):
    info = probe(speech_mp4, FPS)
    assert info["n_video"] == 1 and info["n_audio"] == 1
    assert info["vcodec"] == "h264" and info["acodec"] == "aac"
    source_s = audio_duration(speech)
    assert abs(info["frames"] - source_s * FPS) <= 1
    assert abs(info["audio_s"] - info["video_s"]) <= 1.0 / FPS
    assert not any(p.name.endswith(".partial.mp4") for p in speech_mp4.parent.iterdir())


def test_mouth_follows_loudness(speech, speech_mp4):
    """Mouth openness measured on the rendered pixels correlates with the audio's loudness."""
    frames = decode_rgb(speech_mp4)
    # The mouth interior is the darkest red in the lower face; count those pixels per frame.
    stack = np.stack(frames).astype(np.int16)
    h, w = stack.shape[1:3]
    face = stack[:, int(h * 0.35) : int(h * 0.75), int(w * 0.38) : int(w * 0.62)]
    r, g, b = face[..., 0], face[..., 1], face[..., 2]
    mouth_pixels = ((r - g > 60) & (r - b > 30) & (r < 230)).sum(axis=(1, 2))
    with av.open(str(speech)) as c:
        rate = c.streams.audio[0].rate
        pcm = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)]).astype(
            np.float32
        )
    hop = rate / FPS
    rms = np.array(
        [
            np.sqrt(np.mean(pcm[int(i * hop) : int((i + 1) * hop)] ** 2) + 1e-12)
            for i in range(len(frames))
        ]
    )
    rho = spearmanr(mouth_pixels, rms).statistic
    print(f"Spearman rho(mouth pixels, loudness) = {rho:.3f} over {len(frames)} frames")
    assert mouth_pixels.max() > 20, "no open mouth found in any frame"
    assert rho > 0.5, f"Spearman rho(mouth pixels, loudness) = {rho:.2f}"


def test_webm_transparent_has_alpha(speech, tmp_path):
    out = tmp_path / "idol.webm"
    done = kagura(
        "render",
        str(speech),
        "-o",
        str(out),
        "--size",
        "320x180",
        "--fps",
        str(FPS),
        "--seconds",
        "1.5",
        "--transparent",
        "--preset",
        "cyberpunk",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    with av.open(str(out)) as c:
        assert len(c.streams.video) == 1 and len(c.streams.audio) == 1
        assert c.streams.audio[0].codec_context.name == "opus"
        codec = av.CodecContext.create("libvpx-vp9", "r")
        alphas = []
        for packet in c.demux(video=0):
            for frame in codec.decode(packet):
                alphas.append(frame.to_ndarray(format="rgba")[..., 3])
    assert len(alphas) == pytest.approx(1.5 * FPS, abs=1)
    alpha = alphas[len(alphas) // 2]
    assert alpha[:8, :8].max() < 16, "corners should be transparent"
    assert (alpha > 240).mean() > 0.1, "the idol should be opaque"
    assert 0.1 < (alpha > 128).mean() < 0.9


@pytest.mark.parametrize("preset", ["studio", "ink-wash", "cyberpunk"])
def test_presets_render_distinct_looks(speech, tmp_path, preset):
    out = tmp_path / f"{preset}.png"
    assert (
        main(
            [
                "still",
                str(speech),
                "--at",
                "1.0",
                "-o",
                str(out),
                "--preset",
                preset,
                "--size",
                "320x180",
            ]
        )
        == 0
    )
    with av.open(str(out)) as c:
        img = next(c.decode(video=0)).to_ndarray(format="rgba")
    assert img.shape == (180, 320, 4)
    assert img[..., 3].min() == 255  # opaque output: background composited
    rgb = img[..., :3].astype(np.int16)
    saturation = (rgb.max(-1) - rgb.min(-1)).mean()
    if preset == "ink-wash":
        assert saturation < 25  # monochrome ink, save for a small vermilion accent
    else:
        assert saturation > 25


# ---- bad input: exit 2, one line naming the problem, no output left behind ----------------


def _bad(tmp_path, *args) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out.mp4"
    done = kagura("render", *args, "-o", str(out), "--quiet")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()
    assert list(tmp_path.glob("*.partial.*")) == []
    return done, out


def test_missing_file(tmp_path):
    done, _ = _bad(tmp_path, str(tmp_path / "nope.wav"))
    assert "nope.wav" in done.stderr


def test_not_audio(tmp_path):
    fake = tmp_path / "notes.mp3"
    fake.write_text("these are not the sounds you are looking for\n" * 50)
    done, _ = _bad(tmp_path, str(fake))
    assert "notes.mp3" in done.stderr


def test_zero_length_audio(tmp_path):
    empty = tmp_path / "empty.wav"
    with av.open(str(empty), "w") as c:
        s = c.add_stream("pcm_s16le", rate=16000)
        s.layout = "mono"
    done, _ = _bad(tmp_path, str(empty))
    assert "empty.wav" in done.stderr


def test_unknown_preset(speech, tmp_path):
    done, _ = _bad(tmp_path, str(speech), "--preset", "vaporwave")
    assert "vaporwave" in done.stderr and "studio" in done.stderr


def test_malformed_preset(speech, tmp_path):
    bad = tmp_path / "broken.toml"
    text = (
        (REPO / "presets" / "studio.toml").read_text().replace('hair = "#7fb6ff"', 'hair = "blue"')
    )
    assert text != (REPO / "presets" / "studio.toml").read_text()
    bad.write_text(text.replace('name = "studio"', 'name = "broken"'))
    done, _ = _bad(tmp_path, str(speech), "--preset", str(bad))
    assert "broken.toml" in done.stderr and "palette.hair" in done.stderr


@pytest.mark.parametrize("size", ["1280", "0x0", "1281x720", "axb", "99999x720"])
def test_bad_size(speech, tmp_path, size):
    done, _ = _bad(tmp_path, str(speech), "--size", size)
    assert "--size" in done.stderr


def test_transparent_mp4_refused(speech, tmp_path):
    done, _ = _bad(tmp_path, str(speech), "--transparent")
    assert ".webm" in done.stderr


def test_existing_output_survives_a_failed_render(speech, tmp_path):
    out = tmp_path / "keep.mp4"
    out.write_bytes(b"an earlier render")
    done = kagura("render", str(speech), "-o", str(out), "--preset", "vaporwave", "--quiet")
    assert done.returncode == 2
    assert out.read_bytes() == b"an earlier render"


def test_presets_command_lists_builtins():
    done = kagura("presets")
    assert done.returncode == 0, done.stderr
    for name in ("studio", "ink-wash", "cyberpunk"):
        assert name in done.stdout


def test_unknown_output_extension(speech, tmp_path):
    out = tmp_path / "clip.avi"
    done = kagura("render", str(speech), "-o", str(out), "--quiet")
    assert done.returncode == 2
    assert "clip.avi" in done.stderr and ".mp4" in done.stderr and ".webm" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_still_transparent_png(speech, tmp_path):
    out = tmp_path / "idol.png"
    done = kagura(
        "still", str(speech), "--at", "0.5", "-o", str(out), "--size", "256x144", "--transparent"
    )
    assert done.returncode == 0, done.stderr
    with av.open(str(out)) as c:
        img = next(c.decode(video=0)).to_ndarray(format="rgba")
    assert img[0, 0, 3] == 0 and img[72, 128, 3] == 255
