"""DecodeBatch: the running requests' KV caches and next input tokens, one row each.

Caches are mlx-lm's own classes, combined through their public ``merge`` / ``extend`` /
``filter`` / ``extract`` methods. A lone request keeps its plain per-request cache (no
padding, no mask: as fast as mlx-lm's own loop); a second request turns the batch into
mlx-lm's batched caches; the batch returns to plain caches when one row is left.

The rows' left padding in the batched caches is mirrored on the host (``left``): mlx-lm's
``BatchKVCache.filter`` and ``extract`` read it back from the device, and that read waits for
everything queued before it, the next decode step included, so each step where a row left
or finished lost the overlap of the host's work with the device's. Plain batched KV layers
(and ``--kv-bits`` quantised ones) are filtered and extracted here from the mirror; other layer
types keep their own methods.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import ArraysCache, BatchKVCache, BatchRotatingKVCache, KVCache

from mlxctl.engine.kv.quantized import BatchQuantizedKV, QuantizedKV
from mlxctl.engine.kv.rows import KeptRows
from mlxctl.engine.request import Request

BATCHED_KV = (BatchKVCache, BatchQuantizedKV)  # batched layers whose padding the host mirrors
PLAIN_KV = (KVCache, QuantizedKV)


class DecodeBatch:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.caches: list[Any] | None = None
        self.tokens: mx.array | None = None  # (B,) next inputs: sampled, not yet emitted
        self.samples: list[Any] = []  # per row: logprob data for the pending token, or None
        self.left: list[int] | None = None  # per row: the batched caches' left padding (host mirror)
        self._batched = False

    @property
    def batched(self) -> bool:
        """Whether the caches are mlx-lm's batched ones (else one request's plain caches)."""
        return self._batched

    def __len__(self) -> int:
        return len(self.requests)

    def join(self, reqs: list[Request], cache: list[Any], tokens: mx.array, samples: list[Any],
             batched: bool = False, left: list[int] | None = None) -> None:
        """Add requests whose prompts are done, with their first sampled (lazy) tokens.

        ``cache`` is one request's plain per-layer cache, or (``batched``) a group's batched one
        whose rows have ``left`` padding (read from the device when not given)."""
        if batched and left is None:
            left = read_left(cache)
        if not self.requests:
            self.caches, self.tokens, self._batched = cache, tokens.reshape(-1), batched
            self.left = list(left) if batched else None
        else:
            self.caches = self._merged(cache, batched, left)
            self.tokens = mx.concatenate([self.tokens, tokens.reshape(-1)])
        self.requests.extend(reqs)
        self.samples.extend(samples)

    def _merged(self, cache: list[Any], batched: bool, left: list[int] | None) -> list[Any]:
        if not self._batched and not batched:
            ours, theirs = _size(self.caches), _size(cache)
            self._batched, self.left = True, [max(ours, theirs) - ours, max(ours, theirs) - theirs]
            return [type(mine).merge([mine, new]) for mine, new in zip(self.caches, cache)]
        mine = self.caches if self._batched else [type(c).merge([c]) for c in self.caches]
        new = cache if batched else [type(c).merge([c]) for c in cache]
        ours, theirs = _end(mine), _end(new)
        top = max(ours, theirs)
        self.left = [p + top - ours for p in (self.left if self._batched else [0])] + \
            [p + top - theirs for p in (left if batched else [0])]
        for m, n in zip(mine, new):
            m.extend(n)
        self._batched = True
        return mine

    def keep(self, rows: list[int]) -> None:
        """Drop every row not listed (finished or aborted requests); frees their KV."""
        if len(rows) == len(self.requests):
            return
        if not rows:
            self.__init__()
            return
        kept = KeptRows(rows)
        self.requests = [self.requests[i] for i in rows]
        self.samples = [self.samples[i] for i in rows]
        self.tokens = self.tokens[kept.index]
        if self._batched:
            self._filter(rows, kept)

    def _filter(self, rows: list[int], kept: KeptRows) -> None:
        left = [self.left[i] for i in rows]
        shift = min(left)
        for c in self.caches:
            if type(c) is BatchKVCache:
                _filter_kv(c, kept, shift)
            elif type(c) is BatchRotatingKVCache:
                _filter_kv(c, kept, 0)  # mlx-lm's filter of a window does not drop padding either
            elif type(c) is BatchQuantizedKV:
                c.filter(kept, shift)
            elif type(c) is ArraysCache:
                _filter_state(c, kept)
            else:
                c.filter(kept.index)
        self.left = [p - shift for p in left]
        if len(rows) == 1:
            self.caches = self.extract(0)
            self._batched, self.left = False, None

    def stacked(self, row: int) -> StackedRow | list[Any]:
        """Row ``row``'s KV for the prefix cache: a :class:`StackedRow` where the layers are
        plain batched KV, else ``extract(row)``."""
        return (stacked_row(self.caches, row, self.left) if self._batched else None) or self.extract(row)

    def extract(self, row: int) -> list[Any]:
        """Row ``row``'s KV as plain per-layer caches (the caches themselves when not batched)."""
        return extract_row(self.caches, row, self.left) if self._batched else self.caches

    def advance(self, tokens: mx.array, samples: list[Any]) -> tuple[list[Request], mx.array, list[Any]]:
        """Install the next step's tokens; return the rows' pending (now previous) tokens."""
        pending = (list(self.requests), self.tokens, self.samples)
        self.tokens, self.samples = tokens, samples
        return pending

    def positions(self) -> int:
        """The positions the caches hold a row, left padding included (the width of the
        decode pass's attention; 0 with no rows)."""
        if not self.caches:
            return 0
        return _end(self.caches) if self._batched else _size(self.caches)

    def nbytes(self) -> int:
        if not self.caches:
            return 0
        return sum(c.nbytes for c in self.caches)


def read_left(cache: list[Any]) -> list[int] | None:
    """The rows' left padding of batched caches, read from the device (waits for the queue)."""
    for c in cache:
        if type(c) in BATCHED_KV:
            return c.left_padding.tolist()
    return None


def extract_row(cache: list[Any], row: int, left: list[int] | None) -> list[Any]:
    """One row of batched per-layer caches as plain ones; plain batched KV layers cut at the
    row's host-known ``left`` padding (mlx-lm's ``extract`` reads it from the device)."""
    return [c.extract(row) if left is None or type(c) not in BATCHED_KV else
            _extract_kv(c, row, left[row]) if type(c) is BatchKVCache else c.extract(row, left[row]) for c in cache]


class StackedRow:
    """One row of batched plain KV layers, every layer's keys in one lazy ``(layers, 1, heads,
    tokens, dim)`` array and the values in another: what the prefix cache slices a prompt's
    blocks from (engine/prefix.py), without first copying the row out layer by layer."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: mx.array, values: mx.array):
        self.keys, self.values = keys, values


class HitCache(list):
    """A request's per-layer plain KV caches rebuilt from prefix-cache blocks (engine/prefix.py),
    each layer a view of one stacking of all layers (``stacked``, a :class:`StackedRow`)."""

    __slots__ = ("stacked",)

    def __init__(self, layers: list[Any], stacked: StackedRow):
        super().__init__(layers)
        self.stacked = stacked


def merged_hits(caches: list[list[Any]]) -> list[BatchKVCache] | None:
    """A prompt group's batched caches where every row holds a prefix-cache hit of one length
    and nothing more (a :class:`HitCache` at the length it was rebuilt at, or cut back): each
    side is one concatenation of the rows' stackings, every layer a view of it. Merging layer by
    layer (``BatchKVCache.merge``) writes each row of each layer on its own, two operations a row
    and layer, each a launch on a GPU. None where the rows do not qualify."""
    if not caches or any(not isinstance(c, HitCache) for c in caches):
        return None
    n = caches[0][0].offset
    if not n or any(type(layer) is not KVCache or layer.offset != n for c in caches for layer in c) or \
            any(c.stacked.keys.shape[0] != len(c) or c.stacked.keys.shape[3] < n for c in caches):
        return None
    keys = mx.concatenate([c.stacked.keys[..., :n, :] for c in caches], axis=1)  # (layers, rows, heads, n, dim)
    values = mx.concatenate([c.stacked.values[..., :n, :] for c in caches], axis=1)
    merged = []
    for i in range(keys.shape[0]):
        layer = BatchKVCache([0] * len(caches))
        layer.keys, layer.values, layer._idx = keys[i], values[i], n
        layer.offset += n
        merged.append(layer)
    return merged


def stacked_rows(cache: list[Any], left: list[int] | None) -> list[StackedRow] | None:
    """Every row of a batched group's cache as a :class:`StackedRow`, all sliced from one
    stacking of the group's layers (one copy per group, where extracting costs one per row
    and layer); None unless every layer is plain batched KV of one shape and dtype."""
    if left is None or not _plain_batched(cache):
        return None
    end = cache[0]._idx
    keys = mx.stack([c.keys[..., :end, :] for c in cache])
    values = mx.stack([c.values[..., :end, :] for c in cache])
    return [StackedRow(keys[:, r : r + 1, :, pad:], values[:, r : r + 1, :, pad:]) for r, pad in enumerate(left)]


def stacked_row(cache: list[Any], row: int, left: list[int] | None) -> StackedRow | None:
    """Row ``row`` of batched plain KV layers as a :class:`StackedRow` (one copy of that row);
    None where ``stacked_rows`` would be."""
    if left is None or not _plain_batched(cache):
        return None
    pad, end = left[row], cache[0]._idx
    return StackedRow(mx.stack([c.keys[row : row + 1, :, pad:end] for c in cache]),
                      mx.stack([c.values[row : row + 1, :, pad:end] for c in cache]))


def _plain_batched(cache: list[Any]) -> bool:
    """Whether every layer is mlx-lm's plain ``BatchKVCache``, all of one shape and dtype and
    at one write position (so the layers stack)."""
    if not cache or any(type(c) is not BatchKVCache or c.keys is None for c in cache):
        return False
    return all(c._idx == cache[0]._idx for c in cache) and uniform_kv(cache)


def uniform_kv(cache: list[Any]) -> bool:
    """Whether every layer's keys and values share one shape and dtype (so they stack)."""
    first = cache[0].keys
    return all(c.keys.shape == first.shape and c.values.shape == c.keys.shape and c.keys.dtype == first.dtype
               and c.values.dtype == first.dtype for c in cache)


def _extract_kv(c: BatchKVCache, row: int, pad: int) -> KVCache:
    out = KVCache()
    out.keys = mx.contiguous(c.keys[row : row + 1, :, pad : c._idx])
    out.values = mx.contiguous(c.values[row : row + 1, :, pad : c._idx])
    out.offset = c._idx - pad
    return out


def _filter_kv(c: BatchKVCache | BatchRotatingKVCache, kept: KeptRows, shift: int) -> None:
    """``BatchKVCache.filter`` with the kept rows' smallest left padding known on the host, the
    KV copied a run of consecutive rows at a time (``kv/rows.py``: a gather is slow on CUDA);
    with ``shift`` 0, ``BatchRotatingKVCache.filter`` too."""
    if c.keys is not None:
        c.keys, c.values = kept.take(c.keys, shift), kept.take(c.values, shift)
    c.offset, c.left_padding = c.offset[kept.index], c.left_padding[kept.index]
    if shift > 0:
        c._idx -= shift
        c.left_padding = c.left_padding - shift


def _filter_state(c: ArraysCache, kept: KeptRows) -> None:
    """``ArraysCache.filter`` (recurrent state), its arrays copied a run of rows at a time."""
    c.cache = [None if a is None else kept.take(a) for a in c.cache]
    if c.left_padding is not None:
        c.left_padding = c.left_padding[kept.index]
    if c.lengths is not None:
        c.lengths = c.lengths[kept.index]


def _size(cache: list[Any]) -> int:
    """Tokens a request's plain caches hold (what ``BatchKVCache.merge`` aligns by)."""
    return next((c.size() for c in cache if type(c) in PLAIN_KV), 0)


def _end(cache: list[Any]) -> int:
    """The write position of batched caches (what ``BatchKVCache.extend`` aligns by)."""
    return next((c._idx for c in cache if type(c) in BATCHED_KV), 0)
