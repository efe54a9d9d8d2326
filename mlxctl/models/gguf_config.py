"""The Hugging Face ``config.json`` and ``generation_config.json`` of a GGUF file.

Hyperparameters are ``{arch}.*`` metadata keys (``llama.block_count``, ``qwen2.block_count``);
llama, qwen2 and qwen3 share one layout (qwen2: QKV biases; qwen3: Q/K norms; neither has the
Q/K permutation), the others have their own modules (``gguf_gemma3``, ``gguf_phi3`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_llama3_rope import llama3_rope_scaling
from mlxctl.models.gguf_metadata import meta_float, meta_int

_DEFAULT_ROPE_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-5


# GGUF architecture -> (mlx-lm model_type, Hugging Face class)
_HF_CLASSES = {
    "llama": ("llama", "LlamaForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
}
# tokens that end a turn although the GGUF names one eos_token_id (llama.cpp finds them by text)
_QWEN_END = ("<|endoftext|>", "<|im_end|>")
_END_TOKENS = {
    "qwen2": _QWEN_END,
    "qwen3": _QWEN_END,
    "qwen3moe": _QWEN_END,
    "gemma2": ("<end_of_turn>",),
    "gemma3": ("<end_of_turn>",),
    "phi3": ("<|end|>", "<|endoftext|>"),
}


def llama_config(
    metadata: Mapping[str, object], weights: Mapping[str, object], rope: Mapping | None = None
) -> dict:
    """config.json for mlx-lm's llama, qwen2, qwen3 (or qwen3_moe) model; ``rope`` holds a
    llama 3 ``rope_freqs.weight`` tensor where the file has one."""
    arch = architecture(metadata)
    head_dim = head_size(metadata)
    model_type, hf_class = _HF_CLASSES[arch]
    config = {
        "architectures": [hf_class],
        "model_type": model_type,
        **common_config(metadata),
        "head_dim": head_dim,
        "tie_word_embeddings": "lm_head.weight" not in weights,
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in weights,
        "mlp_bias": False,
        **_token_ids(metadata),
    }
    _check_rope(metadata, head_dim)
    if rope and "rope_freqs.weight" in rope:
        config["rope_scaling"] = llama3_rope_scaling(
            rope["rope_freqs.weight"], config["rope_theta"], head_dim
        )
    elif scaling := _rope_scaling(metadata):
        config["rope_scaling"] = scaling
    return config


def head_size(metadata: Mapping[str, object]) -> int:
    """``{arch}.attention.key_length``, else hidden / heads (llama.cpp's default)."""
    heads, _ = head_counts(metadata)
    key_length = meta_int(metadata, f"{architecture(metadata)}.attention.key_length")
    return key_length or arch_int(metadata, "embedding_length") // heads


def common_config(metadata: Mapping[str, object]) -> dict:
    """The config.json keys every architecture takes from its ``{arch}.*`` metadata."""
    arch = architecture(metadata)
    heads, kv_heads = head_counts(metadata)
    return {
        "hidden_size": arch_int(metadata, "embedding_length"),
        "intermediate_size": arch_int(metadata, "feed_forward_length"),
        "num_hidden_layers": arch_int(metadata, "block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": meta_float(
            metadata, f"{arch}.attention.layer_norm_rms_epsilon", _DEFAULT_RMS_EPS
        ),
        "rope_theta": meta_float(metadata, f"{arch}.rope.freq_base", _DEFAULT_ROPE_THETA),
        "max_position_embeddings": arch_int(metadata, "context_length"),
        "vocab_size": _vocab_size(metadata),
    }


def architecture(metadata: Mapping[str, object]) -> str:
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFormatError("GGUF metadata lacks general.architecture")
    return arch


def arch_int(metadata: Mapping[str, object], suffix: str) -> int:
    """The required ``{arch}.{suffix}`` integer."""
    return _required(metadata, f"{architecture(metadata)}.{suffix}")


def head_counts(metadata: Mapping[str, object]) -> tuple[int, int]:
    """(attention heads, key/value heads)."""
    heads = arch_int(metadata, "attention.head_count")
    kv_heads = meta_int(metadata, f"{architecture(metadata)}.attention.head_count_kv")
    return heads, kv_heads or heads


def generation_config(metadata: Mapping[str, object]) -> dict:
    """generation_config.json: every end-of-turn token id, so generation stops on each."""
    ids = _token_ids(metadata)
    eos = [ids[key] for key in ("eos_token_id", "eot_token_id", "eom_token_id") if key in ids]
    eos += _end_tokens_by_text(metadata)
    config = {"bos_token_id": ids.get("bos_token_id"), "eos_token_id": list(dict.fromkeys(eos))}
    if "pad_token_id" in ids:
        config["pad_token_id"] = ids["pad_token_id"]
    return config


def _token_ids(metadata: Mapping[str, object]) -> dict:
    roles = {"bos": "bos", "eos": "eos", "eot": "eot", "eom": "eom", "padding": "pad"}
    found = {}
    for role, key in roles.items():
        value = meta_int(metadata, f"tokenizer.ggml.{role}_token_id")
        if value is not None:
            found[f"{key}_token_id"] = value
    return found


def _end_tokens_by_text(metadata: Mapping[str, object]) -> list[int]:
    """Ids of the architecture's end-of-turn tokens (Qwen: ``<|endoftext|>`` too)."""
    tokens = metadata.get("tokenizer.ggml.tokens") or []
    wanted = set(_END_TOKENS.get(metadata.get("general.architecture"), ()))
    return [i for i, token in enumerate(tokens) if token in wanted]


def _vocab_size(metadata: Mapping[str, object]) -> int:
    size = meta_int(metadata, f"{architecture(metadata)}.vocab_size")
    return size if size is not None else len(metadata["tokenizer.ggml.tokens"])


def _check_rope(metadata: Mapping[str, object], head_dim: int) -> None:
    dims = meta_int(metadata, f"{architecture(metadata)}.rope.dimension_count")
    if dims is not None and dims != head_dim:
        raise ModelFormatError(
            f"GGUF rotary dimension {dims} differs from the head size {head_dim}",
            hint="partial rotary embeddings are not supported for GGUF imports",
        )


def _rope_scaling(metadata: Mapping[str, object]) -> dict | None:
    arch = architecture(metadata)
    kind = metadata.get(f"{arch}.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind != "linear":
        raise ModelFormatError(f"GGUF rope scaling {kind!r} is not supported (only linear)")
    return {"type": "linear", "factor": meta_float(metadata, f"{arch}.rope.scaling.factor", 1.0)}


def _required(metadata: Mapping[str, object], key: str) -> int:
    value = meta_int(metadata, key)
    if value is None:
        raise ModelFormatError(f"GGUF metadata lacks {key}")
    return value
