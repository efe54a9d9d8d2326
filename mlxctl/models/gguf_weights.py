"""GGUF tensors -> Hugging Face weight names, with llama.cpp's Q/K permutation undone (llama).

llama.cpp permutes the Q/K rows of the ``llama`` architecture only; the others are stored in
Hugging Face order. Gemma 2/3 have four norms per block, named differently (``ffn_norm`` is their
pre-feed-forward norm); Qwen 3 adds per-head Q/K norms; Qwen 3 MoE has a router
(``ffn_gate_inp``) and stacked ``(experts, out, in)`` expert tensors, mlx-lm's ``switch_mlp``;
Phi-3 keeps fused ``attn_qkv`` and gate+up ``ffn_up`` tensors, as mlx-lm's phi3 does.

``mlx.core.load`` returns Q4_0/Q4_1/Q8_0 tensors as MLX affine-quantised triplets
(``.weight``/``.scales``/``.biases``, group size 32); each triplet keeps its module's name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import mlx.core as mx

from mlxctl.errors import ModelFormatError

GGUF_GROUP_SIZE = 32  # every GGUF block quantisation mlx reads uses blocks of 32

_TOP_LEVEL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_IN_BLOCK = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA3_BLOCK = {
    **_IN_BLOCK,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
}
_QK_NORMS = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
_GEMMA2_BLOCK = {k: v for k, v in _GEMMA3_BLOCK.items() if k not in _QK_NORMS}
_QWEN3_BLOCK = {**_IN_BLOCK, **_QK_NORMS}
_DENSE_FFN = ("ffn_gate", "ffn_up", "ffn_down")
_QWEN3MOE_BLOCK = {
    **{k: v for k, v in _QWEN3_BLOCK.items() if not k.startswith(_DENSE_FFN)},
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_exps": "mlp.switch_mlp.gate_proj",
    "ffn_up_exps": "mlp.switch_mlp.up_proj",
    "ffn_down_exps": "mlp.switch_mlp.down_proj",
}
_PHI3_BLOCK = {
    **{k: v for k, v in _IN_BLOCK.items() if k not in ("attn_q", "attn_k", "attn_v", "ffn_gate")},
    "attn_qkv": "self_attn.qkv_proj",
    "ffn_up": "mlp.gate_up_proj",
}
BLOCK_NAMES = {
    "llama": _IN_BLOCK,
    "qwen2": _IN_BLOCK,
    "qwen3": _QWEN3_BLOCK,
    "qwen3moe": _QWEN3MOE_BLOCK,
    "gemma2": _GEMMA2_BLOCK,
    "gemma3": _GEMMA3_BLOCK,
    "phi3": _PHI3_BLOCK,
}
PERMUTED = ("llama",)  # architectures whose Q/K rows llama.cpp interleaves
_SUFFIXES = ("weight", "scales", "biases", "bias")


def unpermute_rows(a: mx.array, n_heads: int) -> mx.array:
    """Undo llama.cpp's per-head row interleave of a Q or K projection (weight/scales/biases)."""
    rows = a.shape[0]
    if rows % (2 * n_heads):
        raise ModelFormatError(f"cannot split {rows} rows into {n_heads} rotary heads")
    split = a.reshape(n_heads, rows // n_heads // 2, 2, *a.shape[1:])
    return split.swapaxes(1, 2).reshape(a.shape)


def hf_name(gguf_name: str, arch: str = "llama") -> str:
    """The HF name of a GGUF tensor (``blk.3.attn_q.weight`` -> ``...q_proj.weight``)."""
    module, _, suffix = gguf_name.rpartition(".")
    if suffix not in _SUFFIXES:
        raise _unknown(gguf_name, arch)
    return f"{_hf_module(module, gguf_name, arch)}.{suffix}"


def convert_weights(
    tensors: Mapping[str, mx.array], n_heads: int, n_kv_heads: int, arch: str = "llama"
) -> dict:
    """Rename every tensor and undo the Q/K permutation; returns HF-named MLX arrays."""
    heads = {"self_attn.q_proj": n_heads, "self_attn.k_proj": n_kv_heads}
    converted = {}
    for name, array in tensors.items():
        new_name = hf_name(name, arch)
        module = new_name.rpartition(".")[0]
        for proj, count in heads.items():
            if arch in PERMUTED and module.endswith(proj):
                array = unpermute_rows(array, count)
        converted[new_name] = array
    return converted


def quantization_config(weights: Mapping[str, mx.array]) -> dict | None:
    """mlx-lm's ``quantization`` entry: the common bit width, plus overrides for other modules."""
    bits = {
        name[: -len(".scales")]: _bits(weights, name)
        for name in weights
        if name.endswith(".scales")
    }
    if not bits:
        return None
    common = Counter(bits.values()).most_common(1)[0][0]
    config: dict = {"group_size": GGUF_GROUP_SIZE, "bits": common, "mode": "affine"}
    for module, width in sorted(bits.items()):
        if width != common:
            config[module] = {"group_size": GGUF_GROUP_SIZE, "bits": width, "mode": "affine"}
    return config


def _bits(weights: Mapping[str, mx.array], scales_name: str) -> int:
    packed = weights[scales_name[: -len(".scales")] + ".weight"]
    return packed.shape[-1] // weights[scales_name].shape[-1]


def _hf_module(module: str, full_name: str, arch: str) -> str:
    if module in _TOP_LEVEL:
        return _TOP_LEVEL[module]
    parts, block = module.split("."), BLOCK_NAMES[arch]
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in block:
        return f"model.layers.{parts[1]}.{block[parts[2]]}"
    raise _unknown(full_name, arch)


def _unknown(name: str, arch: str) -> ModelFormatError:
    return ModelFormatError(
        f"GGUF tensor {name!r} has no place in a {arch} model",
        hint=f"mlxctl imports the tensors llama.cpp's converter writes for {arch}, no others",
    )
