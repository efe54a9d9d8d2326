"""A bounded, ref-counted pool of hash-chained KV blocks for prefix reuse (in memory).

Lookups take a reference on every block they return; ``release`` gives it back. A block with no
references sits on an LRU free list and still serves lookups until it is evicted.

Eviction policy: least recently used among *free leaves* (free blocks with no cached child),
as in nano-vllm and vLLM. A block is only evicted once all its descendants are gone, so every
cached block's parent is cached: nothing is ever left unreachable, and a referenced block's
ancestors stay. To keep that cheap, a chain is touched leaf first (``insert``, ``release``), so
its root is the most recent: a shared system prompt outlives the conversations built on it.

A lower tier (the disk, see ``disk.py``) can sit under the memory: evicted blocks are offered to
it, and a lookup that runs out of memory blocks asks it for the next block of the chain, which is
then promoted back into memory.

Checkpoints (models whose caches cannot be cut at a block boundary: sliding windows, recurrent
layers) live in the same pool: a checkpoint is a leaf under the last full block before its
position, holding the model's whole state after its tokens. ``insert_checkpoint`` caches the
full blocks of a prefix (their payloads hold what can be cut, maybe nothing) and the checkpoint
after it; ``lookup_checkpoint`` finds the deepest checkpoint whose tokens a prompt extends. Being
leaves, checkpoints are evicted before the blocks they hang off, by the same LRU, within the
same byte budget, and spill to the same lower tier.

Not thread-safe: the engine thread owns it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from mlxctl.engine.kv.block import CHECKPOINT, Block, PrefixHit, chain_hash
from mlxctl.engine.kv.pool import BlockPool


class LowerTier(Protocol):
    """Where evicted blocks go and lookups look next (the disk tier, through the engine's glue)."""

    def load(self, block_hash: bytes, parent: bytes | None, tokens: tuple[int, ...]) -> Any | None: ...

    def store(self, block: Block) -> None: ...

    # optional: checkpoints kept below, as (hash, tokens) of every row under ``parent``
    # def children(self, parent: bytes | None) -> list[tuple[bytes, tuple[int, ...]]]: ...


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


class PrefixCache:
    def __init__(
        self,
        block_size: int = 64,
        max_bytes: int = 1 << 30,
        fingerprint: str = "",
        *,
        on_evict: Callable[[Block], None] | None = None,
        lower: LowerTier | None = None,
    ) -> None:
        _check_int("block_size", block_size, 1)
        _check_int("max_bytes", max_bytes, 0)
        self.block_size = block_size
        self.max_bytes = max_bytes
        self.fingerprint = fingerprint  # weights, dtype, adapter: whatever changes the KV
        self._on_evict = on_evict  # e.g. the disk tier spilling a block before it goes
        self._lower = lower
        self._pool = BlockPool()
        self._counts = Counter(queries=0, hits=0, hit_tokens=0, partial_hits=0, inserted_blocks=0, evictions=0,
                               promoted_blocks=0, inserted_checkpoints=0, hits_let_go=0,
                               hits_aligned=0)

    @property
    def bytes(self) -> int:
        return self._pool.bytes

    def __len__(self) -> int:
        return len(self._pool)

    def __contains__(self, block_hash: object) -> bool:
        return block_hash in self._pool

    def __iter__(self) -> Iterator[Block]:
        return iter(self._pool)

    def free_list(self) -> tuple[Block, ...]:
        """Unreferenced blocks, least recently used first."""
        return self._pool.free_list()

    def stats(self) -> dict:
        blocks, free = len(self._pool), self._pool.num_free
        return {
            **self._counts,
            "blocks": blocks,
            "bytes": self.bytes,
            "max_bytes": self.max_bytes,
            "block_size": self.block_size,
            "referenced_blocks": blocks - free,
            "free_blocks": free,
            "checkpoints": self._pool.num_checkpoints,
            "checkpoint_bytes": self._pool.checkpoint_bytes,
            # only after resize() below what referenced blocks pin; cleared as they are released
            "over_budget": self.bytes > self.max_bytes,
        }

    @property
    def min_partial(self) -> int:
        """The fewest tokens a partial hit takes, and a prompt's last partial block holds:
        a quarter block (at least 1). A shorter one would save a handful of tokens and send the
        prompt through the merged-cache path of prompts that hold KV (engine.runner)."""
        return max(1, self.block_size // 4)

    def lookup(self, tokens: Sequence[int], *, fingerprint: str | None = None) -> PrefixHit:
        """The longest chain of full cached blocks matching a prefix of ``tokens``, then, where
        the next cached block shares at least ``min_partial`` of the tokens that follow (a
        sibling prompt's block, or a prompt's last partial block), that block as a partial hit
        of those tokens: its KV is exact for them, attention being causal. The caller holds a
        reference on each returned block until it releases them (``hit.held``)."""
        blocks = tuple(self._walk(tokens, fingerprint))
        depth = len(blocks) * self.block_size
        rest = tuple(int(t) for t in tokens[depth : depth + self.block_size])
        partial, shared = self._pool.longest_shared(blocks[-1].hash if blocks else None, self._fp(fingerprint), rest)
        if shared < self.min_partial:
            partial, shared = None, 0
        hit = PrefixHit(blocks, depth + shared, partial=partial, partial_tokens=shared)
        for block in hit.held:
            self._pool.acquire(block)
        self._counts["queries"] += 1
        if hit.num_tokens:
            self._counts["hits"] += 1
            self._counts["hit_tokens"] += hit.num_tokens
            self._counts["partial_hits"] += partial is not None
        return hit

    def count_let_go(self, tokens: int, partial: bool) -> None:
        """A hit its request let go (engine.prefix ``let_short_hit_go``): no longer counted as one."""
        self._counts["hits"] -= 1
        self._counts["hit_tokens"] -= tokens
        self._counts["partial_hits"] -= partial
        self._counts["hits_let_go"] += 1

    def count_aligned(self, tokens: int) -> None:
        """A hit its request cut by ``tokens`` to match the rows prefilled with it (engine.prefix
        ``align_hits``): those tokens no longer count as served from the cache."""
        self._counts["hit_tokens"] -= tokens
        self._counts["hits_aligned"] += 1

    def lookup_checkpoint(self, tokens: Sequence[int], *, fingerprint: str | None = None) -> PrefixHit:
        """The deepest checkpoint whose tokens ``tokens`` start with, and the full blocks before
        it; the caller holds a reference on each (``hit.held``) until it releases them."""
        blocks = list(self._walk(tokens, fingerprint))
        fp, bs = self._fp(fingerprint) + CHECKPOINT, self.block_size
        self._counts["queries"] += 1
        for depth in range(len(blocks), -1, -1):
            parent = blocks[depth - 1].hash if depth else None
            found = self._checkpoint_under(parent, tuple(int(t) for t in tokens[depth * bs : (depth + 1) * bs]), fp)
            if found is None:
                continue
            hit = PrefixHit(tuple(blocks[:depth]), depth * bs + len(found.tokens), checkpoint=found)
            for block in hit.held:
                self._pool.acquire(block)
            self._counts["hits"] += 1
            self._counts["hit_tokens"] += hit.num_tokens
            return hit
        return PrefixHit((), 0)

    def insert_checkpoint(
        self,
        tokens: Sequence[int],
        payload_for: Callable[[int, int], Any],
        checkpoint_for: Callable[[int], Any],
        *,
        fingerprint: str | None = None,
    ) -> Block | None:
        """Cache the full blocks of ``tokens`` (``payload_for`` as in ``insert``) and a
        checkpoint after the last token; ``checkpoint_for(start)`` makes its payload, covering
        what the blocks do not: the state after ``tokens``, with anything cut from
        ``tokens[start:]``. Returns the checkpoint, or None when the budget could not keep it."""
        bs = self.block_size
        full = len(tokens) // bs * bs
        chain = self.insert(tokens[:full], payload_for, fingerprint=fingerprint) if full else []
        if len(chain) < full // bs:
            return None  # the budget could not keep the blocks it would hang off
        parent = chain[-1].hash if chain else None
        tail = tuple(int(t) for t in tokens[full:])
        h = chain_hash(parent, tail, self._fp(fingerprint) + CHECKPOINT)
        block = self._pool.get(h)
        if block is None:
            block = self._pool.add(h, parent, tail, checkpoint_for(full), checkpoint=True)
            self._counts["inserted_checkpoints"] += 1
        for b in [block, *reversed(chain)]:
            self._pool.touch(b)
        self._evict_to_budget()
        return block if self._pool.holds(block) else None

    def _checkpoint_under(self, parent: bytes | None, rest: tuple[int, ...], fp: str) -> Block | None:
        """The longest checkpoint under ``parent`` whose tokens start ``rest`` (memory first,
        then the lower tier, from which it is promoted)."""
        def fits(tokens: tuple[int, ...]) -> bool:
            return len(tokens) <= len(rest) and rest[: len(tokens)] == tokens

        mine = [b for b in self._pool.checkpoints_of(parent) if fits(b.tokens) and b.hash == chain_hash(parent, b.tokens, fp)]
        below = [(h, t) for h, t in self._lower_children(parent)
                 if h not in self._pool and fits(t) and h == chain_hash(parent, t, fp)]
        best = max(mine, key=lambda b: len(b.tokens), default=None)
        for h, t in sorted(below, key=lambda ht: -len(ht[1])):
            if best is not None and len(best.tokens) >= len(t):
                break
            payload = self._lower.load(h, parent, t)
            if payload is not None:
                self._counts["promoted_blocks"] += 1
                return self._pool.add(h, parent, t, payload, checkpoint=True)
        return best

    def _lower_children(self, parent: bytes | None) -> list[tuple[bytes, tuple[int, ...]]]:
        children = getattr(self._lower, "children", None)
        return children(parent) if children is not None else []

    def release(self, blocks: Iterable[Block]) -> None:
        """Drop one reference on each block (a block listed twice loses two). Blocks reaching
        zero join the free list, the first listed most recent (pass a hit's blocks in order)."""
        blocks = list(blocks)
        for block, n in Counter(blocks).items():
            if not self._pool.holds(block):
                raise ValueError(f"block {block.block_id} is not held by this cache")
            if n > block.ref_count:
                raise ValueError(f"block {block.block_id} released more often than acquired")
        for block in reversed(blocks):
            self._pool.release(block)
        self._evict_to_budget()

    def insert(
        self,
        tokens: Sequence[int],
        payload_for: Callable[[int, int], Any],
        *,
        fingerprint: str | None = None,
        tail: bool = False,
    ) -> list[Block]:
        """Cache every full block of ``tokens`` (and with ``tail`` the tokens after the last
        full block, when there are at least ``min_partial``: a partial block, which only partial
        hits use); ``payload_for(start, end)`` makes the payload of a block not cached yet. New
        blocks are unreferenced. Returns the chain's blocks still cached after eviction: a prefix
        of the chain, shorter if the budget was short."""
        chain: list[Block] = []
        parent = None
        fp = self._fp(fingerprint)
        for start, chunk in self._chunks(tokens, tail):
            h = chain_hash(parent, chunk, fp)
            block = self._pool.get(h) or self._add(h, parent, chunk, payload_for(start, start + len(chunk)), fp)
            chain.append(block)
            parent = h
        for block in reversed(chain):
            self._pool.touch(block)
        self._evict_to_budget()
        return [b for b in chain if self._pool.holds(b)]

    def resize(self, max_bytes: int) -> int:
        """A new byte budget, enforced at once as far as references allow (see ``stats()``'s
        ``over_budget``); returns how many blocks were evicted."""
        _check_int("max_bytes", max_bytes, 0)
        self.max_bytes = max_bytes
        before = self._counts["evictions"]
        self._evict_to_budget()
        return self._counts["evictions"] - before

    def clear(self) -> int:
        """Drop every unreferenced block (keeping only those a referenced block descends
        from); returns how many were dropped."""
        dropped = 0
        while (leaf := self._pool.lru_free_leaf()) is not None:
            self._pool.remove(leaf)
            dropped += 1
        return dropped

    def persist(self) -> int:
        """Offer every cached block to the lower tier (at shutdown); returns how many."""
        if self._lower is None:
            return 0
        blocks = [b for b in self._pool if self._spills(b)]
        for block in blocks:
            self._lower.store(block)
        return len(blocks)

    def _spills(self, block: Block) -> bool:
        """Whether the lower tier takes the block: not a prompt's last partial block, which
        only memory's partial hits use (the lower tier serves whole blocks and checkpoints)."""
        return block.checkpoint or len(block.tokens) == self.block_size

    def _fp(self, fingerprint: str | None) -> str:
        return self.fingerprint if fingerprint is None else fingerprint

    def _chunks(self, tokens: Sequence[int], tail: bool = False) -> Iterator[tuple[int, tuple[int, ...]]]:
        bs = self.block_size
        full = len(tokens) // bs * bs
        for start in range(0, full, bs):
            yield start, tuple(int(t) for t in tokens[start : start + bs])
        if tail and len(tokens) - full >= self.min_partial:
            yield full, tuple(int(t) for t in tokens[full:])

    def _walk(self, tokens: Sequence[int], fingerprint: str | None) -> Iterator[Block]:
        parent = None
        fp = self._fp(fingerprint)
        for _, chunk in self._chunks(tokens):
            h = chain_hash(parent, chunk, fp)
            block = self._pool.get(h) or self._promote(h, parent, chunk, fp)
            if block is None or block.tokens != chunk:
                return
            yield block
            parent = block.hash

    def _promote(self, h: bytes, parent: bytes | None, chunk: tuple[int, ...], fp: str) -> Block | None:
        """The block from the lower tier, back in memory; None when it is not there."""
        if self._lower is None:
            return None
        payload = self._lower.load(h, parent, chunk)
        if payload is None:
            return None
        self._counts["promoted_blocks"] += 1
        return self._pool.add(h, parent, chunk, payload, scope=fp)

    def _add(self, h: bytes, parent: bytes | None, chunk: tuple[int, ...], payload: Any, fp: str) -> Block:
        self._counts["inserted_blocks"] += 1
        return self._pool.add(h, parent, chunk, payload, scope=fp)

    def _evict_to_budget(self) -> None:
        """Evict LRU free leaves until within budget or only referenced chains remain."""
        while self.bytes > self.max_bytes and (victim := self._pool.lru_free_leaf()) is not None:
            self._pool.remove(victim)
            self._counts["evictions"] += 1
            if self._lower is not None and self._spills(victim):
                self._lower.store(victim)
            if self._on_evict is not None:
                self._on_evict(victim)
