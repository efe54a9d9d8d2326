"""Checkpoints: prefix reuse for models whose caches cannot be cut at a block boundary.

Sliding-window layers (``RotatingKVCache``) and recurrent layers (``ArraysCache``,
``MambaCache``, ...) hold a state for the whole prefix that no slice of blocks can rebuild. For
such models the prefix cache keeps *checkpoints*: the state of those layers after a given token,
snapshotted whole (``kv/snapshot.py``), taken where the next request is likely to diverge. The
model's plain ``KVCache`` layers (the full-attention layers of a hybrid) still go into blocks,
shared by every checkpoint of a conversation, so a checkpoint holds only the windows and
recurrent states, plus the KV of its last few tokens past the last full block.

Where checkpoints are taken (kept sparse: each can be large):
- while a prompt is prefilled: after the first and the last two end-of-turn tokens (the end of
  the system prompt and tools, the end of the latest messages) and one token before the end of
  the prompt (an identical prompt resent needs the last token's logits, so it cannot start after
  it);
- when a request finishes: after the prompt and the answer as generated (the next turn of a
  conversation starts with both).
A request starts from the deepest checkpoint its prompt extends; nothing is ever trimmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from mlxctl.engine.kv import snapshot

MARKER = "checkpoint#"  # the name that tells a checkpoint's file from a block's on disk
TURN_END_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|end|>", "<|eot_id|>", "<|return|>", "<|call|>",
                   "<|endoftext|>", "</s>", "<turn|>", "<|end_of_text|>", "<|eom_id|>")
BOUNDARIES_KEPT = (1, 2)  # checkpoints at the first and at the last two turn ends of a prompt


@dataclass(frozen=True)
class CacheLayout:
    """Which layers of a model's cache blocks can hold (plain ``KVCache``, or ``QuantizedKV``
    under ``--kv-bits``: ``cut``) and which
    only a checkpoint can (``whole``); ``kinds`` names the cache classes met."""

    cut: tuple[int, ...]
    whole: tuple[int, ...]
    kinds: tuple[str, ...]

    @classmethod
    def of(cls, cache: list[Any]) -> "CacheLayout":
        names = [type(c).__name__ for c in cache]
        cut = tuple(i for i, n in enumerate(names) if n in ("KVCache", "QuantizedKV"))
        return cls(cut, tuple(i for i in range(len(cache)) if i not in cut), tuple(sorted(set(names))))

    @property
    def needs_checkpoints(self) -> bool:
        return bool(self.whole)


class CheckpointPayload:
    """A checkpoint's contents: a snapshot of each ``whole`` layer, and ``tail``: the cut
    layers' KV (a ``KVBlockPayload``) of the tokens past the last full block, or None."""

    def __init__(self, states: list[dict], tail: Any = None):
        self.states, self.tail = states, tail
        self.nbytes = sum(snapshot.nbytes(s) for s in states) + (tail.nbytes if tail is not None else 0)
        mx.async_eval(self.arrays())  # the copies are made on the device, in order; no wait

    def arrays(self) -> list[mx.array]:
        tail = list(self.tail._arrays()) if self.tail is not None else []
        return snapshot.arrays_of(self.states) + tail

    def to_arrays(self) -> dict[str, mx.array]:
        out = {MARKER: mx.zeros((0,), dtype=mx.uint8)} | snapshot.flatten(self.states, "checkpoint.states")
        if self.tail is not None:
            out |= {f"checkpoint.tail.{k}": v for k, v in self.tail.to_arrays().items()}
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, mx.array], tail_from: Any) -> "CheckpointPayload":
        """``tail_from(arrays)`` rebuilds the tail's block payload from its flat arrays."""
        tail = {k[len("checkpoint.tail."):]: v for k, v in arrays.items() if k.startswith("checkpoint.tail.")}
        return cls(snapshot.unflatten(arrays, "checkpoint.states"), tail_from(tail) if tail else None)


def turn_end_ids(loaded: Any) -> frozenset[int]:
    """Token ids after which a message ends: the model's end-of-sequence ids and the
    end-of-turn markers its vocabulary has."""
    ids = {int(t) for t in (getattr(loaded, "eos_token_ids", None) or ())}
    tokenizer = getattr(loaded, "tokenizer", None)
    lookup = getattr(tokenizer, "convert_tokens_to_ids", None)
    unknown = getattr(tokenizer, "unk_token_id", None)
    for text in TURN_END_TOKENS if lookup is not None else ():
        try:
            found = lookup(text)
        except Exception:  # noqa: BLE001 - a tokenizer that cannot look it up has no such token
            continue
        if isinstance(found, int) and found >= 0 and found != unknown:
            ids.add(found)
    return frozenset(ids)


def cut_points(tokens: list[int], done: int, turn_ends: frozenset[int]) -> list[int]:
    """Where to checkpoint a prompt being prefilled from position ``done``: after the first and
    the last two turn ends, and one token before its end (never at or past the last token)."""
    last = len(tokens) - 1
    ends = [i + 1 for i, t in enumerate(tokens[:last]) if t in turn_ends]
    first, latest = BOUNDARIES_KEPT
    picks = set(ends[:first] + ends[-latest:] + [last])
    return sorted(p for p in picks if done < p <= last)
