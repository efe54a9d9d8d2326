"""The pool's refusals before it unloads anything, under either budget: a model larger than the
whole budget, and one that does not fit beside what pinned models hold (ModelPool.make_room)."""

from __future__ import annotations

import asyncio

import pytest

from mlxctl.engine.memory import MemoryLedger
from mlxctl.server.errors import ApiError
from mlxctl.server.residency import ModelPool

GB = 1 << 30


def refusal(pool: ModelPool, need: int) -> ApiError:
    resident = pool.add("new", "ref", lambda: None)
    with pytest.raises(ApiError) as caught:
        asyncio.run(pool.make_room(resident, need))
    return caught.value


def with_ledger(total: int, pinned: int) -> ModelPool:
    pool = ModelPool(default_keep_alive_s=None)
    pool.ledger = MemoryLedger(total)
    pool.ledger.join(1, pinned, lambda: None, pinned=True)
    return pool


def test_a_model_larger_than_the_memory_budget_is_too_large_whatever_is_pinned():
    error = refusal(with_ledger(4 * GB, 0), 5 * GB)
    assert error.status == 507 and error.code == "model_too_large"
    assert "whole --memory-budget-gb budget (4.00 GiB)" in error.message


def test_what_pinned_models_hold_of_the_memory_budget_is_named():
    error = refusal(with_ledger(4 * GB, 3 * GB), 2 * GB)
    assert error.status == 507 and error.code == "model_budget_full"
    assert "the pinned models hold 3.00 GiB of the --memory-budget-gb budget (4.00 GiB)" in error.message


def test_the_pinned_primary_share_of_the_weights_budget_is_named():
    pool = ModelPool(budget_bytes=4 * GB, default_keep_alive_s=None)
    pool.outside = lambda: 3 * GB
    error = refusal(pool, 2 * GB)
    assert error.status == 507 and error.code == "model_budget_full"
    assert "the pinned primary model holds 3.00 GiB of the --max-loaded-gb budget" in error.message


def test_a_model_that_fits_beside_the_pinned_ones_is_not_refused():
    pool = with_ledger(4 * GB, 3 * GB)
    resident = pool.add("new", "ref", lambda: None)
    assert asyncio.run(pool.make_room(resident, GB // 2)) == []
