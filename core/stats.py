"""Timing summaries: the one median and the one P99 of the app, the benches and the JSON lines.

    percentile(values, q) -> float            q in percent (99 = P99)
    percentile_sorted(sorted_values, q)       the same, on an already sorted list, without numpy
    median_p99(values) -> (median, p99)
    summary(values, digits=3) -> {"median", "p99", "n"} | None   (None: no values)
    percentile_floor(values, q)               a control statistic, not a reported figure (below)

The definition (every reported median, P50, P99, P1): linear interpolation between the two
nearest ranks of the sorted samples, numpy's default: for n samples sorted x[0] <= ... <= x[n-1]
and q in percent, the position is p = q / 100 x (n - 1), and the value
x[floor(p)] + (p - floor(p)) x (x[floor(p) + 1] - x[floor(p)]). The median is q = 50.

`percentile_floor` is x[floor(p)] (numpy's "lower"): the quality ladder decides on it, so that
one isolated spike in its 60-frame window does not move the decision (pipeline/quality.py).
It is the controller's rule, not a way to report a timing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def median_p99(values: Iterable[float]) -> tuple[float, float]:
    """(median, P99) of `values` (not empty)."""
    a = np.fromiter(values, float)
    return float(np.median(a)), float(np.percentile(a, 99))


def summary(values: Iterable[float], digits: int = 3) -> dict[str, float] | None:
    """{"median", "p99", "n"} rounded to `digits`; None when there are no values."""
    a = np.fromiter(values, float)
    if a.size == 0:
        return None
    return {
        "median": round(float(np.median(a)), digits),
        "p99": round(float(np.percentile(a, 99)), digits),
        "n": int(a.size),
    }
