"""Rows kept out of a batch's caches by copies of runs (engine/kv/rows.py) against the gather
they replace, for every shape of row set the engine makes: plain batched KV, sliding-window KV
and recurrent state (mlx-lm's own ``filter`` as the reference for the last two)."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import ArraysCache, BatchRotatingKVCache

from mlxctl.engine.batch import _filter_kv, _filter_state
from mlxctl.engine.kv import rows as kv_rows
from mlxctl.engine.kv.rows import KeptRows, runs


def test_runs_are_the_consecutive_stretches_in_order():
    assert runs([0, 1, 2, 5, 6, 9]) == [(0, 3), (5, 7), (9, 10)]
    assert runs([3]) == [(3, 4)]
    assert runs([4, 2, 3]) == [(4, 5), (2, 4)]  # out of order: runs as they come
    assert runs([]) == []


ROW_SETS = [[1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], [2, 5], [0, 7], [6, 1, 4], [3],
            list(range(0, 8, 2)) + [1]]


@pytest.mark.parametrize("rows", ROW_SETS)
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_kept_rows_equal_the_gather_then_slice(rows, shift):
    x = mx.random.normal((8, 2, 6, 4)).astype(mx.bfloat16)
    got = KeptRows(rows).take(x, shift)
    assert mx.array_equal(got, x[mx.array(rows)][..., shift:, :])


def test_past_max_runs_the_rows_are_gathered_alike(monkeypatch):
    rng = random.Random(3)
    x = mx.random.normal((40, 2, 5, 4))
    rows = sorted(rng.sample(range(40), 25))
    assert len(runs(rows)) > 2
    monkeypatch.setattr(kv_rows, "MAX_RUNS", 2)
    assert mx.array_equal(KeptRows(rows).take(x, 2), x[mx.array(rows)][..., 2:, :])
    assert mx.array_equal(KeptRows(rows).take(x), x[mx.array(rows)])


def test_a_single_run_is_written_after_as_a_fresh_buffer():
    """One run left is a view of the old buffer; a write through it must not touch the old one."""
    x = mx.zeros((4, 1, 3, 2))
    kept = KeptRows([1, 2]).take(x, 1)
    kept[..., 0:1, :] = mx.ones((2, 1, 1, 2))
    mx.eval(kept)
    assert mx.array_equal(x, mx.zeros((4, 1, 3, 2)))
    assert kept[:, :, 0].sum().item() == 4


def _rotating(rows: int) -> BatchRotatingKVCache:
    c = BatchRotatingKVCache(max_size=6, left_padding=[i % 3 for i in range(rows)])
    k = mx.random.normal((rows, 2, 9, 4))
    c.update_and_fetch(k, k + 1)  # past the window: the buffer has rotated
    return c


def _arrays(rows: int) -> ArraysCache:
    c = ArraysCache(2, left_padding=[i % 2 for i in range(rows)])
    c[0], c[1] = mx.random.normal((rows, 3, 5)), mx.random.normal((rows, 2, 4, 4))
    c.lengths = mx.arange(rows) + 4
    return c


@pytest.mark.parametrize("make", [_rotating, _arrays])
@pytest.mark.parametrize("rows", [[1, 2, 3, 4, 5], [0, 3, 5], [2], [4, 0, 1]])
def test_sliding_window_and_recurrent_rows_filter_as_mlx_lm_does(make, rows):
    mx.random.seed(7)
    ours = make(6)
    mx.random.seed(7)
    theirs = make(6)
    if isinstance(ours, BatchRotatingKVCache):
        _filter_kv(ours, KeptRows(rows), 0)
    else:
        _filter_state(ours, KeptRows(rows))
    theirs.filter(mx.array(rows))
    for a, b in zip(tree_flatten(ours.state), tree_flatten(theirs.state)):
        assert mx.array_equal(a[1], b[1])
