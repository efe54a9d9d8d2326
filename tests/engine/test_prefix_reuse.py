"""Prefix reuse in the engine, on a tiny random-weight llama with 4-token blocks."""

from __future__ import annotations

import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from tests.engine.gate import StepGate
from tests.engine.tiny import assert_same, tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=10)
EXACT = SamplingParams(temperature=0.0, max_tokens=10, logprobs=True)
SYSTEM = list(range(1, 30))  # a shared "system prompt" of 29 tokens



def engine_with(enabled: bool = True, **kw) -> Engine:
    loaded = tiny_loaded()
    return Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(enabled=enabled, **{"block_size": 4, **kw}))).start()


@pytest.fixture
def pair():
    on, off = engine_with(True), engine_with(False)
    yield on, off
    on.shutdown(), off.shutdown()


def test_a_repeated_prompt_reuses_its_blocks_and_generates_the_same(pair):
    on, off = pair
    first = on.submit(SYSTEM, EXACT).collect()
    again = on.submit(SYSTEM, EXACT).collect()
    assert first.usage.cached_tokens == 0
    assert again.usage.cached_tokens == 28  # the full blocks of the first 28 tokens, never the last
    assert_same(again, first)
    assert_same(first, off.submit(SYSTEM, EXACT).collect())


def test_a_shared_prefix_with_a_new_suffix(pair):
    on, off = pair
    on.submit(SYSTEM + [40, 41], GREEDY).collect()
    turn2 = SYSTEM + [50, 51, 52, 53, 54, 55]
    got = on.submit(turn2, EXACT).collect()
    assert got.usage.cached_tokens == 29  # 7 full blocks, then SYSTEM's last token from the first prompt's 8th
    assert_same(got, off.submit(turn2, EXACT).collect())


def test_prompts_prefilled_together_are_remembered(pair):
    on, _ = pair
    busy = on.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=200))
    next(iter(busy))
    streams = [on.submit([60 + i] + SYSTEM, GREEDY) for i in range(3)]
    [s.collect() for s in streams]
    busy.abort()
    again = on.submit([61] + SYSTEM, GREEDY).collect()
    assert again.usage.cached_tokens == 29  # all but the last token: 7 full blocks and a partial one


def test_stats_and_clear(pair):
    on, _ = pair
    on.submit(SYSTEM, GREEDY).collect()
    on.submit(SYSTEM, GREEDY).collect()
    stats = on.stats()["prefix_cache"]
    assert stats["enabled"] and stats["queries"] == 2 and stats["hits"] == 1 and stats["hit_tokens"] == 28
    assert stats["bytes"] > 0
    # the prompt's 29 tokens: 7 full blocks and a last partial one; prompt and answer, 39 tokens:
    # 9 full blocks (the first 7 shared) and a last partial one
    assert on.clear_prefix_cache() == 11
    assert on.stats()["prefix_cache"]["bytes"] == 0
    assert on.submit(SYSTEM, GREEDY).collect().usage.cached_tokens == 0


def test_disabled_cache_never_hits(pair):
    _, off = pair
    off.submit(SYSTEM, GREEDY).collect()
    assert off.submit(SYSTEM, GREEDY).collect().usage.cached_tokens == 0
    assert off.stats()["prefix_cache"] == {"enabled": False, "mode": "none", "reason": "disabled"}


def test_a_tiny_budget_evicts_and_stays_correct():
    eng = engine_with(True, max_bytes=1)
    try:
        first = eng.submit(SYSTEM, GREEDY).collect()
        again = eng.submit(SYSTEM, GREEDY).collect()
        assert again.token_ids == first.token_ids
        assert eng.stats()["prefix_cache"]["bytes"] <= 1 or eng.stats()["prefix_cache"]["evictions"] > 0
    finally:
        eng.shutdown()


def test_the_next_turn_reuses_the_previous_answer_too(pair):
    on, off = pair
    first = on.submit(SYSTEM, GREEDY).collect()
    turn2 = SYSTEM + list(first.token_ids) + [7, 8, 9]
    got = on.submit(turn2, EXACT).collect()
    assert got.usage.cached_tokens == 39  # 29 prompt + 10 answer tokens: 9 full blocks and the last 3
    assert_same(got, off.submit(turn2, EXACT).collect())


def test_a_system_prompt_shorter_than_a_block_is_reused_from_part_of_a_block():
    """Chat templates put a short system prompt before every user message: with 16-token
    blocks its 10 tokens are served from part of the first prompt's first block, alone and for
    prompts prefilled together (``min_reuse_tokens`` 0, the default); the answers are those of
    an engine without the cache."""
    on, off = engine_with(True, block_size=16), engine_with(False)
    system = list(range(1, 11))
    try:
        on.submit(system + [40, 41, 42, 43, 44, 45, 46, 47], GREEDY).collect()
        alone = system + [50, 51, 52]
        got = on.submit(alone, EXACT).collect()
        assert got.usage.cached_tokens == 10
        assert_same(got, off.submit(alone, EXACT).collect())
        together = [system + [60 + i] * (3 + i) for i in range(3)]
        streams = [on.submit(p, EXACT) for p in together]
        done = [s.collect() for s in streams]
        assert [d.usage.cached_tokens for d in done] == [10, 10, 10]
        for d, p in zip(done, together):
            assert_same(d, off.submit(p, EXACT).collect())
        assert on.stats()["prefix_cache"]["partial_hits"] == 4
    finally:
        on.shutdown(), off.shutdown()


def _together(engine: Engine, gate: StepGate, prompts: list[list[int]], params: SamplingParams = GREEDY,
              busy_prompt: tuple[int, ...] = (1, 2)):
    """Submit ``prompts`` while the engine is held between two steps of a busy request, so they
    are admitted, and prefilled, together; their streams and what they returned."""
    busy = engine.submit(list(busy_prompt), SamplingParams(temperature=0.0, max_tokens=500, ignore_eos=True))
    gate.hold_next(lambda: bool(engine.scheduler.running))
    assert gate.held.wait(30)  # between steps: what is submitted now is admitted at once, after this step
    streams = [engine.submit(p, params) for p in prompts]
    gate.hold_next(lambda: False)
    done = [s.collect() for s in streams]
    busy.abort()
    busy.collect()  # the engine has stopped: nothing runs beside what the test does next
    return streams, done


def test_prompts_prefilled_together_let_a_short_hit_go_and_a_prompt_alone_keeps_it():
    """One row holding KV sends its whole group through the merged-cache path: with
    ``min_reuse_tokens`` 128 a prompt prefilled with others lets a shorter hit go and prefills
    whole. Alone it keeps the hit; a long hit is kept together too. The answers are those of an
    engine without the cache either way, and the counters say what happened. (A gate holds the
    engine while the prompts are submitted, so they are admitted, and prefilled, together.)"""
    loaded = tiny_loaded()
    gate = StepGate(lambda: False)
    on = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=16, min_reuse_tokens=128),
                                             fault_hook=gate)).start()
    off = engine_with(False)
    system = list(range(1, 11))
    try:
        on.submit(system + [40, 41, 42, 43, 44, 45, 46, 47], GREEDY).collect()
        assert on.submit(system + [50, 51, 52], GREEDY).collect().usage.cached_tokens == 10  # alone
        prompts = [system + [60 + i] * (3 + i) for i in range(3)]
        streams, done = _together(on, gate, prompts)
        assert [d.usage.cached_tokens for d in done] == [0, 0, 0]
        assert [s.cached_tokens for s in streams] == [0, 0, 0]  # what their first events said
        assert [d.token_ids for d in done] == [off.submit(p, GREEDY).collect().token_ids for p in prompts]
        stats = on.stats()["prefix_cache"]
        assert (stats["hits_let_go"], stats["partial_hits"]) == (3, 1)
        long_system = [(i * 7) % 50 + 1 for i in range(140)]  # 140 tokens: over the threshold
        on.submit(long_system + [9], GREEDY).collect()
        prompts = [long_system + [60 + i] * (3 + i) for i in range(3)]
        _, done = _together(on, gate, prompts)
        assert [d.usage.cached_tokens for d in done] == [140, 140, 140]
        assert [d.token_ids for d in done] == [off.submit(p, GREEDY).collect().token_ids for p in prompts]
        assert on.stats()["prefix_cache"]["hits_let_go"] == 3
    finally:
        gate.release()
        on.shutdown(), off.shutdown()


@pytest.mark.parametrize("align", [4, 0])
def test_prompts_prefilled_together_cut_hits_a_few_tokens_longer_than_the_group_least(align):
    """A group whose rows hold hits a few tokens apart would be padded, masked and rolled: with
    ``align_tokens`` 4, where every hit over the group's least is at most 4 over it (4 exactly
    included), each is cut back to the least, or let go beside a prompt with no hit; where one
    reaches further nothing is cut (the group stays ragged anyway); with 0 every hit is kept
    whole. Either way the answers, logprobs included, are those of an engine without the
    cache, and the usage, the streams' first events and the counters say what was served."""
    loaded = tiny_loaded()
    gate = StepGate(lambda: False)
    on = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4, align_tokens=align),
                                             fault_hook=gate)).start()
    off = engine_with(False)
    system = list(range(1, 11))

    def check(prompts, want, busy_prompt=(1, 2)):
        before = on.stats()["prefix_cache"]
        streams, done = _together(on, gate, prompts, EXACT, busy_prompt)
        assert [d.usage.cached_tokens for d in done] == want
        assert [s.cached_tokens for s in streams] == want  # what their first events said
        for got, prompt in zip(done, prompts):
            assert_same(got, off.submit(prompt, EXACT).collect())
        after = on.stats()["prefix_cache"]
        return {k: after[k] - before[k] for k in ("hit_tokens", "hits_aligned", "hits_let_go")}

    try:
        on.submit(system + list(range(40, 48)), GREEDY).collect()
        # hits of 10, 13 and 14 (4 over the least): all cut to 10 (a busy prompt that hits nothing)
        delta = check([system + [60] * 3, system + [40, 41, 42, 50, 51], system + [40, 41, 42, 43, 52]],
                      [10, 10, 10] if align else [10, 13, 14], busy_prompt=(63, 62))
        assert delta == ({"hit_tokens": 30, "hits_aligned": 2, "hits_let_go": 0} if align else
                         {"hit_tokens": 37, "hits_aligned": 0, "hits_let_go": 0})
        # 10, 13 and 18: the 18 is 8 over, so nothing is cut
        delta = check([system + [61] * 3, system + [40, 41, 42, 53, 54], system + list(range(40, 48)) + [52, 53]],
                      [10, 13, 18])
        assert delta["hits_aligned"] == 0
        # beside a prompt with no hit: a 10-token hit is over 4 and kept, a 3-token one let go
        check([[20, 21, 22, 23, 24], system + [62] * 3], [0, 10])
        delta = check([[25, 26, 27, 28, 29], system[:3] + [63] * 3], [0, 0] if align else [0, 3])
        assert delta["hits_let_go"] == (1 if align else 0)
    finally:
        gate.release()
        on.shutdown(), off.shutdown()


def test_rows_of_a_group_and_of_the_batch_are_kept_exactly():
    """A group prefilled together (different lengths, so different left padding) keeps each
    row's blocks sliced from one stacking of the group (``batch.stacked_rows``), and a row that
    finishes in a batch keeps prompt + answer (``batch.stacked_row``): served back, alone, each
    gives the answers of an engine without the cache, from all but its last token, and their
    logprobs (greedy tokens alone barely notice a wrong position on this tiny model)."""
    loaded = tiny_loaded()
    gate = StepGate(lambda: False)
    on = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4), fault_hook=gate)).start()
    off = engine_with(False)
    exact = EXACT
    prompts = [[(i * 5 + j * 3) % 40 + 3 for j in range(9 + 6 * i)] for i in range(3)]
    try:
        busy = on.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=500, ignore_eos=True))
        gate.hold_next(lambda: bool(on.scheduler.running))
        assert gate.held.wait(30)
        streams = [on.submit(p, exact) for p in prompts]
        gate.hold_next(lambda: False)
        done = [s.collect() for s in streams]
        busy.abort()
        assert on.stats()["prefix_cache"]["hits"] == 0
        for prompt, first in zip(prompts, done):
            assert_same(first, off.submit(prompt, exact).collect())
            again = on.submit(prompt, exact).collect()
            assert again.usage.cached_tokens == len(prompt) - 1
            assert_same(again, first)
            turn2 = prompt + list(first.token_ids) + [7, 8]
            got = on.submit(turn2, exact).collect()
            assert got.usage.cached_tokens == len(prompt) + len(first.token_ids)
            assert_same(got, off.submit(turn2, exact).collect())
    finally:
        gate.release()
        on.shutdown(), off.shutdown()


def test_blocks_kept_together_are_copied_in_one_evaluation(monkeypatch):
    """Inside ``PrefixReuse.together`` (the engine wraps a step's remembering in one) the blocks
    of every prompt kept start copying in one ``async_eval`` when it ends; outside it, one a
    prompt. Each block then holds exactly its positions of the prompt's KV."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    import mlxctl.engine.prefix as prefix_module
    from mlxctl.engine.prefix import PrefixReuse
    from mlxctl.engine.request import Request

    loaded = tiny_loaded()
    reuse = PrefixReuse(loaded, PrefixConfig(block_size=4))
    prompts = [[(i * 7 + j) % 50 + 3 for j in range(10 + 3 * i)] for i in range(3)]
    caches = []
    for prompt in prompts:
        cache = make_prompt_cache(loaded.model)
        loaded.model(mx.array([prompt]), cache=cache)
        mx.eval([c.keys for c in cache])
        caches.append(cache)
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(mx, name)

        def async_eval(self, arrays):
            calls.append(len(arrays))
            mx.async_eval(arrays)

    monkeypatch.setattr(prefix_module, "mx", Counting())
    with reuse.together():
        for prompt, cache in zip(prompts[:2], caches):
            reuse.remember_tokens(prompt, cache)
        assert calls == []  # nothing started before the outermost ``together`` ends
    # 10 tokens: 2 full blocks and a partial one; 13 tokens: 3 and one; keys and values each
    assert calls == [2 * (3 + 4)]
    reuse.remember_tokens(prompts[2], caches[2])  # 16 tokens: 4 full blocks, alone
    assert calls == [14, 8]
    for prompt, cache in zip(prompts, caches):
        req = Request("r", prompt + [1], GREEDY, None, 8)
        reuse.attach(req)
        assert req.num_prefilled == len(prompt)
        for restored, kept in zip(req.cache, cache):
            assert mx.array_equal(restored.keys[..., : len(prompt), :], kept.keys[..., : len(prompt), :])
            assert mx.array_equal(restored.values[..., : len(prompt), :], kept.values[..., : len(prompt), :])
        reuse.forget(req)


def test_merged_hits_builds_what_mlx_lm_merge_builds():
    """Rows rebuilt from prefix-cache blocks (``HitCache``), cut back to one length as
    ``align_hits`` does, merge from their stackings into the caches ``BatchKVCache.merge``
    builds layer by layer: the same keys, values, offsets and padding, and the same after the
    next tokens go in. Rows of other lengths, or a row that is not a hit, are left to merge."""
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache, KVCache, trim_prompt_cache

    from mlxctl.engine.batch import HitCache, StackedRow, merged_hits

    def hit(n: int, seed: int) -> HitCache:
        keys = mx.random.normal((3, 1, 2, n, 4), key=mx.random.key(seed))
        values = mx.random.normal((3, 1, 2, n, 4), key=mx.random.key(seed + 100))
        layers = []
        for i in range(3):
            layer = KVCache()
            layer.keys, layer.values, layer.offset = keys[i], values[i], n
            layers.append(layer)
        return HitCache(layers, StackedRow(keys, values))

    rows = [hit(7, 1), hit(5, 2), hit(5, 3)]
    trim_prompt_cache(rows[0], 2)  # cut back to the group's least
    fast, slow = merged_hits(rows), [BatchKVCache.merge(list(layers)) for layers in zip(*rows)]
    assert fast is not None and len(fast) == len(slow) == 3
    new_k = mx.random.normal((3, 2, 3, 4), key=mx.random.key(7))
    new_v = mx.random.normal((3, 2, 3, 4), key=mx.random.key(8))
    for f, s in zip(fast, slow):
        assert f._idx == s._idx == 5
        assert f.offset.tolist() == s.offset.tolist() == [5, 5, 5]
        assert f.left_padding.tolist() == s.left_padding.tolist() == [0, 0, 0]
        for a, b in zip(f.keys_and_values(), s.keys_and_values()):
            assert mx.array_equal(a, b)
        for a, b in zip(f.update_and_fetch(new_k, new_v), s.update_and_fetch(new_k, new_v)):
            assert a.shape == (3, 2, 8, 4) and mx.array_equal(a, b)
    assert merged_hits([hit(7, 1), hit(5, 2)]) is None  # ragged: merged with padding, layer by layer
    assert merged_hits([hit(5, 1), list(hit(5, 2))]) is None  # a row that is no hit
    chunked = hit(5, 3)
    for layer in chunked:  # a row that ran part of its prompt after the hit
        layer.update_and_fetch(mx.zeros((1, 2, 2, 4)), mx.zeros((1, 2, 2, 4)))
    assert merged_hits([hit(7, 1), chunked]) is None  # its 7 tokens are more than its stacking holds


def test_a_group_of_equal_hits_merges_from_the_stackings_and_answers_the_same(monkeypatch):
    """Prompts opening with one system part, prefilled together after it was kept: every row
    holds a hit of one length, so the group's caches come from ``merged_hits`` (one
    concatenation a side), and the answers, logprobs included, are an uncached engine's, with
    tails of several lengths (right-padded and rolled into place)."""
    from mlxctl.engine import runner

    merged = []

    def spy(caches):
        out = real(caches)
        merged.append(out is not None)
        return out

    real = runner.merged_hits
    monkeypatch.setattr(runner, "merged_hits", spy)
    loaded = tiny_loaded()
    gate = StepGate(lambda: False)
    on = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4), fault_hook=gate)).start()
    off = engine_with(False)
    try:
        on.submit(SYSTEM + [40], GREEDY).collect()
        prompts = [SYSTEM + [50 + i] * (1 + 2 * i) for i in range(3)]  # tails of 1, 3 and 5: right-padded
        streams, done = _together(on, gate, prompts, EXACT, busy_prompt=(63, 62))
        assert [d.usage.cached_tokens for d in done] == [29, 29, 29]
        assert merged == [True]
        for got, prompt in zip(done, prompts):
            assert_same(got, off.submit(prompt, EXACT).collect())
    finally:
        gate.release()
        on.shutdown(), off.shutdown()


def test_a_hit_prefilled_alone_lets_its_stacking_go():
    """A request rebuilt from several blocks and prefilled alone (a chunk, or its whole tail)
    turns back into plain layers: the stacking its layers were views of would otherwise hold a
    second copy of the hit for as long as the request runs (it joins the batch with its cache)."""
    from mlxctl.engine.batch import HitCache

    loaded = tiny_loaded()
    on = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4))).start()
    try:
        on.submit(SYSTEM + [40], GREEDY).collect()
        seen = []
        real = on.runner.prefill

        def spy(req, n):
            seen.append(isinstance(req.cache, HitCache))
            out = real(req, n)
            seen.append(isinstance(req.cache, HitCache))
            return out

        on.runner.prefill = spy
        assert on.submit(SYSTEM + [50, 51], GREEDY).collect().usage.cached_tokens == 29
        assert seen == [True, False]  # rebuilt from blocks, then plain once it ran
    finally:
        on.shutdown()
