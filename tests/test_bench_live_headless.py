"""`kagura bench live --headless` on the CPU with the tiny random-weight models, as the GPU
machine runs it: in a fresh process where PySide6, librosa and sounddevice cannot be imported
(the GPU machine has none of them), for 2 seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import kagura

pytest.importorskip("diffusers")
pytest.importorskip("skia")

ROOT = Path(__file__).resolve().parent.parent

# As on a machine without them: `import X` fails and importlib.util.find_spec("X") is None
# (a None entry in sys.modules does both). At the end the process lists any that got loaded.
RUN = r"""
import json, sys
BLOCKED = ("PySide6", "librosa", "sounddevice")
for name in BLOCKED:
    sys.modules[name] = None
from app.cli import main
rc = main(sys.argv[1:])
loaded = sorted(k for k, v in sys.modules.items() if v is not None and k.split(".")[0] in BLOCKED)
print("IMPORTS " + json.dumps({"loaded": loaded}), flush=True)
sys.exit(rc)
"""


def test_headless_live_bench_cpu_tiny(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    args = [
        "bench", "live", "--headless", "--device", "cpu", "--diffusion-random", "tiny",
        "--diffusion-size", "64x64", "--upscale", "2", "--fps", "5", "--seconds", "2",
        "--warm-up", "0.5", "--out", str(out), "--trace", str(tmp_path / "trace.jsonl"),
        "--stall-watch", "1000",
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    imports = json.loads(lines[-1].removeprefix("IMPORTS "))
    assert imports["loaded"] == [], imports
    result = json.loads(lines[-2])

    # the live session ran: frames made, shown through the jitter buffer on the simulated VSYNC
    assert result["frames_produced"] >= 3
    assert result["vsync_ticks"] >= 100  # 60 Hz for 2.5 s
    assert result["size"] == [128, 128] and result["render_size"] == [64, 64]
    # the idol drawn ahead in the render process, its mouth late; what the mouth step waited
    # for the idol (0 when it was copied out before the frame's start)
    assert result["stage_ms"]["render_wait"]["median"] >= 0
    stages = ("render", "mouth", "stylize", "diffusion", "temporal", "upscale")
    for stage in (*stages, "ladder total"):
        assert result["stage_ms"][stage]["median"] > 0, stage
    q = result["quality"]
    assert q["ladder"][0] == "1 step 64x64 temporal vsr x2" and q["budget_ms"] == 160.0
    # at 5 fps for 2.5 s the run makes about 12 frames, fewer than the 30 the ladder decides on
    assert result["frames_produced"] < 30
    assert result["quality_events"] == [] and q["changes"] == 0 and q["level"] == 0
    # every frame made is shown, dropped, or still on its way at the stop; a latency is taken
    # per new frame shown after the warm-up only. (A loaded 2-core machine may show none in
    # time; the latency itself is checked on the GPU below.)
    accounted = result["shown"] + result["dropped_late"] + result["dropped_overflow"]
    assert accounted + result["dropped_output_queue"] <= result["frames_produced"]
    lat = result["audio_to_photon_ms"]
    assert lat["n"] <= result["shown"]
    # librosa missing (as on the GPU machine): the live analysis needs none of it — lip-sync,
    # pitch and motion all run, nothing is reported left out
    assert result["analysis_note"] is None
    # the GPU chain's frame thread and the render process asked for real-time scheduling (on
    # the CPU device there is no publishing thread); what the OS allowed depends on the
    # machine: one of the sentences core.priority says
    assert sorted(result["priority"]) == ["frames", "render"]
    for sentence in result["priority"].values():
        assert sentence.startswith(("This thread now runs with SCHED_FIFO", "Real-time sched"))
    # --trace: a line per new frame shown, with the frame thread's issuing of it (wall and its
    # own CPU time: a thread cannot use more CPU than wall time) and the collector's time
    rows = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert len(rows) >= 3 and all(r["gc_ms"] >= 0 and r["gc_full"] >= 0 for r in rows)
    for r in rows:
        assert 0 < r["frame.issue_cpu"] <= r["frame.issue"] + 0.5, r
    # --stall-watch: its events beside the trace (a second-long stall: none expected, but the
    # file is there and every line of it is an event)
    stalls = (tmp_path / "trace.jsonl.stalls.jsonl").read_text().splitlines()
    assert all(json.loads(line)["late_ms"] >= 1000 for line in stalls)

    text = out.read_text()
    assert "<!-- bench:live-headless-cpu -->" in text
    assert "audio→photon" in text and "RANDOM weights" in text and "diffusion" in text
    assert "Quality ladder" in text
    line = next(x for x in text.splitlines() if x.startswith("- scheduling: "))
    assert "frames: " in line and "render: " in line


@pytest.mark.gpu
def test_headless_live_bench_cuda_late_mouth(tmp_path):
    """On the GPU machine: the live session with Kagura's model on cuda draws each idol ahead
    in the render process and only redraws the mouth at the frame's start — that step costs
    a fraction of the whole idol — and every shown frame's latency is split into its parts."""
    out = tmp_path / "BENCHMARKS.md"
    args = [
        "bench", "live", "--headless", "--device", "cuda", "--diffusion", "kagura",
        "--upscale", "3", "--fps", "60", "--seconds", "3", "--out", str(out),
    ]  # fmt: skip
    done = kagura(*args, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads([ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1])
    assert result["error"] is None
    assert result["frames_produced"] >= 0.9 * result["frames_expected"]
    stages = result["stage_ms"]
    assert 0 < stages["mouth"]["median"] < stages["render"]["median"] / 2
    parts = result["latency_parts_ms"]
    n = result["audio_to_photon_ms"]["n"]
    assert n > 0 and parts["pts_to_flip"]["n"] == parts["audio_age"]["n"] == n
    assert parts["lead"]["n"] == n  # phase-locked: every frame carries its lead


@pytest.mark.parametrize(
    ("remembered", "flag", "preset", "source"),
    [
        ("ink-wash", None, "ink-wash", "live_app.json"),  # as `kagura live` starts
        ("ink-wash", "cyberpunk", "cyberpunk", "--preset"),  # a flag wins
        ("no-such-look", None, "studio", "live_app.json"),  # gone since: the default, said
    ],
)
def test_headless_bench_layers_its_preset_over_live_app_json(
    tmp_path, remembered, flag, preset, source
):
    """`bench live --headless` takes its preset as `kagura live` does: the flag, else the one
    live_app.json remembers, else studio — and says where it came from; the file is read,
    not changed."""
    settings = tmp_path / "live_app.json"
    text = json.dumps({"version": 1, "preset": remembered})
    settings.write_text(text)
    args = ["bench", "live", "--headless", "--seconds", "1", "--warm-up", "0.2", "--no-write"]
    if flag:
        args += ["--preset", flag]
    done = kagura(*args, timeout=180, env={"KAGURA_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["preset"], result["preset_from"]) == (preset, source)
    assert settings.read_text() == text
    if remembered == "no-such-look":
        assert "no-such-look" in done.stderr
