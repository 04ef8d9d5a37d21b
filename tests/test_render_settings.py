"""`kagura render` / `demo`'s settings file (app/render_settings.py): defaults ← render.toml (or
--config FILE) ← the flags. Real files in tmp_path, the real command line in a fresh process,
renders of half a second at 96x64 read back with av."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import av
import pytest

from app.cli import _layered_render_config, build_parser
from tests.hostile import write_wav_s16

REPO = Path(__file__).resolve().parents[1]
TINY = ["--seconds", "0.5", "--quiet", "-y"]


@pytest.fixture
def config_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(d))
    return d


@pytest.fixture
def song(tmp_path) -> Path:
    return write_wav_s16(tmp_path / "song.wav", 1.0)


def kagura(*args: str, config_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAGURA_CONFIG_DIR": str(config_dir), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
        check=False,
    )


def video(path: Path) -> tuple[int, int, float]:
    """(width, height, frames per second) of a rendered file, as av reads it."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return s.codec_context.width, s.codec_context.height, float(s.average_rate)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


# --- the real command ------------------------------------------------------------------------


def test_the_files_values_are_used_and_the_flags_win(config_dir, song, tmp_path):
    settings = config_dir / "render.toml"
    settings.write_text('size = "96x64"\nfps = 12\n')
    before = settings.read_bytes(), settings.stat().st_mtime_ns
    out = tmp_path / "from_file.mp4"
    done = kagura("render", song, "-o", out, *TINY, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert video(out) == (96, 64, 12.0)  # both from render.toml

    out = tmp_path / "flag.mp4"
    done = kagura("render", song, "-o", out, "--fps", "8", *TINY, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert video(out) == (96, 64, 8.0)  # --fps wins, the file still gives the size

    other = tmp_path / "other.toml"
    other.write_text("fps = 10\n")  # --config replaces render.toml (no size from it)
    out = tmp_path / "other.mp4"
    args = ("--config", other, "--size", "64x64")
    done = kagura("render", song, "-o", out, *args, *TINY, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert video(out) == (64, 64, 10.0)
    assert (settings.read_bytes(), settings.stat().st_mtime_ns) == before  # only ever read


def test_a_bad_value_keeps_its_default_with_a_notice_naming_file_and_key(
    config_dir, song, tmp_path
):
    settings = config_dir / "render.toml"
    settings.write_text('size = "96x64"\nfps = "fast"\n')
    out = tmp_path / "bad.mp4"
    done = kagura("render", song, "-o", out, *TINY, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert video(out) == (96, 64, 30.0)  # the good key is used, the bad one is the default
    (line,) = [ln for ln in done.stderr.splitlines() if "fps" in ln]
    assert str(settings) in line and "fps='fast'" in line and "using 30" in line


def test_a_file_that_is_not_toml_is_one_line_and_exit_2(config_dir, song, tmp_path):
    settings = config_dir / "render.toml"
    settings.write_text("fps = = 12\n")
    out = tmp_path / "never.mp4"
    line = one_error_line(kagura("render", song, "-o", out, *TINY, config_dir=config_dir))
    assert str(settings) in line and "not valid TOML" in line
    assert not out.exists()
    other = tmp_path / "broken.toml"
    other.write_bytes(b"\xff\xfe size")
    done = kagura("demo", "-o", out, "--config", other, *TINY, config_dir=config_dir)
    assert str(other) in one_error_line(done)


def test_a_config_that_names_no_file_is_one_line_and_exit_2(config_dir, song, tmp_path):
    missing = tmp_path / "nowhere.toml"
    out = tmp_path / "never.mp4"
    done = kagura("render", song, "-o", out, "--config", missing, *TINY, config_dir=config_dir)
    line = one_error_line(done)
    assert f"--config {missing}" in line and "no such settings file" in line
    line = one_error_line(
        kagura("render", song, "-o", out, "--config", tmp_path, *TINY, config_dir=config_dir)
    )
    assert "is a folder" in line


def picture(path: Path) -> tuple[int, int, bool]:
    """(width, height, whether its corner is see-through) of a written PNG, as av reads it."""
    with av.open(str(path)) as c:
        img = next(c.decode(video=0)).to_ndarray(format="rgba")
    return img.shape[1], img.shape[0], bool(img[0, 0, 3] == 0)


def test_still_reads_the_same_file_and_the_flags_win(config_dir, song, tmp_path):
    """`kagura still` layers render.toml like render: the look's keys from the file, a flag over
    it; the file's video keys (fps here) are render's and say nothing to a still."""
    (config_dir / "render.toml").write_text('size = "96x64"\ntransparent = true\nfps = 12\n')
    out = tmp_path / "from_file.png"
    done = kagura("still", song, "--at", "0.5", "-o", out, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert picture(out) == (96, 64, True)  # size and transparency from render.toml
    assert "fps" not in done.stderr

    out = tmp_path / "flag.png"
    done = kagura("still", song, "--at", "0.5", "-o", out, "--size", "64x64", config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert picture(out) == (64, 64, True)  # --size wins, the file still makes it transparent

    other = tmp_path / "other.toml"
    other.write_text('size = "128x72"\n')  # --config replaces render.toml: opaque
    out = tmp_path / "other.png"
    done = kagura("still", song, "--at", "0.5", "-o", out, "--config", other, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert picture(out) == (128, 72, False)


def test_still_a_bad_value_keeps_its_default_and_a_missing_config_is_exit_2(
    config_dir, song, tmp_path
):
    settings = config_dir / "render.toml"
    settings.write_text('size = "96x64"\nseed = -1\n')
    out = tmp_path / "bad.png"
    done = kagura("still", song, "--at", "0.5", "-o", out, config_dir=config_dir)
    assert done.returncode == 0, done.stderr
    assert picture(out)[:2] == (96, 64)
    (line,) = [ln for ln in done.stderr.splitlines() if "seed" in ln]
    assert str(settings) in line and "seed=-1" in line and "using 0" in line

    missing = tmp_path / "nowhere.toml"
    out = tmp_path / "never.png"
    done = kagura(
        "still", song, "--at", "0.5", "-o", out, "--config", missing, config_dir=config_dir
    )
    line = one_error_line(done)
    assert f"--config {missing}" in line and "no such settings file" in line
    assert not out.exists()


def test_a_fifo_as_settings_is_refused_not_waited_on(config_dir, tmp_path):
    from app.errors import UsageError

    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        _config("render", "a.wav", "-o", str(tmp_path / "x.mp4"), "--config", str(fifo))


def test_sizes_that_do_not_fit_together_name_the_file(config_dir, song, tmp_path):
    settings = config_dir / "render.toml"
    settings.write_text('size = "1280x720"\nupscale = 3\n')  # 1280 is not a multiple of 3
    line = one_error_line(kagura("render", song, "-o", tmp_path / "x.mp4", config_dir=config_dir))
    assert "--size 1280x720" in line and "--upscale 3" in line and str(settings) in line


# --- the layers, without rendering -----------------------------------------------------------


def _config(*argv: str):
    return _layered_render_config(build_parser().parse_args(list(argv)))


def test_keys_it_may_not_have_are_named_and_ignored(config_dir, tmp_path, capsys):
    (config_dir / "render.toml").write_text(
        'seconds = 3\noverwrite = true\ncolour = "red"\n[gpu]\nupscale = 2\n'
    )
    cfg = _config("render", "a.wav", "-o", str(tmp_path / "x.mp4"))
    assert cfg.seconds is None and not cfg.overwrite and cfg.gpu.upscale == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and all("render.toml" in ln for ln in lines)
    assert any("seconds: given on the command line only" in ln for ln in lines)
    assert any("unknown key 'colour'" in ln for ln in lines)
    assert any("unknown key 'gpu'" in ln for ln in lines)


def test_gpu_keys_layer_like_the_flags(config_dir, tmp_path):
    from pipeline.model_factory import KAGURA

    settings = config_dir / "render.toml"
    out = str(tmp_path / "x.mp4")
    settings.write_text('device = "cuda"\nupscale = 3\nsize = "1920x1080"\ntemporal = false\n')
    cfg = _config("render", "a.wav", "-o", out)
    assert cfg.gpu.device == "cuda" and cfg.gpu.upscale == 3 and not cfg.gpu.temporal_on
    assert cfg.gpu.diffusion == KAGURA  # cuda's default look, resolved after the layers
    assert _config("render", "a.wav", "-o", out, "--device", "cpu").gpu.diffusion is None
    assert _config("render", "a.wav", "-o", out, "--temporal").gpu.temporal is True
    settings.write_text('device = "cuda"\ndiffusion = false\n')  # = --no-diffusion
    assert not _config("render", "a.wav", "-o", out).gpu.diffusion_on
    settings.write_text('device = "cuda"\ndiffusion_random = "tiny"\n')
    rand = _config("render", "a.wav", "-o", out)
    assert rand.gpu.diffusion_random == "tiny" and rand.gpu.diffusion is None
    no = _config("render", "a.wav", "-o", out, "--no-diffusion")  # the flag's choice wins
    assert not no.gpu.diffusion_on


def test_auto_on_the_command_line_wins_over_a_number_in_the_file(config_dir, tmp_path):
    (config_dir / "render.toml").write_text("encoders = 4\nrender_workers = 2\n")
    out = str(tmp_path / "x.mp4")
    cfg = _config("render", "a.wav", "-o", out)
    assert (cfg.encoders, cfg.render_workers) == (4, 2)
    cfg = _config("render", "a.wav", "-o", out, "--encoders", "auto", "--render-workers", "auto")
    assert (cfg.encoders, cfg.render_workers) == (None, None)


def test_demo_keeps_its_own_default_under_the_file(config_dir, tmp_path):
    from app.cli import DEMO_X264_PRESET, demo_config
    from app.config import RenderConfig

    def demo_preset() -> str:
        args = build_parser().parse_args(["demo", "-o", str(tmp_path / "d.mp4")])
        return demo_config(args).x264_preset

    assert RenderConfig.model_fields["x264_preset"].default != DEMO_X264_PRESET
    assert demo_preset() == DEMO_X264_PRESET  # no file: the demo's own default
    (config_dir / "render.toml").write_text('x264_preset = "slow"\n')
    assert demo_preset() == "slow"


def test_relative_paths_in_the_file_are_from_its_folder(config_dir, tmp_path, capsys):
    (config_dir / "looks").mkdir()
    preset = (REPO / "presets" / "studio.toml").read_text()
    (config_dir / "looks" / "mine.toml").write_text(preset)
    (config_dir / "render.toml").write_text('preset = "looks/mine.toml"\navatar = "gone.psd"\n')
    cfg = _config("render", "a.wav", "-o", str(tmp_path / "x.mp4"))
    assert cfg.preset == str(config_dir / "looks" / "mine.toml") and cfg.avatar is None
    (line,) = capsys.readouterr().err.splitlines()
    assert "avatar='gone.psd'" in line and "no such file or folder" in line


def test_bench_offline_reads_the_file_as_render_does(config_dir, tmp_path, capsys):
    """`kagura bench offline` stands for `kagura render`: the same file under its flags (its own
    size and length unless given), named in its report; a bad value is the same notice."""
    from app.bench_offline import _command, _config

    def bench(*flags: str) -> tuple[dict, int, int, argparse.Namespace]:
        args = build_parser().parse_args(["bench", "offline", "--device", "cpu", *flags])
        return (*_config(args), args)

    cfg, _, _, _ = bench()
    assert cfg["settings"] is None and cfg["preset"] == "studio"
    settings = config_dir / "render.toml"
    settings.write_text('preset = "ink-wash"\nx264_preset = "ultrafast"\nsize = "640x360"\n')
    cfg, n, m, args = bench()
    assert (cfg["preset"], cfg["x264_preset"]) == ("ink-wash", "ultrafast")
    assert (cfg["width"], cfg["height"]) == (1920, 1080)  # the bench's own size
    assert cfg["settings"] == str(settings.absolute())
    assert f"--config {settings.absolute()}" in _command(args, cfg, n, m)
    assert bench("--preset", "cyberpunk")[0]["preset"] == "cyberpunk"  # the flag wins
    capsys.readouterr()
    settings.write_text("fps = 0\n")
    assert bench()[0]["fps"] == 30  # the default, with the same one-line notice as render's
    err = capsys.readouterr().err
    assert "render.toml" in err and "fps" in err
