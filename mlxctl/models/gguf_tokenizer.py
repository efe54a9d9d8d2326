"""Rebuild a Hugging Face ``tokenizer.json`` from the tokenizer stored in GGUF metadata.

Byte-level BPE (``tokenizer.ggml.model == "gpt2"``): how text is split before BPE depends on
``tokenizer.ggml.pre``; each supported pre-type is one row of ``_PRE_TOKENIZERS``. SentencePiece
(``"llama"``) is rebuilt as a BPE with byte fallback (:mod:`mlxctl.models.gguf_sentencepiece`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_metadata import meta_bool, meta_int
from mlxctl.models.gguf_sentencepiece import sentencepiece_bpe

# ggml token types (llama.cpp's llama_token_type)
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

# GGUF special-token role -> tokenizer_config.json key
_SPECIAL_ROLES = {
    "bos": "bos_token",
    "eos": "eos_token",
    "padding": "pad_token",
    "unknown": "unk_token",
}

# llama.cpp's LLAMA_VOCAB_PRE_TYPE_LLAMA3 split regex
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2: the llama3 regex, one digit at a time
_QWEN2_SPLIT = _LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")


def _byte_level() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _digits_then_byte_level() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _byte_level()])


def _split_then_byte_level(pattern: str) -> pre_tokenizers.PreTokenizer:
    split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
    return pre_tokenizers.Sequence(
        [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )


def _llama3() -> pre_tokenizers.PreTokenizer:
    return _split_then_byte_level(_LLAMA3_SPLIT)


def _qwen2() -> pre_tokenizers.PreTokenizer:
    return _split_then_byte_level(_QWEN2_SPLIT)


_PRE_TOKENIZERS: Mapping[str, Callable[[], pre_tokenizers.PreTokenizer]] = {
    "default": _byte_level,
    "gpt-2": _byte_level,
    "smollm": _digits_then_byte_level,
    "llama-bpe": _llama3,
    "qwen2": _qwen2,
}
_NFC_PRE_TYPES = ("qwen2",)  # Qwen's tokenizer.json normalises to NFC first


def build_tokenizer(metadata: Mapping[str, object]) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` equal to the GGUF file's tokenizer."""
    tokens = list(metadata["tokenizer.ggml.tokens"])
    if _check_model(metadata) == "llama":
        tokenizer = sentencepiece_bpe(metadata)
        if (template := _bos_template(metadata)) is not None:
            tokenizer.post_processor = template
    else:
        tokenizer = _byte_level_bpe(metadata, tokens)
    types = _token_types(metadata, len(tokens))
    tokenizer.add_special_tokens(_added_tokens(tokens, types, CONTROL))
    tokenizer.add_tokens(_added_tokens(tokens, types, USER_DEFINED))
    return tokenizer


def _byte_level_bpe(metadata: Mapping[str, object], tokens: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(_bpe(tokens, metadata["tokenizer.ggml.merges"]))
    if metadata.get("tokenizer.ggml.pre") in _NFC_PRE_TYPES:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = _pre_tokenizer(metadata)()
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = _post_processor(metadata)
    return tokenizer


def write_tokenizer(metadata: Mapping[str, object], out_dir: Path, max_length: int) -> None:
    """Write tokenizer.json and tokenizer_config.json (with the chat template) into ``out_dir``."""
    build_tokenizer(metadata).save(str(out_dir / "tokenizer.json"))
    config = tokenizer_config(metadata, max_length)
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))


def tokenizer_config(metadata: Mapping[str, object], max_length: int) -> dict:
    """tokenizer_config.json for transformers' fast tokenizer over our tokenizer.json."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": meta_bool(metadata, "tokenizer.ggml.add_bos_token"),
    }
    for role, key in _SPECIAL_ROLES.items():
        if (token := special_token(metadata, role)) is not None:
            config[key] = token
    if template := metadata.get("tokenizer.chat_template"):
        config["chat_template"] = template
    return config


def special_token(metadata: Mapping[str, object], role: str) -> str | None:
    """The text of the ``role`` token (bos, eos, padding, unknown, eot), if the file names one."""
    token_id = meta_int(metadata, f"tokenizer.ggml.{role}_token_id")
    tokens = metadata["tokenizer.ggml.tokens"]
    return tokens[token_id] if token_id is not None and token_id < len(tokens) else None


def _check_model(metadata: Mapping[str, object]) -> str:
    model = metadata.get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        raise ModelFormatError(
            f"GGUF tokenizer model {model!r} is not supported",
            hint="mlxctl rebuilds byte-level BPE (tokenizer.ggml.model = gpt2) and SentencePiece"
            " (llama) tokenizers",
        )
    if model == "gpt2" and "tokenizer.ggml.merges" not in metadata:
        raise ModelFormatError("GGUF tokenizer has no tokenizer.ggml.merges")
    return model


def _bpe(tokens: list[str], merges: list[str]) -> models.BPE:
    vocab = {token: i for i, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    try:
        return models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
    except Exception as e:  # the tokenizers library raises a bare Exception
        raise ModelFormatError(f"GGUF tokenizer is inconsistent: {e}") from None


def _pre_tokenizer(metadata: Mapping[str, object]) -> Callable[[], pre_tokenizers.PreTokenizer]:
    pre = metadata.get("tokenizer.ggml.pre", "default")
    if pre not in _PRE_TOKENIZERS:
        raise ModelFormatError(
            f"GGUF pre-tokenizer {pre!r} is not supported",
            hint=f"supported tokenizer.ggml.pre values: {', '.join(sorted(_PRE_TOKENIZERS))}",
        )
    return _PRE_TOKENIZERS[pre]


def _post_processor(metadata: Mapping[str, object]) -> processors.PostProcessor:
    byte_level = processors.ByteLevel(trim_offsets=False)
    template = _bos_template(metadata)
    return byte_level if template is None else processors.Sequence([byte_level, template])


def _bos_template(metadata: Mapping[str, object]) -> processors.PostProcessor | None:
    """The template that puts BOS first, when the GGUF asks for one (add_bos_token)."""
    bos = special_token(metadata, "bos")
    if not meta_bool(metadata, "tokenizer.ggml.add_bos_token") or bos is None:
        return None
    bos_id = meta_int(metadata, "tokenizer.ggml.bos_token_id")
    return processors.TemplateProcessing(
        single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
    )


def _token_types(metadata: Mapping[str, object], count: int) -> list[int]:
    types = metadata.get("tokenizer.ggml.token_type")
    if types is None:
        return [NORMAL] * count
    if len(types) != count:
        raise ModelFormatError(f"GGUF tokenizer has {count} tokens but {len(types)} token types")
    return [int(t) for t in types.tolist()]


def _added_tokens(tokens: list[str], types: list[int], wanted: int) -> list[AddedToken]:
    special = wanted == CONTROL
    return [
        AddedToken(token, special=special, normalized=False)
        for token, kind in zip(tokens, types, strict=True)
        if kind == wanted
    ]
