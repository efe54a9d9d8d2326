"""Percentiles and summaries agree with numpy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mlxctl.bench.stats import percentile, ratio, summarize


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 1000])
@pytest.mark.parametrize("q", [0, 1, 50, 90, 95, 99, 99.9, 100])
def test_percentile_matches_numpy(size, q):
    rng = random.Random(size)
    values = [rng.expovariate(3.0) for _ in range(size)]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_percentile_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summary_of_values():
    values = [0.5, 0.1, 0.3, 0.2, 0.4]
    summary = summarize(values)
    assert summary["count"] == 5
    assert summary["mean"] == pytest.approx(np.mean(values))
    for q in (50, 90, 95, 99):
        assert summary[f"p{q}"] == pytest.approx(np.percentile(values, q))


def test_summary_of_nothing_is_none():
    assert summarize([]) == {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None, "p99": None}


def test_ratio():
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None
