"""The command line imports only what the command runs: `kagura --help` (and importing app.cli)
must not wait for torch, diffusers, librosa, numba, PySide6, av, skia or numpy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "diffusers",
    "transformers",
    "librosa",
    "numba",
    "PySide6",
    "av",
    "skia",
    "numpy",
    "ray",
)

PROBE = """
import contextlib, io, json, sys
{action}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _heavy_modules_after(action: str) -> list[str]:
    code = PROBE.format(action=action, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_nothing_heavy():
    assert _heavy_modules_after("import app.cli") == []


@pytest.mark.parametrize(
    "argv", [["--help"], ["bench", "--help"], ["presets", "--help"], ["farm", "--help"]]
)
def test_help_imports_nothing_heavy(argv):
    action = (
        "from app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code"
    )
    assert _heavy_modules_after(action) == []


def test_a_bad_argument_is_reported_without_importing_torch():
    action = (
        "from app.cli import main\n"
        "with contextlib.redirect_stderr(io.StringIO()) as err:\n"
        "    code = main(['render'])\n"
        "assert code == 2, code\n"
        "assert err.getvalue().startswith('kagura: error: '), err.getvalue()"
    )
    assert "torch" not in _heavy_modules_after(action)


def test_every_command_still_parses_when_all_are_filled():
    """The lazily filled parser is the same parser: filling them all gives every option."""
    from app.cli import build_parser

    parser = build_parser(full=True)
    args = parser.parse_args(["render", "song.wav", "-o", "x.mp4", "--size", "320x180"])
    # --encoders not given is None: render.toml's value, else auto (app/render_settings.py)
    assert (args.command, args.size, args.encoders) == ("render", "320x180", None)
    assert parser.parse_args(["render", "s.wav", "-o", "x.mp4", "--encoders", "2"]).encoders == "2"
    args = parser.parse_args(["bench", "e2e", "--repeats", "1"])
    assert (args.bench, args.repeats) == ("e2e", 1)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_refused_render_is_reported_without_importing_torch(tmp_path, device):
    """The one-line error of a render refused before any work (an existing output, no -y)
    does not wait for torch: the error types are looked up only where they were imported.
    On cuda the request names Kagura's model by default; naming it imports no torch either,
    so the audio analysis process can start before torch is imported (app/early_analysis.py)."""
    out = tmp_path / "out.mp4"
    out.write_bytes(b"an earlier render")
    argv = ["render", "SONG", "-o", str(out), "--quiet", "--device", device]
    action = (
        "from app.cli import main\n"
        "from audio.demo_song import demo_song_path\n"
        f"argv = [str(demo_song_path()) if a == 'SONG' else a for a in {argv!r}]\n"
        "with contextlib.redirect_stderr(io.StringIO()) as err:\n"
        "    code = main(argv)\n"
        "assert code == 2, code\n"
        "assert err.getvalue().startswith('kagura: error: '), err.getvalue()"
    )
    assert "torch" not in _heavy_modules_after(action)
    assert out.read_bytes() == b"an earlier render"


def test_a_served_renders_client_imports_nothing_heavy(tmp_path):
    """What a served render's client runs before and while it hands the job over — the parser
    with the render options, the layered configuration, the hand-over's own checks, the
    progress bar — imports none of the heavy modules (numpy included): it only parses, checks
    its output's claim and shows the server's progress (app/serve_link.py)."""
    action = (
        "from app.cli import build_parser, _layered_render_config\n"
        "from app.serve_link import absolute, code_id, shared_env\n"
        "from pipeline.progress import RenderProgress\n"
        "from pipeline.sinks.output import PartialFile\n"
        "args = build_parser().parse_args(['render', 'song.wav', '-o', "
        f"{str(tmp_path / 'x.mp4')!r}, '--device', 'cuda', '--diffusion', 'kagura'])\n"
        "cfg = absolute(_layered_render_config(args))\n"
        "code_id(), shared_env()\n"
        "PartialFile(cfg.output).check_free()\n"
        "RenderProgress(10, quiet=True).on_frame()"
    )
    assert _heavy_modules_after(action) == []
