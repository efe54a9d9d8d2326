"""A SentencePiece vocabulary from GGUF metadata (``tokenizer.ggml.model == "llama"``) as a BPE.

The GGUF holds the pieces and their scores but no merges. As Hugging Face's
``SentencePieceExtractor`` does, every way of splitting a piece into two pieces of the vocabulary
becomes a merge, ranked by the score of the merged piece (highest first; ties in vocabulary
order). Bytes missing from the vocabulary fall back to the ``<0xNN>`` byte pieces, spaces are
``▁``, and no space is prefixed unless ``tokenizer.ggml.add_space_prefix`` says so (Gemma: no).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_metadata import meta_bool

SPACE = "\u2581"
_UNKNOWN = "<unk>"


def sentencepiece_bpe(metadata: Mapping[str, object]) -> Tokenizer:
    """The BPE tokenizer (normalizer, pre-tokenizer, model, decoder) of a SentencePiece GGUF."""
    tokens = list(metadata["tokenizer.ggml.tokens"])
    scores = metadata.get("tokenizer.ggml.scores")
    if scores is None or len(scores) != len(tokens):
        raise ModelFormatError("GGUF SentencePiece tokenizer lacks one score per token")
    vocab = {token: i for i, token in enumerate(tokens)}
    unknown = _UNKNOWN if _UNKNOWN in vocab else None
    model = models.BPE(
        vocab=vocab,
        merges=merges_by_score(tokens, np.asarray(scores, dtype=np.float32)),
        unk_token=unknown,
        fuse_unk=True,
        byte_fallback=True,
    )
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = _normalizer(metadata)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    strip = [decoders.Strip(content=" ", left=1, right=0)] if _space_prefix(metadata) else []
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(), *strip]
    )
    return tokenizer


def merges_by_score(tokens: list[str], scores: np.ndarray) -> list[tuple[str, str]]:
    """Every (left, right) pair of pieces that makes a piece, best merged score first."""
    ids = {token: i for i, token in enumerate(tokens)}
    found = []
    for merged, token_id in ids.items():
        local = [
            (ids[merged[:cut]], ids[merged[cut:]])
            for cut in range(1, len(merged))
            if merged[:cut] in ids and merged[cut:] in ids
        ]
        found += [(-scores[token_id], token_id, left, right) for left, right in sorted(local)]
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [(tokens[left], tokens[right]) for _, _, left, right in found]


def _normalizer(metadata: Mapping[str, object]) -> normalizers.Normalizer:
    replace = normalizers.Replace(" ", SPACE)
    if _space_prefix(metadata):
        return normalizers.Sequence([normalizers.Prepend(SPACE), replace])
    return replace


def _space_prefix(metadata: Mapping[str, object]) -> bool:
    if "tokenizer.ggml.add_space_prefix" not in metadata:
        return True  # llama.cpp's default for SentencePiece vocabularies
    return meta_bool(metadata, "tokenizer.ggml.add_space_prefix")
