"""Timing summaries: the one median and the one P99 of the app, the benches and the JSON lines.

    percentile(values, q) -> float            q in percent (99 = P99)
    percentile_sorted(sorted_values, q)       the same, on an already sorted list, without numpy
    median(values) -> float                   percentile(values, 50)
    median_p99(values) -> (median, p99)
    Summary(median, p99, n)                   one timing's snapshot; Summary.of(values) -> None
                                              when empty; .as_dict(digits) -> the JSON form
    summary(values, digits=3) -> {"median", "p99", "n"} | None   (Summary.of(...).as_dict())
    Timings(size=300)                         recent samples of named timings (ms), any thread:
        .add(name, ms)  .snapshot(digits=3) -> {name: {"median", "p99", "n"}}
    percentile_floor(values, q)               a control statistic, not a reported figure (below)

The snapshot. Every per-stage timing the app and the benches report has one shape,
{"median": ms, "p99": ms, "n": samples} (`Summary.as_dict`), and a set of them is a
`Timings.snapshot()`: `LiveSession.stats()["stage_ms"]` (the stats panel), the quality
ladder's `stage_stats()`, `kagura live`'s JSON line and `kagura bench live --headless`'s
JSON and report (docs/ARCHITECTURE.md, "Metrics").

The definition (every reported median, P50, P99, P1): linear interpolation between the two
nearest ranks of the sorted samples, numpy's default: for n samples sorted x[0] <= ... <= x[n-1]
and q in percent, the position is p = q / 100 x (n - 1), and the value
x[floor(p)] + (p - floor(p)) x (x[floor(p) + 1] - x[floor(p)]). The median is q = 50.

`percentile_floor` is x[floor(p)] (numpy's "lower"): the quality ladder decides on it, so that
one isolated spike in its 60-frame window does not move the decision (pipeline/quality.py).
It is the controller's rule, not a way to report a timing.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (q in percent) of `values` (not empty)."""
    return float(np.percentile(np.fromiter(values, float), q))


def percentile_sorted(sorted_values: Sequence[float], q: float) -> float:
    """`percentile` of an already sorted sequence, in plain Python (cheap on the real-time
    path for the short windows of the jitter buffer); 0.0 for an empty one."""
    if not sorted_values:
        return 0.0
    pos = q / 100.0 * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentile_floor(values: Iterable[float], q: float) -> float:
    """The sample at rank floor(q / 100 x (n - 1)): the quality controller's decision statistic."""
    return float(np.percentile(np.fromiter(values, float), q, method="lower"))


def median(values: Iterable[float]) -> float:
    """The median of `values` (not empty): `percentile(values, 50)`."""
    return percentile(values, 50)


def median_p99(values: Iterable[float]) -> tuple[float, float]:
    """(median, P99) of `values` (not empty)."""
    a = np.fromiter(values, float)
    return float(np.median(a)), float(np.percentile(a, 99))


# up to this many samples Summary.of sorts in plain Python (the same definition as numpy's,
# tests/test_stats.py): the stats panel asks for a dozen 300-sample windows on the UI thread
_PLAIN_MAX = 4096


@dataclass(frozen=True, slots=True)
class Summary:
    """One timing's snapshot: median and P99 (ms, or whatever the samples are) of n samples."""

    median: float
    p99: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary | None:
        v = [float(x) for x in values]
        if not v:
            return None
        if len(v) <= _PLAIN_MAX:  # the live windows: sorting in Python beats numpy's set-up
            v.sort()
            return cls(percentile_sorted(v, 50), percentile_sorted(v, 99), len(v))
        med, p99 = np.percentile(np.asarray(v), [50, 99])
        return cls(float(med), float(p99), len(v))

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        """{"median", "p99", "n"}, rounded to `digits`: the form every JSON line and panel takes."""
        return {"median": round(self.median, digits), "p99": round(self.p99, digits), "n": self.n}


def summary(values: Iterable[float], digits: int = 3) -> dict[str, float] | None:
    """{"median", "p99", "n"} rounded to `digits`; None when there are no values."""
    s = Summary.of(values)
    return None if s is None else s.as_dict(digits)


class Timings:
    """The last `size` samples of each named timing; `add` from any thread, `snapshot` too."""

    def __init__(self, size: int = 300) -> None:
        self.size = int(size)
        self._d: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, value: float) -> None:
        with self._lock:
            d = self._d.get(name)
            if d is None:
                d = self._d[name] = deque(maxlen=self.size)
            d.append(float(value))

    def values(self, name: str) -> list[float]:
        with self._lock:
            return list(self._d.get(name, ()))

    def summaries(self) -> dict[str, Summary]:
        with self._lock:
            items = {k: list(v) for k, v in self._d.items()}
        return {k: s for k, v in items.items() if (s := Summary.of(v)) is not None}

    def snapshot(self, digits: int = 3) -> dict[str, dict[str, float]]:
        """{name: {"median", "p99", "n"}} of every timing with samples."""
        return {k: s.as_dict(digits) for k, s in self.summaries().items()}
