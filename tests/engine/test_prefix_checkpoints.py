"""Checkpoints in the prefix cache's pool, with plain payloads: no model, no MLX."""

from __future__ import annotations

from tests.engine.test_prefix_cache import Payload, maker

from mlxctl.engine.kv.prefix_cache import PrefixCache

TOKENS = list(range(1, 12))  # 2 full blocks of 4 and 3 tokens past them


def state(tokens, nbytes=100):
    return lambda start: Payload(nbytes, "", tuple(tokens))


def test_the_deepest_checkpoint_a_prompt_extends_is_found_with_its_blocks():
    cache = PrefixCache(block_size=4, max_bytes=10_000)
    for end in (3, 6, 11):
        cache.insert_checkpoint(TOKENS[:end], maker(TOKENS), state(TOKENS[:end]))
    hit = cache.lookup_checkpoint(TOKENS + [50])
    assert hit.num_tokens == 11 and len(hit.blocks) == 2 and hit.checkpoint.payload.tokens == tuple(TOKENS)
    cache.release(hit.held)
    hit = cache.lookup_checkpoint(TOKENS[:10])  # the 11-token one is past the prompt: the 6-token one
    assert hit.num_tokens == 6 and len(hit.blocks) == 1
    cache.release(hit.held)
    assert cache.lookup_checkpoint([9] + TOKENS).num_tokens == 0
    assert cache.stats()["checkpoints"] == 3 and cache.stats()["checkpoint_bytes"] == 300


def test_a_checkpoint_is_evicted_before_the_blocks_it_hangs_off():
    cache = PrefixCache(block_size=4, max_bytes=10_000)
    cache.insert_checkpoint(TOKENS, maker(TOKENS), state(TOKENS))
    cache.resize(cache.bytes - 1)
    stats = cache.stats()
    assert stats["checkpoints"] == 0 and stats["blocks"] == 2 and stats["evictions"] == 1
    assert cache.lookup_checkpoint(TOKENS).num_tokens == 0  # blocks alone serve nothing


def test_a_held_checkpoint_is_not_evicted_and_other_fingerprints_are_not_served():
    cache = PrefixCache(block_size=4, max_bytes=10_000)
    cache.insert_checkpoint(TOKENS, maker(TOKENS), state(TOKENS), fingerprint="a")
    assert cache.lookup_checkpoint(TOKENS, fingerprint="b").num_tokens == 0
    hit = cache.lookup_checkpoint(TOKENS, fingerprint="a")
    cache.resize(0)
    assert cache.stats()["checkpoints"] == 1  # referenced: kept over budget
    cache.release(hit.held)
    assert cache.stats()["checkpoints"] == 0 and cache.bytes == 0


def test_a_checkpoint_the_budget_cannot_keep_is_not_returned():
    cache = PrefixCache(block_size=4, max_bytes=50)
    assert cache.insert_checkpoint(TOKENS, maker(TOKENS), state(TOKENS, nbytes=1000)) is None
    assert cache.lookup_checkpoint(TOKENS).num_tokens == 0
