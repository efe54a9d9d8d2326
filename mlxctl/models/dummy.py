"""Dummy weights: a real architecture built from a config, with random weights.

Everything but the output quality is real, which is all a speed measurement needs (vLLM calls
this ``--load-format dummy``). The model is an architecture preset or a ``config.json``; the
tokenizer is the default model's (SmolLM2, 49152 tokens), so any architecture runs on real text.
Ids beyond the tokenizer's vocabulary decode to nothing.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Callable

from mlxctl.errors import BadInputError, ModelFormatError

LLAMA_3_2_1B = {
    "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 8192,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "rms_norm_eps": 1e-5,
    "vocab_size": 128256, "rope_theta": 500000.0, "tie_word_embeddings": True,
    "max_position_embeddings": 131072,
}
LLAMA_3_1_8B = dict(  # a model worth splitting over GPUs (tensor-parallel benchmarks)
    LLAMA_3_2_1B, hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, head_dim=128,
    tie_word_embeddings=False,
)
SMOLLM2_135M = {
    "model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "intermediate_size": 1536,
    "num_attention_heads": 9, "num_key_value_heads": 3, "rms_norm_eps": 1e-5, "vocab_size": 49152,
    "rope_theta": 100000.0, "tie_word_embeddings": True, "max_position_embeddings": 8192,
}
QWEN3_MOE_SMALL = {
    "model_type": "qwen3_moe", "hidden_size": 1024, "num_hidden_layers": 8, "intermediate_size": 3072,
    "moe_intermediate_size": 384, "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
    "num_experts": 64, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "norm_topk_prob": True, "rms_norm_eps": 1e-6, "vocab_size": 49152, "rope_theta": 1000000.0,
    "tie_word_embeddings": False, "max_position_embeddings": 32768,
}
QWEN3_MOE_MEDIUM = dict(  # Qwen3-30B-A3B's layer shape, half the layers and experts (7.6B params)
    QWEN3_MOE_SMALL, hidden_size=2048, num_hidden_layers=24, intermediate_size=6144, moe_intermediate_size=768,
    num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=64, vocab_size=151936,
)
PRESETS = {"llama-3.2-1b": LLAMA_3_2_1B, "llama-3.1-8b": LLAMA_3_1_8B, "smollm2-135m": SMOLLM2_135M, "qwen3-moe-small": QWEN3_MOE_SMALL,
           "qwen3-moe-medium": QWEN3_MOE_MEDIUM}
DEFAULT_PRESET = "llama-3.2-1b"


def dummy_config(ref: str | None) -> tuple[str, dict]:
    """(name, config) for a preset name, a config.json file or a folder holding one."""
    ref = ref or DEFAULT_PRESET
    if ref in PRESETS:
        return ref, dict(PRESETS[ref])
    path = Path(ref).expanduser()
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise BadInputError(f"--load-format dummy needs an architecture preset or a config.json, got {ref!r}",
                            hint=f"presets: {', '.join(PRESETS)}")
    return path.parent.name, json.loads(path.read_text())


def build_model(config: dict, seed: int = 0) -> Any:
    """The architecture's mlx-lm Model class (found by module name), randomly initialised."""
    import mlx.core as mx

    try:
        arch = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
        args = arch.ModelArgs.from_dict(config)
    except (ImportError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"cannot build a {config.get('model_type')!r} model: {exc}") from None
    mx.random.seed(seed)
    return arch.Model(args)


def silence_unknown_tokens(model: Any, tokenizer_vocab: int) -> None:
    """Zero the embedding rows of ids the tokenizer cannot decode: with tied embeddings their
    logits become 0 while random in-vocabulary logits reach above it, so generated text is
    real text. Shapes, and so the work per step, stay those of the architecture."""
    import mlx.core as mx

    emb = getattr(getattr(model, "model", None), "embed_tokens", None)
    if emb is None or not hasattr(emb, "weight") or emb.weight.shape[0] <= tokenizer_vocab:
        return
    keep = (mx.arange(emb.weight.shape[0]) < tokenizer_vocab)[:, None]
    emb.weight = emb.weight * keep.astype(emb.weight.dtype)
    head = getattr(model, "lm_head", None)
    if head is not None and hasattr(head, "weight") and head.weight.shape[0] == emb.weight.shape[0]:
        head.weight = head.weight * keep.astype(head.weight.dtype)


def load_dummy(ref: str | None, tokenizer_dir: Path, dtype: str = "auto", seed: int = 0,
               prepare: Callable[[Any, dict], None] | None = None) -> Any:
    """A LoadedModel with random weights in ``dtype`` (auto: float32 on CPU, bfloat16 elsewhere).

    ``prepare(model, config)`` runs before the weights are evaluated (the tensor-parallel
    split; every rank draws the same weights from ``seed`` and keeps its share)."""
    import mlx.core as mx
    from mlx_lm.utils import load_tokenizer

    from mlxctl.models.loader import LoadedModel, context_length, weight_dtype

    name, config = dummy_config(ref)
    model = build_model(config, seed)
    if prepare is not None:
        prepare(model, config)
    model.set_dtype(weight_dtype(dtype) or mx.bfloat16)
    mx.eval(model.parameters())
    tokenizer = load_tokenizer(Path(tokenizer_dir))
    silence_unknown_tokens(model, len(tokenizer.vocab))
    mx.eval(model.parameters())
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, context_length=context_length(config),
                       eos_token_ids=set(tokenizer.eos_token_ids), name=f"dummy-{name}")
