"""Synthetic GGUF files for the model-layer tests: a tiny llama with a tiny byte-level BPE vocab.

The GGUF layout is produced here independently of mlxctl's importer: names mapped HF -> GGUF
and Q/K rows permuted with a copy of llama.cpp's own ``permute`` (convert_hf_to_gguf.py).
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "n d", "Ġa nd", "1 2"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TINY_CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
}

_GGUF_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def bytes_to_unicode() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values, in byte order."""
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


def tiny_vocab() -> list[str]:
    merged = ["".join(m.split(" ")) for m in MERGES]
    return SPECIALS + bytes_to_unicode() + merged


def tokenizer_metadata(pre: str = "smollm") -> dict:
    tokens = tiny_vocab()
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": MERGES,
        "tokenizer.ggml.token_type": mx.array(types, dtype=mx.int32),
        "tokenizer.ggml.bos_token_id": mx.array(1, dtype=mx.uint32),
        "tokenizer.ggml.eos_token_id": mx.array(2, dtype=mx.uint32),
        "tokenizer.ggml.padding_token_id": mx.array(2, dtype=mx.uint32),
        "tokenizer.ggml.unknown_token_id": mx.array(0, dtype=mx.uint32),
        "tokenizer.ggml.add_bos_token": mx.array(False),
        "tokenizer.chat_template": CHAT_TEMPLATE,
    }


def llama_metadata(config: dict) -> dict:
    u32 = lambda v: mx.array(v, dtype=mx.uint32)  # noqa: E731
    return {
        "general.architecture": "llama",
        "llama.embedding_length": u32(config["hidden_size"]),
        "llama.feed_forward_length": u32(config["intermediate_size"]),
        "llama.block_count": u32(config["num_hidden_layers"]),
        "llama.attention.head_count": u32(config["num_attention_heads"]),
        "llama.attention.head_count_kv": u32(config["num_key_value_heads"]),
        "llama.rope.dimension_count": u32(config["head_dim"]),
        "llama.context_length": u32(config["max_position_embeddings"]),
        "llama.vocab_size": u32(config["vocab_size"]),
        "llama.rope.freq_base": mx.array(config["rope_theta"], dtype=mx.float32),
        "llama.attention.layer_norm_rms_epsilon": mx.array(
            config["rms_norm_eps"], dtype=mx.float32
        ),
    }


def llamacpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py's LlamaModel.permute (HF rows -> GGUF rows)."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def build_tiny_llama(config: dict, seed: int = 0):
    """A seeded random-weight mlx-lm llama model for ``config``."""
    from mlx_lm.models.llama import Model, ModelArgs

    mx.random.seed(seed)
    model = Model(ModelArgs.from_dict(config))
    params = tree_flatten(model.parameters())
    model.update(_unflatten({k: mx.random.normal(v.shape) * 0.2 for k, v in params}))
    mx.eval(model.parameters())
    return model


def gguf_tensors(model, config: dict, dtype=mx.float32) -> dict:
    """The model's weights named and permuted as llama.cpp writes them."""
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    out = {}
    for name, value in tree_flatten(model.parameters()):
        gguf_name = _gguf_name(name)
        array = np.array(value.astype(mx.float32))
        if (kind := gguf_name.split(".")[-2]) in heads:
            array = llamacpp_permute(array, heads[kind])
        is_norm = gguf_name.endswith("norm.weight")
        out[gguf_name] = mx.array(array).astype(mx.float32 if is_norm else dtype)
    return out


def write_tiny_gguf(path: Path, config: dict | None = None, dtype=mx.float32, **extra):
    """Write a tiny llama GGUF; returns (path, source model, full config)."""
    config = {**TINY_CONFIG, "vocab_size": len(tiny_vocab()), **(config or {})}
    model = build_tiny_llama(config)
    metadata = {**llama_metadata(config), **tokenizer_metadata(), **extra}
    mx.save_gguf(str(path), gguf_tensors(model, config, dtype), metadata)
    return path, model, config


def _gguf_name(hf_name: str) -> str:
    module, suffix = hf_name.rsplit(".", 1)
    if module.startswith("model.layers."):
        _, _, index, rest = module.split(".", 3)
        return f"blk.{index}.{_GGUF_NAMES[rest]}.{suffix}"
    return f"{_GGUF_NAMES[module]}.{suffix}"


def _unflatten(flat: dict):
    from mlx.utils import tree_unflatten

    return tree_unflatten(list(flat.items()))
