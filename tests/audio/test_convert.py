"""faster-whisper → mlx-audio Whisper: names, shapes, Q/K/V split, int8, tokenizer, the folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlxctl.audio.ctranslate2 import read_model
from mlxctl.audio.whisper_convert import (
    N_TIMESTAMPS,
    RECIPE,
    add_timestamp_tokens,
    convert_whisper,
    dimensions,
    is_faster_whisper,
    is_mlx_whisper,
    whisper_weights,
)
from mlxctl.errors import ModelFormatError
from tests.audio.helpers import (
    toy_dims,
    toy_faster_whisper,
    toy_tokenizer,
    toy_variables,
)


def mlx_audio_parameters(dims: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of mlx-audio's own Whisper built from ``dims``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions

    model = Model(ModelDimensions.from_dict(dims), dtype=mx.float32)
    return {name: tuple(value.shape) for name, value in tree_flatten(model.parameters())}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return toy_faster_whisper(tmp_path_factory.mktemp("toy") / "fw")


def test_names_and_shapes_match_mlx_audio(toy):
    model = read_model(toy)
    dims = dimensions(model)
    assert dims == toy_dims()
    weights = whisper_weights(model)
    assert {k: v.shape for k, v in weights.items()} == mlx_audio_parameters(dims)


def test_fused_projections_are_split_and_the_key_bias_dropped(toy):
    model = read_model(toy)
    weights, s = whisper_weights(model), toy_dims()["n_audio_state"]
    qkv = model.variables["encoder/layer_0/self_attention/linear_0/weight"]
    bias = model.variables["encoder/layer_0/self_attention/linear_0/bias"]
    np.testing.assert_array_equal(weights["encoder.blocks.0.attn.query.weight"], qkv[:s])
    np.testing.assert_array_equal(weights["encoder.blocks.0.attn.key.weight"], qkv[s : 2 * s])
    np.testing.assert_array_equal(weights["encoder.blocks.0.attn.value.weight"], qkv[2 * s :])
    np.testing.assert_array_equal(weights["encoder.blocks.0.attn.value.bias"], bias[2 * s :])
    assert "encoder.blocks.0.attn.key.bias" not in weights
    kv = model.variables["decoder/layer_1/attention/linear_1/weight"]
    np.testing.assert_array_equal(weights["decoder.blocks.1.cross_attn.key.weight"], kv[:s])
    np.testing.assert_array_equal(weights["decoder.blocks.1.cross_attn.value.weight"], kv[s:])
    conv = model.variables["encoder/conv1/weight"]  # (out, in, width) -> (out, width, in)
    np.testing.assert_array_equal(weights["encoder.conv1.weight"], conv.transpose(0, 2, 1))
    assert weights["decoder.positional_embedding"].shape == (448, s)


def test_int8_weights_are_dequantized(tmp_path, toy):
    exact = whisper_weights(read_model(toy))
    quantized = whisper_weights(read_model(toy_faster_whisper(tmp_path / "q", int8=True)))
    assert exact.keys() == quantized.keys()
    for name in ("decoder.token_embedding.weight", "encoder.blocks.1.mlp1.weight", "decoder.blocks.0.attn.query.weight"):
        assert quantized[name].dtype == np.float32
        error = np.abs(quantized[name] - exact[name].astype(np.float32)).max()
        assert error <= np.abs(exact[name].astype(np.float32)).max() / 127 + 1e-6, name


def test_unknown_variables_and_other_specs_are_refused(tmp_path):
    from mlxctl.audio.ctranslate2 import write_model

    variables = toy_variables(toy_dims())
    write_model(tmp_path / "model.bin", "WhisperSpec", {**variables, "decoder/extra/weight": np.ones((2, 2), np.float16)})
    with pytest.raises(ModelFormatError, match="decoder/extra/weight"):
        whisper_weights(read_model(tmp_path))
    write_model(tmp_path / "model.bin", "TransformerSpec", variables)
    with pytest.raises(ModelFormatError, match="not Whisper"):
        whisper_weights(read_model(tmp_path))


def test_timestamp_tokens_follow_notimestamps():
    tokenizer, n_vocab = toy_tokenizer(), toy_dims()["n_vocab"]
    assert add_timestamp_tokens(tokenizer, n_vocab) == N_TIMESTAMPS
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    first = ids["<|notimestamps|>"] + 1
    assert ids["<|0.00|>"] == first and ids["<|0.02|>"] == first + 1
    assert ids["<|30.00|>"] == first + 1500 == n_vocab - 1
    assert add_timestamp_tokens(tokenizer, n_vocab) == 0  # already there
    with pytest.raises(ModelFormatError, match="the tokenizer has"):
        add_timestamp_tokens(toy_tokenizer(), n_vocab + 1)


def test_toy_folder_converts_and_mlx_audio_loads_it(tmp_path, toy):
    import mlx_audio.stt

    assert is_faster_whisper(toy) and not is_faster_whisper(tmp_path)
    facts = convert_whisper(toy, tmp_path / "out", dtype="float32")
    out = tmp_path / "out"
    assert is_mlx_whisper(out)
    assert json.loads((out / "config.json").read_text()) == {"model_type": "whisper", **toy_dims()}
    assert json.loads((out / "generation_config.json").read_text()) == {"alignment_heads": [[1, 0], [1, 1]]}
    assert facts["dtypes"] == ["float32"] and facts["timestamp_tokens_added"] == N_TIMESTAMPS
    model = mlx_audio.stt.load(out, strict=True)  # mlx-audio's own loader, every weight used
    assert model.get_tokenizer().timestamp_begin == toy_dims()["n_vocab"] - N_TIMESTAMPS
    assert facts["parameters"] == sum(int(np.prod(s)) for s in mlx_audio_parameters(toy_dims()).values())


def test_real_tiny_en(tiny_whisper, tiny_model):
    """The catalog's tiny.en: every mlx-audio parameter, the 1501 timestamps, the manifest."""
    from mlx.utils import tree_flatten

    from mlxctl.models.manifest import read_manifest

    manifest = read_manifest(tiny_whisper.path)
    assert manifest["recipe"]["method"] == RECIPE and manifest["kind"] == "stt" and manifest["format"] == "mlx"
    dims = manifest["dimensions"]
    assert (dims["n_audio_state"], dims["n_audio_layer"], dims["n_vocab"]) == (384, 4, 51864)
    loaded = dict(tree_flatten(tiny_model.model.parameters()))
    assert {k: tuple(v.shape) for k, v in loaded.items()} == mlx_audio_parameters(dims)
    assert sum(v.size for v in loaded.values()) == manifest["parameters"] == 37_184_256
    tokenizer = tiny_model.model.get_tokenizer()
    assert tokenizer.timestamp_begin == 50363 and tokenizer.no_timestamps == 50362
    vocab = tokenizer.hf_tokenizer.get_vocab()
    assert vocab["<|0.00|>"] == 50363 and vocab["<|30.00|>"] == 51863
    assert tiny_model.model.dtype.__str__().endswith("float32")  # CPU: float32
