"""Cache-layer snapshots (engine/kv/snapshot.py): exact copies that in-place updates of the live
layer never reach, restored as fresh copies, and flattened to named arrays and back."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ArraysCache, CacheList, KVCache, RotatingKVCache

from mlxctl.engine.kv import snapshot


def filled_rotating(n: int) -> RotatingKVCache:
    layer = RotatingKVCache(max_size=4)
    for i in range(n):
        kv = mx.full((1, 1, 1, 2), float(i))
        layer.update_and_fetch(kv, kv)
    return layer


def test_an_in_place_update_of_the_layer_does_not_reach_its_snapshot():
    layer = filled_rotating(6)  # rotated: later tokens overwrite slots in place
    state = snapshot.snapshot(layer)
    before = mx.array(state["keys"])
    kv = mx.full((1, 1, 1, 2), 100.0)
    layer.update_and_fetch(kv, kv)
    assert mx.array_equal(state["keys"], before)
    assert not mx.array_equal(layer.keys, before)


def test_a_restored_layer_continues_exactly_and_leaves_the_snapshot_alone():
    layer = filled_rotating(6)
    state = snapshot.snapshot(layer)
    restored = snapshot.restore(RotatingKVCache(max_size=4), state)
    kv = mx.full((1, 1, 1, 2), 7.0)
    a, _ = layer.update_and_fetch(kv, kv)
    b, _ = restored.update_and_fetch(kv, kv)
    assert mx.array_equal(a, b) and restored.offset == layer.offset == 7
    again = snapshot.restore(RotatingKVCache(max_size=4), state)
    assert again.offset == 6  # the first restore's update did not reach the snapshot


def test_nested_caches_and_recurrent_states_round_trip_through_flat_arrays(tmp_path):
    arrays = ArraysCache(2)
    arrays[0], arrays[1] = mx.ones((1, 3, 4)), mx.arange(6).reshape(1, 2, 3)
    kv = KVCache()
    kv.update_and_fetch(mx.ones((1, 1, 2, 2)), mx.zeros((1, 1, 2, 2)))
    layers = [snapshot.snapshot(arrays), snapshot.snapshot(CacheList(ArraysCache(2), kv)), snapshot.snapshot(filled_rotating(5))]
    path = str(tmp_path / "s.safetensors")
    mx.save_safetensors(path, snapshot.flatten(layers, "s"))
    back = snapshot.unflatten(mx.load(path), "s")
    for want, got in zip(layers, back):
        assert snapshot.nbytes(want) == snapshot.nbytes(got)
        assert [a.tolist() for a in snapshot.arrays_of(want)] == [a.tolist() for a in snapshot.arrays_of(got)]
    assert back[2]["offset"] == 5 and back[2]["_idx"] == layers[2]["_idx"]
    restored = snapshot.restore(CacheList(ArraysCache(2), KVCache()), back[1])
    assert restored.caches[1].offset == 2


def test_a_missing_or_foreign_snapshot_is_refused():
    with pytest.raises(KeyError):
        snapshot.unflatten({}, "s")
    state = snapshot.snapshot(CacheList(KVCache()))
    with pytest.raises(TypeError):
        snapshot.restore(CacheList(ArraysCache(1)), state)
