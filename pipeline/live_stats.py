"""The live session's stats snapshot: one dict of its parts' counters and timings, for the
app's status line, the benches and the JSON line (`LiveSession.stats()`).

The keys, by the part that counts them:

* session: "state", "source", "source_state", "preset", "transparent", "size",
  "render_size", "notices" (things the user must see, e.g. a model that could not be loaded),
  "priority" (what the frame and publishing threads and the render process got when they
  asked for real-time scheduling: {part: one sentence});
* frame loop (pipeline/live_frames.py): "frames_produced", "stalled_ticks" (no new audio),
  "late_ticks", "shed_ticks" (pipeline/shedding.py), "gpu_busy_ticks", "lipsync_lag_ms" and
  "lipsync_lag_p99_ms" (the mouth's age at each frame's pts), "output_dropped";
* scheduler (pipeline/phase_lock.py): "phase_locked", "frame_lead_ms", "start_error_ms";
* analysis (pipeline/live_analysis.py): "analysis_hops", "analysis_latches",
  "analysis_skips", "audio_skipped_s", "audio_overruns", "analysis_note",
  "params_superseded" (hops no frame used: expected, 100 Hz → fps);
* looks (pipeline/live_looks.py): "look_switches";
* "stage_ms": every stage's times (core.stats.Timings; the GPU stages' from the ladder);
* "quality": the quality ladder's rung and last change (GPU sessions; None otherwise);
* "recording": the recording in progress ({"path", "frames", "repeated"}) or None.
"""

from __future__ import annotations

from typing import Any

from core.stats import median_p99


class GpuFigures:
    """The GPU chain's ladder status and stage times, kept when stop() closes the chain so
    the last figures can still be read."""

    def __init__(self, chain: Any) -> None:
        self.chain = chain
        self._status: dict[str, Any] | None = None
        self._stages: dict[str, dict[str, float]] = {}

    def keep(self) -> None:
        """Before the chain is closed."""
        if self.chain is not None:
            self._status = self.chain.status()
            self._stages = self.chain.stage_stats()

    def stages(self) -> dict[str, dict[str, float]]:
        if self.chain is None:
            return {}
        return dict(self._stages) if self.chain.closed else self.chain.stage_stats()

    def quality(self) -> dict[str, Any] | None:
        if self.chain is None:
            return None
        return self._status if self.chain.closed else self.chain.status()


def snapshot(session: Any) -> dict[str, Any]:
    """A LiveSession's stats now (any thread; counters are read without a lock: each value is
    current, the set is not one instant's)."""
    frames, analysis = session.frames, session.analysis
    lag = median_p99(frames.lag_ms) if frames.lag_ms else None
    rec = session.recorder
    return {
        "state": session.state,
        "source": getattr(session.source, "device_name", None),
        "source_state": session.source_state,
        "preset": session.preset_name,
        "transparent": session.transparent,
        "frames_produced": frames.frames_produced,
        "output_dropped": session.output.dropped,
        "params_superseded": analysis.out.dropped,
        "stalled_ticks": frames.stalled_ticks,
        "analysis_skips": analysis.skips,
        "audio_skipped_s": round(analysis.skipped_s, 3),
        "late_ticks": frames.late_ticks,
        "shed_ticks": frames.shedder.shed,
        "analysis_hops": analysis.hops,
        "analysis_latches": analysis.latches,
        "audio_overruns": analysis.audio_overruns,
        "look_switches": session.looks.switches,
        "lipsync_lag_ms": None if lag is None else round(lag[0], 2),
        "lipsync_lag_p99_ms": None if lag is None else round(lag[1], 2),
        "stage_ms": {**session.timings.snapshot(), **session.gpu_figures.stages()},
        "gpu_busy_ticks": frames.gpu_busy_ticks,
        **frames.phase_lock.stats(),  # phase_locked, frame_lead_ms, start_error_ms
        "quality": session.gpu_figures.quality(),
        "size": list(session.size),
        "render_size": list(session.render_size),
        "analysis_note": analysis.note,
        "priority": dict(session.priority),
        "notices": list(getattr(session.gpu_spec, "notices", None) or []),
        "recording": None
        if rec is None
        else {"path": str(rec.path), "frames": rec.sent, "repeated": rec.repeated},
    }
