"""Whole-state snapshots of cache layers that cannot be cut at a block boundary.

A sliding-window layer (mlx-lm's ``RotatingKVCache``) has dropped old positions and a recurrent
layer (``ArraysCache``, ``MambaCache``) holds one state for the whole prefix, so neither can be
rebuilt from per-block slices. What can be kept is the layer's whole state after a given token:
its attributes (arrays, offsets, window indices, nested caches of a ``CacheList``), copied.

Copies matter: mlx-lm updates a cache's arrays in place (``keys[..., i:j, :] = new``), which
changes the very array object every alias holds. A snapshot holds new array objects (MLX ops
are copy-on-write: an array another one still reads is never overwritten), and a restore hands
the layer fresh copies again, so decoding from a restored layer never touches the snapshot.

A snapshot is a plain tree (dicts of attribute values; lists and tuples; arrays; ints, floats,
bools, strings and None) that flattens to named arrays for a safetensors file (the disk tier)
and back: scalars travel as 0-d arrays tagged with their type, structure in the names.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

_SCALARS = (bool, int, float, str, type(None))


def snapshot(layer: Any) -> dict:
    """The layer's state, copied: restoring it gives a layer in exactly this state."""
    return {name: _copy(value) for name, value in vars(layer).items()}


def restore(layer: Any, state: dict) -> Any:
    """Put ``state`` (from :func:`snapshot` of a layer of the same kind) into ``layer``."""
    for name, value in state.items():
        current = getattr(layer, name, None)
        setattr(layer, name, _restored(current, value))
    return layer


def _copy(value: Any) -> Any:
    if isinstance(value, mx.array):
        return mx.array(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    if isinstance(value, _SCALARS):
        return value
    if hasattr(value, "__dict__"):  # a nested cache (CacheList's layers)
        return {"__cache__": type(value).__name__, **snapshot(value)}
    raise TypeError(f"cannot snapshot a cache attribute of type {type(value).__name__}")


def _restored(current: Any, value: Any) -> Any:
    if isinstance(value, dict) and "__cache__" in value:
        if current is None or type(current).__name__ != value["__cache__"]:
            raise TypeError(f"snapshot of a {value['__cache__']} cannot restore into {type(current).__name__}")
        return restore(current, {k: v for k, v in value.items() if k != "__cache__"})
    if isinstance(value, (list, tuple)):
        olds = list(current) if isinstance(current, (list, tuple)) and len(current) == len(value) else [None] * len(value)
        return type(value)(_restored(o, v) for o, v in zip(olds, value))
    return _copy(value)


def nbytes(state: Any) -> int:
    """Bytes the arrays of a snapshot hold."""
    if isinstance(state, mx.array):
        return state.nbytes
    if isinstance(state, dict):
        return sum(nbytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(nbytes(v) for v in state)
    return 0


def arrays_of(state: Any) -> list[mx.array]:
    if isinstance(state, mx.array):
        return [state]
    if isinstance(state, dict):
        return [a for v in state.values() for a in arrays_of(v)]
    if isinstance(state, (list, tuple)):
        return [a for v in state for a in arrays_of(v)]
    return []


# -- flat arrays (a safetensors file) ---------------------------------------------------------

_TAGS = {bool: "b", int: "i", float: "f", type(None): "n"}


def flatten(state: Any, prefix: str) -> dict[str, mx.array]:
    """Named arrays holding ``state`` (see :func:`unflatten`); names start with ``prefix``."""
    if isinstance(state, mx.array):
        return {f"{prefix}#a": state}
    if isinstance(state, dict):
        out = {f"{prefix}#d{len(state)}": mx.zeros((0,), dtype=mx.uint8)}
        for i, (k, v) in enumerate(state.items()):
            out |= _text(f"{prefix}.{i}#k", k) | flatten(v, f"{prefix}.{i}")
        return out
    if isinstance(state, (list, tuple)):
        out = {f"{prefix}#{'l' if isinstance(state, list) else 't'}{len(state)}": mx.zeros((0,), dtype=mx.uint8)}
        for i, v in enumerate(state):
            out |= flatten(v, f"{prefix}.{i}")
        return out
    if isinstance(state, str):
        return _text(f"{prefix}#s", state)
    if isinstance(state, float):  # as text: float64 arrays are not on every device
        return _text(f"{prefix}#f", repr(state))
    tag = _TAGS.get(type(state))
    if tag is None:
        raise TypeError(f"cannot store a snapshot value of type {type(state).__name__}")
    if tag == "n":
        return {f"{prefix}#n": mx.zeros((0,), dtype=mx.uint8)}
    return {f"{prefix}#{tag}": mx.array(int(state), dtype=mx.int64)}


def _text(name: str, text: str) -> dict[str, mx.array]:
    return {name: mx.array(list(text.encode("utf-8")) or [0], dtype=mx.uint8)[: len(text.encode("utf-8"))]}


def unflatten(arrays: dict[str, mx.array], prefix: str) -> Any:
    """The snapshot :func:`flatten` stored under ``prefix``; KeyError when it is not all there."""
    kinds = {name[len(prefix) + 1:]: name for name in _here(arrays, prefix)}
    if not kinds:
        raise KeyError(prefix)
    (kind, name), = kinds.items()
    tag, count = kind[0], kind[1:]
    if tag == "a":
        return arrays[name]
    if tag == "n":
        return None
    if tag == "s":
        return bytes(arrays[name].tolist()).decode("utf-8")
    if tag == "f":
        return float(bytes(arrays[name].tolist()).decode("utf-8"))
    if tag in "bi":
        return (bool if tag == "b" else int)(arrays[name].item())
    n = int(count)
    if tag == "d":
        keys = [bytes(arrays[f"{prefix}.{i}#k"].tolist()).decode("utf-8") for i in range(n)]
        return {k: unflatten(arrays, f"{prefix}.{i}") for i, k in enumerate(keys)}
    items = [unflatten(arrays, f"{prefix}.{i}") for i in range(n)]
    return items if tag == "l" else tuple(items)


def _here(arrays: dict[str, mx.array], prefix: str) -> list[str]:
    return [name for name in arrays if name.startswith(prefix + "#") and not name.endswith("#k")]
