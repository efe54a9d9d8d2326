"""The Hugging Face ``config.json`` and ``generation_config.json`` of a GGUF file.

Hyperparameters are ``{arch}.*`` metadata keys (``llama.block_count``, ``qwen2.block_count``);
llama and qwen2 share one layout (qwen2: QKV biases, no Q/K permutation, mlx-lm's qwen2 model),
gemma3 has its own (:mod:`mlxctl.models.gguf_gemma3`).
"""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_metadata import meta_float, meta_int

_DEFAULT_ROPE_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-5


_HF_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
# tokens that end a turn although the GGUF names one eos_token_id (llama.cpp finds them by text)
_END_TOKENS = {"qwen2": ("<|endoftext|>", "<|im_end|>"), "gemma3": ("<end_of_turn>",)}


def llama_config(metadata: Mapping[str, object], weights: Mapping[str, object]) -> dict:
    """config.json for mlx-lm's llama or qwen2 model, from GGUF metadata and converted weights."""
    arch = architecture(metadata)
    heads, kv_heads = head_counts(metadata)
    hidden = arch_int(metadata, "embedding_length")
    head_dim = meta_int(metadata, f"{arch}.attention.key_length") or hidden // heads
    config = {
        "architectures": [_HF_CLASSES[arch]],
        "model_type": arch,
        **common_config(metadata),
        "head_dim": head_dim,
        "tie_word_embeddings": "lm_head.weight" not in weights,
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in weights,
        "mlp_bias": False,
        **_token_ids(metadata),
    }
    _check_rope(metadata, head_dim)
    if scaling := _rope_scaling(metadata):
        config["rope_scaling"] = scaling
    return config


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
