"""When the live frame thread leaves a display tick to a starved analysis ("shedding").

The mouth is only as fresh as the analysis. On a CPU starved for a long stretch the frame
thread (tens of ms a frame, holding the GIL while the idol draws) took the CPU the analysis
needed, and the mouth ran 0.3-1 s behind (docs/BENCHMARKS.md, soak-starved). So once the
analysis has been behind for a while, a tick whose newest mouth is too old starts no frame
(the presenter shows the last one meanwhile) and the analysis gets the CPU back.

Only a *lasting* lag does it: after a one-off stall (a look being built, a page fault, another
process's burst) the analysis catches up by itself within a few hops, and shedding then would
only add a hole to the picture. The state machine, on any clock (tests pass simulated time):

* behind: the tick's mouth is older than `age_s`;
* starved: behind for `after_s` without a break, or a tick was shed less than `hold_s` ago;
* shed: behind and starved, and fewer than `max_s` of ticks shed in a row (the picture keeps
  moving where even the analysis alone cannot keep up).
"""

from __future__ import annotations

SHED_AGE_S = 0.15
SHED_AFTER_S = 0.5
SHED_HOLD_S = 2.0
SHED_MAX_S = 0.25


class Shedder:
    """`tick(now_s, age_ms)` at every frame tick: True means start no frame. `age_s` 0: off."""

    def __init__(
        self,
        fps: float,
        *,
        age_s: float = SHED_AGE_S,
        after_s: float = SHED_AFTER_S,
        hold_s: float = SHED_HOLD_S,
        max_s: float = SHED_MAX_S,
    ) -> None:
        self.age_s, self.after_s, self.hold_s = age_s, after_s, hold_s
        self.max_run = max(1, round(max_s * fps))
        self.shed = 0  # ticks shed in all
        self._run = 0  # ticks shed in a row
        self._behind_since: float | None = None
        self._last_shed: float | None = None

    def starved(self, now_s: float) -> bool:
        lasting = self._behind_since is not None and now_s - self._behind_since >= self.after_s
        recent = self._last_shed is not None and now_s - self._last_shed < self.hold_s
        return lasting or recent

    def tick(self, now_s: float, age_ms: float) -> bool:
        if self.age_s <= 0:
            return False
        behind = age_ms > self.age_s * 1000.0
        if not behind:
            self._behind_since = None
        elif self._behind_since is None:
            self._behind_since = now_s
        if behind and self._run < self.max_run and self.starved(now_s):
            self._run += 1
            self.shed += 1
            self._last_shed = now_s
            return True
        self._run = 0
        return False
