"""What a Hugging Face folder's config.json and tokenizer files say: context, attention, template."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlxctl.errors import ModelFormatError

_CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "seq_length", "n_positions", "n_ctx")


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelFormatError(
            f"{folder} has no config.json",
            hint="a model folder holds config.json next to its *.safetensors files",
        )
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{path} is not a JSON object")
    return config


def _context_length(config: Mapping, text: Mapping) -> int | None:
    for source in (config, text):
        for key in _CONTEXT_KEYS:
            if isinstance(source.get(key), int):
                return source[key]
    return None


def _attention(config: Mapping, text: Mapping) -> dict | None:
    def pick(*keys: str) -> int | None:
        for source in (text, config):
            for key in keys:
                if isinstance(source.get(key), int):
                    return source[key]
        return None

    layers = pick("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = pick("num_attention_heads", "n_head", "num_heads")
    hidden = pick("hidden_size", "n_embd", "d_model")
    if not (layers and heads):
        return None
    head_dim = pick("head_dim") or (hidden // heads if hidden else None)
    kv_heads = pick("num_key_value_heads", "num_kv_heads", "n_head_kv") or heads
    return {"layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}


def read_chat_template(folder: Path) -> str | None:
    """The chat template text of a Hugging Face folder, or None."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace")
    for name in ("chat_template.json", "tokenizer_config.json"):
        try:
            data = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        template = _template_of(data)
        if isinstance(template, str) and template.strip():
            return template
    return None


def _template_of(data: Any) -> Any:
    """The ``chat_template`` of a tokenizer file's JSON: the default one of a named list."""
    template = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template
