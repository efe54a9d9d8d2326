"""The in-memory prefix cache with plain payloads: no model, no MLX."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from mlxctl.engine.kv.block import Block, PrefixHit, chain_hash, payload_nbytes
from mlxctl.engine.kv.prefix_cache import PrefixCache


@dataclass(frozen=True)
class Payload:
    nbytes: int
    fingerprint: str = ""
    tokens: tuple[int, ...] = ()  # the tokens it was made for, to check hits against


def maker(tokens, fingerprint="", nbytes=10, calls=None):
    """A payload_for that records the (start, end) ranges it was asked for."""

    def payload_for(start, end):
        if calls is not None:
            calls.append((start, end))
        return Payload(nbytes, fingerprint, tuple(tokens[start:end]))

    return payload_for


def put(cache, tokens, nbytes=10, calls=None):
    return cache.insert(tokens, maker(tokens, cache.fingerprint, nbytes, calls))


# -- hashing and blocks -------------------------------------------------------------------


def test_chain_hash_depends_on_parent_fingerprint_and_tokens():
    base = chain_hash(None, [1, 2, 3], "m")
    assert base == chain_hash(None, (1, 2, 3), "m")
    assert len(base) == 32
    variants = [chain_hash(b"\0" * 32, [1, 2, 3], "m"), chain_hash(None, [1, 2, 3], "n"), chain_hash(None, [1, 2, 4], "m")]
    assert base not in variants and len(set(variants)) == 3


def test_chain_hash_encoding_is_unambiguous():
    assert chain_hash(None, [], "a") != chain_hash(None, [], "a\x00")
    assert chain_hash(None, [256], "") != chain_hash(None, [0, 1], "")
    with pytest.raises(ValueError):
        chain_hash(None, [1 << 63], "")


def test_block_nbytes_comes_from_payload_including_per_layer_lists():
    assert Block(0, b"h", None, (1,), Payload(7)).nbytes == 7
    assert payload_nbytes([(Payload(1), Payload(2)), (Payload(3), Payload(4))]) == 10
    assert payload_nbytes({"k": Payload(5)}) == 5
    with pytest.raises(TypeError):
        payload_nbytes(object())


@pytest.mark.parametrize("kwargs", [{"block_size": 0}, {"block_size": 2.0}, {"block_size": True}, {"max_bytes": -1}, {"max_bytes": None}])
def test_bad_settings_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        PrefixCache(**kwargs)


def test_module_imports_no_mlx():
    code = "import sys, mlxctl.engine.kv.prefix_cache; print(any(m == 'mlx' or m.startswith('mlx.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- lookup / insert ----------------------------------------------------------------------


def test_hit_after_insert_counts_full_blocks_only():
    cache = PrefixCache(block_size=4)
    tokens = list(range(10))  # two full blocks and a partial one
    assert not cache.lookup(tokens)
    inserted = put(cache, tokens)
    assert len(inserted) == 2 and cache.bytes == 20
    hit = cache.lookup(tokens)
    assert hit.num_tokens == 8 and hit.blocks == tuple(inserted)
    assert [b.ref_count for b in hit.blocks] == [1, 1]
    partial = cache.lookup(tokens[:7])  # the first block, then 3 tokens of the second
    assert partial.num_tokens == 7 and partial.partial is inserted[1] and partial.partial_tokens == 3
    assert partial.held == (inserted[0], inserted[1]) and inserted[1].ref_count == 2
    stats = cache.stats()
    assert stats["queries"] == 3 and stats["hits"] == 2 and stats["hit_tokens"] == 15
    assert stats["partial_hits"] == 1


def test_a_partial_hit_takes_at_least_a_quarter_block_of_the_same_fingerprint():
    cache = PrefixCache(block_size=8)
    put(cache, list(range(16)))
    cache.insert([100] * 8, maker([100] * 8, "tenant-b"), fingerprint="tenant-b")
    assert cache.min_partial == 2
    assert cache.lookup([0]).num_tokens == 0 and cache.lookup([0, 1]).num_tokens == 2
    assert cache.lookup(list(range(8)) + [8, 9, 99]).num_tokens == 10
    assert cache.lookup(list(range(8)) + [8]).num_tokens == 8  # one token of the next block: below the minimum
    assert cache.lookup([100, 100, 100]).num_tokens == 0  # another fingerprint's root block never serves
    assert cache.lookup([100, 100, 100], fingerprint="tenant-b").num_tokens == 3


def test_the_last_partial_block_is_kept_with_tail_and_serves_a_repeat():
    cache = PrefixCache(block_size=8)
    tokens = list(range(13))
    chain = cache.insert(tokens, lambda a, b: Payload(b - a, "", tuple(tokens[a:b])), tail=True)
    assert [len(b.tokens) for b in chain] == [8, 5]
    assert cache.lookup(tokens[:12]).num_tokens == 12 and cache.lookup(tokens).num_tokens == 13
    short = cache.insert([50] * 9, lambda a, b: Payload(b - a, "", ()), tail=True)
    assert [len(b.tokens) for b in short] == [8]  # a 1-token tail is under the quarter-block minimum


def test_lookup_of_a_diverging_prompt_stops_at_the_divergence():
    cache = PrefixCache(block_size=2)
    put(cache, [1, 2, 3, 4, 5, 6])
    hit = cache.lookup([1, 2, 3, 9, 5, 6])  # (3, 4) shares its first token: a partial hit of 1
    assert hit.num_tokens == 3 and hit.blocks[0].tokens == (1, 2) and hit.partial.tokens == (3, 4)
    assert cache.lookup([1, 2, 9, 9, 5, 6]).num_tokens == 2


def test_shared_prefix_between_two_requests_shares_blocks():
    cache = PrefixCache(block_size=2)
    system = [7, 7, 8, 8]
    first = put(cache, system + [1, 1])
    calls = []
    second = put(cache, system + [2, 2], calls=calls)
    assert calls == [(4, 6)]  # only the new block is computed
    assert second[:2] == first[:2] and second[2] is not first[2]
    a, b = cache.lookup(system + [1, 1]), cache.lookup(system + [2, 2, 3])
    assert a.blocks[0] is b.blocks[0] and a.blocks[0].ref_count == 2
    assert cache.stats()["inserted_blocks"] == 4


def test_release_returns_blocks_to_the_free_list_and_they_still_hit():
    cache = PrefixCache(block_size=2)
    put(cache, [1, 2, 3, 4])
    hit = cache.lookup([1, 2, 3, 4])
    assert cache.free_list() == () and cache.stats()["referenced_blocks"] == 2
    cache.release(hit.blocks)
    assert {b.ref_count for b in hit.blocks} == {0} and len(cache.free_list()) == 2
    assert cache.lookup([1, 2, 3, 4]).blocks == hit.blocks


def test_release_rejects_blocks_not_held():
    cache = PrefixCache(block_size=2)
    (block,) = put(cache, [1, 2])
    with pytest.raises(ValueError):
        cache.release([block])
    hit = cache.lookup([1, 2])
    with pytest.raises(ValueError):
        cache.release([block, block])
    assert block.ref_count == 1  # a rejected release changes nothing
    with pytest.raises(ValueError):
        PrefixCache(block_size=2).release(hit.blocks)


def test_different_fingerprints_never_share_blocks():
    a, b = PrefixCache(block_size=2, fingerprint="model-a"), PrefixCache(block_size=2, fingerprint="model-b")
    (block_a,), (block_b,) = put(a, [1, 2]), put(b, [1, 2])
    assert block_a.hash != block_b.hash
    put(a, [1, 2, 3, 4])
    assert not a.lookup([1, 2], fingerprint="model-b")
    assert a.lookup([1, 2], fingerprint="model-a").num_tokens == 2


# -- budget and eviction ------------------------------------------------------------------


def test_lru_order_is_respected():
    cache = PrefixCache(block_size=2, max_bytes=40)  # four 10-byte blocks
    a, b = [1, 1, 2, 2], [3, 3, 4, 4]
    put(cache, a)
    put(cache, b)
    cache.release(cache.lookup(a).blocks)  # a is now more recent than b
    put(cache, [5, 5, 6, 6])
    assert cache.lookup(a).num_tokens == 4 and not cache.lookup(b)
    assert cache.stats()["evictions"] == 2 and cache.bytes == 40


def test_reinserting_touches_existing_blocks():
    cache = PrefixCache(block_size=2, max_bytes=40)
    a, b = [1, 1, 2, 2], [3, 3, 4, 4]
    put(cache, a)
    put(cache, b)
    put(cache, a)
    put(cache, [5, 5, 6, 6])
    assert cache.lookup(a).num_tokens == 4 and not cache.lookup(b)


def test_eviction_takes_leaves_first_so_a_shared_root_survives():
    evicted = []
    cache = PrefixCache(block_size=2, max_bytes=30, on_evict=evicted.append)
    put(cache, [9, 9, 1, 1])
    put(cache, [9, 9, 2, 2])
    put(cache, [9, 9, 3, 3])  # four blocks: the root [9, 9] and three leaves
    assert [b.tokens for b in evicted] == [(1, 1)]
    assert cache.lookup([9, 9]).num_tokens == 2
    assert all(cache.lookup([9, 9, t, t]).num_tokens == 4 for t in (2, 3))


def test_an_evicted_block_takes_nothing_unreachable_with_it():
    cache = PrefixCache(block_size=1, max_bytes=20)
    inserted = put(cache, [1, 2, 3, 4])  # a chain longer than the budget keeps its head
    assert [b.tokens for b in inserted] == [(1,), (2,)]
    assert len(cache) == 2 and all(b.parent is None or b.parent in cache for b in cache)


def test_referenced_blocks_are_never_evicted():
    cache = PrefixCache(block_size=2, max_bytes=20)
    put(cache, [1, 1, 2, 2])
    held = cache.lookup([1, 1, 2, 2])
    assert put(cache, [3, 3, 4, 4]) == []  # the newcomers go, the held blocks stay
    assert cache.lookup([1, 1, 2, 2]).blocks == held.blocks and not cache.lookup([3, 3])
    assert [b.ref_count for b in held.blocks] == [2, 2] and cache.bytes == 20


def test_over_budget_is_reported_while_references_pin_memory():
    cache = PrefixCache(block_size=2, max_bytes=40)
    put(cache, [1, 1, 2, 2])
    put(cache, [3, 3])
    held = cache.lookup([1, 1, 2, 2])
    assert cache.resize(5) == 1  # only [3, 3] can go
    assert cache.stats()["over_budget"] is True and cache.bytes == 20
    cache.release(held.blocks)
    assert cache.bytes == 0 and cache.stats()["over_budget"] is False
    with pytest.raises(ValueError):
        cache.resize(-1)


def test_zero_budget_caches_nothing_unreferenced():
    cache = PrefixCache(block_size=2, max_bytes=0)
    assert put(cache, [1, 2, 3, 4]) == [] and len(cache) == 0 and cache.bytes == 0


def test_clear_keeps_referenced_blocks():
    cache = PrefixCache(block_size=2)
    put(cache, [1, 1, 2, 2])
    put(cache, [3, 3, 4, 4])
    held = cache.lookup([1, 1, 2, 2])
    assert cache.clear() == 2
    assert len(cache) == 2 and cache.bytes == 20
    assert cache.lookup([1, 1, 2, 2]).blocks == held.blocks and not cache.lookup([3, 3])
    cache.release(held.blocks)
    cache.release(held.blocks)
    assert cache.clear() == 2 and len(cache) == 0 and cache.bytes == 0


def test_stats_has_the_documented_keys():
    keys = {"queries", "hits", "hit_tokens", "inserted_blocks", "evictions", "blocks", "bytes"}
    keys |= {"max_bytes", "block_size", "referenced_blocks", "over_budget"}
    assert keys <= PrefixCache().stats().keys()
    assert isinstance(PrefixHit((), 0), PrefixHit)


# -- property-based: random lookup / release / insert / clear / resize sequences ----------


def shared(a, b) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


# a tiny alphabet and short prompts, so that prompts share prefixes (and whole blocks) often
prompts = st.lists(st.integers(0, 2), max_size=12)
fingerprints = st.sampled_from(["", "other-model"])


class PrefixCacheMachine(RuleBasedStateMachine):
    @initialize(block_size=st.integers(1, 3), max_bytes=st.integers(0, 80))
    def start(self, block_size, max_bytes):
        self.cache = PrefixCache(block_size, max_bytes, on_evict=self.evicted)
        self.bs = block_size
        self.outstanding: list[tuple[Block, ...]] = []  # acquisitions not yet released
        self.removed_ids: set[int] = set()
        self.counts = Counter()

    def evicted(self, block):
        assert block.ref_count == 0 and block.hash not in self.cache
        assert not any(b.parent == block.hash for b in self.cache)  # a leaf: nothing orphaned
        self.forget([block])
        self.counts["evictions"] += 1

    def forget(self, blocks):
        self.removed_ids |= {b.block_id for b in blocks}
        self.counts["removed_bytes"] += sum(b.nbytes for b in blocks)

    def check_chain(self, blocks, tokens, fingerprint, tail=False):
        parent = None
        for i, block in enumerate(blocks):
            span = tuple(tokens[i * self.bs : (i + 1) * self.bs])
            last_partial = tail and i == len(blocks) - 1 and len(span) < self.bs
            assert (len(span) == self.bs or last_partial) and block.tokens == span == block.payload.tokens
            assert len(span) >= self.cache.min_partial
            assert block.payload.fingerprint == fingerprint and block.parent == parent
            assert block.hash in self.cache and block.block_id not in self.removed_ids
            parent = block.hash

    @rule(tokens=prompts, fingerprint=fingerprints, size=st.integers(1, 10), tail=st.booleans())
    def insert(self, tokens, fingerprint, size, tail):
        def payload_for(start, end):
            whole = end - start == self.bs
            assert start % self.bs == 0 and (whole or (tail and end == len(tokens)))
            self.counts["created"] += 1
            self.counts["created_bytes"] += size
            return Payload(size, fingerprint, tuple(tokens[start:end]))

        chain = self.cache.insert(tokens, payload_for, fingerprint=fingerprint, tail=tail)
        self.check_chain(chain, tokens, fingerprint, tail)

    @rule(tokens=prompts, fingerprint=fingerprints)
    def lookup(self, tokens, fingerprint):
        hit = self.cache.lookup(tokens, fingerprint=fingerprint)
        self.check_chain(hit.blocks, tokens, fingerprint)
        n = len(hit.blocks)
        assert hit.num_tokens == n * self.bs + hit.partial_tokens
        parent = hit.blocks[-1].hash if n else None
        if (n + 1) * self.bs <= len(tokens):  # the longest match: the next block is not cached
            assert chain_hash(parent, tokens[n * self.bs : (n + 1) * self.bs], fingerprint) not in self.cache
        rest = tuple(tokens[n * self.bs : (n + 1) * self.bs])
        shares = [shared(b.tokens, rest) for b in self.cache if not b.checkpoint and b.parent == parent
                  and (parent is not None or b.scope == fingerprint)]
        best = max(shares, default=0)  # the partial hit: the most any block under the chain shares
        if best >= self.cache.min_partial:
            p = hit.partial
            assert hit.partial_tokens == best and p.parent == parent and p.tokens[:best] == rest[:best]
            assert p.payload.fingerprint == fingerprint
        else:
            assert hit.partial is None and hit.partial_tokens == 0
        self.counts["queries"] += 1
        if hit.num_tokens:
            self.outstanding.append(hit.held)
            self.counts["hits"] += 1
            self.counts["hit_tokens"] += hit.num_tokens

    @precondition(lambda self: self.outstanding)
    @rule(data=st.data())
    def release(self, data):
        i = data.draw(st.integers(0, len(self.outstanding) - 1))
        blocks = self.outstanding.pop(i)
        keep = data.draw(st.lists(st.booleans(), min_size=len(blocks), max_size=len(blocks)))
        self.cache.release(b for b, k in zip(blocks, keep) if not k)
        if any(keep):
            self.outstanding.append(tuple(b for b, k in zip(blocks, keep) if k))

    @rule()
    def clear(self):
        before = list(self.cache)
        dropped = self.cache.clear()
        gone = [b for b in before if b.hash not in self.cache]
        assert dropped == len(gone) and all(b.ref_count == 0 for b in gone)
        self.forget(gone)
        assert all(any(c.parent == b.hash for c in self.cache) for b in self.cache.free_list())

    @rule(max_bytes=st.integers(0, 80))
    def resize(self, max_bytes):
        self.cache.resize(max_bytes)

    @invariant()
    def ref_counts_match_outstanding_acquisitions(self):
        held = Counter(b for blocks in self.outstanding for b in blocks)
        assert {b: b.ref_count for b in self.cache if b.ref_count} == dict(held)

    @invariant()
    def free_list_is_exactly_the_unreferenced_blocks(self):
        free = self.cache.free_list()
        assert len(set(free)) == len(free)
        assert set(free) == {b for b in self.cache if b.ref_count == 0}

    @invariant()
    def bytes_are_accounted_once_per_insert_and_removal(self):
        assert self.cache.bytes == sum(b.nbytes for b in self.cache)
        assert self.cache.bytes == self.counts["created_bytes"] - self.counts["removed_bytes"]

    @invariant()
    def within_budget_unless_references_pin_memory(self):
        if not self.outstanding:
            assert self.cache.bytes <= self.cache.max_bytes
        if self.cache.bytes > self.cache.max_bytes:  # nothing left that could be evicted
            assert all(any(c.parent == b.hash for c in self.cache) for b in self.cache.free_list())

    @invariant()
    def every_cached_block_is_reachable_and_none_was_removed(self):
        for b in self.cache:
            assert b.parent is None or b.parent in self.cache
            assert b.hash == chain_hash(b.parent, b.tokens, b.payload.fingerprint)
            assert b.block_id not in self.removed_ids

    @invariant()
    def stats_agree(self):
        s = self.cache.stats()
        assert (s["queries"], s["hits"], s["hit_tokens"]) == tuple(self.counts[k] for k in ("queries", "hits", "hit_tokens"))
        assert (s["inserted_blocks"], s["evictions"]) == (self.counts["created"], self.counts["evictions"])
        assert s["blocks"] == len(self.cache) and s["bytes"] == self.cache.bytes
        assert s["referenced_blocks"] == sum(1 for b in self.cache if b.ref_count)
        assert s["over_budget"] == (self.cache.bytes > self.cache.max_bytes)


PrefixCacheMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_prefix_cache_invariants = PrefixCacheMachine.TestCase
