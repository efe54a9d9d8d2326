"""import_gguf on tiny synthetic llama GGUFs: mlx-lm loads the folder, computes the same logits."""

import json

import mlx.core as mx
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.digest import file_sha256
from mlxctl.models.gguf import import_gguf
from tests.models.helpers import TINY_CONFIG, write_tiny_gguf

TOKENS = mx.array([[1, 40, 70, 90, 2, 120, 200, 5]])


def _load(folder):
    from mlx_lm import load

    return load(str(folder))


def _logits(model):
    return model(TOKENS).astype(mx.float32)


def test_float32_import_matches_source_model(tiny_gguf, tmp_path):
    path, source, _ = tiny_gguf
    model, _ = _load(import_gguf(path, tmp_path / "out"))
    assert mx.allclose(_logits(model), _logits(source), atol=1e-4).item()


def test_float16_import_is_close(tmp_path):
    path, source, _ = write_tiny_gguf(tmp_path / "f16.gguf", dtype=mx.float16)
    model, _ = _load(import_gguf(path, tmp_path / "out"))
    assert model.model.layers[0].self_attn.q_proj.weight.dtype == mx.float16
    assert mx.allclose(_logits(model), _logits(source), atol=5e-2).item()


def test_untied_output_becomes_lm_head(tmp_path):
    path, source, _ = write_tiny_gguf(tmp_path / "untied.gguf", {"tie_word_embeddings": False})
    out = import_gguf(path, tmp_path / "out")
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is False
    model, _ = _load(out)
    assert mx.allclose(_logits(model), _logits(source), atol=1e-4).item()


def test_config_from_metadata(tiny_model_dir):
    config = json.loads((tiny_model_dir / "config.json").read_text())
    for key in (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "head_dim",
        "rope_theta",
        "rms_norm_eps",
        "tie_word_embeddings",
    ):
        assert config[key] == TINY_CONFIG[key], key
    assert config["max_position_embeddings"] == 256
    assert config["model_type"] == "llama"
    assert "quantization" not in config


def test_generation_and_tokenizer_configs(tiny_model_dir):
    generation = json.loads((tiny_model_dir / "generation_config.json").read_text())
    assert generation == {"bos_token_id": 1, "eos_token_id": [2], "pad_token_id": 2}
    tok_config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    assert tok_config["eos_token"] == "<|im_end|>"
    assert tok_config["bos_token"] == "<|im_start|>"
    assert "<|im_start|>" in tok_config["chat_template"]


def test_manifest(tiny_gguf, tmp_path):
    path = tiny_gguf[0]
    out = import_gguf(path, tmp_path / "out", name="tiny")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["name"] == "tiny"
    assert manifest["source"] == str(path.resolve())
    assert manifest["source_sha256"] == file_sha256(path)
    assert manifest["recipe"] == "gguf-llama"


def test_progress_messages(tiny_gguf, tmp_path):
    messages = []
    import_gguf(tiny_gguf[0], tmp_path / "out", messages.append)
    assert messages[0] == "reading tiny.gguf"
    assert all(isinstance(m, str) and "\n" not in m for m in messages)


def test_mlx_lm_stops_on_eos(tiny_model_dir):
    _, tokenizer = _load(tiny_model_dir)
    assert tokenizer.eos_token_ids == {2}


@pytest.mark.parametrize(
    "metadata,message",
    [
        ({"llama.block_count": None}, "lacks llama.block_count"),
        ({"llama.attention.head_count": None}, "lacks llama.attention.head_count"),
        ({"llama.rope.scaling.type": "yarn"}, "rope scaling 'yarn'"),
        ({"llama.rope.dimension_count": mx.array(8, dtype=mx.uint32)}, "rotary dimension 8"),
        ({"tokenizer.ggml.model": "bert"}, "tokenizer model 'bert'"),
        ({"tokenizer.ggml.model": "llama"}, "SentencePiece tokenizer lacks one score per token"),
        ({"tokenizer.ggml.pre": "deepseek-llm"}, "pre-tokenizer 'deepseek-llm'"),
    ],
)
def test_unsupported_metadata(tmp_path, metadata, message):
    extra = {k: v for k, v in metadata.items() if v is not None}
    path, _, _ = write_tiny_gguf(tmp_path / "bad.gguf", **extra)
    if dropped := [k for k, v in metadata.items() if v is None]:
        _drop_metadata(path, dropped)
    with pytest.raises(ModelFormatError, match=message):
        import_gguf(path, tmp_path / "out")


def _drop_metadata(path, keys):
    tensors, metadata = mx.load(str(path), return_metadata=True)
    mx.save_gguf(str(path), tensors, {k: v for k, v in metadata.items() if k not in keys})
