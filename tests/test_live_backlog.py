"""A starved analysis thread skips old audio: after a stall the mouth follows the present; and
while it is behind, the frame thread sheds frames to leave it the CPU.

The source is a real ring buffer the test writes into, as a sound card's callback would, with
no thread of its own: the audio clock moves only when the test writes, and one write of several
seconds is published at once — the backlog a stalled analysis thread finds when it runs again.
Every mouth the analysis hands on is recorded at the params queue.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from audio.calibration import default_profile_path, load_profile
from audio.live_resample import LowDelayResampler
from audio.ringbuffer import RingBuffer, RingReader
from core.clock import NS_PER_S, samples_to_ns
from pipeline.live import LiveSession
from pipeline.live_analysis import ANALYSIS_KEEP_S
from pipeline.queues import BoundedQueue, Policy
from pipeline.shedding import SHED_AFTER_S, SHED_HOLD_S, SHED_MAX_S, Shedder
from tests.written_audio import RATE, WrittenAudio

HOP_NS = 10_000_000


class SeenParams(BoundedQueue):
    """The session's params queue, also keeping (pts_ns, mouth_open) of everything put."""

    def __init__(self) -> None:
        super().__init__(1, Policy.LATEST)
        self.seen: list[tuple[int, float]] = []

    def put(self, item) -> None:
        self.seen.append((item.pts_ns, item.mouth_open))
        super().put(item)


def tone(seconds: float) -> np.ndarray:
    """A sung vowel's stand-in: 180 Hz with 14 harmonics (opens the mouth within ~20 ms)."""
    t = np.arange(round(seconds * RATE)) / RATE
    return sum((0.3 / k) * np.sin(2 * np.pi * 180 * k * t) for k in range(1, 15)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), np.float32)


def analysed_up_to(session, src, seen, timeout: float = 20.0) -> None:
    """Wait (polling, bounded) until the analysis has handed on a mouth from the newest block."""
    newest = samples_to_ns(src.ring.written - 1, RATE)
    deadline = time.monotonic() + timeout
    while not (seen and seen[-1][0] >= newest - HOP_NS - 5_000_000):
        assert session.error is None, session.error
        assert time.monotonic() < deadline, "the analysis never reached the newest audio"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def stalls():
    src = WrittenAudio()
    profile = load_profile(default_profile_path())  # the shipped one, not the user's
    session = LiveSession(src, "studio", size=(64, 36), fps=50, profile=profile)
    session.params = SeenParams()
    seen = session.params.seen
    session.start()
    runs = []
    try:
        assert src.read_from.wait(30), "the analysis thread never started reading"
        src.ring.write(silence(0.1))  # under the bound: all analysed
        analysed_up_to(session, src, seen)
        # two stalls: 3 s sung then 0.15 s quiet, and 3 s quiet then 0.15 s sung, each
        # written at once; then 0.1 s more of the present, in 10 ms blocks
        for old, now in ((tone(3.0), silence), (silence(3.0), tone)):
            start = len(seen)
            hops = session.hops
            # `analysed_up_to` may return a hop before the last one is handed on: a mouth of
            # the audio before this write (the previous present) can land after `start`
            before = samples_to_ns(src.ring.written - 1, RATE)
            present_from = samples_to_ns(src.ring.written + old.shape[0], RATE)
            src.ring.write(np.concatenate([old, now(0.15)]))
            analysed_up_to(session, src, seen)
            for _ in range(10):
                src.ring.write(now(0.01))
                analysed_up_to(session, src, seen)
            runs.append(
                {
                    "seen": [(p, m) for p, m in seen[start:] if p > before],
                    "hops": session.hops - hops,
                    "present_from": present_from,
                    "newest": samples_to_ns(src.ring.written - 1, RATE),
                }
            )
        stats = session.stats()
    finally:
        session.stop()
    return runs, stats, profile.sample_rate


def test_old_audio_is_skipped_and_counted(stalls):
    runs, stats, _ = stalls
    assert stats["analysis_skips"] == 2
    # each stall: 3.15 s waiting, the newest ANALYSIS_KEEP_S of it kept
    assert stats["audio_skipped_s"] == pytest.approx(2 * (3.15 - ANALYSIS_KEEP_S), abs=0.002)
    assert stats["audio_overruns"] == 0  # skipped by choice, nothing overwritten
    for run in runs:
        # about the kept audio and the 0.1 s after it, one hop per 10 ms — not 3 s of hops
        assert run["hops"] <= round((ANALYSIS_KEEP_S + 0.1) * 100) + 2, run["hops"]


def test_the_mouth_follows_the_present_after_a_stall(stalls):
    runs = stalls[0]
    kept_from = [r["present_from"] + round((0.15 - ANALYSIS_KEEP_S) * NS_PER_S) for r in runs]
    for run, first in zip(runs, kept_from, strict=True):
        pts = [p for p, _ in run["seen"]]
        # no mouth from the old audio: every one from the kept part on (the stall's old
        # seconds and the skipped part of the present were never analysed)
        assert min(pts) >= first - HOP_NS, (min(pts) - first) / 1e6
        assert max(pts) - min(pts) <= (ANALYSIS_KEEP_S + 0.1 + 0.02) * NS_PER_S
    # quiet present after 3 s of singing: the mouth is shut; sung present after quiet: open
    assert runs[0]["seen"][-1][1] < 0.05, runs[0]["seen"][-1]
    assert runs[1]["seen"][-1][1] > 0.5, runs[1]["seen"][-1]


def test_the_clock_mapping_survives_the_skip(stalls):
    """The newest mouth is stamped with the newest sample's time (less the resampler's delay):
    the skipped seconds are in the clock, not in the analysers' sample counts."""
    runs, _, arate = stalls
    delay_ns = round(LowDelayResampler(RATE, int(arate)).delay_s * NS_PER_S)
    for run in runs:
        last = run["seen"][-1][0]
        assert abs(last - (run["newest"] - delay_ns)) <= HOP_NS + 1_000_000, (
            last - run["newest"]
        ) / 1e6


def test_reader_skips_to_the_newest_frames_without_an_overrun():
    ring = RingBuffer(100, 1)
    ring.write(np.arange(60, dtype=np.float32))
    reader = ring.reader(0)
    assert reader.skip_to_newest(10) == 50
    assert reader.skip_to_newest(10) == 0  # already there
    assert reader.read()[:, 0].tolist() == list(range(50, 60))
    ring.write(np.arange(60, 300, dtype=np.float32))  # laps the ring: 140 of 240 overwritten
    assert reader.skip_to_newest(5) == 235
    assert reader.read()[:, 0].tolist() == list(range(295, 300))
    assert (reader.overruns, reader.lost) == (0, 0)


class HeldReader(RingReader):
    """The analysis thread's reader; while `go` is clear a read waits, as an analysis thread
    that gets no CPU would: the audio piles up unanalysed and the mouth grows old."""

    def __init__(self, ring, position, go: threading.Event) -> None:
        super().__init__(ring, position)
        self.go = go

    def read(self, max_frames=None):
        self.go.wait()
        return super().read(max_frames)


class HeldAudio(WrittenAudio):
    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.go.set()

    def reader(self, position=None):
        self.read_from.set()
        start = self.ring.written if position is None else position
        return HeldReader(self.ring, start, self.go)


def write_blocks(src, seconds: float) -> None:
    """The sound card's blocks, 10 ms each, at about real-time pace (the clock is the ring)."""
    for _ in range(round(seconds / 0.01)):
        src.ring.write(silence(0.01))
        time.sleep(0.01)


def test_frames_are_shed_while_the_analysis_is_behind_and_resume_after():
    fps = 50
    src = HeldAudio()
    profile = load_profile(default_profile_path())
    session = LiveSession(src, "studio", size=(64, 36), fps=fps, profile=profile)
    session.params = SeenParams()
    session.start()
    try:
        assert src.read_from.wait(30), "the analysis thread never started reading"
        src.ring.write(silence(0.2))
        analysed_up_to(session, src, session.params.seen)
        src.go.clear()  # from here the analysis hands on no mouth
        write_blocks(src, 0.25 + SHED_AFTER_S)  # the mouth too old, and for long enough
        frames, shed = session.frames_produced, session.shedder.shed
        write_blocks(src, 0.8)
        frames, shed = session.frames_produced - frames, session.shedder.shed - shed
        # the ticks went to the analysis: at most one frame after each SHED_MAX_S of shedding
        # (+2: a frame in flight when counting began, a run of sheds cut by the window)
        assert shed >= 10, (frames, shed)
        assert frames <= shed // round(SHED_MAX_S * fps) + 2, (frames, shed)
        src.go.set()  # the analysis catches up: frames at every tick again
        start, deadline = session.frames_produced, time.monotonic() + 20
        while session.frames_produced < start + 10:
            assert time.monotonic() < deadline, "frames did not resume"
            write_blocks(src, 0.02)
        assert session.error is None, session.error
    finally:
        src.go.set()
        session.stop()


def test_only_a_lasting_lag_is_shed_on_a_simulated_clock():
    fps, dt = 50, 0.02
    shedder = Shedder(fps)
    cap = round(SHED_MAX_S * fps)

    def run(seconds: float, age_ms: float, t: float) -> tuple[list[bool], float]:
        out = []
        for _ in range(round(seconds / dt)):
            out.append(shedder.tick(t, age_ms))
            t += dt
        return out, t

    # a one-off stall: the mouth 300 ms old for 0.3 s, then fresh again — nothing shed
    stall, t = run(0.3, 300.0, 0.0)
    fresh, t = run(1.0, 10.0, t)
    assert not any(stall + fresh)
    # a lasting lag: frames go on for SHED_AFTER_S, then ticks are shed, `cap` in a row at most
    lag, t = run(SHED_AFTER_S + 1.0, 300.0, t)
    first = lag.index(True)
    assert first == round(SHED_AFTER_S / dt)
    pattern = lag[first:]
    runs = "".join("s" if x else "f" for x in pattern).split("f")
    assert max(len(r) for r in runs) == cap and pattern.count(False) >= 2
    # caught up: a lag right after is shed at once (still starved), and not after SHED_HOLD_S
    ok, t = run(0.1, 10.0, t)
    assert not any(ok) and shedder.tick(t, 300.0)
    calm, t = run(SHED_HOLD_S + 0.1, 10.0, t)
    assert not any(calm) and not shedder.tick(t, 300.0)
    assert shedder.shed == sum(lag) + 1
    off = Shedder(fps, age_s=0)
    assert not any(off.tick(i * dt, 5000.0) for i in range(200))
