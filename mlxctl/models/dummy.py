"""Dummy weights: a real architecture built from a config, with random weights.

Everything but the output quality is real, which is all a speed measurement needs (vLLM calls
this ``--load-format dummy``). The model is an architecture preset or a ``config.json``; the
tokenizer is the default model's (SmolLM2, 49152 tokens), so any architecture runs on real text.
Ids beyond the tokenizer's vocabulary decode to nothing. A config's ``quantization`` key
(``{"group_size": 64, "bits": 4}``, as in an mlx-lm quantised checkpoint) quantises the random
weights (models/dummy_quantize.py), so a model too large for bf16 runs as it is deployed.
A ``dummy_eos_scale`` key (a config.json's, not a preset's) makes answers end (favour_eos).
"""

from __future__ import annotations

import copy
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
LLAMA_3_1_8B_4BIT = dict(LLAMA_3_1_8B, quantization={"group_size": 64, "bits": 4})  # as mlx-community ships it
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
# The real shapes of published models, key for key from their config.json files (only the keys
# the installed mlx-lm's ModelArgs reads, and max_position_embeddings for the context length).
GPT_OSS_20B = {  # openai/gpt-oss-20b: 20.9B, bf16 (the published experts are MXFP4)
    "model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 24, "intermediate_size": 2880,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
    "num_experts_per_tok": 4, "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "rms_norm_eps": 1e-5, "vocab_size": 201088, "rope_theta": 150000,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "original_max_position_embeddings": 4096, "truncate": False},
    "max_position_embeddings": 131072,
}
GEMMA3_12B = {  # google/gemma-3-12b-it's text tower: 11.8B, tied embeddings, 5 sliding layers to 1 global
    "model_type": "gemma3_text", "hidden_size": 3840, "num_hidden_layers": 48, "intermediate_size": 15360,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "query_pre_attn_scalar": 256,
    "sliding_window": 1024, "sliding_window_pattern": 6, "rms_norm_eps": 1e-6, "vocab_size": 262208,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "tie_word_embeddings": True, "max_position_embeddings": 131072,
}
QWEN3_NEXT_80B_A3B = {  # Qwen/Qwen3-Next-80B-A3B-Instruct: 79.7B, 4-bit (bf16 would be 159 GB)
    "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "intermediate_size": 5120,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "norm_topk_prob": True, "rms_norm_eps": 1e-6, "vocab_size": 151936,
    "rope_theta": 10000000.0, "partial_rotary_factor": 0.25, "rope_scaling": None, "attention_bias": False,
    "tie_word_embeddings": False, "max_position_embeddings": 262144,
    "quantization": {"group_size": 64, "bits": 4},
}
QWEN3_5_35B_A3B = {  # Qwen/Qwen3.5-35B-A3B's text tower: 34.7B, bf16 (69 GB; the vision tower is left out)
    "model_type": "qwen3_5_moe", "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": True,
        "rms_norm_eps": 1e-6, "vocab_size": 248320, "attention_bias": False, "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "max_position_embeddings": 262144,
    },
}
QWEN3_5_35B_A3B_4BIT = dict(QWEN3_5_35B_A3B, quantization={"group_size": 64, "bits": 4})
_LFM2_FULL = (2, 5, 8, 10, 12, 14)
LFM2_1_2B = {  # LiquidAI/LFM2-1.2B: 10 short-convolution layers (a small recurrent state) among 6 attention ones
    "model_type": "lfm2", "vocab_size": 65536, "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 128000, "norm_eps": 1e-5,
    "conv_bias": False, "conv_L_cache": 3, "block_dim": 2048, "block_ff_dim": 12288, "block_multiple_of": 256,
    "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True, "rope_theta": 1000000.0,
    "layer_types": ["full_attention" if i in _LFM2_FULL else "conv" for i in range(16)],
}
PRESETS = {"llama-3.2-1b": LLAMA_3_2_1B, "llama-3.1-8b": LLAMA_3_1_8B, "llama-3.1-8b-4bit": LLAMA_3_1_8B_4BIT,
           "smollm2-135m": SMOLLM2_135M, "qwen3-moe-small": QWEN3_MOE_SMALL,
           "qwen3-moe-medium": QWEN3_MOE_MEDIUM, "gpt-oss-20b": GPT_OSS_20B, "gemma3-12b": GEMMA3_12B,
           "qwen3-next-80b-a3b": QWEN3_NEXT_80B_A3B, "qwen3.5-35b-a3b": QWEN3_5_35B_A3B,
           "qwen3.5-35b-a3b-4bit": QWEN3_5_35B_A3B_4BIT, "lfm2-1.2b": LFM2_1_2B}
DEFAULT_PRESET = "llama-3.2-1b"


def dummy_config(ref: str | None) -> tuple[str, dict]:
    """(name, config) for a preset name, a config.json file or a folder holding one."""
    ref = ref or DEFAULT_PRESET
    if ref in PRESETS:
        return ref, copy.deepcopy(PRESETS[ref])  # ModelArgs may rewrite nested dicts (rope_parameters)
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
    model = arch.Model(args)
    tie_embeddings(model, config)
    return model


def tie_embeddings(model: Any, config: dict) -> None:
    """Drop the output head of a model whose checkpoint has none (Gemma 3 builds one and ties it
    only when loading finds no ``lm_head`` weight), so its shape is the deployed one."""
    if config.get("tie_word_embeddings") and getattr(model, "tie_word_embeddings", True) is False \
            and "lm_head" in model:
        model.tie_word_embeddings = True
        model.pop("lm_head")


def _output_head(model: Any) -> Any:
    """The untied output projection, at the top (most models) or in a text tower (Qwen3.5)."""
    for owner in (model, getattr(model, "language_model", None)):
        head = getattr(owner, "lm_head", None)
        if head is not None:
            return head
    return None


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
    head = _output_head(model)
    if head is not None and hasattr(head, "weight") and head.weight.shape[0] == emb.weight.shape[0]:
        head.weight = head.weight * keep.astype(head.weight.dtype)


def favour_eos(model: Any, config: dict, eos_ids: set[int]) -> None:
    """Scale the output rows of the end-of-sequence ids by the config's ``dummy_eos_scale``: their
    logits become that many times a random one, so an answer ends after a few tokens, as a real
    model's does (random weights alone almost never pick one of 49,152 ids: a client that treats
    a cut-off answer as an error, like Claude Code and Codex, could not finish a session)."""
    import mlx.core as mx

    scale = config.get("dummy_eos_scale")
    if scale is None:
        return
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise BadInputError(f"dummy_eos_scale must be a positive number, got {scale!r}")
    head = _output_head(model) or getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is None or not hasattr(head, "weight"):
        raise ModelFormatError("dummy_eos_scale: this architecture has no output head to scale")
    rows = mx.arange(head.weight.shape[0])[:, None]
    hit = mx.zeros(rows.shape, dtype=mx.bool_)
    for eos in eos_ids:
        hit = hit | (rows == eos)
    head.weight = head.weight * mx.where(hit, scale, 1.0).astype(head.weight.dtype)


def load_dummy(ref: str | None, tokenizer_dir: Path, dtype: str = "auto", seed: int = 0,
               prepare: Callable[[Any, dict], None] | None = None) -> Any:
    """A LoadedModel with random weights in ``dtype`` (auto: float32 on CPU, bfloat16 elsewhere).

    ``prepare(model, config)`` runs before the weights are evaluated (the tensor-parallel
    split; every rank draws the same weights from ``seed`` and keeps its share). Everything up
    to :func:`materialise` is lazy: a quantised model's full-precision weights never coexist."""
    import mlx.core as mx
    from mlx_lm.utils import load_tokenizer

    from mlxctl.models.dummy_quantize import quantize_dummy
    from mlxctl.models.loader import LoadedModel, context_length, weight_dtype

    name, config = dummy_config(ref)
    model = build_model(config, seed)
    if prepare is not None:
        prepare(model, config)
    model.set_dtype(weight_dtype(dtype) or mx.bfloat16)
    # The borrowed tokenizer's own limit (SmolLM2's 8192) is not this model's: a longer prompt
    # would log "longer than the specified maximum sequence length ... indexing errors".
    tokenizer = load_tokenizer(Path(tokenizer_dir), {"model_max_length": context_length(config)})
    silence_unknown_tokens(model, len(tokenizer.vocab))  # before quantising: packed zeros are not zeros
    favour_eos(model, config, set(tokenizer.eos_token_ids))
    quantize_dummy(model, config)
    materialise(model)
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, context_length=context_length(config),
                       eos_token_ids=set(tokenizer.eos_token_ids), name=f"dummy-{name}")


def materialise(model: Any) -> None:
    """Draw the random weights a tensor at a time, so the float32 draw behind one is freed
    before the next (at once, an 80B model's draws would need several times its size)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    for _, weight in tree_flatten(model.parameters()):
        mx.eval(weight)
