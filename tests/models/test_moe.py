"""--moe-top-k: routing MoE blocks to fewer experts, on a tiny random Qwen3-MoE."""

from __future__ import annotations

import mlx.core as mx
import pytest

from mlxctl.errors import BadInputError
from mlxctl.models.dummy import PRESETS, build_model
from mlxctl.models.moe import moe_blocks, set_moe_top_k

TINY_MOE = dict(PRESETS["qwen3-moe-small"], hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                moe_intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                num_experts=8, num_experts_per_tok=4, vocab_size=100)
TINY_DENSE = dict(PRESETS["smollm2-135m"], hidden_size=64, num_hidden_layers=1, intermediate_size=128,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=100)


def logits(model):
    return model(mx.array([[1, 2, 3, 4]]))


def test_fewer_experts_change_every_block_and_the_output():
    model = build_model(TINY_MOE)
    before = logits(model)
    notes = []
    assert set_moe_top_k(model, 1, notes.append) == 2
    assert all(b.top_k == 1 for b in moe_blocks(model))
    assert not mx.allclose(before, logits(model)).item()
    assert "1 of 4 experts" in notes[0]


def test_the_trained_top_k_changes_nothing():
    model = build_model(TINY_MOE)
    before = logits(model)
    set_moe_top_k(model, 4)
    assert mx.allclose(before, logits(model)).item()


def test_out_of_range_is_refused():
    with pytest.raises(BadInputError, match="between 1 and the model's 4"):
        set_moe_top_k(build_model(TINY_MOE), 5)


def test_dense_models_get_a_notice_and_no_change():
    notes = []
    assert set_moe_top_k(build_model(TINY_DENSE), 2, notes.append) == 0
    assert "not a mixture-of-experts" in notes[0]
