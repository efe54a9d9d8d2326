"""The block pool under the prefix cache: cached blocks by hash, the LRU free list of
unreferenced blocks, child counts (to find leaves), the checkpoints hanging off each block
(see ``PrefixCache.insert_checkpoint``), each parent's blocks sorted by their tokens (the
longest common prefix with a prompt's next tokens: ``PrefixCache.lookup``'s partial hits) and
the byte total.

It keeps its own books straight and nothing else: hashing, budgets and policy live in
``PrefixCache``.
"""

from __future__ import annotations

import bisect
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from mlxctl.engine.kv.block import Block


class BlockPool:
    def __init__(self) -> None:
        self._blocks: dict[bytes, Block] = {}
        self._free: OrderedDict[bytes, Block] = OrderedDict()  # ref_count 0; LRU first
        self._children: Counter[bytes] = Counter()  # cached children per block hash
        self._checkpoints: dict[bytes | None, dict[bytes, Block]] = {}  # by parent hash
        # blocks (not checkpoints) by parent, or by fingerprint at the root: (tokens, hash), sorted
        self._kids: dict[bytes | str, list[tuple[tuple[int, ...], bytes]]] = {}
        self.num_checkpoints = 0  # kept as counts: stats() is read from other threads
        self.checkpoint_bytes = 0
        self._next_id = 0
        self.bytes = 0  # sum of nbytes over cached blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block_hash: object) -> bool:
        return block_hash in self._blocks

    def __iter__(self) -> Iterator[Block]:
        return iter(list(self._blocks.values()))

    def get(self, block_hash: bytes) -> Block | None:
        return self._blocks.get(block_hash)

    def holds(self, block: Block) -> bool:
        return self._blocks.get(block.hash) is block

    def free_list(self) -> tuple[Block, ...]:
        return tuple(self._free.values())

    @property
    def num_free(self) -> int:
        return len(self._free)

    def checkpoints_of(self, parent: bytes | None) -> tuple[Block, ...]:
        return tuple(self._checkpoints.get(parent, {}).values())

    def longest_shared(self, parent: bytes | None, scope: str, tokens: tuple[int, ...]) -> tuple[Block | None, int]:
        """The block under ``parent`` (at the root: of fingerprint ``scope``) whose tokens share
        the longest prefix with ``tokens``, and that length. In lexicographic order the longest
        common prefix with ``tokens`` is found next to where ``tokens`` would be inserted."""
        kids = self._kids.get(parent if parent is not None else scope)
        if not kids or not tokens:
            return None, 0
        at = bisect.bisect_left(kids, (tokens,))
        best, length = None, 0
        for mine, h in kids[max(0, at - 1) : at + 1]:
            n = shared_prefix(mine, tokens)
            if n > length:
                best, length = self._blocks[h], n
        return best, length

    def add(self, h: bytes, parent: bytes | None, tokens: tuple[int, ...], payload: Any,
            checkpoint: bool = False, scope: str = "") -> Block:
        """A new unreferenced block (or checkpoint), at the most recent end of the free list;
        ``scope``: the fingerprint its hash was chained under (what a root block's partial
        matches are kept apart by)."""
        block = Block(self._next_id, h, parent, tokens, payload, checkpoint=checkpoint, scope=scope)
        self._next_id += 1
        self._blocks[h] = self._free[h] = block
        if parent is not None:
            self._children[parent] += 1
        if checkpoint:
            self._checkpoints.setdefault(parent, {})[h] = block
            self.num_checkpoints += 1
            self.checkpoint_bytes += block.nbytes
        else:
            bisect.insort(self._kids.setdefault(_kid_key(block), []), (tokens, h))
        self.bytes += block.nbytes
        return block

    def remove(self, block: Block) -> None:
        """Forget an unreferenced leaf."""
        del self._blocks[block.hash], self._free[block.hash]
        self._children.pop(block.hash, None)
        if block.parent is not None:
            self._children[block.parent] -= 1
        if block.checkpoint:
            siblings = self._checkpoints[block.parent]
            del siblings[block.hash]
            if not siblings:
                del self._checkpoints[block.parent]
            self.num_checkpoints -= 1
            self.checkpoint_bytes -= block.nbytes
        else:
            kids = self._kids[_kid_key(block)]
            del kids[bisect.bisect_left(kids, (block.tokens, block.hash))]
            if not kids:
                del self._kids[_kid_key(block)]
        self.bytes -= block.nbytes

    def acquire(self, block: Block) -> None:
        block.ref_count += 1
        self._free.pop(block.hash, None)

    def release(self, block: Block) -> None:
        block.ref_count -= 1
        if block.ref_count == 0:
            self._free[block.hash] = block

    def touch(self, block: Block) -> None:
        """Mark an unreferenced block most recently used."""
        if block.ref_count == 0:
            self._free.move_to_end(block.hash)

    def lru_free_leaf(self) -> Block | None:
        """The least recently used free block with no cached child."""
        return next((b for b in self._free.values() if not self._children[b.hash]), None)


def _kid_key(block: Block) -> bytes | str:
    return block.parent if block.parent is not None else block.scope


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
