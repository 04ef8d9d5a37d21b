"""`kagura bench e2e` runs the real CLI as fresh processes and reports what each run took."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.bench_e2e import phases, top_imports

ROOT = Path(__file__).resolve().parents[1]


def kagura(argv: list[str], **env: str) -> None:
    """`kagura ARGV` as a fresh process from the repository root; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_tiny_render_bench_reports_every_field(tmp_path):
    # a user's render settings must not change what the bench measures (the commands' defaults)
    user_config = tmp_path / "user-config"
    user_config.mkdir()
    (user_config / "render.toml").write_text("fps = 12\n")
    out_json = tmp_path / "e2e.json"
    doc = tmp_path / "BENCHMARKS.md"
    argv = [
        *("bench", "e2e", "--commands", "render", "--size", "160x90", "--seconds", "0.5"),
        *("--repeats", "1", "--cold-repeats", "0", "--no-imports"),
        *("--out", str(doc), "--json", str(out_json)),
    ]
    kagura(argv, KAGURA_CONFIG_DIR=str(user_config))
    entry = json.loads(out_json.read_text())["commands"]["render"]
    assert entry["argv"][:2] == ["render", str(ROOT / "audio" / "assets" / "demo_song.ogg")]
    assert "cold" not in entry and entry["fill_wall_s"] > 0
    warm = entry["warm"]
    assert warm["runs"] == 1 and warm["frames"] == 15  # 0.5 s at the default 30 fps
    wall = warm["wall_s"][0]
    first = warm["first_frame_s"][0]
    assert 0 < first < wall
    assert abs(warm["fps_whole"][0] - 15 / wall) < 1e-6
    assert warm["cpu_s"][0] > 0
    # the phases split the wall time of the run, in the order the command went through them
    assert list(warm["phases_s"]) == [
        *("start-up", "parse", "checks", "setup", "first frame", "frames", "finish", "exit")
    ]
    assert all(v >= 0 for v in warm["phases_s"].values())
    assert abs(sum(warm["phases_s"].values()) - wall) < 1e-6
    # the run's own trace: every event, in order, within the wall time
    events = entry["runs"]["warm"][0]["events"]
    order = ["main", "parsed", "checked", "graph built", "first frame", "last frame", "finished"]
    assert [events[e] for e in order] == sorted(events[e] for e in order)
    assert events["finished"] < wall
    # the set-up steps the render marked (core.trace.step), in the order they happened, all
    # before its first frame; the report lists them
    steps = warm["steps_s"]
    assert {"decoded", "stages built", "render set up", "stylize set up"} <= set(steps)
    assert list(steps.values()) == sorted(steps.values())
    assert events["checked"] < steps["stages built"] < events["first frame"]
    section = doc.read_text()
    assert "- `render` warm: " in section and "stylize set up" in section
    assert "<!-- bench:e2e-cpu-render-160x90-0.5s -->" in section
    assert "kagura bench e2e --device cpu --commands render --size 160x90 --seconds 0.5" in section
    assert "| warm | 1 |" in section


def test_the_desktop_app_is_timed_to_its_first_frame_on_screen(tmp_path):
    """`--commands app`: the real `kagura live` window (Qt offscreen, the song as its
    microphone) as a fresh process, to the first frame its display tick put on screen."""
    out_json = tmp_path / "e2e.json"
    argv = [
        *("bench", "e2e", "--commands", "app", "--live-seconds", "0.5"),
        *("--repeats", "1", "--cold-repeats", "0", "--no-imports"),
        *("--no-write", "--json", str(out_json)),
    ]
    kagura(argv)
    entry = json.loads(out_json.read_text())["commands"]["app"]
    assert entry["argv"][:3] == [
        "live",
        "--audio-file",
        str(ROOT / "audio" / "assets" / "demo_song.ogg"),
    ]
    assert "--quit-after" in entry["argv"] and "--no-play-out" in entry["argv"]
    warm = entry["warm"]
    wall, first = warm["wall_s"][0], warm["first_frame_s"][0]
    assert 0 < first < wall
    assert list(warm["phases_s"]) == ["start-up", "parse", "session setup", "first shown"]
    events = entry["runs"]["warm"][0]["events"]
    order = ["main", "parsed", "live started", "first shown frame"]
    assert [events[e] for e in order] == sorted(events[e] for e in order)
    assert "first look built" in warm["steps_s"]


def test_phases_and_imports_are_parsed():
    ev = {"main": 0.5, "parsed": 0.75, "checked": 1.0, "graph built": 3.0, "first frame": 3.5}
    ev |= {"last frame": 4.0, "finished": 4.25}
    got = phases(ev, 4.5)
    assert got == {
        "start-up": 0.5,
        "parse": 0.25,
        "checks": 0.25,
        "setup": 2.0,
        "first frame": 0.5,
        "frames": 0.5,
        "finish": 0.25,
        "exit": 0.25,
    }
    log = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       100 |      2000000 |     torch._C",
            "import time:       100 |      3000000 |   torch",
            "import time:       100 |      1500000 | librosa",
            "import time:       100 |      3100000 | torch",
            "import time:       100 |       500000 | librosa",
        ]
    )
    # only top-level imports count (nested ones are inside them); a module imported by two
    # processes of the run counts twice
    assert top_imports(log) == [("torch", 3.1), ("librosa", 2.0)]
