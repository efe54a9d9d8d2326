"""The Hugging Face llama ``config.json`` and ``generation_config.json`` of a GGUF file."""

from __future__ import annotations

from collections.abc import Mapping

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_metadata import meta_float, meta_int

_DEFAULT_ROPE_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-5


def llama_config(metadata: Mapping[str, object], weights: Mapping[str, object]) -> dict:
    """config.json for mlx-lm's llama model, from GGUF metadata and the converted weights."""
    heads, kv_heads = head_counts(metadata)
    hidden = _required(metadata, "llama.embedding_length")
    head_dim = meta_int(metadata, "llama.attention.key_length") or hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": _required(metadata, "llama.feed_forward_length"),
        "num_hidden_layers": _required(metadata, "llama.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": meta_float(
            metadata, "llama.attention.layer_norm_rms_epsilon", _DEFAULT_RMS_EPS
        ),
        "rope_theta": meta_float(metadata, "llama.rope.freq_base", _DEFAULT_ROPE_THETA),
        "max_position_embeddings": _required(metadata, "llama.context_length"),
        "vocab_size": _vocab_size(metadata),
        "tie_word_embeddings": "lm_head.weight" not in weights,
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in weights,
        "mlp_bias": False,
        **_token_ids(metadata),
    }
    _check_rope(metadata, head_dim)
    if scaling := _rope_scaling(metadata):
        config["rope_scaling"] = scaling
    return config


def head_counts(metadata: Mapping[str, object]) -> tuple[int, int]:
    """(attention heads, key/value heads)."""
    heads = _required(metadata, "llama.attention.head_count")
    return heads, meta_int(metadata, "llama.attention.head_count_kv") or heads


def generation_config(metadata: Mapping[str, object]) -> dict:
    """generation_config.json: every end-of-turn token id, so generation stops on each."""
    ids = _token_ids(metadata)
    eos = [ids[key] for key in ("eos_token_id", "eot_token_id", "eom_token_id") if key in ids]
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


def _vocab_size(metadata: Mapping[str, object]) -> int:
    size = meta_int(metadata, "llama.vocab_size")
    return size if size is not None else len(metadata["tokenizer.ggml.tokens"])


def _check_rope(metadata: Mapping[str, object], head_dim: int) -> None:
    dims = meta_int(metadata, "llama.rope.dimension_count")
    if dims is not None and dims != head_dim:
        raise ModelFormatError(
            f"GGUF rotary dimension {dims} differs from the head size {head_dim}",
            hint="partial rotary embeddings are not supported for llama GGUF imports",
        )


def _rope_scaling(metadata: Mapping[str, object]) -> dict | None:
    kind = metadata.get("llama.rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind != "linear":
        raise ModelFormatError(f"GGUF rope scaling {kind!r} is not supported (only linear)")
    return {"type": "linear", "factor": meta_float(metadata, "llama.rope.scaling.factor", 1.0)}


def _required(metadata: Mapping[str, object], key: str) -> int:
    value = meta_int(metadata, key)
    if value is None:
        raise ModelFormatError(f"GGUF metadata lacks {key}")
    return value
