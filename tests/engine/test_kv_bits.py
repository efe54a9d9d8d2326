"""--kv-bits: running requests keep quantised KV, alone and batched, with prefix reuse and
speculation on top; and the memory budget that admits requests by their KV."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest
from mlx_lm.models.cache import QuantizedKVCache

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.kv.quantized import BatchQuantizedKV, QuantizedKV, make_cache
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.limits import with_context_cap
from mlxctl.engine.memory import KVBudget, MemoryLedger, KVFootprint
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import SchedulerConfig, admit
from mlxctl.engine.speculative import SpeculationConfig
from mlxctl.errors import BadInputError, ContextOverflowError, MemoryBusyError
from tests.engine.hybrid_configs import CONFIGS, VOCAB
from tests.engine.tiny import TinyModel, tiny_llama

GREEDY = SamplingParams(temperature=0, max_tokens=24)
rng = random.Random(3)
PROMPTS = [[rng.randrange(1, 250) for _ in range(n)] for n in (5, 41, 17, 90, 3, 64)]


def loaded(**kw) -> TinyModel:
    """head dimension 32: the smallest quantisation group divides it"""
    return TinyModel(model=tiny_llama(hidden=128, vocab=256), vocab_size=256, **kw)


def greedy(model, prompt: list[int], n: int, cache: list) -> list[int]:
    logits = model(mx.array([prompt]), cache=cache)[:, -1]
    out = []
    for _ in range(n):
        token = mx.argmax(logits, -1)
        out.append(token.item())
        logits = model(token[:, None], cache=cache)[:, -1]
    return out


@pytest.mark.parametrize("bits", [8, 4])
def test_one_request_decodes_what_mlx_lms_quantised_cache_decodes(bits):
    model = tiny_llama(hidden=128, vocab=256)
    for prompt in PROMPTS[:3]:
        theirs = greedy(model, prompt, 16, [QuantizedKVCache(32, bits) for _ in model.layers])
        ours = greedy(model, prompt, 16, make_cache(model, KVQuant(bits, 32)))
        assert ours == theirs


@pytest.mark.parametrize("bits", [8, 4])
def test_batched_quantised_kv_decodes_what_each_request_does_alone(bits):
    """Rows of several lengths (left padding), rows that finish early (filter, extract), prefix
    hits whose tails run together (right padding and its roll)."""
    config = EngineConfig(kv=KVQuant(bits, 32), prefix=PrefixConfig(block_size=16))
    lengths = [SamplingParams(temperature=0, max_tokens=n) for n in (24, 7, 30, 12, 24, 3)]
    with Engine(lambda: loaded(), config) as engine:
        alone = [engine.submit(p, s).collect().token_ids for p, s in zip(PROMPTS, lengths)]
        together = [engine.submit(p, s) for p, s in zip(PROMPTS, lengths)]
        assert [s.collect().token_ids for s in together] == alone
        hits = [engine.submit(p + [7, 8, 9], GREEDY) for p in PROMPTS]  # cached prefixes, tails batched
        extended = [s.collect() for s in hits]
        stats = engine.stats()
    with Engine(lambda: loaded(), config) as fresh:  # the same prompts, nothing cached
        cold = [fresh.submit(p + [7, 8, 9], GREEDY).collect().token_ids for p in PROMPTS]
    assert [r.token_ids for r in extended] == cold
    assert sum(r.usage.cached_tokens for r in extended) > 0
    assert stats["kv_bits"] == bits and stats["prefix_cache"]["bits"] == bits


def test_quantised_kv_is_smaller_by_what_the_formula_says():
    model = tiny_llama(hidden=128, vocab=256)  # float32 weights: 4-byte scales and biases
    plain = KVFootprint.of(model)
    for bits in (8, 4):
        kv = KVQuant(bits, 32)
        assert KVFootprint.of(model, kv).per_token == plain.per_token * kv.bytes_per_value(4) / 4


def test_the_prefix_cache_keeps_quantised_blocks_apart_from_plain_ones():
    from mlxctl.engine.prefix import PrefixReuse

    fingerprints = {PrefixReuse(loaded(), PrefixConfig(), kv).cache.fingerprint
                    for kv in (KVQuant(), KVQuant(8, 32), KVQuant(4, 32))}
    assert len(fingerprints) == 3
    with pytest.raises(BadInputError, match="--prefix-cache-bits 4 differs from --kv-bits 8"):
        PrefixReuse(loaded(), PrefixConfig(bits=4), KVQuant(8, 32))


def test_speculation_rolls_back_quantised_rows():
    spec = SpeculationConfig(mode="ngram", num_draft_tokens=4, max_rows=8, measured=False)
    repeat = [[11, 12, 13, 14, 15, 16] * 6, [21, 22, 23, 24] * 9, PROMPTS[1]]
    kv = KVQuant(8, 32)
    with Engine(lambda: loaded(), EngineConfig(kv=kv)) as plain:
        want = [plain.submit(p, GREEDY).collect().token_ids for p in repeat]
    with Engine(lambda: loaded(), EngineConfig(kv=kv, speculation=spec)) as engine:
        streams = [engine.submit(p, GREEDY) for p in repeat]
        assert [s.collect().token_ids for s in streams] == want
        assert engine.stats()["speculative"]["steps"] > 0


def test_a_sliding_window_model_quantises_its_full_attention_layers_only():
    from mlx_lm.utils import _get_classes

    config = dict(CONFIGS["gemma3_text"], head_dim=32, query_pre_attn_scalar=32)
    classes, args = _get_classes(config)
    model = classes(args.from_dict(config))
    mx.eval(model.parameters())
    kinds = {type(c).__name__ for c in make_cache(model, KVQuant(8, 32))}
    assert kinds == {"RotatingKVCache", "QuantizedKV"}
    tiny = TinyModel(model=model, vocab_size=VOCAB)
    prompts = [list(range(1, 30)), list(range(40, 45)), list(range(50, 70))]
    with Engine(lambda: tiny, EngineConfig(kv=KVQuant(8, 32))) as engine:
        alone = [engine.submit(p, GREEDY).collect().token_ids for p in prompts]
        streams = [engine.submit(p, GREEDY) for p in prompts]
        assert [s.collect().token_ids for s in streams] == alone


def test_a_group_size_that_does_not_divide_the_head_dimension_is_refused_at_load():
    engine = Engine(lambda: TinyModel(model=tiny_llama()), EngineConfig(kv=KVQuant(8, 32)))  # head dim 16
    with pytest.raises(BadInputError, match="does not divide this model's head dimension"):
        engine.start()


def test_batch_caches_merge_filter_and_extract_row_for_row():
    model = tiny_llama(hidden=128, vocab=256)
    caches = []
    for prompt in PROMPTS[:3]:
        cache = make_cache(model, KVQuant(8, 32))
        model(mx.array([prompt]), cache=cache)
        caches.append(cache[0])
    batch = BatchQuantizedKV.merge(caches)
    assert batch.size() == max(len(p) for p in PROMPTS[:3])
    batch.filter(mx.array([0, 2]))
    row = batch.extract(1)
    assert isinstance(row, QuantizedKV) and row.offset == len(PROMPTS[2])
    for got, want in zip(row.held(), caches[2].held()):
        assert all(mx.array_equal(a, b) for a, b in zip(got, want))


# -- the memory budget --------------------------------------------------------------------------

def budget_for(tokens: int, context: int = 4096) -> KVBudget:
    """A budget whose KV room is one sequence of ``tokens`` positions."""
    fp = KVFootprint(per_token=1000)
    ledger = MemoryLedger(fp.bytes_for(tokens) + 5000)
    ledger.join(1, 5000, lambda: None)
    return KVBudget(ledger, 1, {"weights": 5000}, fp, context)


def test_a_request_that_can_never_fit_is_refused_and_a_default_is_given_what_fits():
    budget = budget_for(512)
    assert budget.longest == 512
    assert budget.admit_alone(100, 4000, None) == 412  # no max_tokens asked: as many as fit
    assert budget.admit_alone(100, 300, "max_tokens") == 300
    with pytest.raises(ContextOverflowError, match="max_tokens is 500 .* at most 412 new tokens fit the memory"):
        budget.admit_alone(100, 500, "max_tokens")
    with pytest.raises(ContextOverflowError, match="at most 511 prompt tokens fit"):
        budget.admit_alone(600, 10, None)


def test_a_burst_beyond_the_budget_gets_503_with_retry_after():
    budget = budget_for(1024)
    budget.check_queue([], 1024, running=3)  # nothing queued: it waits for the running ones
    budget.check_queue([200], 200, running=0)  # two rows padded to 256: they fit
    with pytest.raises(MemoryBusyError) as refused:
        budget.check_queue([1000], 1000, running=0)
    assert refused.value.http_status == 503 and refused.value.headers["Retry-After"] == "1"


def test_the_queue_head_waits_for_room_and_nothing_overtakes_it():
    class Req:
        def __init__(self, reserve):
            self.reserve, self.id = reserve, str(reserve)

    from collections import deque

    budget = budget_for(1024)
    running = [Req(600)]
    waiting = deque([Req(900), Req(10)])
    assert admit(waiting, [], running, SchedulerConfig(), fits=budget.fits) == []  # 2 x 1024 > room
    assert [r.reserve for r in waiting] == [900, 10]
    assert [r.reserve for r in admit(waiting, [], [], SchedulerConfig(), fits=budget.fits)] == [900]


def test_the_engine_queues_by_memory_and_finishes_everything_it_admitted():
    model = tiny_llama(hidden=128, vocab=256)
    from mlxctl.engine.wired import model_bytes

    fp = KVFootprint.of(model)
    total = model_bytes(model) + 2 * fp.bytes_for(512)  # two rows of 512 positions
    params = SamplingParams(temperature=0, max_tokens=200, max_tokens_field="max_tokens")
    config = EngineConfig(memory_budget_bytes=total, prefix=PrefixConfig(enabled=False))
    with Engine(lambda: TinyModel(model=model, vocab_size=256), config) as engine:
        accepted, refused = [], 0
        for prompt in PROMPTS[:5]:
            try:
                accepted.append(engine.submit(prompt, params))
            except MemoryBusyError:
                refused += 1
        assert accepted and refused
        assert all(len(s.collect().token_ids) == 200 for s in accepted)
        memory = engine.stats()["memory"]
        assert memory["kv_reserved_bytes"] == 0 and memory["kv_budget_bytes"] == 2 * fp.bytes_for(512)
        assert len(engine.submit(PROMPTS[0], params).collect().token_ids) == 200  # still serving


def test_max_model_len_caps_the_context_and_never_raises_it():
    model = loaded(context_length=512)
    assert with_context_cap(model, 100).context_length == 100
    assert with_context_cap(model, 1000, at_most=True).context_length == 512
    with pytest.raises(BadInputError, match="--max-model-len 1000 is more than"):
        with_context_cap(model, 1000)
    with Engine(lambda: model, EngineConfig(max_model_len=64)) as engine:
        with pytest.raises(ContextOverflowError):
            engine.submit(PROMPTS[3], SamplingParams(max_tokens=10, max_tokens_field="max_tokens"))
        assert engine.model.context_length == 64


@pytest.mark.parametrize("bits", [8, 4])
def test_requests_joining_a_running_batch_decode_what_they_do_alone(bits):
    """Each later request joins rows already decoding, shorter or longer than it (``extend``)."""
    from mlxctl.engine.streams import gather_events

    params = SamplingParams(temperature=0, max_tokens=40)
    order = [PROMPTS[4], PROMPTS[0], PROMPTS[3], PROMPTS[5]]  # 3, 5, 90, 64 tokens: the third is the longest
    with Engine(lambda: loaded(), EngineConfig(kv=KVQuant(bits, 32))) as engine:
        alone = [engine.submit(p, params).collect().token_ids for p in order]
        streams, firsts = [], []
        for prompt in order:
            if streams:
                firsts.append(next(iter(streams[-1])))  # the one before is decoding
            streams.append(engine.submit(prompt, params))
        heads = firsts + [None]
        got = [gather_events(([head] if head else []) + list(s)).token_ids for head, s in zip(heads, streams)]
        assert got == alone


@pytest.mark.parametrize("bits", [8, 4])
def test_where_attention_cannot_read_quantised_kv_it_gets_it_dequantised(bits):
    """MLX's CUDA backend (0.32) has no quantised matmul for attention's shapes: the cache stays
    quantised and hands attention dequantised arrays; the same numbers up to rounding."""
    model = tiny_llama(hidden=128, vocab=256)
    fallback = KVQuant(bits, 32, dequantize_attention=True)
    cache = make_cache(model, fallback)
    assert not hasattr(cache[0], "bits")  # mlx-lm's attention takes its plain path
    for prompt in PROMPTS[:3]:
        quantised = greedy(model, prompt, 16, make_cache(model, KVQuant(bits, 32)))
        assert greedy(model, prompt, 16, make_cache(model, fallback)) == quantised
    with Engine(lambda: loaded(), EngineConfig(kv=fallback)) as engine:
        alone = [engine.submit(p, GREEDY).collect().token_ids for p in PROMPTS]
        together = [engine.submit(p, GREEDY) for p in PROMPTS]
        assert [s.collect().token_ids for s in together] == alone
        assert engine.stats()["memory"] is None and engine.batch.nbytes() == 0


def test_the_engine_falls_back_to_dequantised_attention_where_mlx_has_no_kernel(monkeypatch, caplog):
    """The CUDA backend's missing kernel cannot run here: its error is raised in its place."""
    import mlx_lm.models.base as base

    def no_kernel(*args, **kwargs):
        raise ValueError("[quantized_matmul] No implementation for problem shape")

    monkeypatch.setattr(base.mx, "quantized_matmul", no_kernel)
    with Engine(lambda: loaded(), EngineConfig(kv=KVQuant(8, 32))) as engine:
        assert engine.runner.kv.dequantize_attention
        assert len(engine.submit(PROMPTS[0], GREEDY).collect().token_ids) == GREEDY.max_tokens
    assert "dequantised for attention" in caplog.text
