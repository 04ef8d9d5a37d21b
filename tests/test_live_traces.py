"""scripts/live_traces.py over a trace and its stall events written here: per run and pooled
audio-to-photon, the frame thread's issuing (wall against CPU), and the stalls' suspects — a
thread caught in our code, not one that was only waiting."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("live_traces", ROOT / "scripts/live_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def frame(start_s: float, a2p: float, issue: float, cpu: float, counted: bool = True) -> dict:
    return {
        "start_s": start_s, "counted": counted, "audio_to_photon_ms": a2p, "gc_ms": 0.1,
        "frame.lead": 12.0, "frame": 7.0, "frame.issue": issue, "frame.issue_cpu": cpu,
    }  # fmt: skip


def test_runs_pooled_and_the_stalls_suspect(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(
        "\n".join(
            json.dumps(r)
            for r in [frame(0.5, 99.0, 3, 2, counted=False)]
            + [frame(1 + i / 60, 30.0, 3.0, 2.0) for i in range(97)]
            + [frame(3.0, 50.0, 20.0, 4.0), frame(3.1, 45.0, 9.0, 3.0), frame(3.2, 44.0, 8, 3)]
        )
    )
    b.write_text("\n".join(json.dumps(frame(1 + i / 60, 28.0, 3.0, 2.5)) for i in range(100)))
    stall = {
        "at_s": 10.0, "late_ms": 14.0, "cpu_ms": 13.0, "gc_ms": 0.0,
        "threads": {
            "kagura-live-analysis": ["audio/live_pitch.py:120 _yin", "audio/x.py:3 run"],
            "kagura-live-publish": ["threading.py:355 wait", "pipeline/live_frames.py:9 x"],
        },
    }  # fmt: skip
    (tmp_path / "a.jsonl.stalls.jsonl").write_text(json.dumps(stall) + "\n")
    assert load_script().main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "a.jsonl: 100 frames" in out and "b.jsonl: 100 frames" in out  # uncounted left out
    assert "at 3.00 s: 50.0 ms" in out and "frame.issue 20.0, frame.issue_cpu 4.0" in out
    assert "1 stalls" in out and "the process ran through 1 of them" in out
    assert "kagura-live-analysis: audio/live_pitch.py:120 _yin (1 of 1)" in out
    assert "kagura-live-publish" not in out  # only waiting: not a suspect
    assert "all 2 runs pooled: 200 frames" in out
    assert "runs with P99 <= 35 ms: 1 of 2" in out
