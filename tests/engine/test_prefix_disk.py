"""The prefix cache's disk tier: crash-safe files, a SQLite index, and reuse across restarts."""

from __future__ import annotations

import sqlite3

import mlx.core as mx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.kv.disk import DiskTier
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from tests.engine.tiny import assert_same, tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=10, logprobs=True)
SYSTEM = list(range(1, 30))


def arrays(seed: int = 0) -> dict[str, mx.array]:
    mx.random.seed(seed)
    return {"0.k": mx.random.normal((1, 2, 4, 8)), "0.v": mx.random.normal((1, 2, 4, 8))}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(mx.array_equal(a[k], b[k]).item() for k in a)


def test_a_block_round_trips_and_survives_reopening(tmp_path):
    disk = DiskTier(tmp_path, 1 << 20, "fp")
    data = arrays()
    assert disk.put(b"h1", None, (1, 2, 3, 4), data)
    assert b"h1" in disk and len(disk) == 1 and disk.bytes > 0
    disk.close()
    again = DiskTier(tmp_path, 1 << 20, "fp")
    got = again.get(b"h1", (1, 2, 3, 4))
    assert got is not None and got.parent is None and same(got.arrays, data)
    assert again.stats()["disk_hits"] == 1


def test_another_fingerprint_or_other_tokens_never_match(tmp_path):
    DiskTier(tmp_path, 1 << 20, "model-a").put(b"h1", None, (1, 2), arrays())
    other = DiskTier(tmp_path, 1 << 20, "model-b")
    assert other.get(b"h1", (1, 2)) is None and len(other) == 0
    same_model = DiskTier(tmp_path, 1 << 20, "model-a")
    assert same_model.get(b"h1", (1, 3)) is None
    assert same_model.get(b"h1", (1, 2)) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip", "swap"])
def test_a_damaged_file_is_dropped_not_served(tmp_path, damage):
    disk = DiskTier(tmp_path, 1 << 20, "fp")
    disk.put(b"h1", None, (1,), arrays(1))
    disk.put(b"h2", None, (2,), arrays(2))
    path = tmp_path / "blocks" / (b"h1".hex() + ".safetensors")
    data = path.read_bytes()
    if damage == "truncate":  # a torn write
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:  # another block's (intact) file under this name
        path.write_bytes((tmp_path / "blocks" / (b"h2".hex() + ".safetensors")).read_bytes())
    assert disk.get(b"h1", (1,)) is None
    assert disk.stats()["disk_errors"] == 1 and b"h1" not in disk and not path.exists()
    assert disk.get(b"h2", (2,)) is not None


def test_what_a_crash_leaves_is_cleaned_at_start(tmp_path):
    disk = DiskTier(tmp_path, 1 << 20, "fp")
    disk.put(b"h1", None, (1,), arrays(1))
    disk.put(b"h2", None, (2,), arrays(2))
    disk.close()
    blocks = tmp_path / "blocks"
    (blocks / ".deadbeef.123.tmp").write_bytes(b"half a block")  # died before the rename
    (blocks / (b"h3".hex() + ".safetensors")).write_bytes(b"x")  # died before the index commit
    (blocks / (b"h2".hex() + ".safetensors")).unlink()  # a file lost under a row
    disk = DiskTier(tmp_path, 1 << 20, "fp")
    assert sorted(p.name for p in blocks.iterdir()) == [b"h1".hex() + ".safetensors"]
    assert len(disk) == 1 and disk.get(b"h1", (1,)) is not None


def test_the_size_cap_evicts_least_recently_used(tmp_path):
    one = DiskTier(tmp_path / "probe", 1 << 20, "fp")
    one.put(b"p", None, (1,), arrays())
    size = one.bytes
    disk = DiskTier(tmp_path / "c", 2 * size, "fp")
    disk.put(b"a", None, (1,), arrays())
    disk.put(b"b", None, (2,), arrays())
    assert disk.get(b"a", (1,)) is not None  # a is now more recent than b
    disk.put(b"c", None, (3,), arrays())
    assert b"b" not in disk and b"a" in disk and b"c" in disk
    assert disk.bytes <= 2 * size and disk.stats()["disk_evictions"] == 1
    rows = sqlite3.connect(tmp_path / "c" / "index.sqlite").execute("SELECT COUNT(*) FROM blocks").fetchone()[0]
    assert rows == 2 == len(list((tmp_path / "c" / "blocks").iterdir()))


def test_a_block_larger_than_the_cap_is_not_written(tmp_path):
    disk = DiskTier(tmp_path, 10, "fp")
    assert not disk.put(b"a", None, (1,), arrays())
    assert len(disk) == 0 and not list((tmp_path / "blocks").iterdir())


def test_an_unusable_directory_is_a_clear_error(tmp_path):
    from mlxctl.errors import BadInputError

    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(BadInputError, match="cannot use cache directory"):
        DiskTier(tmp_path / "file" / "sub", 1 << 20, "fp")


# -- through the engine ---------------------------------------------------------------------------


def engine(tmp_path, **kw) -> Engine:
    loaded = tiny_loaded()
    cfg = PrefixConfig(block_size=4, cache_dir=str(tmp_path / "kv"), **kw)
    return Engine(lambda: loaded, EngineConfig(prefix=cfg)).start()


def test_blocks_evicted_from_memory_are_served_from_disk(tmp_path):
    eng = engine(tmp_path, max_bytes=1)  # nothing stays in memory
    try:
        first = eng.submit(SYSTEM, GREEDY).collect()
        again = eng.submit(SYSTEM, GREEDY).collect()
        stats = eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()
    assert again.usage.cached_tokens == 28
    assert_same(again, first)
    assert stats["disk_writes"] >= 7 and stats["promoted_blocks"] >= 7 and stats["disk_hits"] >= 7


def test_the_cache_survives_a_restart_with_identical_greedy_output(tmp_path):
    eng = engine(tmp_path)
    try:
        first = eng.submit(SYSTEM, GREEDY).collect()
    finally:
        eng.shutdown()  # memory blocks are saved to disk
    eng = engine(tmp_path)
    try:
        assert eng.stats()["prefix_cache"]["disk_blocks"] >= 7
        again = eng.submit(SYSTEM, GREEDY).collect()
        cleared = eng.clear_prefix_cache(disk=True)
        after = eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()
    assert again.usage.cached_tokens == 28
    assert_same(again, first)
    assert cleared > 0 and after["disk_blocks"] == 0


def test_a_restart_with_another_fingerprint_does_not_reuse(tmp_path):
    eng = engine(tmp_path)
    try:
        eng.submit(SYSTEM, GREEDY).collect()
    finally:
        eng.shutdown()
    loaded = tiny_loaded(name="another-model")
    other = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4, cache_dir=str(tmp_path / "kv")))).start()
    try:
        assert other.submit(SYSTEM, GREEDY).collect().usage.cached_tokens == 0
    finally:
        other.shutdown()


# -- quantised blocks, on the real SmolLM2 ----------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_loaded(smollm2):
    from mlxctl.models.loader import load_model

    return load_model(smollm2.path)


def prompt_of(loaded, n: int = 200) -> list[int]:
    text = "The history of the printing press begins in the fifteenth century. " * 30
    return loaded.tokenizer.encode(text)[:n]


@pytest.mark.parametrize("bits", [8, pytest.param(4, marks=pytest.mark.slow)])
def test_quantised_blocks_are_smaller_and_still_hit(smollm2_loaded, tmp_path, bits):
    prompt, params = prompt_of(smollm2_loaded), SamplingParams(temperature=0.0, max_tokens=8)
    results = {}
    for b in (0, bits):
        cfg = PrefixConfig(block_size=64, bits=b, cache_dir=str(tmp_path / f"kv{b}"))
        eng = Engine(lambda: smollm2_loaded, EngineConfig(prefix=cfg)).start()
        try:
            cold = eng.submit(prompt, params).collect()
            warm = eng.submit(prompt, params).collect()
            results[b] = (cold, warm, eng.stats()["prefix_cache"])
        finally:
            eng.shutdown()
    (cold0, _, plain), (_, warm_q, quant) = results[0], results[bits]
    assert warm_q.usage.cached_tokens == 192 and quant["bits"] == bits
    per_block_plain, per_block_q = plain["bytes"] / plain["blocks"], quant["bytes"] / quant["blocks"]
    assert per_block_q < per_block_plain * (0.3 if bits == 8 else 0.2)  # float32 KV: 4 bytes a value
    if bits == 8:  # close enough that a short greedy answer does not move
        assert warm_q.token_ids == cold0.token_ids
    # the quantised blocks on disk are not served to an engine expecting full-precision ones
    eng = Engine(lambda: smollm2_loaded, EngineConfig(prefix=PrefixConfig(cache_dir=str(tmp_path / f"kv{bits}")))).start()
    try:
        assert eng.submit(prompt, params).collect().usage.cached_tokens == 0
    finally:
        eng.shutdown()
