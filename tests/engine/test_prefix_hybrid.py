"""Models whose caches cannot be cut at a block boundary (sliding windows, recurrent and
linear-attention layers, hybrids of them with full attention) are served from checkpoints: the
greedy outputs and their logprobs with the cache on equal those with it off, request by
request, alone and batched, in memory and from the disk tier after a restart; ``cached_tokens``
says what was reused.

Tiny random models of real mlx-lm architectures (``hybrid_configs.py``): random weights make
near-ties common, so an inexact state would show as a different greedy token soon."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix import PrefixReuse
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.request import Request
from mlxctl.engine.sampling import SamplingParams
from mlxctl.models.dummy import build_model
from tests.engine.hybrid_configs import CONFIGS, VOCAB
from tests.engine.tiny import TinyModel, assert_same, tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, logprobs=True)
END = 99  # the tiny models' end-of-turn token
SYSTEM = [(7 * i + 3) % 97 + 1 for i in range(21)]  # 5 full blocks of 4 and one token: longer than the windows
CHAT = SYSTEM + [END, 5, 6, 7, 8, 9, 10, 11, END, 3, 4]  # two turn ends inside the prompt
CACHE_KINDS = {"gemma3_text": {"RotatingKVCache", "KVCache"}, "gpt_oss": {"RotatingKVCache", "KVCache"},
               "falcon_h1": {"CacheList"}, "mamba": {"ArraysCache"}, "mamba2": {"ArraysCache"}}


def assert_all_same(on: list, off: list) -> None:
    """The same greedy tokens and their logprobs, request by request (logprobs notice a state
    that is slightly off where the greedy tokens may not)."""
    assert len(on) == len(off)
    for a, b in zip(on, off):
        assert_same(a, b)


def loaded_model(arch: str) -> TinyModel:
    model = build_model(CONFIGS[arch], seed=0)
    mx.eval(model.parameters())
    return TinyModel(model=model, name=f"tiny-{arch}", config=dict(CONFIGS[arch]), vocab_size=VOCAB,
                     eos_token_ids={END})


def engine(loaded: TinyModel, **prefix) -> Engine:
    return Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4, **prefix))).start()


def conversation(eng: Engine) -> list:
    """Alone: a prompt, the same again, one extending it, an unrelated one, one with turn ends,
    the next turn of the third (its prompt + answer + more); then all six at once (batched)."""
    prompts = [SYSTEM, SYSTEM, SYSTEM + [40, 41, 42, 43, 44], [9] + SYSTEM, CHAT]
    done = [eng.submit(p, GREEDY).collect() for p in prompts]
    prompts.append(prompts[2] + list(done[2].token_ids) + [50, 51, 52])
    done.append(eng.submit(prompts[-1], GREEDY).collect())
    streams = [eng.submit(p, GREEDY) for p in prompts]
    return done + [s.collect() for s in streams]


def run(loaded: TinyModel, **prefix) -> tuple[list, dict]:
    eng = engine(loaded, **prefix)
    try:
        return conversation(eng), eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_the_model_really_has_caches_that_cannot_be_cut(arch):
    loaded = loaded_model(arch)
    cache = make_prompt_cache(loaded.model)
    loaded.model(mx.array([SYSTEM]), cache=cache)
    kinds = {type(c).__name__ for c in cache}
    assert kinds - {"KVCache"}, kinds
    assert kinds >= CACHE_KINDS.get(arch, {"ArraysCache"})
    assert not all(c.is_trimmable() for c in cache)  # past the window / a recurrent state


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_checkpoints_serve_exactly_what_the_cache_off_computes(arch):
    loaded = loaded_model(arch)
    on, stats = run(loaded)
    off, _ = run(loaded, enabled=False)
    assert_all_same(on, off)
    # alone: nothing; the same prompt up to its last token; the checkpoint one token before the
    # end of the first prompt; nothing for another start; the first prompt's checkpoint again;
    # the third prompt's answer as generated (26 prompt + 8 answer tokens).
    assert [d.usage.cached_tokens for d in on[:6]] == [0, 20, 20, 0, 20, 34]
    assert all(d.usage.cached_tokens > 0 for d in on[6:])  # batched: every one from a checkpoint
    assert stats["mode"] == "checkpoints" and stats["reason"] is None
    assert set(stats["cache_layers"]) - {"KVCache"}
    assert stats["checkpoints"] > 0 and 0 < stats["checkpoint_bytes"] <= stats["bytes"]


@pytest.mark.parametrize("arch", ["gemma3_text", "qwen3_next", "mamba", "falcon_h1"])
def test_checkpoints_survive_a_restart_through_the_disk_tier(arch, tmp_path):
    loaded = loaded_model(arch)
    first, _ = run(loaded, cache_dir=str(tmp_path / "kv"))
    eng = engine(loaded, cache_dir=str(tmp_path / "kv"))  # a new process would find the same files
    try:
        again = eng.submit(CHAT + [60, 61], GREEDY).collect()
        stats = eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()
    off, _ = run(loaded, enabled=False)
    assert stats["promoted_blocks"] > 0 and stats["disk_hits"] > 0
    assert again.usage.cached_tokens == len(CHAT) - 1  # the checkpoint one token before the end of CHAT
    off_eng = engine(loaded, enabled=False)
    try:
        assert_same(again, off_eng.submit(CHAT + [60, 61], GREEDY).collect())
    finally:
        off_eng.shutdown()
    assert_all_same(first, off)


def test_turn_ends_in_the_prompt_get_checkpoints_a_branch_can_start_from():
    """A conversation that branches after its second message starts from the checkpoint
    taken after that message's end-of-turn token, not from scratch."""
    loaded = loaded_model("qwen3_next")
    eng = engine(loaded)
    try:
        eng.submit(CHAT, GREEDY).collect()
        branch = SYSTEM + [END, 5, 6, 7, 8, 9, 10, 11, END, 70, 71, 72]
        hit = eng.submit(branch, GREEDY).collect()
    finally:
        eng.shutdown()
    assert hit.usage.cached_tokens == len(SYSTEM) + 9  # after the second END


def test_a_tiny_budget_evicts_checkpoints_and_stays_exact():
    loaded = loaded_model("gemma3_text")
    on, stats = run(loaded, max_bytes=60_000)
    off, _ = run(loaded, enabled=False)
    assert_all_same(on, off)
    assert stats["evictions"] > 0 and stats["bytes"] <= stats["max_bytes"]


def test_reuse_glue_never_trims_a_layer():
    """Below the engine: a prompt that diverges inside a checkpoint's tokens does not get it."""
    loaded = loaded_model("gemma3_text")
    reuse = PrefixReuse(loaded, PrefixConfig(block_size=4))
    cache = make_prompt_cache(loaded.model)
    loaded.model(mx.array([SYSTEM]), cache=cache)
    reuse.checkpoint(SYSTEM, cache)
    for prompt, want in ((SYSTEM + [5], 21), (SYSTEM[:-1] + [50, 5], 0), (SYSTEM[:18] + [5], 0)):
        req = Request("r", prompt, GREEDY, None, 8)
        reuse.attach(req)
        assert req.num_prefilled == want == req.cached_tokens
        reuse.forget(req)


def test_a_plain_kv_model_reports_block_mode():
    eng = engine(tiny_loaded())
    try:
        for _ in range(2):
            eng.submit(SYSTEM, GREEDY).collect()
        stats = eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()
    assert stats["enabled"] is True and stats["mode"] == "blocks" and stats["reason"] is None
    assert stats["hit_tokens"] == 20 and stats["checkpoints"] == 0


def test_a_stream_knows_its_cached_tokens_by_its_first_event():
    """What Anthropic's message_start reports, before the finish event's usage exists."""
    eng = engine(tiny_loaded())
    try:
        eng.submit(SYSTEM, GREEDY).collect()
        stream = eng.submit(SYSTEM + [5], GREEDY)
        first = next(iter(stream))
        assert stream.finish is None or first is stream.finish
        assert stream.cached_tokens == 21  # five blocks of 4 and, partly, the block after them
        done = stream.collect()
    finally:
        eng.shutdown()
    assert done.usage.cached_tokens == stream.cached_tokens
