"""Quantized layers fold a decode batch's rows into one matmul (models/quantized_rows.py)."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm.generate import generate_step

from mlxctl.generation import model_loader
from mlxctl.models.loader import load_model
from mlxctl.models.quantized_rows import RowsQuantizedEmbedding, RowsQuantizedLinear, fold_quantized_rows
from tests.models.helpers import TINY_CONFIG, build_tiny_llama


def _quantized_tiny(tied: bool):
    model = build_tiny_llama({**TINY_CONFIG, "vocab_size": 128, "tie_word_embeddings": tied})
    nn.quantize(model, group_size=32, bits=4)
    return model


def test_folded_layers_give_the_same_numbers_for_every_shape():
    mx.random.seed(3)
    linear = nn.Linear(64, 96).to_quantized(group_size=32, bits=4)
    embedding = nn.Embedding(50, 64).to_quantized(group_size=32, bits=4)
    shapes = [(64,), (5, 64), (7, 1, 64), (2, 3, 64), (2, 2, 3, 64)]
    inputs = [mx.random.normal(shape) for shape in shapes]
    ids = mx.array([[1, 4], [49, 0]])
    plain = [linear(x) for x in inputs] + [embedding.as_linear(x) for x in inputs] + [embedding(ids)]
    assert fold_quantized_rows(nn.Sequential(linear, embedding)) == 2
    assert type(linear) is RowsQuantizedLinear and type(embedding) is RowsQuantizedEmbedding
    folded = [linear(x) for x in inputs] + [embedding.as_linear(x) for x in inputs] + [embedding(ids)]
    for before, after in zip(plain, folded):
        assert before.shape == after.shape
        assert mx.array_equal(before, after).item()


def test_a_quantized_model_decodes_the_same_tokens_batched():
    for tied in (True, False):
        model = _quantized_tiny(tied)
        prompts = mx.array([[1, 5, 9, 30, 2], [7, 7, 3, 11, 4], [60, 2, 8, 8, 1]])
        before = model(prompts)
        swapped = fold_quantized_rows(model)
        assert swapped == 2 * 7 + (1 if tied else 2)  # q k v o gate up down per layer, embedding (+ head)
        assert mx.array_equal(before, model(prompts)).item()
        step = prompts[:, -1:]  # a decode step's shape: (rows, 1)
        assert model(step).shape == (3, 1, 128)


def test_float_and_subclassed_layers_are_left_alone():
    class Own(nn.QuantizedLinear):
        pass

    own = Own(64, 32, group_size=32, bits=4)
    dense = nn.Linear(64, 32)
    assert fold_quantized_rows(nn.Sequential(own, dense)) == 0
    assert type(own) is Own and type(dense) is nn.Linear


@pytest.mark.slow  # over 5 s on CI's two cores
def test_the_engine_loader_folds_and_real_weights_decode_as_before(smollm2):
    plain = load_model(smollm2.path, dtype="native")
    loaded = model_loader(str(smollm2.path), "native", None)()
    layers = [m for _, m in loaded.model.named_modules() if isinstance(m, nn.QuantizedLinear)]
    assert layers and all(type(m) is RowsQuantizedLinear for m in layers)
    prompt = mx.array(plain.tokenizer.encode("The capital of France is"))

    def greedy(model):
        return [int(t) for t, _ in generate_step(prompt, model, max_tokens=12)]

    assert greedy(loaded.model) == greedy(plain.model)
