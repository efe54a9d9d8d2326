"""Dummy weights: real architectures with random weights and the default model's tokenizer."""

from __future__ import annotations

import json

import pytest

from mlxctl.engine.engine import Engine
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError
from mlxctl.models.dummy import PRESETS, load_dummy


def test_a_larger_vocabulary_still_generates_decodable_text_greedily(tmp_path, smollm2):
    config = dict(PRESETS["smollm2-135m"], vocab_size=60000, num_hidden_layers=2)
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = load_dummy(str(tmp_path), smollm2.path, "float32")
    with Engine(lambda: loaded) as engine:
        got = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)).collect()
    assert all(t < 49152 for t in got.token_ids)
    assert got.text.strip()


def test_every_preset_builds(smollm2):
    from mlxctl.models.dummy import build_model

    for name, config in PRESETS.items():
        small = dict(config, num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                     block_dim=64, block_ff_dim=128)
        assert build_model(small) is not None, name


def test_the_borrowed_tokenizer_takes_the_models_context_length(tmp_path, smollm2):
    config = dict(PRESETS["smollm2-135m"], num_hidden_layers=1, max_position_embeddings=131072)
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = load_dummy(str(tmp_path), smollm2.path, "float32")
    assert loaded.context_length == 131072
    assert loaded.tokenizer.model_max_length == 131072  # not SmolLM2's 8192: no "indexing errors" warning


def tiny_config(tmp_path, **extra):
    config = dict(PRESETS["smollm2-135m"], num_hidden_layers=1, hidden_size=128, intermediate_size=256,
                  num_attention_heads=4, num_key_value_heads=2, **extra)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


def test_dummy_eos_scale_makes_sampled_answers_end_as_a_real_models_do(tmp_path, smollm2):
    loaded = load_dummy(tiny_config(tmp_path, dummy_eos_scale=10), smollm2.path, "float32")
    with Engine(lambda: loaded) as engine:
        done = [engine.submit(list(range(100, 300)), SamplingParams(temperature=1.0, max_tokens=64, seed=seed))
                .collect() for seed in range(4)]
    assert [got.finish_reason.value for got in done] == ["stop"] * 4  # unscaled, all four run to 64 tokens


@pytest.mark.parametrize("scale", [0, -1, "10", True])
def test_a_bad_dummy_eos_scale_is_refused_by_name(tmp_path, smollm2, scale):
    with pytest.raises(BadInputError, match="dummy_eos_scale must be a positive number"):
        load_dummy(tiny_config(tmp_path, dummy_eos_scale=scale), smollm2.path, "float32")
