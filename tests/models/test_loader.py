import json
import shutil

import mlx.core as mx
import mlx.nn as nn
import pytest

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.dequantize import dequantize_model
from mlxctl.models.loader import DTYPES, context_length, load_model, weight_dtype
from tests.models.helpers import TINY_CONFIG, build_tiny_llama

TOKENS = mx.array([[1, 5, 9, 30, 2]])


def _quantized_tiny(bits_for=lambda path: 4):
    model = build_tiny_llama({**TINY_CONFIG, "vocab_size": 128})

    def predicate(path, module):
        return hasattr(module, "to_quantized") and {"group_size": 32, "bits": bits_for(path)}

    nn.quantize(model, class_predicate=predicate)
    return model


def test_dequantize_keeps_outputs_and_tied_embedding():
    model = _quantized_tiny(lambda p: 8 if "embed" in p else 4)
    before = model(TOKENS)
    assert dequantize_model(model, mx.float32) == 2 * 7 + 1
    assert type(model.model.embed_tokens) is nn.Embedding
    assert type(model.model.layers[1].mlp.down_proj) is nn.Linear
    assert model.model.layers[0].self_attn.q_proj.weight.dtype == mx.float32
    assert mx.allclose(model(TOKENS), before, atol=1e-4).item()


def test_dequantize_partial_quantization():
    model = _quantized_tiny()
    model.model.layers[0].update_modules(
        {
            "mlp": {
                "up_proj": nn.Linear(
                    TINY_CONFIG["hidden_size"], TINY_CONFIG["intermediate_size"], bias=False
                )
            }
        }
    )
    assert dequantize_model(model, mx.float16) == 2 * 7
    assert model.model.layers[1].mlp.up_proj.weight.dtype == mx.float16


def test_dequantize_nothing_quantized():
    assert dequantize_model(build_tiny_llama({**TINY_CONFIG, "vocab_size": 64}), mx.float32) == 0


def test_weight_dtype():
    assert weight_dtype("native") is None
    assert weight_dtype("bfloat16") == mx.bfloat16
    expected = mx.float32 if mx.default_device().type == mx.cpu else None
    assert weight_dtype("auto") == expected


@pytest.mark.parametrize("bad", ["fp32", "int8", "", "Float32"])
def test_bad_dtype(bad, tiny_model_dir):
    with pytest.raises(BadInputError) as caught:
        load_model(tiny_model_dir, bad)
    assert all(name in caught.value.hint for name in DTYPES)


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_dtypes(tiny_model_dir, dtype):
    loaded = load_model(tiny_model_dir, dtype)
    expected = weight_dtype(dtype) or mx.float32  # the tiny model is stored in float32
    assert loaded.model.model.layers[0].mlp.gate_proj.weight.dtype == expected
    assert loaded.context_length == 256
    assert loaded.eos_token_ids == {2}
    assert loaded.name == "tiny"
    assert loaded.config["model_type"] == "llama"
    assert loaded.model(TOKENS).shape == (1, 5, loaded.config["vocab_size"])


def test_name_override(tiny_model_dir):
    assert load_model(tiny_model_dir, "native", name="x").name == "x"


def test_missing_folder(tmp_path):
    with pytest.raises(ModelNotFoundError):
        load_model(tmp_path / "nope")


def test_unknown_architecture(tiny_model_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "model_type": "no_such_arch"}))
    with pytest.raises(ModelFormatError, match="cannot load broken"):
        load_model(broken)


@pytest.mark.parametrize(
    "config,expected",
    [
        ({"max_position_embeddings": 8192}, 8192),
        ({"n_ctx": 1024}, 1024),
        ({"text_config": {"max_position_embeddings": 32768}}, 32768),
        ({}, 4096),
    ],
)
def test_context_length(config, expected):
    assert context_length(config) == expected
