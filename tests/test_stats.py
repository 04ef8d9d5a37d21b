"""core.stats: the one percentile definition the app and the benches report."""

import threading

import numpy as np
import pytest

from core.stats import (
    Summary,
    Timings,
    median,
    median_p99,
    percentile,
    percentile_floor,
    percentile_sorted,
    summary,
)


def test_percentile_is_linear_interpolation_between_ranks():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]  # sorted: 1 2 3 4 5, position 0.99 x 4 = 3.96
    assert percentile(values, 99) == pytest.approx(4.0 + 0.96 * 1.0)
    assert percentile(values, 50) == 3.0
    assert percentile(values, 1) == pytest.approx(1.04)


def test_sorted_variant_agrees_with_numpy_definition():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 60, 301):
        v = rng.exponential(4.0, n)
        for q in (0, 1, 50, 90, 99, 100):
            assert percentile_sorted(sorted(v), q) == pytest.approx(percentile(v, q))
    assert percentile_sorted([], 99) == 0.0


def test_floor_rank_ignores_one_spike_the_reported_p99_sees():
    window = [10.0] * 59 + [30.0]
    assert percentile_floor(window, 99) == 10.0
    assert percentile(window, 99) > 10.0
    assert percentile_floor([10.0] * 58 + [30.0, 30.0], 99) == 30.0


def test_summary_and_median_p99():
    assert summary([]) is None
    s = summary([1.0, 2.0, 3.0, 4.0], digits=2)
    assert s == {"median": 2.5, "p99": 3.97, "n": 4}
    med, p99 = median_p99([1.0, 2.0, 3.0, 4.0])
    assert (med, round(p99, 2)) == (2.5, 3.97)


def test_summary_type_is_the_dict_every_report_takes():
    assert Summary.of([]) is None
    s = Summary.of([4.0, 1.0, 3.0, 2.0])
    assert (s.median, round(s.p99, 2), s.n) == (2.5, 3.97, 4)
    assert s.as_dict(2) == summary([1.0, 2.0, 3.0, 4.0], digits=2)
    assert median([1.0, 2.0, 3.0, 10.0]) == 2.5
    rng = np.random.default_rng(5)
    for n in (1, 2, 300, 4096, 5000):  # sorted in Python up to 4096 samples, numpy above
        v = rng.exponential(4.0, n)
        s = Summary.of(v)
        assert s.n == n
        assert s.median == pytest.approx(np.median(v)) and s.p99 == pytest.approx(
            np.percentile(v, 99)
        )


def test_timings_keep_the_last_samples_of_each_name_from_any_thread():
    t = Timings(size=100)
    assert t.snapshot() == {}

    def add(name: str, base: float) -> None:
        for i in range(1000):
            t.add(name, base + i)

    threads = [threading.Thread(target=add, args=(n, b)) for n, b in (("a", 0.0), ("b", 1e4))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert t.values("a") == [float(v) for v in range(900, 1000)]  # the last 100, in order
    snap = t.snapshot(digits=2)
    assert snap == {"a": summary(range(900, 1000), 2), "b": summary(range(10900, 11000), 2)}
    assert snap["a"] == {"median": 949.5, "p99": 998.01, "n": 100}
