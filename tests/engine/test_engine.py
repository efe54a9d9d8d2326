"""The engine on a tiny random-weight llama: correctness against mlx-lm, batching invisibility,
chunked prefill, aborts, stop conditions and errors travelling through streams."""

from __future__ import annotations

import asyncio
import threading

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason, TokenEvent
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import SchedulerConfig
from mlxctl.errors import BadInputError, EngineError
from tests.engine.tiny import tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
PROMPTS = [[1, 2, 3], [5] * 17, [7, 8], list(range(40)), [9, 10, 11, 12], [3] * 5, [60, 61], list(range(20, 33))]


def make_engine(**sched) -> Engine:
    loaded = tiny_loaded()
    cfg = EngineConfig(scheduler=SchedulerConfig(**sched)) if sched else EngineConfig()
    return Engine(lambda: loaded, cfg).start()


@pytest.fixture
def engine():
    eng = make_engine()
    yield eng
    eng.shutdown()


def reference_greedy(model, prompt, n):
    cache = make_prompt_cache(model)
    out = []
    for tok, _ in generate_step(mx.array(prompt), model, max_tokens=n, prompt_cache=cache):
        out.append(int(tok))
    return out


def test_single_request_matches_mlx_lm_generate_step(engine):
    got = engine.submit(PROMPTS[3], GREEDY).collect()
    assert list(got.token_ids) == reference_greedy(engine.model.model, PROMPTS[3], 12)
    assert got.finish_reason is FinishReason.LENGTH
    assert got.usage.prompt_tokens == 40 and got.usage.completion_tokens == 12


def test_eight_concurrent_requests_produce_what_each_produces_alone(engine):
    alone = [engine.submit(p, GREEDY).collect().token_ids for p in PROMPTS]
    streams = [engine.submit(p, GREEDY) for p in PROMPTS]
    together = [s.collect().token_ids for s in streams]
    assert together == alone


SHARED = [(i * 7) % 50 + 3 for i in range(130)]  # over two prefix-cache blocks (64 tokens each)


def _grouped_while_busy(engine, prompts):
    """Submit ``prompts`` while another request decodes (so they queue up for one step); the
    token ids, and per prefill_group call the prompt tokens each member already held."""
    calls = []
    real = engine.runner.prefill_group
    engine.runner.prefill_group = lambda reqs: calls.append([r.num_prefilled for r in reqs]) or real(reqs)
    try:
        busy = engine.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=400))
        next(iter(busy))
        streams = [engine.submit(p, GREEDY) for p in prompts]
        got = [s.collect().token_ids for s in streams]
        busy.abort()
    finally:
        engine.runner.prefill_group = real
    return got, calls


def test_prompts_ending_after_prefix_cache_hits_are_prefilled_as_one_batch():
    """Tails of different lengths after hits of different lengths (and a fresh prompt among
    them): one padded pass, the same tokens as each prompt alone without any cache."""
    prompts = [SHARED + [5], SHARED + [9] * 20, SHARED[:70] + [11, 12, 13], SHARED + list(range(3, 40)), [4, 5, 6]]
    loaded = tiny_loaded()
    uncached = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(enabled=False))).start()
    try:
        expected = [uncached.submit(p, GREEDY).collect().token_ids for p in prompts]
    finally:
        uncached.shutdown()
    cached = Engine(lambda: loaded).start()
    try:
        cached.submit(SHARED + [1, 1], GREEDY).collect()  # leaves SHARED's blocks in the prefix cache
        got, calls = _grouped_while_busy(cached, prompts)
    finally:
        cached.shutdown()
    assert got == expected
    hits = [held for call in calls for held in call if held]
    assert any(len(call) >= 2 and any(call) for call in calls), calls
    assert len(hits) >= 3, calls


def test_a_long_prompt_end_is_not_padded_onto_many_short_ones(engine):
    engine.submit(SHARED + [1, 1], GREEDY).collect()
    prompts = [SHARED + [5], SHARED + [6], SHARED + [7], list(range(3, 63)) * 5]  # three 1-token tails, one of 300
    got, calls = _grouped_while_busy(engine, prompts)
    assert [len(call) for call in calls] == [3], calls  # the 300-token prompt went alone
    assert got[3] == engine.submit(prompts[3], GREEDY).collect().token_ids


def test_requests_join_and_leave_at_any_step(engine):
    """Different max_tokens make rows leave mid-batch while later submissions join."""
    alone = [engine.submit(p, SamplingParams(temperature=0.0, max_tokens=3 + 2 * i)).collect().token_ids
             for i, p in enumerate(PROMPTS)]
    results: dict[int, tuple] = {}

    def worker(i, p):
        results[i] = engine.submit(p, SamplingParams(temperature=0.0, max_tokens=3 + 2 * i)).collect().token_ids

    threads = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(PROMPTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(len(PROMPTS))] == alone


def test_chunked_prefill_gives_the_same_tokens_and_interleaves_decoding():
    eng = make_engine(prefill_chunk=8)
    try:
        long_prompt = list(range(1, 60)) * 3
        whole = reference_greedy(eng.model.model, long_prompt, 6)
        short = eng.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=40))
        first = next(iter(short))  # the short request is decoding
        assert isinstance(first, TokenEvent)
        long = eng.submit(long_prompt, SamplingParams(temperature=0.0, max_tokens=6))
        assert list(long.collect().token_ids) == whole
        rest = short.collect()
        # the short request kept decoding while the 177-token prompt went through 8-token chunks
        assert rest.finish_reason is FinishReason.LENGTH
    finally:
        eng.shutdown()


def test_abort_ends_stream_and_frees_the_batch(engine):
    stream = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=400))
    events = iter(stream)
    next(events)
    stream.abort()
    for _ in events:
        pass
    assert stream.finish.reason is FinishReason.ABORT
    engine.submit([4], SamplingParams(temperature=0.0, max_tokens=1)).collect()  # one more step
    assert engine.stats()["batch_size"] == 0 and engine.stats()["kv_bytes"] == 0


def test_stop_token_id_and_stop_string(engine):
    free = engine.submit([1, 2, 3], GREEDY).collect()
    stop_id = free.token_ids[4]
    got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=(stop_id,))).collect()
    assert got.finish_reason is FinishReason.STOP
    assert got.token_ids[-1] == stop_id and len(got.token_ids) == free.token_ids.index(stop_id) + 1
    stop_text = free.text[5:7]
    got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=12, stop=(stop_text,))).collect()
    assert got.finish_reason is FinishReason.STOP
    assert got.text == free.text[: free.text.index(stop_text)]


def test_eos_stops_unless_ignored():
    loaded = tiny_loaded()
    free = Engine(lambda: loaded).start()
    try:
        ref = free.submit([1, 2, 3], GREEDY).collect()
    finally:
        free.shutdown()
    eos = ref.token_ids[3]
    loaded.eos_token_ids = {eos}
    eng = Engine(lambda: loaded).start()
    try:
        got = eng.submit([1, 2, 3], GREEDY).collect()
        assert got.finish_reason is FinishReason.STOP
        assert got.token_ids == ref.token_ids[: ref.token_ids.index(eos) + 1]
        params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
        assert eng.submit([1, 2, 3], params).collect().token_ids == ref.token_ids
    finally:
        eng.shutdown()


def test_prompt_over_the_context_is_refused_not_truncated(engine):
    with pytest.raises(BadInputError, match="512"):
        engine.submit(list(range(600)), GREEDY)
    with pytest.raises(BadInputError, match="empty"):
        engine.submit([], GREEDY)


def test_max_tokens_is_capped_by_the_context(engine):
    got = engine.submit(list(range(1, 60)) * 8 + [1] * 20, SamplingParams(temperature=0.0, max_tokens=None)).collect()
    assert got.usage.prompt_tokens + got.usage.completion_tokens == 512
    assert got.finish_reason is FinishReason.LENGTH
    default = engine.submit([1] * 500, SamplingParams(temperature=0.0, max_tokens=100)).collect()  # no field: a default
    assert default.usage.completion_tokens == 12 and default.finish_reason is FinishReason.LENGTH


def test_a_requested_max_tokens_over_the_context_is_refused(engine):
    params = SamplingParams(temperature=0.0, max_tokens=13, max_tokens_field="max_tokens")
    with pytest.raises(BadInputError, match="max_tokens is 13 but the prompt has 500 tokens and the model's "
                                            "context is 512: at most 12 new tokens fit"):
        engine.submit([1] * 500, params)
    fits = engine.submit([1] * 500, SamplingParams(temperature=0.0, max_tokens=12, max_tokens_field="max_tokens"))
    assert fits.collect().usage.completion_tokens == 12


class Exploding:
    """Wraps a model; raises when token 63 is fed in, as a failing step would."""

    def __init__(self, model):
        self.model = model
        self.layers = model.layers

    def parameters(self):
        return self.model.parameters()

    def __call__(self, tokens, cache=None):
        if 63 in tokens.tolist()[0]:
            raise RuntimeError("boom")
        return self.model(tokens, cache=cache)


def test_errors_travel_through_the_stream_and_the_engine_survives():
    loaded = tiny_loaded()
    loaded.model = Exploding(loaded.model)
    eng = Engine(lambda: loaded).start()
    try:
        with pytest.raises(EngineError, match="boom"):
            eng.submit([1, 63], GREEDY).collect()
        assert len(eng.submit([1, 2], GREEDY).collect().token_ids) == 12
    finally:
        eng.shutdown()


def test_load_failure_is_raised_by_start():
    def load():
        raise BadInputError("no such model")

    with pytest.raises(BadInputError, match="no such model"):
        Engine(load).start()


def test_async_stream(engine):
    async def main():
        stream = engine.submit([1, 2, 3], GREEDY, loop=asyncio.get_running_loop())
        return await stream.collect_async()

    got = asyncio.run(main())
    assert list(got.token_ids) == reference_greedy(engine.model.model, [1, 2, 3], 12)


def test_seeded_sampling_is_reproducible_and_batch_independent(engine):
    params = SamplingParams(temperature=1.0, seed=1234, max_tokens=10)
    alone = engine.submit([1, 2, 3], params).collect().token_ids
    others = [engine.submit(p, SamplingParams(temperature=1.0, max_tokens=10)) for p in PROMPTS[:4]]
    again = engine.submit([1, 2, 3], params).collect().token_ids
    for s in others:
        s.collect()
    assert again == alone


def test_logprobs_are_reported_per_token(engine):
    got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=4, logprobs=True, top_logprobs=3)).collect()
    assert len(got.logprobs) == 4
    for tok, lp in zip(got.token_ids, got.logprobs):
        assert lp.token_id == tok and lp.logprob <= 0
        assert len(lp.top) == 3 and lp.top[0].token_id == tok  # greedy picks the most likely


def test_finish_event_names_the_stop_string(engine):
    free = engine.submit([1, 2, 3], GREEDY).collect()
    stop_text = free.text[5:7]
    got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=12, stop=("zzzz", stop_text))).collect()
    assert got.stop_string == stop_text
    assert engine.submit([1, 2, 3], GREEDY).collect().stop_string is None


def test_fresh_prompts_submitted_together_are_prefilled_as_one_batch(engine):
    alone = [engine.submit(p, GREEDY).collect().token_ids for p in PROMPTS[:4]]
    calls = []
    real = engine.runner.prefill_group
    engine.runner.prefill_group = lambda reqs: calls.append(len(reqs)) or real(reqs)
    try:
        busy = engine.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=300))
        next(iter(busy))  # the engine is stepping: the next submissions queue up together
        streams = [engine.submit(p, GREEDY) for p in PROMPTS[:4]]
        together = [s.collect().token_ids for s in streams]
        busy.abort()
    finally:
        engine.runner.prefill_group = real
    assert together == alone
    assert calls and max(calls) >= 2
