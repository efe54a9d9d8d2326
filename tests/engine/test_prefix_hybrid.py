"""Models whose caches cannot be cut at a block boundary (a sliding window, state-space layers)
are never trimmed to fake a hit: the prefix cache says its mode (``none``) and why, and serves
nothing, in memory or from the disk tier; their outputs match a run with the cache off.

Tiny random models of real mlx-lm architectures: Gemma 3 text (sliding-window layers keep an
mlx-lm ``RotatingKVCache`` of 8 positions, every other layer a full ``KVCache``) and Mamba
(state-space layers: ``ArraysCache``)."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix import PrefixReuse
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.models.dummy import build_model
from tests.engine.tiny import TinyModel, tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)
SYSTEM = [(7 * i + 3) % 97 + 1 for i in range(21)]  # 5 full blocks of 4, longer than the window
WINDOW = 8

CONFIGS = {
    "gemma3_text": dict(model_type="gemma3_text", hidden_size=64, num_hidden_layers=4, intermediate_size=128,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                        vocab_size=100, sliding_window=WINDOW, sliding_window_pattern=2,
                        max_position_embeddings=512),
    "mamba": dict(model_type="mamba", vocab_size=100, hidden_size=64, intermediate_size=128, state_size=8,
                  num_hidden_layers=2, conv_kernel=4, use_bias=False, use_conv_bias=True, time_step_rank=8),
}
CACHE_KINDS = {"gemma3_text": "RotatingKVCache", "mamba": "ArraysCache"}


def loaded_model(arch: str) -> TinyModel:
    model = build_model(CONFIGS[arch], seed=0)
    mx.eval(model.parameters())
    return TinyModel(model=model, name=f"tiny-{arch}", config=dict(CONFIGS[arch]), vocab_size=100)


def run(loaded: TinyModel, prompts: list[list[int]], **prefix) -> tuple[list, dict]:
    eng = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4, **prefix))).start()
    try:
        done = [eng.submit(p, GREEDY).collect() for p in prompts]
        return done, eng.stats()["prefix_cache"]
    finally:
        eng.shutdown()


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_the_model_really_has_caches_that_cannot_be_cut(arch):
    loaded = loaded_model(arch)
    cache = make_prompt_cache(loaded.model)
    loaded.model(mx.array([SYSTEM]), cache=cache)
    kinds = {type(c).__name__ for c in cache}
    assert CACHE_KINDS[arch] in kinds
    assert not all(c.is_trimmable() for c in cache)  # past the window / a recurrent state


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_no_hit_is_faked_and_the_cache_says_why(arch, tmp_path):
    loaded = loaded_model(arch)
    prompts = [SYSTEM, SYSTEM, SYSTEM + [40, 41, 42, 43, 44], [9] + SYSTEM]
    on, stats = run(loaded, prompts, cache_dir=str(tmp_path / "kv"))
    off, _ = run(loaded, prompts, enabled=False)
    assert [d.usage.cached_tokens for d in on] == [0, 0, 0, 0]
    assert [d.token_ids for d in on] == [d.token_ids for d in off]
    assert on[0].token_ids == on[1].token_ids
    assert stats["enabled"] is False and stats["mode"] == "none"
    assert CACHE_KINDS[arch] in stats["reason"] and "cannot be cut at block boundaries" in stats["reason"]
    assert "hits" not in stats and "blocks" not in stats  # no block store was ever made
    assert not (tmp_path / "kv").exists()  # nor a disk tier to serve blocks from after a restart


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_reuse_glue_refuses_the_model_itself(arch):
    """Below the engine: nothing is remembered or attached, whatever is asked."""
    from mlxctl.engine.request import Request

    loaded = loaded_model(arch)
    reuse = PrefixReuse(loaded, PrefixConfig(block_size=4))
    assert not reuse.enabled and reuse.cache is None
    cache = make_prompt_cache(loaded.model)
    loaded.model(mx.array([SYSTEM]), cache=cache)
    reuse.remember_tokens(SYSTEM, cache)  # a no-op, not a slice of a rotated window
    req = Request("r", SYSTEM + [5], GREEDY, None, 8)
    reuse.attach(req)
    assert req.cache is None and req.num_prefilled == 0 and req.cached_tokens == 0
    assert reuse.stats() == {"enabled": False, "mode": "none", "reason": reuse.reason}


def test_a_plain_kv_model_reports_block_mode():
    _, stats = run(tiny_loaded(), [SYSTEM, SYSTEM])
    assert stats["enabled"] is True and stats["mode"] == "blocks" and stats["reason"] is None
    assert stats["hit_tokens"] == 20
