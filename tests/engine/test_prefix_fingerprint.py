"""The prefix cache's model fingerprint covers MoE routing (--moe-top-k) and the weights, so a
disk tier reloaded under another routing or other weights of the same name and config is never
served; the same model reloaded is."""

from __future__ import annotations

import mlx.core as mx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix import fingerprint
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.models.dummy import PRESETS, build_model
from mlxctl.models.moe import set_moe_top_k
from tests.engine.tiny import TinyModel, tiny_llama

GREEDY = SamplingParams(temperature=0.0, max_tokens=6)
PROMPT = [5, 17, 3, 42, 8, 9, 61, 2, 33, 14, 70, 1, 4]  # three full blocks of 4, then one token
TINY_MOE = dict(PRESETS["qwen3-moe-small"], hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                moe_intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                num_experts=8, num_experts_per_tok=4, vocab_size=100)


def moe_loaded(seed: int = 0, top_k: int | None = None) -> TinyModel:
    """A tiny random Qwen3-MoE, always named and configured alike; ``seed`` picks the weights."""
    model = build_model(TINY_MOE, seed=seed)
    mx.eval(model.parameters())
    if top_k is not None:
        set_moe_top_k(model, top_k)
    return TinyModel(model=model, name="tiny-moe", config=dict(TINY_MOE), vocab_size=100)


def run_once(loaded: TinyModel, cache_dir) -> tuple[int, tuple[int, ...], dict]:
    """Start an engine with a disk tier, send PROMPT, shut down (memory blocks go to disk)."""
    eng = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4, cache_dir=str(cache_dir)))).start()
    try:
        done = eng.submit(PROMPT, GREEDY).collect()
        stats = eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()
    return done.usage.cached_tokens, done.token_ids, stats


# -- the fingerprint itself ------------------------------------------------------------------


def test_same_model_same_fingerprint_and_each_change_gives_another():
    base = fingerprint(moe_loaded())
    assert fingerprint(moe_loaded()) == base  # rebuilt from the same seed: the same weights
    assert fingerprint(moe_loaded(top_k=4)) == base  # the trained top-k changes nothing
    changed = {
        "moe_top_k": fingerprint(moe_loaded(top_k=2)),
        "weights": fingerprint(moe_loaded(seed=1)),
        "name": fingerprint(TinyModel(model=moe_loaded().model, name="other", config=dict(TINY_MOE))),
    }
    assert all(fp != base for fp in changed.values()), changed
    assert len(set(changed.values())) == len(changed)


def test_one_changed_weight_value_among_the_sampled_ones_changes_it():
    loaded = TinyModel(model=tiny_llama())
    before = fingerprint(loaded)
    layer = loaded.model.model.layers[1].mlp.down_proj
    layer.weight = layer.weight.at[0, 0].add(1.0)  # the first value: always among the samples
    assert fingerprint(loaded) != before


def test_the_weights_dtype_changes_it():
    loaded = TinyModel(model=tiny_llama())
    before = fingerprint(loaded)
    loaded.model.set_dtype(mx.float16)
    assert fingerprint(loaded) != before


def test_quantised_weights_get_an_identity_too():
    import mlx.nn as nn

    a, b = tiny_llama(seed=0), tiny_llama(seed=3)
    for m in (a, b):
        nn.quantize(m, group_size=32, bits=4)
    assert fingerprint(TinyModel(model=a)) != fingerprint(TinyModel(model=b))
    assert fingerprint(TinyModel(model=a)) == fingerprint(TinyModel(model=a))


# -- the disk tier, reloaded -----------------------------------------------------------------


@pytest.fixture
def first_run(tmp_path):
    """The disk tier after one run of the MoE model with its trained routing."""
    cached, tokens, stats = run_once(moe_loaded(), tmp_path / "kv")
    assert cached == 0 and stats["enabled"]
    return tmp_path / "kv", tokens


def test_the_same_model_reloaded_hits_the_disk_tier(first_run):
    cache_dir, tokens = first_run
    cached, again, stats = run_once(moe_loaded(), cache_dir)
    assert cached == 12 and again == tokens
    assert stats["promoted_blocks"] == 3


def test_another_moe_top_k_gets_no_hits(first_run):
    cache_dir, _ = first_run
    cached, _, stats = run_once(moe_loaded(top_k=1), cache_dir)
    assert cached == 0 and stats["promoted_blocks"] == 0 and stats["disk_hits"] == 0
    # and the routed run's own blocks do not poison the trained routing's
    cached, _, _ = run_once(moe_loaded(), cache_dir)
    assert cached == 12


def test_other_weights_under_the_same_name_and_config_get_no_hits(first_run):
    cache_dir, _ = first_run
    cached, _, stats = run_once(moe_loaded(seed=1), cache_dir)
    assert cached == 0 and stats["promoted_blocks"] == 0 and stats["disk_hits"] == 0
