"""Blocks of cached KV state, named by a hash chain over their tokens.

A block holds the KV of ``block_size`` consecutive prompt tokens. Its hash covers its parent's
hash, the model fingerprint and its own tokens, so equal hashes mean equal prefixes of the same
model: a lookup walks the chain from the root and stops at the first block not cached.
A checkpoint is a leaf hanging off the block its position falls in: the whole state of a model
whose caches cannot be cut (see ``PrefixCache.insert_checkpoint``) after ``tokens``, which are
the up to ``block_size - 1`` tokens past its parent; its hash is chained like a block's, under
the fingerprint tagged ``CHECKPOINT``, so no block and checkpoint ever share one.
Payloads are opaque here (per-layer MLX arrays in the engine, plain objects in tests); only
their size is read, through ``nbytes``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
CHECKPOINT = "|checkpoint"  # appended to the fingerprint a checkpoint's hash is chained under


def chain_hash(parent: bytes | None, tokens: Sequence[int], fingerprint: str) -> bytes:
    """SHA-256 over the parent hash, the fingerprint and the token ids (little-endian int64).

    Each part is tagged or length-prefixed, so no two different (parent, fingerprint, tokens)
    triples encode to the same bytes.
    """
    ids = [int(t) for t in tokens]
    if any(t < _INT64_MIN or t > _INT64_MAX for t in ids):
        raise ValueError("token ids must fit in a signed 64-bit integer")
    fp = fingerprint.encode("utf-8")
    h = hashlib.sha256()
    h.update(b"\x00" if parent is None else b"\x01" + parent)
    h.update(struct.pack("<Q", len(fp)) + fp)
    h.update(struct.pack(f"<Q{len(ids)}q", len(ids), *ids))
    return h.digest()


def payload_nbytes(payload: Any) -> int:
    """Bytes held by a payload: its ``nbytes``, or the sum over a list, tuple or dict of them
    (so a per-layer list of (keys, values) arrays can be passed as it is)."""
    if hasattr(payload, "nbytes"):
        return int(payload.nbytes)
    if isinstance(payload, Mapping):
        return sum(payload_nbytes(v) for v in payload.values())
    if isinstance(payload, (list, tuple)):
        return sum(payload_nbytes(v) for v in payload)
    if payload is None:
        return 0
    raise TypeError(f"cannot size a block payload of type {type(payload).__name__}")


@dataclass(eq=False)
class Block:
    """One cached block; identity is the object (two blocks are never equal by value)."""

    block_id: int
    hash: bytes
    parent: bytes | None  # the previous block's hash; None for the first block of a prompt
    tokens: tuple[int, ...]
    payload: Any
    ref_count: int = 0  # lookups holding it and not yet released
    checkpoint: bool = False  # a whole-state checkpoint after ``tokens`` (a leaf), not a block of KV
    scope: str = ""  # the fingerprint its hash is chained under (keeps root blocks' partial matches apart)
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.nbytes = payload_nbytes(self.payload)


@dataclass(frozen=True)
class PrefixHit:
    """The cached blocks matching a prompt's prefix, in order; the caller holds one reference
    on each until it passes them to ``PrefixCache.release``."""

    blocks: tuple[Block, ...]
    num_tokens: int  # len(blocks) * block_size, plus the checkpoint's or the partial block's tokens
    checkpoint: Block | None = None  # the state after num_tokens (models restored from checkpoints)
    partial: Block | None = None  # a block whose first ``partial_tokens`` tokens follow ``blocks``
    partial_tokens: int = 0

    @property
    def held(self) -> tuple[Block, ...]:
        """Every block the caller holds a reference on, in release order."""
        extra = tuple(b for b in (self.checkpoint, self.partial) if b is not None)
        return self.blocks + extra

    def __bool__(self) -> bool:
        return self.num_tokens > 0
