"""The live session's analysis thread: audio from the source's ring buffer → AvatarParams.

    analysis = LiveAnalysis(source, stop, timings, on_error, profile=None, seed=0)
    analysis.run(None, params)          # the source node of the session's graph (its own
                                        # thread), until `stop` is set: AvatarParams into
                                        # `params`, a BoundedQueue(1, LATEST) (the newest wins)

It polls the ring every ANALYSIS_POLL_S; for every 10 ms of audio: gain → low-delay resample
to the profile's rate (audio/live_resample.py) → LiveLipSync + LivePitch → LiveMotion (100 Hz)
→ AvatarParams, stamped with the time of its newest sample on the source clock. Between hops,
after every block, the mouth is latched from the newest audio (LiveLipSync.latch) with the
last hop's motion. A backlog (the thread starved of CPU) is skipped, not worked through.
The controls (gain, gate, smoothing) may be changed from any thread: `set_control`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from core.avatar import AvatarParams
from core.clock import NS_PER_S, samples_to_ns
from core.stats import Timings
from pipeline.queues import BoundedQueue, Policy

log = logging.getLogger(__name__)

# how often the analysis thread looks for new audio: a short poll shortens the lip-sync lag
# (hops are analysed sooner after their block arrives)
ANALYSIS_POLL_S = 0.001
# A starved analysis thread (CPU overloaded) does not work through a backlog: audio more than
# ANALYSIS_MAX_BEHIND_S old when it gets to read is skipped, all but the newest ANALYSIS_KEEP_S
# (a few hops: the analysers' windows refill from the present), and counted in stats()
# ("audio_skipped_s"). The mouth then follows what is heard now, not what was sung seconds ago
# in fast-forward; a backlog also means a burst of short-lived allocations that the allocator
# keeps (docs/BENCHMARKS.md, soak). Not less than a second: audio devices deliver large blocks
# at once (PulseAudio ~0.4 s when a stream starts), which are new audio, not a backlog — a
# lower bound skipped most of a played file's first second.
ANALYSIS_MAX_BEHIND_S = 1.0
ANALYSIS_KEEP_S = 0.05


class LiveAnalysis:
    """The analysis thread's state and body (`run`); see the module docstring.

    `source`: anything with the AudioSource surface (pipeline/live_source.py). `timings`: the
    session's stage times ("analysis" is added per hop). `on_error(message)`: called from this
    thread when the analysis fails (it then ends). `profile`: lip-sync profile (default: the
    user's calibrated one, else the shipped default). `out`: the queue `run` was given (a
    queue of its own before the first run).
    """

    name = "analysis"  # the live graph's source node (pipeline/graph.py)
    parts = ()

    def __init__(
        self,
        source: Any,
        stop: threading.Event,
        timings: Timings,
        on_error: Callable[[str], None],
        *,
        profile: Any = None,
        seed: int = 0,
        gain_db: float = 0.0,
        gate_db: float = 12.0,
        smoothing: float = 0.0,
    ) -> None:
        self.source = source
        self.profile = profile
        self.seed = seed
        self.out: BoundedQueue[AvatarParams] = BoundedQueue(1, Policy.LATEST)
        self.controls = {"gain_db": gain_db, "gate_db": gate_db, "smoothing": smoothing}
        self._controls_version = 1
        self._stop = stop
        self._timings = timings
        self._on_error = on_error
        # called once the engines are built, right before the first read (see LiveSession.start)
        self.start_source: Callable[[], Any] | None = None
        self.note: str | None = None  # why the analysis runs reduced, if it does
        self.error: str | None = None
        self.level_db = -120.0  # input level of the last hop (dBFS, after gain)
        self.hops = 0
        self.latches = 0  # mouth updates between hops (LiveLipSync.latch)
        self.latch_mouth = True  # False: the mouth only moves at hops (for comparison)
        self.audio_overruns = 0
        self.skips = 0  # times the analysis fell ANALYSIS_MAX_BEHIND_S behind
        self.skipped_s = 0.0  # audio it skipped then (seconds)
        self._engines: tuple[Any, Any, Any, int] | None = None  # built ahead by `prepare`

    def set_control(self, key: str, value: float) -> None:
        """Any thread: one dict store; the analysis picks it up before its next block."""
        self.controls = {**self.controls, key: value}
        self._controls_version += 1

    def run(self, inbox: None, outbox: BoundedQueue[AvatarParams]) -> None:
        """The thread body: analyse into `outbox` (kept as `out`) until `stop` is set (or
        report a failure and end)."""
        self.out = outbox
        try:
            self._loop()
        except Exception as exc:
            self.error = f"audio analysis failed: {exc}"
            log.exception("live analysis")
            self._on_error(self.error)

    def prepare(self) -> None:
        """Build the engines now, before `run` (LiveSession's constructor calls it). Their
        imports and the profile take a good part of a second, and built in `run` they held
        the first frames back: a played file starts once they are ready, so every tick until
        then had no new audio. A failure here is left for `run`, which reports it."""
        if self._engines is None:
            try:
                self._engines = self._make_engines()
            except Exception:
                log.debug("live analysis: engines not built ahead", exc_info=True)

    @property
    def ready(self) -> bool:
        """The engines are built and wait for `run`."""
        return self._engines is not None

    def _make_engines(self) -> tuple[Any, Any, Any, int]:
        from audio.calibration import load_user_or_default
        from audio.live_lipsync import LiveLipSync

        profile = self.profile if self.profile is not None else load_user_or_default()
        rate = int(profile.sample_rate)
        lips = LiveLipSync(profile, rate)
        # Pitch and motion need no librosa (audio.features imports it only for the offline
        # analysis); if their imports fail anyway, the lip-sync — the mouth — still runs.
        pitch = motion = None
        try:
            from audio.live_pitch import LivePitch

            pitch = LivePitch(rate)
        except ImportError as exc:
            self.note = f"no pitch or motion ({exc})"
        if pitch is not None:
            try:
                from audio.live_motion import LiveMotion

                motion = LiveMotion(seed=self.seed, fps=round(1.0 / lips.hop_s))
            except ImportError as exc:
                self.note = f"no motion ({exc})"
        if self.note:
            log.warning("live analysis: lip-sync only, %s", self.note)
        return lips, pitch, motion, rate

    def _apply_controls(self, lips: Any, defaults: dict[str, Any]) -> float:
        c = self.controls
        gate = float(min(max(c["gate_db"], 2.0), 40.0))
        lips.open_db, lips.close_db = gate, max(gate - 6.0, 1.0)
        k = 1.0 - 0.85 * c["smoothing"]  # filter gains scale down → steadier, slower mouth
        lips.att = (defaults["att"][0] * k, defaults["att"][1] * k * k)
        lips.rel = (defaults["rel"][0] * k, defaults["rel"][1] * k * k)
        return 10.0 ** (c["gain_db"] / 20.0)

    def _loop(self) -> None:
        from audio.live_lipsync import to_avatar_params

        # the prepared engines serve one run; a second `run` starts from new ones
        engines, self._engines = self._engines, None
        lips, pitch, motion, arate = engines or self._make_engines()
        apply = None
        if motion is not None:
            from audio.live_motion import apply
        defaults = {"att": lips.att, "rel": lips.rel}
        version = self._controls_version
        gain = self._apply_controls(lips, defaults)
        src = self.source
        srate = src.sample_rate
        resampler = None
        delay_ns = 0
        if srate != arate:
            # a short linear-phase FIR, not soxr's HQ stream, which withholds far more output
            # (audio/live_resample.py)
            from audio.live_resample import LowDelayResampler

            resampler = LowDelayResampler(srate, arate)
            delay_ns = round(resampler.delay_s * NS_PER_S)
        reader = src.reader()
        if self.start_source is not None:
            self.start_source()
            self.start_source = None
        # A hop is time-stamped from the position of its newest sample in the *input* stream:
        # output sample j is input sample j*srate/arate of what was pushed, minus the
        # resampler's group delay (a resampler may also withhold output; this ignores that).
        # Skipped audio is never pushed: `pushed` and the analysers' stream positions count the
        # same samples, and `end_pts` (the reader's position) carries the gap to the clock.
        pushed = 0  # source-rate samples pushed into the resampler so far
        max_behind = max(1, round(ANALYSIS_MAX_BEHIND_S * srate))
        keep = round(ANALYSIS_KEEP_S * srate)
        last_pf = None
        motion_state = None  # the idle/pitch motion of the last hop
        while not self._stop.wait(ANALYSIS_POLL_S):
            # read no more than was checked: a block landing after the check waits for the
            # next one (read at once, a stall's backlog would be analysed)
            unread = reader.available
            if unread > max_behind:
                skipped = reader.skip_to_newest(keep)
                self.skips += 1
                self.skipped_s += skipped / srate
                unread = min(reader.available, keep)
            x = reader.read(max_frames=unread)
            if reader.overruns != self.audio_overruns:
                self.audio_overruns = reader.overruns
            if x.shape[0] == 0:
                continue
            if version != self._controls_version:
                version = self._controls_version
                gain = self._apply_controls(lips, defaults)
            t0 = time.perf_counter()
            mono = x[:, 0] if x.shape[1] == 1 else x.mean(axis=1)
            if gain != 1.0:
                mono = mono * np.float32(gain)
            y = resampler.resample_chunk(mono) if resampler is not None else mono
            y = np.asarray(y, np.float32)
            pushed += mono.shape[0]
            end_pts = samples_to_ns(reader.position - 1, srate)  # newest sample pushed
            pfs = pitch.push(y) if pitch is not None else []
            lfs = lips.push(y)

            def stamp(lf, pushed=pushed, end_pts=end_pts) -> int:
                """pts of a lip frame's newest sample, on the source clock."""
                newest_in = round(lf.t * arate) * srate / arate
                behind = pushed - 1 - newest_in  # source samples pushed after it
                return end_pts - round(behind * NS_PER_S / srate) - delay_ns

            for i, lf in enumerate(lfs):
                pf = pfs[min(i, len(pfs) - 1)] if pfs else last_pf
                last_pf = pf
                pts = stamp(lf)
                level = pf.level_db if pf is not None else lf.level_db
                voiced = bool(pf.voiced) if pf is not None else not lf.silent
                f0 = pf.pitch_hz if pf is not None else None
                params = to_avatar_params(lf, AvatarParams(pts_ns=pts))
                if motion is not None and apply is not None:
                    motion_state = motion.update(pts / NS_PER_S, level, voiced, f0)
                    params = apply(motion_state, params)
                self.out.put(params)
                self.level_db = float(lf.level_db)
                self.hops += 1
            # The mouth as of the newest audio, between hops (LiveLipSync.latch: a provisional
            # hop ending now, no state changed): a frame started before the next hop shows
            # audio at most one block old instead of up to one hop. Head and body keep the
            # last hop's motion (100 Hz is plenty for them).
            lf = lips.latch() if self.hops and self.latch_mouth else None
            if lf is not None:
                params = to_avatar_params(lf, AvatarParams(pts_ns=stamp(lf)))
                if motion_state is not None and apply is not None:
                    params = apply(motion_state, params)
                self.out.put(params)
                self.latches += 1
            if lfs or lf is not None:
                n = len(lfs) + (lf is not None)
                self._timings.add("analysis", (time.perf_counter() - t0) * 1000.0 / n)
