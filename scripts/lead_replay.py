"""Replay live lead policies over `kagura bench live --headless --trace FILE` traces.

    python3 scripts/lead_replay.py TRACE.jsonl ... [--policies JSON]

Each trace holds every shown frame's start, target tick, lead and tick-to-publication time as
measured on the machine that ran it. For each policy ({label: {PhaseLock attribute: value}}:
frame_margin_ns, predict_window, outliers_left_out, predict_q, learn_min), the lead is
recomputed frame by frame from the same frame times by pipeline/phase_lock.py's PhaseLock itself
(nothing learnt in the first FRAME_LEARN_AFTER_S, forgotten where the trace's lead
falls back to one frame period after the lower rungs' set-up, the wake-up allowance the real
lead carried kept); a frame is on time if its publication comes by its tick with the new lead,
and its audio-to-photon moves by the lead's change, or by a refresh if it would now miss (or no
longer miss) its tick. The shipped policy replayed gives back the measured P99s: that is the
check that the replay follows the scheduler. It ignores what a different start time would do
to the frame's own time.
"""

from __future__ import annotations

import argparse
import json

from core.clock import NS_PER_S
from core.stats import median, percentile
from pipeline.phase_lock import FRAME_LEARN_AFTER_S, PhaseLock

FPS = 60
REFRESH_MS = 1000 / 60
PERIOD_MS = NS_PER_S // FPS / 1e6  # the lead before `learn_min` frames are learnt
# policies as PhaseLock attributes: frame_margin_ns, predict_window, outliers_left_out,
# predict_q, learn_min ({}: as shipped)
POLICIES = {
    "shipped": {},
    "margin 2": {"frame_margin_ns": 2_000_000},
    "margin 1.5": {"frame_margin_ns": 1_500_000},
    "margin 1": {"frame_margin_ns": 1_000_000},
    "window 60": {"predict_window": 60},
    "drop 2": {"outliers_left_out": 2},
    "P98": {"predict_q": 98.0},
}


def load(path: str) -> list[dict]:
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    return [r for r in rows if r.get("frame.lead") is not None and r.get("frame") is not None]


def lock_for(policy: dict) -> PhaseLock:
    lock = PhaseLock(FPS, now_ns=lambda: 0)
    for name, value in policy.items():
        setattr(lock, name, value)
    return lock


def replay(rows: list[dict], policy: dict) -> list[float]:
    """Audio-to-photon ms of the counted frames under `policy`."""
    shipped, lock = lock_for({}), lock_for(policy)
    # the lead the trace starts over with (one frame period + the wake-up floor) after forget()
    default = [abs(r["frame.lead"] - (PERIOD_MS + 1.0)) < 0.02 for r in rows]
    forget = max((i for i in range(1, len(rows)) if default[i] and not default[i - 1]), default=-1)
    out = []
    for i, r in enumerate(rows):
        if i == forget:
            shipped.forget()
            lock.forget()
        wake = r["frame.lead"] - shipped.predicted_frame_ns() / 1e6
        lead = lock.predicted_frame_ns() / 1e6 + wake
        start_error = r["frame.started"] - (r["frame.target"] - r["frame.lead"])
        was_on_time = r["frame.started"] + r["frame"] <= r["frame.target"]
        on_time = lead - start_error >= r["frame"]
        if r.get("counted") and r.get("audio_to_photon_ms") is not None:
            a2p = r["audio_to_photon_ms"] - (r["frame.lead"] - lead)
            a2p += REFRESH_MS * (
                int(was_on_time and not on_time) - int(on_time and not was_on_time)
            )
            out.append(a2p)
        if r["start_s"] >= FRAME_LEARN_AFTER_S:
            shipped.note_frame(None, r["frame"])
            lock.note_frame(None, r["frame"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument(
        "--policies", default=None, help="JSON {label: {PhaseLock attribute: value, ...}}"
    )
    a = ap.parse_args()
    policies = json.loads(a.policies) if a.policies else POLICIES
    runs = [load(t) for t in a.traces]
    for label, policy in policies.items():
        p99 = [percentile(replay(rows, policy), 99) for rows in runs]
        print(
            f"{label:>12}: P99 median {median(p99):.2f} ms, worst {max(p99):.2f}, "
            f"<= 35 ms in {sum(x <= 35 for x in p99)} of {len(p99)} runs"
        )


if __name__ == "__main__":
    main()
