"""KVBlockPayload: one prefix-cache block's keys and values for every layer (engine.prefix
keeps and restores them; the disk tier stores them as flat arrays)."""

from __future__ import annotations

from typing import Any

import mlx.core as mx


class KVBlockPayload:
    """One block's keys and values for every layer: per layer ``(keys, values)`` as arrays, or,
    quantised, as ``(q, scales, biases)`` triples each; or, for plain blocks of a model whose
    layers share one KV shape, ``stacked``: all layers' keys in one ``(layers, batch, heads,
    tokens, dim)`` array and the values in another. A chain of stacked blocks is rebuilt with one
    concatenation per side instead of one per layer: on a GPU every copy is a kernel launch, and
    30 blocks x 16 layers x 2 of them were most of a cached request's time to first token."""

    def __init__(self, layers: list[tuple[Any, Any]] | None, bits: int = 0, group_size: int = 0, dtype: Any = None,
                 stacked: tuple[mx.array, mx.array] | None = None):
        self.layers, self.bits, self.group_size, self.dtype, self.stacked = layers, bits, group_size, dtype, stacked
        self.nbytes = sum(a.nbytes for a in self._arrays())

    def _arrays(self):
        if self.stacked is not None:
            yield from self.stacked
            return
        for pair in self.layers:
            for part in pair:
                yield from (part if isinstance(part, tuple) else (part,))

    def layer(self, i: int) -> tuple[mx.array, mx.array]:
        if self.stacked is not None:
            return self.stacked[0][i], self.stacked[1][i]
        keys, values = self.layers[i]
        if not self.bits:
            return keys, values
        return tuple(mx.dequantize(*part, group_size=self.group_size, bits=self.bits).astype(self.dtype)
                     for part in (keys, values))

    def head(self, n: int) -> "KVBlockPayload":
        """The first ``n`` tokens' keys and values (a partial hit: exact, attention being
        causal; quantised groups run along the head dimension, so they cut along tokens too)."""
        if self.stacked is not None:
            return KVBlockPayload(None, dtype=self.dtype, stacked=tuple(a[..., :n, :] for a in self.stacked))

        def cut(part):
            return tuple(a[..., :n, :] for a in part) if isinstance(part, tuple) else part[..., :n, :]

        return KVBlockPayload([(cut(k), cut(v)) for k, v in self.layers], self.bits, self.group_size, self.dtype)

    def to_arrays(self) -> dict[str, mx.array]:
        """Flat names for a safetensors file (the disk tier)."""
        if self.stacked is not None:
            return {"k": self.stacked[0], "v": self.stacked[1]}
        out = {}
        for i, (keys, values) in enumerate(self.layers):
            for name, part in (("k", keys), ("v", values)):
                if isinstance(part, tuple):
                    out |= {f"{i}.{name}.q": part[0], f"{i}.{name}.scales": part[1], f"{i}.{name}.biases": part[2]}
                else:
                    out[f"{i}.{name}"] = part
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, mx.array], num_layers: int, bits: int, group_size: int, dtype: Any):
        if not bits and "k" in arrays:
            if arrays["k"].shape[0] != num_layers:
                raise KeyError("k")  # another model's layout: never served
            return cls(None, dtype=dtype, stacked=(arrays["k"], arrays["v"]))

        def part(i, name):
            if bits:
                return tuple(arrays[f"{i}.{name}.{p}"] for p in ("q", "scales", "biases"))
            return arrays[f"{i}.{name}"]

        return cls([(part(i, "k"), part(i, "v")) for i in range(num_layers)], bits, group_size, dtype)
