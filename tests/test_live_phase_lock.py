"""Phase-locked frame starts (LiveSession.set_display_timing) and the headless bench's
present-before-VSYNC model, on the CPU chain with a real FilePlayback."""

from __future__ import annotations

import argparse
import time
import wave

import numpy as np
import pytest

from pipeline.live import START_MARGIN_NS, FilePlayback, LiveSession

REFRESH_NS = 16_666_667
RELEASE_DELAY_NS = 40_000_000  # a presenter's pts -> release delay (above any frame time here)


def _tone(path, seconds: float = 4.0, rate: int = 48000) -> None:
    t = np.arange(int(seconds * rate)) / rate
    x = (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())


def _residues(tmp_path, lock: bool) -> tuple[np.ndarray, dict]:
    """(tick − (pts + release delay)) mod refresh, in ms, per frame after a warm-up."""
    wav = tmp_path / "tone.wav"
    _tone(wav)
    src = FilePlayback(wav, start=False)
    session = LiveSession(src, "studio", size=(320, 180), fps=30)
    tick0 = time.monotonic_ns() + 5 * REFRESH_NS
    if lock:
        session.set_display_timing(tick0, REFRESH_NS, lambda: RELEASE_DELAY_NS)
    frames = []
    session.start()
    try:
        t_end = time.monotonic() + 2.5
        while time.monotonic() < t_end:
            frames.append(session.output.get())
        # pts (audio clock) -> monotonic: the master clock's offset (its freshest sample)
        offset = session.clock.now_ns() - time.monotonic_ns()
        stats = session.stats()
    finally:
        session.stop()
    frames = frames[15:]
    assert len(frames) >= 30
    due_mono = np.array([f.pts_ns for f in frames]) - offset + RELEASE_DELAY_NS
    res = ((tick0 - due_mono) % REFRESH_NS) / 1e6
    return res, stats


def test_phase_locked_frames_are_due_just_before_a_display_tick(tmp_path):
    res, stats = _residues(tmp_path, lock=True)
    # start = tick − (release delay + START_MARGIN): a frame is due START_MARGIN before its
    # tick, plus how stale the newest audio sample was (0..5 ms blocks) and the wake-up delay.
    # pts -> monotonic goes through the master clock's offset, which is only known to a few ms
    # here (the file pacer writes in steps): accept 3 ms either side of [margin, margin + 5].
    lo = START_MARGIN_NS / 1e6 - 3.0
    r = np.where(res > REFRESH_NS / 1e6 - 3.0, res - REFRESH_NS / 1e6, res)  # circular
    near = np.mean((r >= lo) & (r <= lo + 11.0))
    print(f"due before tick (ms): {np.percentile(r, [5, 50, 95]).round(1)}, near {near:.0%}")
    assert near >= 0.75  # weak: a free-running phase lands here ~2 times in 3 (see report)
    assert stats["phase_locked"]
    assert stats["frame_lead_ms"] == pytest.approx(
        (RELEASE_DELAY_NS + START_MARGIN_NS) / 1e6, abs=0.01
    )
    assert stats["start_error_ms"]["median"] < 1.0


def _bench_args(*extra: str) -> argparse.Namespace:
    from app.bench_live import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(
        ["live", "--headless", "--device", "cpu", "--size", "320x180", "--fps", "30",
         "--seconds", "2", "--warm-up", "0.5", "--no-write", *extra]
    )  # fmt: skip


@pytest.mark.parametrize("lead_ms", [0.0, 4.0])
def test_headless_bench_flips_at_the_vsync_after_the_tick(lead_ms):
    from app.bench_live import measure_headless

    r = measure_headless(_bench_args("--present-lead-ms", f"{lead_ms:g}"))
    assert r["error"] is None and r["phase_lock"] and r["present_lead_ms"] == lead_ms
    flip = r["tick_to_flip_ms"]
    refresh = 1000 / 60
    if lead_ms == 0:  # ticked at VSYNC k, flipped at k + 1: a whole refresh later
        assert refresh - 3 < flip["median"] <= refresh
    else:  # ticked `lead` before VSYNC k, flipped at k
        assert 0 < flip["median"] <= lead_ms
        assert r["present_missed"] <= 0.05 * r["vsync_ticks"]
    lat = r["audio_to_photon_ms"]
    assert lat["n"] > 30 and lat["p99"] >= lat["median"] > 0
