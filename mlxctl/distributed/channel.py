"""Rank 0's messages to the other ranks, carried by the group's own collectives.

A broadcast is two ``all_sum`` reductions in which only rank 0 contributes: first the
payload's length, then the payload as int32 words (zeros elsewhere, so the sum is rank 0's
bytes exactly). Using the group's backend (NCCL, ring, JACCL) means no second network
channel to configure, and the collectives run on the engine's stream in the same order on
every rank, interleaved with the model's own.

Payloads are pickled: every rank is a process of the same job started by ``mlx.launch``,
trusting rank 0 as it trusts its own code.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np


class Channel:
    def __init__(self, group: Any):
        self.group = group
        self.rank = group.rank()
        self.messages = 0
        self.bytes = 0

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0: send ``obj`` and return it; other ranks: return what rank 0 sent. ``None``
        costs one reduction of one word (the steps with nothing new, most of them)."""
        import mlx.core as mx

        data = b"" if self.rank != 0 or obj is None else pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        size = int(self._sum(mx.array([len(data)], dtype=mx.int32)).item())
        self.messages += 1
        if size == 0:
            return None
        words = -(-size // 4)
        if self.rank == 0:
            buf = np.zeros(words * 4, dtype=np.uint8)
            buf[:size] = np.frombuffer(data, dtype=np.uint8)
            payload = mx.array(buf.view(np.int32))
        else:
            payload = mx.zeros((words,), dtype=mx.int32)
        got = np.array(self._sum(payload), copy=False).view(np.uint8)[:size].tobytes()
        self.bytes += size
        return obj if self.rank == 0 else pickle.loads(got)

    def agree(self, flag: bool) -> int:
        """How many ranks pass ``flag`` true (every rank gets the same count)."""
        import mlx.core as mx

        return int(self._sum(mx.array([int(flag)], dtype=mx.int32)).item())

    def _sum(self, x: Any) -> Any:
        import mlx.core as mx

        out = mx.distributed.all_sum(x, group=self.group)
        mx.eval(out)
        return out
