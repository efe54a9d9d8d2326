"""Rows kept out of a batch's caches (KV buffers, recurrent state), by copies, not a gather.

When rows leave a batch its KV is copied without them. MLX's gather (``x[index]``) is slow on
CUDA: on an H100 it took 25 ms to keep 248 of 256 rows of a Llama-3.2-1B batch of 542-token
prompts, as long as a whole decode step, where copying the same rows took about 3 ms
(``scripts/probe_leave.py``). The run count past which one gather is used instead is a guess.
The rows a batch keeps mostly come in a few runs of consecutive rows (a group that joined
together leaves together), so those runs are sliced out and concatenated instead: one copy of
each run, and no copy at all where a single run remains (a view, copied by the next write).
"""

from __future__ import annotations

import mlx.core as mx

MAX_RUNS = 16  # past this many runs, one gather launches fewer kernels than a copy a run


def runs(rows: list[int]) -> list[tuple[int, int]]:
    """The rows as ``(start, stop)`` runs of consecutive rows, in order."""
    out: list[tuple[int, int]] = []
    for row in rows:
        if out and out[-1][1] == row:
            out[-1] = (out[-1][0], row + 1)
        else:
            out.append((row, row + 1))
    return out


class KeptRows:
    """The rows a batch keeps (in their new order), worked out once a filter for every layer:
    their runs of consecutive rows, and their index on the device."""

    def __init__(self, rows: list[int]) -> None:
        self.spans, self.index = runs(rows), mx.array(rows)

    def take(self, x: mx.array, shift: int = 0) -> mx.array:
        """``x[rows]`` (rows on the first axis, any shape), or with ``shift`` (KV's
        ``(rows, heads, tokens, dim)``) ``x[rows][..., shift:, :]``: the first ``shift``
        positions dropped."""
        if len(self.spans) > MAX_RUNS:
            kept = x[self.index]
            return kept[..., shift:, :] if shift else kept
        parts = [x[start:stop, :, shift:] if shift else x[start:stop] for start, stop in self.spans]
        return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=0)
