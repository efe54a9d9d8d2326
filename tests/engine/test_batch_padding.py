"""The decode batch's host mirror of its rows' left padding (engine/batch.py) against what the
device holds, through joins of single prompts and groups (fresh and after prefix-cache hits),
rows leaving at different steps, and the return to plain caches; and the output it gives."""

from __future__ import annotations

import random

import pytest

from mlxctl.engine.batch import read_left
from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import SchedulerConfig
from mlxctl.engine.streams import gather_events
from tests.engine.tiny import tiny_loaded

SHARED = [(i * 5) % 50 + 3 for i in range(70)]


def workload(seed: int) -> list[tuple[list[int], int]]:
    """Prompts of many lengths, some sharing a prefix-cache block, and answers of many lengths."""
    rng = random.Random(seed)
    out = []
    for i in range(24):
        body = [rng.randrange(3, 60) for _ in range(rng.choice((1, 3, 9, 30, 80)))]
        out.append(((SHARED if i % 3 == 0 else []) + body, rng.randrange(1, 14)))
    return out


@pytest.fixture(scope="module")
def loaded():
    return tiny_loaded()


def checked_engine(loaded, prefix: bool, seen: list) -> Engine:
    """An engine whose every step ends with the mirror compared to the device's padding."""
    cfg = EngineConfig(SchedulerConfig(max_num_seqs=12, max_prefilling=6, prefill_chunk=64),
                       PrefixConfig(enabled=prefix))
    engine = Engine(lambda: loaded, cfg).start()
    step = engine.step

    def step_and_check():
        step()
        batch = engine.batch
        if batch.batched:
            seen.append((batch.left, read_left(batch.caches), len(batch)))
    engine.step = step_and_check
    return engine


def run(engine: Engine, work, stagger: bool) -> list[tuple[int, ...]]:
    streams, early = [], {}
    for i, (prompt, n) in enumerate(work):
        streams.append(engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)))
        if stagger and i % 4 == 3:  # let some decode before the next ones join
            early[i] = next(iter(streams[-1]))
    events = [([early[i]] if i in early else []) + list(s) for i, s in enumerate(streams)]
    return [gather_events(e).token_ids for e in events]


@pytest.mark.parametrize("prefix", [False, True])
def test_the_mirror_matches_the_device_and_rows_answer_as_alone(loaded, prefix):
    work = workload(1)
    seen: list = []
    engine = checked_engine(loaded, prefix, seen)
    try:
        alone = [engine.submit(p, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)).collect().token_ids
                 for p, n in work]
        together = run(engine, work, stagger=True)
        again = run(engine, workload(2), stagger=False)
    finally:
        engine.shutdown()
    assert together == alone
    assert len(again) == 24
    assert len(seen) > 20 and any(n > 4 for _, _, n in seen)
    assert any(max(mirror) > 0 for mirror, _, _ in seen)  # padded rows were exercised
    for mirror, device, n in seen:
        assert mirror == device and len(mirror) == n



def test_stacked_rows_hold_what_extract_row_does():
    """``stacked_rows`` (a group's rows from one stacking) and ``stacked_row`` (one row) give
    each row's KV over its own tokens, as extracting it layer by layer does."""
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache, KVCache

    from mlxctl.engine.batch import extract_row, stacked_row, stacked_rows

    layers, rows = 3, [5, 9, 2]
    plain = []
    for n in rows:
        cache = []
        for _ in range(layers):
            c = KVCache()
            c.update_and_fetch(mx.random.normal((1, 2, n, 4)), mx.random.normal((1, 2, n, 4)))
            cache.append(c)
        plain.append(cache)
    merged = [BatchKVCache.merge([p[i] for p in plain]) for i in range(layers)]
    left = read_left(merged)
    assert left == [4, 0, 7]
    group = stacked_rows(merged, left)
    for r in range(len(rows)):
        want = extract_row(merged, r, left)
        for got in (group[r], stacked_row(merged, r, left)):
            assert got.keys.shape == (layers, 1, 2, rows[r], 4)
            for i, c in enumerate(want):
                assert mx.array_equal(got.keys[i], c.keys[..., : c.offset, :]).item()
                assert mx.array_equal(got.values[i], c.values[..., : c.offset, :]).item()
    quantized = merged[:1] + [None]
    assert stacked_rows(quantized, left) is None and stacked_row(merged, 0, None) is None
