"""Quantised KV for running requests (``--kv-bits 8|4``), one request or a batch.

mlx-lm has ``QuantizedKVCache`` for one sequence and no batched form. Here:

* :class:`QuantizedKV` — one request's cache: mlx-lm's ``QuantizedKVCache`` with what the
  engine's batching needs (``size``, ``merge`` into a batch, a whole-prefix ``fill``).
* :class:`BatchQuantizedKV` — a batch's: mlx-lm's ``BatchKVCache`` layout (rows left-padded to
  one write position ``_idx``, ``offset`` and ``left_padding`` per row) with every key and value
  kept as mlx's quantised triple ``(packed, scales, biases)``, grouped along the head dimension.

Each step quantises only the new positions. Attention runs on the quantised cache itself: both
classes carry ``bits`` and ``group_size``, which is what makes mlx-lm's attention take its
quantised path (``quantized_matmul`` for the scores and for the weighted values), so the cache
is never dequantised whole.

:func:`make_cache` builds a model's cache with its plain KV layers in this form; sliding-window
and recurrent layers stay as they are (their state is bounded by the window or fixed).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import mlx.core as mx
from mlx.utils import tree_map
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import KVCache, _BaseCache, create_attention_mask, dynamic_roll, make_prompt_cache

from mlxctl.engine.kv.rows import KeptRows
from mlxctl.engine.kv_config import KVQuant
from mlxctl.errors import BadInputError

def make_cache(model: Any, kv: KVQuant | None) -> list[Any]:
    """The model's per-layer cache, its plain KV layers quantised when ``kv`` asks for it."""
    cache = make_prompt_cache(model)
    if kv is None or not kv.enabled:
        return cache
    return [QuantizedKV(kv.group_size, kv.bits, kv.dequantize_attention) if type(c) is KVCache else c
            for c in cache]


def _parts(x: Any) -> tuple:
    return tuple(x)


class _Quantized(_BaseCache):
    """What both caches share: the stored triples up to a write position ``_end()``, grown in
    steps of 256 positions; and what attention is given. mlx-lm's attention takes its quantised
    path when the cache has ``bits``; where MLX has no quantised matmul for attention's shapes
    (its CUDA backend, 0.32), ``dequantize`` hides ``bits`` and hands attention the keys and
    values dequantised: the cache still holds a quarter or an eighth of the memory, and each
    step pays for the conversion."""

    step = 256
    keys: tuple | None
    values: tuple | None

    def _setup(self, group_size: int, bits: int, dequantize: bool) -> None:
        self.keys = self.values = None
        self.group_size, self.kv_bits, self.dequantize = group_size, bits, dequantize

    @property
    def bits(self) -> int:
        if self.dequantize:
            raise AttributeError("bits")  # mlx-lm's attention then takes its plain path
        return self.kv_bits

    def _end(self) -> int:
        raise NotImplementedError

    def _store(self, keys: mx.array, values: mx.array) -> None:
        """Quantise the new positions into place after the write position (not moved here)."""
        prev, n = self._end(), keys.shape[2]
        if self.keys is None or prev + n > self.keys[0].shape[2]:
            steps = (self.step + n - 1) // self.step * self.step
            fresh = tuple(_empty(x, steps, self.group_size, self.kv_bits) for x in (keys, values))
            if self.keys is None:
                self.keys, self.values = fresh
            else:
                held = tree_map(lambda x: x[..., :prev, :], (self.keys, self.values))
                self.keys, self.values = (tuple(mx.concatenate([a, b], axis=2) for a, b in zip(h, f))
                                          for h, f in zip(held, fresh))
        for stored, new in ((self.keys, keys), (self.values, values)):
            for part, q in zip(stored, mx.quantize(new, group_size=self.group_size, bits=self.kv_bits)):
                part[..., prev : prev + n, :] = q

    def keys_and_values(self) -> tuple[Any, Any]:
        held = tree_map(lambda x: x[..., : self._end(), :], (_parts(self.keys), _parts(self.values)))
        if not self.dequantize:
            return held
        return tuple(mx.dequantize(*side, group_size=self.group_size, bits=self.kv_bits) for side in held)

    def is_trimmable(self) -> bool:
        return True

    def empty(self) -> bool:
        return self.keys is None

    @property
    def nbytes(self) -> int:
        if self.keys is None:
            return 0
        return sum(x.nbytes for x in (*self.keys, *self.values))


class QuantizedKV(_Quantized):
    """One request's quantised KV (what mlx-lm's ``QuantizedKVCache`` holds, batchable)."""

    def __init__(self, group_size: int = 64, bits: int = 8, dequantize: bool = False):
        self._setup(group_size, bits, dequantize)
        self.offset = 0

    def _end(self) -> int:
        return self.offset

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Any, Any]:
        self._store(keys, values)
        self.offset += keys.shape[2]
        return self.keys_and_values()

    def size(self) -> int:
        return self.offset

    def trim(self, n: int) -> int:
        n = min(self.offset, n)
        self.offset -= n
        return n

    def make_mask(self, *args, **kwargs):
        return create_attention_mask(*args, offset=self.offset, **kwargs)

    @property
    def state(self):
        return self.keys, self.values, self.offset

    @state.setter
    def state(self, v):
        self.keys, self.values, self.offset = v

    def fill(self, keys: tuple, values: tuple) -> None:
        """Start from already quantised keys and values (a prefix-cache hit): (1, heads, n, ·)."""
        self.keys, self.values, self.offset = _parts(keys), _parts(values), keys[0].shape[2]

    def held(self) -> tuple[tuple, tuple]:
        """The quantised keys and values of the positions written so far (views, no copy)."""
        return tree_map(lambda x: x[..., : self.offset, :], (_parts(self.keys), _parts(self.values)))

    @classmethod
    def merge(cls, caches: list["QuantizedKV"]) -> "BatchQuantizedKV":
        return BatchQuantizedKV.merge(caches)


class BatchQuantizedKV(_Quantized):
    """A batch's quantised KV: ``BatchKVCache``'s layout, quantised triples for keys and values."""

    def __init__(self, left_padding: list[int], group_size: int = 64, bits: int = 8, dequantize: bool = False):
        self._setup(group_size, bits, dequantize)
        self.left_padding = mx.array(left_padding)
        self.offset = mx.array([-p for p in left_padding])
        self._idx = 0
        self._right_padding = None

    def _end(self) -> int:
        return self._idx

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Any, Any]:
        self._store(keys, values)
        self.offset = self.offset + keys.shape[2]
        self._idx += keys.shape[2]
        return self.keys_and_values()

    # -- padding (what ``BatchKVCache`` does for prompts of several lengths) ---------------------
    def prepare(self, *, left_padding=None, lengths=None, right_padding=None) -> None:
        if left_padding is not None:
            if self.keys is not None:
                raise ValueError("left padding can only be added to an empty cache")
            pad = mx.array(left_padding)
            self.left_padding = self.left_padding + pad
            self.offset = self.offset - pad
        if right_padding is not None and max(right_padding) > 0:
            self._right_padding = mx.array(right_padding)

    def finalize(self) -> None:
        if self._right_padding is not None:
            self.roll(self._right_padding)
            self._right_padding = None

    def roll(self, shift: mx.array) -> None:
        """Move each row right by ``shift[row]`` positions (its left padding grows by as much)."""
        self.keys, self.values = tree_map(lambda x: dynamic_roll(x, shift[:, None], axis=2), (self.keys, self.values))
        self.offset = self.offset - shift
        self.left_padding = self.left_padding + shift

    def make_mask(self, N: int, return_array: bool = False, **kwargs) -> mx.array:
        return create_causal_mask(N, offset=self._idx, left_padding=self.left_padding, **kwargs)

    # -- rows --------------------------------------------------------------------------------
    def filter(self, rows: mx.array | KeptRows, shift: int | None = None) -> None:
        """Keep the listed rows (an index, or ``kv/rows.py``'s ``KeptRows``, worked out once for
        every layer: the KV is copied a run of consecutive rows at a time); ``shift``: their
        smallest left padding when the host knows it (else read from the device), dropped from
        every row."""
        kept = rows if isinstance(rows, KeptRows) else KeptRows(rows.tolist())
        self.offset, self.left_padding = self.offset[kept.index], self.left_padding[kept.index]
        if shift is None:
            shift = min(self.left_padding.tolist())
        if self.keys is not None:
            self.keys, self.values = tree_map(lambda x: kept.take(x, shift), (self.keys, self.values))
        if shift > 0:
            self._idx -= shift
            self.left_padding = self.left_padding - shift

    def extract(self, idx: int, pad: int | None = None) -> QuantizedKV:
        """Row ``idx`` as one request's cache; ``pad``: its left padding when the host knows it."""
        if pad is None:
            pad = self.left_padding.tolist()[idx]
        out = QuantizedKV(self.group_size, self.kv_bits, self.dequantize)
        out.keys, out.values = tree_map(lambda x: mx.contiguous(x[idx : idx + 1, :, pad : self._idx]),
                                        (self.keys, self.values))
        out.offset = self._idx - pad
        return out

    def extend(self, other: "BatchQuantizedKV") -> None:
        """Append ``other``'s rows, both right-aligned at the later write position."""
        if self.keys is None and other.keys is None:
            self.left_padding = mx.concatenate([self.left_padding, other.left_padding])
            self.offset = mx.concatenate([self.offset, other.offset])
            return
        top = max(self._idx, other._idx)
        size = max(c.keys[0].shape[2] for c in (self, other) if c.keys is not None)
        like = self if self.keys is not None else other
        parts = [c._padded(top, size, like) for c in (self, other)]
        self.keys = tuple(mx.concatenate([p[0][i] for p in parts]) for i in range(3))
        self.values = tuple(mx.concatenate([p[1][i] for p in parts]) for i in range(3))
        self.offset = mx.concatenate([self.offset, other.offset])
        self.left_padding = mx.concatenate([self.left_padding + top - self._idx, other.left_padding + top - other._idx])
        self._idx = top

    def _padded(self, top: int, size: int, like: "BatchQuantizedKV") -> tuple[tuple, tuple]:
        rows = self.offset.shape[0]
        if self.keys is None:
            empty = [tuple(mx.zeros((rows, *x.shape[1:2], 0, x.shape[3]), dtype=x.dtype) for x in side)
                     for side in (like.keys, like.values)]
            keys, values = empty
        else:
            keys, values = self.keys, self.values
        left = top - self._idx
        right = size - keys[0].shape[2] - left

        def pad(x):
            if right < 0:
                x = x[..., :right, :]
            if left or right > 0:
                x = mx.pad(x, [(0, 0), (0, 0), (left, max(right, 0)), (0, 0)])
            return x

        return tuple(map(pad, keys)), tuple(map(pad, values))

    @classmethod
    def merge(cls, caches: list[QuantizedKV]) -> "BatchQuantizedKV":
        """Several requests' caches as one batch, left-padded to the longest."""
        first = caches[0]
        lengths = [c.offset for c in caches]
        longest = max(lengths)
        out = cls([longest - n for n in lengths], first.group_size, first.kv_bits, first.dequantize)
        if longest == 0:
            return out
        like = next(c for c in caches if c.keys is not None)

        def side(name):
            template = getattr(like, name)
            rows = []
            for c, n in zip(caches, lengths):
                held = getattr(c, name)
                row = []
                for i, t in enumerate(template):
                    shape = (1, t.shape[1], longest - n, t.shape[3])
                    part = held[i][..., :n, :] if held is not None and n else t[..., :0, :]
                    row.append(mx.concatenate([mx.zeros(shape, dtype=t.dtype), part], axis=2) if longest > n else part)
                rows.append(row)
            return tuple(mx.concatenate([r[i] for r in rows]) for i in range(3))

        out.keys, out.values = side("keys"), side("values")
        out.offset = out.offset + longest
        out._idx = longest
        return out

    # -- the rest of mlx-lm's cache interface ---------------------------------------------------
    @property
    def state(self):
        return self.keys, self.values, self.offset, self.left_padding, self._idx

    @state.setter
    def state(self, v):
        self.keys, self.values, self.offset, self.left_padding, self._idx = v

    def trim(self, n: int) -> int:
        n = min(self._idx, n)
        self._idx -= n
        self.offset = self.offset - n
        return n

    def size(self) -> int:
        return self._idx


def _empty(like: mx.array, steps: int, group_size: int, bits: int) -> tuple[mx.array, mx.array, mx.array]:
    """Zeroed room for ``steps`` positions of ``like``'s rows and heads, quantised."""
    rows, heads, _, dim = like.shape
    shape = (rows, heads, steps)
    return (mx.zeros((*shape, dim * bits // 32), dtype=mx.uint32),
            mx.zeros((*shape, dim // group_size), dtype=like.dtype),
            mx.zeros((*shape, dim // group_size), dtype=like.dtype))


def check_model(model: Any, kv: KVQuant) -> KVQuant:
    """At load, under ``--kv-bits``: one token through a quantised cache, so a model whose
    attention cannot take it (or whose head dimension the group size does not divide) is
    refused with the reason, not at its first request. Returns the settings to run with: where
    MLX has no quantised matmul for attention's shapes (its CUDA backend, 0.32), attention is
    given the cache dequantised (``dequantize_attention``), with a warning."""
    if not kv.enabled:
        return kv
    plain = make_prompt_cache(model)
    model(mx.array([[0]]), cache=plain)
    dims = {c.keys.shape[-1] for c in plain if type(c) is KVCache} | \
        {c.values.shape[-1] for c in plain if type(c) is KVCache}
    if not dims:
        raise BadInputError("--kv-bits: this model has no plain KV layers to quantise (its layers keep "
                            "sliding windows or recurrent state)", hint="leave --kv-bits out")
    for dim in sorted(dims):
        kv.check_head_dim(dim)
    try:
        mx.eval(model(mx.array([[0, 1]]), cache=make_cache(model, kv)))
        return kv
    except Exception as exc:  # noqa: BLE001 - no kernel for these shapes, or an attention of its own
        fallback = dataclasses.replace(kv, dequantize_attention=True)
        try:
            mx.eval(model(mx.array([[0, 1]]), cache=make_cache(model, fallback)))
        except Exception:  # noqa: BLE001 - not even with plain arrays
            raise BadInputError(f"--kv-bits: this model's attention does not take quantised KV ({exc})",
                                hint="leave --kv-bits out") from exc
        logging.getLogger("mlxctl.engine").warning(
            "--kv-bits: MLX cannot attend over quantised KV here (%s); the cache is kept quantised and "
            "dequantised for attention each step (less memory, slower decoding)", " ".join(str(exc).split())[:160])
        return fallback
