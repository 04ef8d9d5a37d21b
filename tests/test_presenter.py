"""The jitter buffer on a simulated master clock with simulated arrival jitter (no Qt, no sleep)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from pipeline.presenter import NS_PER_MS, JitterBuffer

NS = 1_000_000_000
FPS = 30
PERIOD = NS // FPS
REFRESH = NS // 60


@dataclass(frozen=True)
class F:
    pts_ns: int
    index: int = 0


@dataclass
class SimResult:
    errors: list[int]  # presentation error of every newly shown frame after warm-up, ns
    delays: list[tuple[int, int]]  # (tick time, target delay) at every tick
    max_buffered: int
    pushed: int
    shown_indices: list[int]


def arrivals(seconds: float, jitter_ms, base_ms: float = 30.0, stall_every: int = 0, seed: int = 1):
    """(arrival_ns, frame) in arrival order. `jitter_ms(t_s)` gives the jitter amplitude at time t.

    Each frame arrives at pts + base + U(0, jitter); every `stall_every` frames (randomised) the
    producer stalls 40 ms, and frames queued behind a stall arrive right after it (serial work).
    """
    rng = random.Random(seed)
    out = []
    prev = 0
    for i in range(int(seconds * FPS)):
        pts = i * NS // FPS
        amp = jitter_ms(pts / NS) if callable(jitter_ms) else jitter_ms
        t = pts + int((base_ms + rng.uniform(0.0, amp)) * NS_PER_MS)
        if stall_every and rng.random() < 1.0 / stall_every:
            t += 40 * NS_PER_MS
        t = max(t, prev + NS_PER_MS // 10)
        prev = t
        out.append((t, F(pts, i)))
    return out


def simulate(
    jb: JitterBuffer, events, seconds: float, warmup_s: float = 2.0, phase_ns: int = 3_300_000
):
    errors, delays, shown = [], [], []
    max_buffered = 0
    ai = 0
    k = 0
    while True:
        now = k * REFRESH + phase_ns
        if now > seconds * NS:
            break
        while ai < len(events) and events[ai][0] <= now:
            jb.push(events[ai][1], events[ai][0])
            ai += 1
            max_buffered = max(max_buffered, len(jb))
        target = jb.target_delay_ns  # the delay this tick uses (slew happens inside tick)
        frame = jb.tick(now, REFRESH)
        target = jb.target_delay_ns
        delays.append((now, target))
        if frame is not None and jb.last_was_new:
            shown.append(frame.index)
            if now >= warmup_s * NS:
                errors.append(now - (frame.pts_ns + target))
        k += 1
    return SimResult(errors, delays, max_buffered, ai, shown)


def p99(values):
    s = sorted(values)
    return s[int(0.99 * (len(s) - 1))]


@pytest.mark.parametrize("stall_every", [0, 45], ids=["jitter10ms", "jitter10ms+stalls40ms"])
def test_presentation_error_within_one_refresh(stall_every):
    seconds = 30.0
    events = arrivals(seconds, 10.0, stall_every=stall_every, seed=7)
    jb = JitterBuffer(capacity=6)
    res = simulate(jb, events, seconds)
    st = jb.stats()

    assert res.errors, "nothing was shown"
    assert min(res.errors) >= 0  # never shown before it is due
    assert p99(res.errors) < REFRESH  # P99 presentation error within one refresh interval
    assert st.error_p99_ms < REFRESH / NS_PER_MS
    assert res.max_buffered <= jb.capacity  # bounded
    # every pushed frame is accounted for exactly once
    assert st.shown + st.dropped_late + st.dropped_overflow + st.buffered == res.pushed
    assert st.shown == len(res.shown_indices)
    assert res.shown_indices == sorted(res.shown_indices)  # time never goes back
    # the delay covered the jitter: (almost) nothing lost, (almost) no underflow
    lost = st.dropped_late + st.dropped_overflow
    budget = 0.03 if stall_every else 0.005  # a 40 ms stall costs a frame or two each time
    assert lost <= budget * res.pushed, st.summary()
    assert st.repeated <= budget * res.pushed, st.summary()
    # the delay sits above the pipeline latency (30 ms) plus most of the jitter, not far beyond
    assert 30 + 8 <= st.target_delay_ms <= (30 + 10 + 40 + 10 if stall_every else 30 + 10 + 10)
    assert st.audio_to_photon_ms == pytest.approx(st.target_delay_ms + REFRESH / NS_PER_MS)
    assert 28 <= st.pipeline_latency_ms <= 40


def test_target_delay_grows_with_jitter_and_shrinks_back():
    def jitter(t):
        return 40.0 if 10.0 <= t < 20.0 else 4.0

    seconds = 40.0
    events = arrivals(seconds, jitter, seed=3)
    jb = JitterBuffer(capacity=8, grow_rate=0.1, shrink_rate=0.02)
    res = simulate(jb, events, seconds)
    delay_at = {t // NS: d for t, d in res.delays}  # last delay within each second

    calm = delay_at[9] / NS_PER_MS
    stormy = delay_at[19] / NS_PER_MS
    calm_again = delay_at[39] / NS_PER_MS
    assert 30 + 3 <= calm <= 30 + 4 + 6, calm
    assert stormy >= calm + 25, (calm, stormy)  # grew to cover ~40 ms of jitter
    assert calm_again <= calm + 3, (calm, calm_again)  # and came back down
    # slewed, never a jump: at most grow_rate (resp. shrink_rate) of the elapsed time per tick
    for (t0, d0), (t1, d1) in zip(res.delays, res.delays[1:], strict=False):
        assert d1 - d0 <= 0.1 * (t1 - t0) + 1
        assert d0 - d1 <= 0.02 * (t1 - t0) + 1


def fixed(delay_ms: int = 20, **kw) -> JitterBuffer:
    """A buffer whose target delay cannot move: exact, hand-checkable behaviour."""
    d = delay_ms * NS_PER_MS
    return JitterBuffer(initial_delay_ns=d, min_delay_ns=d, max_delay_ns=d, **kw)


def test_release_newest_due_frame_and_count_superseded():
    jb = fixed(20)
    for i in range(3):  # frames 0, 33, 66 ms, all arrive at once
        jb.push(F(i * PERIOD, i), 70 * NS_PER_MS)
    # at 90 ms frames 0 (due 20) and 1 (due 53) and 2 (due 86.7) are due: newest wins
    assert jb.tick(90 * NS_PER_MS, REFRESH) == F(2 * PERIOD, 2)
    st = jb.stats()
    assert (st.shown, st.dropped_late, st.repeated) == (1, 2, 0)


def test_hold_is_not_a_repeat_but_underflow_is():
    jb = fixed(20)
    jb.push(F(0, 0), 5 * NS_PER_MS)
    jb.push(F(PERIOD, 1), 40 * NS_PER_MS)
    assert jb.tick(10 * NS_PER_MS, REFRESH) is None  # nothing due yet
    assert jb.tick(25 * NS_PER_MS, REFRESH).index == 0 and jb.last_was_new
    assert jb.tick(42 * NS_PER_MS, REFRESH).index == 0 and not jb.last_was_new  # hold (30 fps)
    assert jb.tick(58 * NS_PER_MS, REFRESH).index == 1 and jb.last_was_new
    assert jb.stats().repeated == 0
    # frame 2 (pts 66.7, due 86.7) is missing at 92 and 108 ms: two repeats of frame 1
    assert jb.tick(92 * NS_PER_MS, REFRESH).index == 1
    assert jb.tick(108 * NS_PER_MS, REFRESH).index == 1
    st = jb.stats()
    assert (st.shown, st.repeated, st.dropped_late) == (2, 2, 0)
    # it arrives at 110 ms: released at 112 (error 25.3 ms > one refresh): too late, dropped
    jb.push(F(2 * PERIOD, 2), 110 * NS_PER_MS)
    assert jb.tick(112 * NS_PER_MS, REFRESH).index == 1
    st = jb.stats()
    assert (st.shown, st.dropped_late, st.repeated) == (2, 1, 3)
    # frame 3 (due 120) on time again
    jb.push(F(3 * PERIOD, 3), 115 * NS_PER_MS)
    assert jb.tick(125 * NS_PER_MS, REFRESH).index == 3 and jb.last_was_new
    assert jb.stats().error_p99_ms < REFRESH / NS_PER_MS


def test_slightly_late_frame_is_still_shown():
    jb = fixed(20)
    jb.push(F(0, 0), 0)
    assert jb.tick(21 * NS_PER_MS, REFRESH).index == 0
    # frame 1 is due at 53.3 ms but arrives at 60: the 62 ms tick is within one refresh
    jb.push(F(PERIOD, 1), 60 * NS_PER_MS)
    assert jb.tick(62 * NS_PER_MS, REFRESH).index == 1
    assert jb.stats().dropped_late == 0


def test_capacity_drops_oldest_and_stale_frames_are_dropped():
    jb = fixed(20, capacity=4)
    for i in range(7):
        jb.push(F(i * PERIOD, i), 0)
    assert len(jb) == 4
    assert jb.stats().dropped_overflow == 3
    assert jb.tick(3 * PERIOD + 20 * NS_PER_MS, REFRESH).index == 3  # oldest kept is frame 3
    jb.push(F(2 * PERIOD, 2), 0)  # older than what is on screen
    jb.push(F(5 * PERIOD, 5), 0)  # duplicate of a buffered pts
    st = jb.stats()
    assert st.dropped_late == 2 and st.dropped_overflow == 3 and st.buffered == 3


def test_bounds_and_validation():
    jb = JitterBuffer(min_delay_ns=10 * NS_PER_MS, max_delay_ns=60 * NS_PER_MS, initial_delay_ns=0)
    assert jb.target_delay_ns == 10 * NS_PER_MS
    for i in range(200):  # enormous lateness: the delay saturates at max
        jb.push(F(i * PERIOD, i), i * PERIOD + 500 * NS_PER_MS)
        jb.tick(i * PERIOD, REFRESH)
    assert jb.target_delay_ns == 60 * NS_PER_MS
    with pytest.raises(ValueError):
        JitterBuffer(capacity=0)
    with pytest.raises(ValueError):
        JitterBuffer(min_delay_ns=10, max_delay_ns=5)


def test_target_delay_follows_a_narrow_lateness_down_to_percentile_plus_margin():
    """Phase-locked frames arrive with a narrow lateness (pipeline time ± little): the target
    must come down from the initial delay to that lateness' P99 + the margin, not stay
    over-provisioned (the live path starts frames at tick − target, so every ms counts)."""
    rng = random.Random(5)
    jb = JitterBuffer(capacity=8, initial_delay_ns=40 * NS_PER_MS, margin_ns=3 * NS_PER_MS)
    t = 0
    for i in range(30 * 20):  # 20 s at 30 fps
        pts = i * PERIOD
        arrival = pts + int((20 + rng.uniform(-0.5, 0.5)) * NS_PER_MS)
        while t < arrival:
            jb.tick(t, REFRESH)
            t += REFRESH
        jb.push(F(pts, i), arrival)
    target = jb.target_delay_ns / NS_PER_MS
    assert 20 + 3 <= target <= 20.5 + 3 + 0.5, target


def test_follow_takes_the_delay_from_outside_at_once_and_back():
    """follow(): the target delay is what the callable says at each tick (no slewing, whatever
    the measured lateness); frames are released at pts + that delay. follow(None) adapts again
    from the lateness, slewing from where it was."""
    jb = JitterBuffer(initial_delay_ns=60 * NS_PER_MS, shrink_rate=0.02)
    delay = {"ns": 21 * NS_PER_MS}
    jb.follow(lambda: delay["ns"])
    refresh = 16 * NS_PER_MS
    for i in range(10):  # frames every 16 ms, arriving 30 ms late: lateness says ~33 ms
        jb.push(F(i * refresh), i * refresh + 30 * NS_PER_MS)
    assert jb.tick(0, refresh) is None
    assert jb.target_delay_ns == 21 * NS_PER_MS  # at once, not slewed down from 60
    got = jb.tick(2 * refresh + 21 * NS_PER_MS, refresh)  # exactly frame 2's due time
    assert got is not None and got.pts_ns == 2 * refresh
    delay["ns"] = 25 * NS_PER_MS
    assert jb.tick(3 * refresh + 24 * NS_PER_MS, refresh).pts_ns == 2 * refresh  # 3 not due yet
    assert jb.target_delay_ns == 25 * NS_PER_MS
    jb.follow(None)
    jb.tick(3 * refresh + 26 * NS_PER_MS, refresh)
    jb.tick(4 * refresh + 26 * NS_PER_MS, refresh)
    # adapting again: growing towards P99 of the lateness + margin (33 ms) at the slew rate
    assert 25 * NS_PER_MS < jb.target_delay_ns < 33 * NS_PER_MS
    assert jb.stats().desired_delay_ms == pytest.approx(33.0, abs=0.01)
