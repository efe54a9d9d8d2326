"""Poisson arrivals: reproducible with a seed, at the asked mean rate."""

from __future__ import annotations

import pytest

from mlxctl.bench.schedule import poisson_arrivals


def test_same_seed_same_schedule_other_seed_other_schedule():
    assert poisson_arrivals(50, 4.0, seed=7) == poisson_arrivals(50, 4.0, seed=7)
    assert poisson_arrivals(50, 4.0, seed=7) != poisson_arrivals(50, 4.0, seed=8)


def test_first_at_zero_and_increasing():
    times = poisson_arrivals(100, 10.0, seed=1)
    assert times[0] == 0.0
    assert all(b >= a for a, b in zip(times, times[1:]))


@pytest.mark.parametrize("rate", [0.5, 4.0, 100.0])
def test_mean_rate(rate):
    count = 20_000
    times = poisson_arrivals(count, rate, seed=3)
    observed = (count - 1) / times[-1]
    assert observed == pytest.approx(rate, rel=0.03)


def test_gaps_are_exponential():
    """Coefficient of variation 1 (a Poisson process), not evenly spaced."""
    times = poisson_arrivals(20_000, 2.0, seed=5)
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = sum(gaps) / len(gaps)
    std = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert std / mean == pytest.approx(1.0, abs=0.05)


def test_infinite_rate_and_empty():
    assert poisson_arrivals(3, float("inf")) == [0.0, 0.0, 0.0]
    assert poisson_arrivals(0, 1.0) == []
