"""The live frame loop (pipeline/live_frames.py) on simulated time: no thread, no sleep.

The loop runs on the test's thread with the real scheduler, a real look (render + stylize),
real expressions and a real ring buffer as the audio clock. Only time is simulated: it moves
when the loop sleeps, and as it passes, a sound card writes 10 ms blocks into the ring (half a
block off the display ticks, so no tick falls on a block's edge) and an analysis hands on one
mouth per block, from its newest sample.
"""

from __future__ import annotations

import numpy as np
import pytest

from audio.ringbuffer import RingBuffer, RingSource
from core.avatar import AvatarParams
from core.clock import NS_PER_S
from core.stats import Timings
from pipeline.expressions import Expressions
from pipeline.live_frames import AUDIO_AGE, LEAD, STARTED, TARGET, FrameLoop
from pipeline.live_looks import LookSwitcher
from pipeline.look import build_look
from pipeline.phase_lock import FRAME_LEARN_AFTER_S, FRAME_MARGIN_NS, START_MARGIN_NS
from pipeline.queues import BoundedQueue, Policy
from pipeline.shedding import SHED_AFTER_S, SHED_AGE_S, SHED_MAX_S

RATE = 48_000
BLOCK_NS = 10_000_000
REFRESH_NS = 16_666_667
SIZE = (64, 36)
MS = 1e6


def within(window: tuple[int, int] | None, ns: int) -> bool:
    return window is not None and window[0] <= ns < window[1]


class Source(RingSource):
    def __init__(self) -> None:
        self.sample_rate = RATE
        self.ring = RingBuffer(10 * RATE, 1, max_block=RATE)
        self.state = "running"


class SimulatedTime:
    """The loop's clock (`now_ns`, `sleep`) and the world that moves with it: the sound card
    (`source`) and the analysis's surface (`out`, `hops`). The loop ends at `end_s`."""

    def __init__(self, end_s: float) -> None:
        self.t0 = self.ns = 100 * NS_PER_S
        self.end_ns = self.t0 + round(end_s * NS_PER_S)
        self.source = Source()
        self.out: BoundedQueue[AvatarParams] = BoundedQueue(1, Policy.LATEST)
        self.hops = 0
        self.next_block = self.t0 + BLOCK_NS // 2
        self.silent: tuple[int, int] | None = None  # (from, to) ns: the card delivers nothing
        self.starved: tuple[int, int] | None = None  # (from, to) ns: the analysis hands on nothing
        self.late_wake: tuple[int, int] | None = None  # (at, extra) ns: one sleep ends late

    def now_ns(self) -> int:
        return self.ns

    def sleep(self, seconds: float) -> bool:
        if seconds > 0:
            self._advance(self.ns + round(seconds * NS_PER_S))
        if self.late_wake is not None and self.ns >= self.late_wake[0]:
            self._advance(self.ns + self.late_wake[1])
            self.late_wake = None
        return self.ns >= self.end_ns

    def _advance(self, to_ns: int) -> None:
        while self.next_block <= to_ns:
            off, starved = (
                within(self.silent, self.next_block),
                within(self.starved, self.next_block),
            )
            if not off:
                self.source.ring.write(np.zeros(RATE * BLOCK_NS // NS_PER_S, np.float32))
            if not (off or starved):
                self.out.put(AvatarParams(pts_ns=self.source.pts_ns()))
                self.hops += 1
            self.next_block += BLOCK_NS
        self.ns = to_ns


def since_last_block(sim: SimulatedTime, frames) -> list[float]:
    """ms from the sound card's block that holds each frame's pts to the frame's start."""
    out = []
    for f in frames:
        # the block written at t0 + 5 ms + 10 ms * j ends with sample 480 * (j + 1) - 1
        written_at = sim.t0 + (f.pts_ns + NS_PER_S // RATE + 1) // BLOCK_NS * BLOCK_NS
        out.append((f.timings[STARTED] * MS - (written_at - BLOCK_NS // 2)) / MS)
    return out


@pytest.fixture(scope="module")
def looks():
    return LookSwitcher(
        lambda preset, transparent: build_look(preset, SIZE, 30, transparent),
        "studio",
        False,
        Timings(),
        on_error=print,
        thread_name="test-look",
    )


def run_loop(sim: SimulatedTime, looks, fps: int, display_tick_ns: int | None = None):
    errors: list[str] = []
    loop = FrameLoop(
        fps, sim.source, sim, looks, Expressions(), Timings(), clock=sim, on_error=errors.append
    )
    loop.phase_lock.start()
    if display_tick_ns is not None:
        loop.phase_lock.set_display_timing(display_tick_ns, REFRESH_NS)
    shown = BoundedQueue(10_000, Policy.BLOCK)  # what the session's tee would be handed
    loop.run(sim.out, shown)
    assert errors == []
    frames = []
    while len(shown):
        frame, look = shown.get()
        assert look is looks.current
        frames.append(frame)
    return loop, frames


def test_phase_locked_frames_start_at_their_tick_minus_the_learnt_lead(looks):
    """30 fps on 60 Hz ticks: every frame starts exactly at its tick minus the lead, for the
    tick a frame period after the last one's; the lead is one frame period + the wake-up
    allowance until frames are learnt from, then their time (none, on this clock) + margin."""
    sim = SimulatedTime(end_s=2.0)
    tick0 = sim.t0 + 7_000_000  # the display's phase, arbitrary to the audio's
    loop, frames = run_loop(sim, looks, 30, display_tick_ns=tick0)
    assert len(frames) == 59 and loop.late_ticks == 0 and loop.stalled_ticks == 0
    started = np.array([f.timings[STARTED] for f in frames])
    target = np.array([f.timings[TARGET] for f in frames])
    lead = np.array([f.timings[LEAD] for f in frames])
    np.testing.assert_allclose(started, target - lead, atol=1e-6)
    ticks = (target * MS - tick0) / REFRESH_NS
    np.testing.assert_allclose(ticks, np.round(ticks), atol=1e-6)
    assert np.all(np.diff(np.round(ticks)) == 2)
    learnt_from = (sim.t0 / MS) + FRAME_LEARN_AFTER_S * 1e3
    untaught = started < learnt_from + 10 * 1000 / 30  # before 10 learnt frames were handed on
    first_lead = (NS_PER_S / 30 + START_MARGIN_NS) / MS
    np.testing.assert_allclose(lead[untaught], first_lead, atol=1e-6)
    np.testing.assert_allclose(lead[~untaught], (FRAME_MARGIN_NS + START_MARGIN_NS) / MS)
    assert (~untaught).sum() >= 10
    # each frame's pts is the newest sample at its start (of the last block written before
    # it), and its mouth is from that block
    assert all(0 <= since < BLOCK_NS / MS for since in since_last_block(sim, frames))
    assert all(f.timings[AUDIO_AGE] == pytest.approx(6.0) for f in frames)


def test_free_running_frames_skip_a_late_wake_up_instead_of_catching_up(looks):
    sim = SimulatedTime(end_s=2.0)
    sim.late_wake = (sim.t0 + NS_PER_S, 100_000_000)  # one wake-up 100 ms late, at 1 s
    loop, frames = run_loop(sim, looks, 30)
    gaps = np.diff([f.timings[STARTED] for f in frames])
    period = 1000 / 30
    # the late frame starts 100 ms late; the next one a period after it — no burst of frames
    # to catch up, so the one gap is a period + 100 ms and every other one a period
    long = np.flatnonzero(gaps > 1.5 * period)
    assert len(long) == 1 and gaps[long[0]] == pytest.approx(period + 100.0, abs=1e-3)
    np.testing.assert_allclose(np.delete(gaps, long), period, atol=1e-3)
    assert loop.late_ticks == 1 and loop.stalled_ticks == 0


def test_ticks_without_new_audio_start_no_frame(looks):
    """The sound card delivers nothing for half a second (a lost device): each 25 fps tick
    in it finds the audio clock where the last frame left it, starts no frame and is counted;
    frames resume with the audio."""
    sim = SimulatedTime(end_s=2.0)
    sim.silent = (sim.t0 + NS_PER_S, sim.t0 + 3 * NS_PER_S // 2)
    loop, frames = run_loop(sim, looks, 25)
    # ticks at 1040 .. 1480 ms saw no block since the 1000 ms tick's
    assert loop.stalled_ticks == 12
    started = np.array([f.timings[STARTED] for f in frames]) - sim.t0 / MS
    assert not np.any((started > 1001) & (started < 1519))
    assert len(frames) == 50 - 12
    assert np.all(np.diff([f.pts_ns for f in frames]) > 0)


def test_ticks_are_shed_only_once_the_analysis_is_lastingly_behind(looks):
    """The analysis hands on no mouth for 1.5 s while the audio goes on (a starved analysis
    thread): frames go on until the mouth has been too old for SHED_AFTER_S, then ticks are
    shed — at most SHED_MAX_S of them in a row, a frame between — and every tick has its frame
    again as soon as the mouth is fresh."""
    fps = 25
    sim = SimulatedTime(end_s=4.0)
    sim.starved = (sim.t0 + NS_PER_S, sim.t0 + 5 * NS_PER_S // 2)
    loop, frames = run_loop(sim, looks, fps)
    period_ms = 1000 / fps
    started = np.array([f.timings[STARTED] for f in frames]) - sim.t0 / MS
    ticks = np.arange(round(4000 / period_ms)) * period_ms
    shed = np.array([not np.any(np.abs(started - t) < 1e-3) for t in ticks])
    assert shed.sum() == loop.shedder.shed > 0 and loop.stalled_ticks == 0
    # a tick at t (ms from the start) reads the pts of the block written at t - 5 ms, which
    # ends at t + 5 ms on the audio clock; the newest mouth ends at 1000 ms: its age at the
    # tick is t + 5 - 1000 + 6 (the level window's centre), too old past SHED_AGE_S
    too_old_from = ticks[ticks + 5 - 1000 + 6 > SHED_AGE_S * 1e3][0]
    first_shed = ticks[np.flatnonzero(shed)[0]]
    assert first_shed == too_old_from + np.ceil(SHED_AFTER_S * 1e3 / period_ms) * period_ms
    # from there to the analysis's return at 2500 ms (ticks 1680 .. 2480): runs of SHED_MAX_S
    # of ticks with one frame after each; from the next tick on, the mouth is fresh again
    cap = round(SHED_MAX_S * fps)
    runs = [r for r in "".join("s" if x else "f" for x in shed).split("f") if r]
    assert runs == ["s" * cap] * 3 and (2480 - first_shed) / period_ms + 1 == 3 * (cap + 1)
    assert not shed[ticks > 2500].any()
