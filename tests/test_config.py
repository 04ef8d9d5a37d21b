"""The one configuration model (app/config.py) and the one directory rule (core/paths.py):
defaults ← the settings file ← the flags, frozen, versioned, one size parser for every command,
`--device` the compute device and `--mic` the microphone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.cli import build_parser
from app.config import (
    CONFIG_VERSION,
    LiveConfig,
    RenderConfig,
    layer,
    live_config,
    parse_size,
    render_config,
)
from app.errors import UsageError
from app.live_settings import SETTINGS_VERSION, Settings

REPO = Path(__file__).resolve().parents[1]

GOOD_SIZES = ["64x64", "160x90", "1280x720", "7680x4320", "1920X1080"]
BAD_SIZES = ["1280", "0x0", "1281x720", "axb", "99999x720", "62x64", "64x64x64", ""]


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    d = tmp_path / "config"
    d.mkdir()
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(d))
    monkeypatch.setenv("KAGURA_NO_KEYRING", "1")
    return d


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def _settings(config_dir: Path, **values) -> Settings:
    path = config_dir / "live_app.json"
    path.write_text(json.dumps(values))
    return Settings(path)


# --- the layers ------------------------------------------------------------------------------


def test_a_flag_wins_over_the_settings_file_which_wins_over_the_default(config_dir):
    settings = _settings(config_dir, preset="cyberpunk", device="USB mic")
    remembered = live_config(_parse("live"), settings)
    assert remembered.preset == "cyberpunk" and remembered.mic == "USB mic"
    flagged = live_config(_parse("live", "--preset", "ink-wash", "--mic", "Headset"), settings)
    assert flagged.preset == "ink-wash" and flagged.mic == "Headset"
    assert live_config(_parse("live")).preset == "studio"  # no file: the default
    assert remembered.fps == 30 and remembered.size is None  # the defaults underneath


def test_a_remembered_preset_that_is_gone_falls_back_with_a_notice(config_dir):
    settings = _settings(config_dir, preset="no-such-look")
    notices: list[str] = []
    cfg = live_config(_parse("live"), settings, notices=notices)
    assert cfg.preset == "studio"
    (line,) = notices
    assert "preset='no-such-look'" in line and "no such preset" in line and "\n" not in line


def test_a_bad_file_value_keeps_its_default_and_says_so():
    notices: list[str] = []
    cfg = layer(
        LiveConfig,
        file={"fps": "fast", "mic": "Headset"},
        flags={},
        file_name="settings: live_app.json",
        notices=notices,
    )
    assert cfg.fps == 30 and cfg.mic == "Headset"  # the good value survives
    (line,) = notices
    assert line.startswith("settings: live_app.json: fps='fast'") and "using 30" in line


def test_a_bad_flag_is_one_usage_error_naming_it():
    with pytest.raises(UsageError, match=r"^--fps 0: "):
        layer(LiveConfig, flags={"fps": 0})


def _one_line_exit_2(*argv: str, env_dir: Path) -> str:
    import os

    env = {**os.environ, "KAGURA_CONFIG_DIR": str(env_dir), "KAGURA_NO_KEYRING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_bad_live_flags_end_in_one_line_and_exit_2(config_dir):
    line = _one_line_exit_2("live", "--size", "1281x720", env_dir=config_dir)
    assert "--size '1281x720'" in line and "even number of pixels" in line
    line = _one_line_exit_2("live", "--temporal", "--budget-ms", "-3", env_dir=config_dir)
    assert "--budget-ms -3" in line


def test_the_parsed_options_are_never_written(tmp_path):
    args = _parse("demo", "--device", "cpu", "--upscale", "2")
    before = dict(vars(args))
    cfg = render_config(args, audio=tmp_path / "a.wav", output=tmp_path / "demo.mp4")
    assert vars(args) == before and cfg.output == tmp_path / "demo.mp4"
    args = _parse("live", "--device", "cpu", "--temporal")
    before = dict(vars(args))
    live_config(args)
    assert vars(args) == before


# --- frozen, versioned -----------------------------------------------------------------------


def test_configs_are_frozen(tmp_path):
    cfg = render_config(_parse("render", "a.wav", "-o", str(tmp_path / "x.mp4")))
    with pytest.raises(ValidationError, match="frozen"):
        cfg.fps = 60
    with pytest.raises(ValidationError, match="frozen"):
        cfg.gpu.upscale = 2
    with pytest.raises(ValidationError):
        RenderConfig(audio="a.wav", output="x.mp4", no_such_option=1)  # unknown fields refused


def test_configs_carry_their_version(tmp_path):
    cfg = render_config(_parse("render", "a.wav", "-o", str(tmp_path / "x.mp4")))
    assert cfg.version == CONFIG_VERSION
    assert cfg.model_dump(mode="json")["version"] == CONFIG_VERSION
    assert live_config(_parse("live")).version == CONFIG_VERSION


def test_a_settings_file_from_a_newer_kagura_is_read_kept_and_said(config_dir):
    path = config_dir / "live_app.json"
    newer = {"version": SETTINGS_VERSION + 4, "preset": "cyberpunk", "hologram": True}
    path.write_text(json.dumps(newer))
    s = Settings(path)
    assert s["preset"] == "cyberpunk"  # the fields this version knows are used
    assert any("written by a newer Kagura" in n and "version 5" in n for n in s.notices)
    assert json.loads((config_dir / "live_app.json.bad").read_text()) == newer  # not lost
    on_disk = json.loads(path.read_text())
    assert on_disk["version"] == SETTINGS_VERSION and on_disk["preset"] == "cyberpunk"
    assert Settings(path).notices == []  # the next start is clean


@pytest.mark.parametrize("version", ["two", 0, True, None])
def test_a_settings_file_with_a_bad_version_is_healed(config_dir, version):
    s = _settings(config_dir, version=version, gain_db=3.0)
    assert s["gain_db"] == 3.0 and s["version"] == SETTINGS_VERSION
    assert any(n.startswith("settings: version=") for n in s.notices)


def test_a_file_from_before_versions_is_version_1(config_dir):
    s = _settings(config_dir, preset="ink-wash")
    assert s.notices == [] and s["version"] == 1


# --- one size parser -------------------------------------------------------------------------


def _sizes_of_every_command(size: str, tmp_path: Path) -> list[tuple[int, int]]:
    from app.still import still_config

    out = str(tmp_path / "x.mp4")
    got = [
        render_config(_parse("render", "a.wav", "-o", out, "--size", size)).request().sizes()[1],
        render_config(
            _parse("demo", "--size", size), audio=tmp_path / "a.wav", output=Path(out)
        ).size,
        still_config(
            _parse("still", "a.wav", "--at", "1", "-o", str(tmp_path / "x.png"), "--size", size)
        ).size,
        live_config(_parse("live", "--size", size)).size,
    ]
    return got


@pytest.mark.parametrize("size", GOOD_SIZES)
def test_every_command_accepts_the_same_sizes(size, tmp_path):
    want = parse_size(size)
    assert _sizes_of_every_command(size, tmp_path) == [want] * 4


@pytest.mark.parametrize("size", BAD_SIZES)
def test_every_command_refuses_the_same_sizes(size, tmp_path):
    from app.still import still_config

    out = str(tmp_path / "x.mp4")
    builders = [
        lambda: render_config(_parse("render", "a.wav", "-o", out, "--size", size)),
        lambda: render_config(
            _parse("demo", "--size", size), audio=tmp_path / "a.wav", output=Path(out)
        ),
        lambda: still_config(
            _parse("still", "a.wav", "--at", "1", "-o", str(tmp_path / "x.png"), "--size", size)
        ),
        lambda: live_config(_parse("live", "--size", size)),
    ]
    messages = []
    for build in builders:
        with pytest.raises(UsageError) as exc:
            build()
        messages.append(str(exc.value))
    assert len(set(messages)) == 1 and messages[0].startswith(f"--size {size!r}: ")


def test_a_bad_size_is_the_same_line_from_the_real_commands(config_dir, tmp_path):
    """Through the real CLI: render, still, live and the render bench refuse 1281x720 with the
    same line (exit 2), before any work."""
    wav = REPO / "audio" / "assets" / "demo_song.ogg"
    lines = [
        _one_line_exit_2("render", str(wav), "-o", str(tmp_path / "x.mp4"), "--size", "1281x720",
                         env_dir=config_dir),
        _one_line_exit_2("still", str(wav), "--at", "1", "-o", str(tmp_path / "x.png"),
                         "--size", "1281x720", env_dir=config_dir),
        _one_line_exit_2("live", "--size", "1281x720", env_dir=config_dir),
        _one_line_exit_2("bench", "render", "--size", "1281x720", "--no-write",
                         env_dir=config_dir),
    ]  # fmt: skip
    tails = {line.split("--size", 1)[1] for line in lines}
    assert len(tails) == 1, lines


# --- --device and --mic ----------------------------------------------------------------------


def test_device_is_the_compute_device_and_mic_the_microphone(capsys):
    cfg = live_config(_parse("live", "--device", "cpu", "--mic", "Headset"))
    assert cfg.gpu.device == "cpu" and cfg.mic == "Headset"
    assert capsys.readouterr().err == ""


def test_the_old_device_spelling_still_picks_the_microphone_with_a_notice(capsys):
    cfg = live_config(_parse("live", "--device", "USB mic"))
    assert cfg.gpu.device == "cpu" and cfg.mic == "USB mic"
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "kagura live: --device 'USB mic' for the microphone is deprecated; use --mic 'USB mic'"
    )


def test_calibrate_takes_mic_and_the_old_device_with_a_notice(capsys):
    from app.cmd_calibrate import microphone

    assert microphone(_parse("calibrate", "--mic", "Headset")) == "Headset"
    assert capsys.readouterr().err == ""
    assert microphone(_parse("calibrate", "--device", "Headset")) == "Headset"
    assert "deprecated; use --mic 'Headset'" in capsys.readouterr().err


# --- one directory rule ----------------------------------------------------------------------


def test_one_folder_rule_for_settings_profile_presets_and_caches(tmp_path, monkeypatch):
    from app.live_settings import config_dir
    from audio.calibration import user_profile_path
    from audio.features import numba_cache_dir
    from audio.speech_corpus import cache_dir as corpus_cache
    from core import paths
    from pipeline.diffusion.compile import default_compile_cache
    from presets.loader import user_presets_dir
    from render.disk_cache import cache_dir as disk_cache

    cfg, cache = tmp_path / "cfg", tmp_path / "cache"
    monkeypatch.setenv("KAGURA_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("KAGURA_CACHE_DIR", str(cache))
    monkeypatch.delenv("KAGURA_PRESETS_DIR", raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert config_dir() == cfg and Settings().path == cfg / "live_app.json"
    assert user_profile_path() == cfg / "lipsync-profile.json"
    assert user_presets_dir() == cfg / "presets"  # KAGURA_CONFIG_DIR moves the presets too
    assert disk_cache("looks") == cache / "looks"
    assert Path(numba_cache_dir()) == cache / "numba"
    assert default_compile_cache() == cache / "inductor"
    assert corpus_cache().parent == cache
    monkeypatch.setenv("KAGURA_PRESETS_DIR", str(tmp_path / "mine"))
    assert user_presets_dir() == tmp_path / "mine" and paths.config_dir() == cfg
    shipped = tmp_path / "shipped"
    assert paths.weights_dir(shipped) == shipped
    monkeypatch.setenv("KAGURA_WEIGHTS_DIR", str(tmp_path / "retrained"))
    assert paths.weights_dir(shipped) == tmp_path / "retrained"


def test_the_default_look_per_device_is_resolved_once(tmp_path):
    """On cuda the render and live configs carry Kagura's own model unless told otherwise (the
    namespace keeps what was typed); `default_model=False` leaves it out."""
    from pipeline.model_factory import KAGURA

    out = str(tmp_path / "x.mp4")
    args = _parse("render", "a.wav", "-o", out, "--device", "cuda")
    assert render_config(args).gpu.diffusion == KAGURA and args.diffusion is None
    assert render_config(args, default_model=False).gpu.diffusion is None
    no = render_config(_parse("render", "a.wav", "-o", out, "--device", "cuda", "--no-diffusion"))
    assert no.gpu.diffusion is None and not no.gpu.diffusion_on
    rand = live_config(_parse("live", "--device", "cuda", "--diffusion-random", "tiny"))
    assert rand.gpu.diffusion is None and rand.gpu.diffusion_random == "tiny"
    assert live_config(_parse("live", "--device", "cuda")).gpu.diffusion == KAGURA
    cpu = render_config(_parse("render", "a.wav", "-o", out))
    assert cpu.gpu.diffusion is None and not cpu.gpu.requested
