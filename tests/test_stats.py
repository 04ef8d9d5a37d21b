"""core.stats: the one percentile definition the app and the benches report."""

import numpy as np
import pytest

from core.stats import median_p99, percentile, percentile_floor, percentile_sorted, summary


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
