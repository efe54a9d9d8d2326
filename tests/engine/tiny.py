"""A tiny random-weight llama and a character tokenizer for engine tests (no downloads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class CharTokenizer:
    """Token i decodes to one letter; enough for the detokenizer and stop strings."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + i % 26) for i in ids)


@dataclass
class TinyModel:
    model: Any
    tokenizer: Any = field(default_factory=CharTokenizer)
    eos_token_ids: set[int] = field(default_factory=set)
    context_length: int = 512
    vocab_size: int = 64
    name: str = "tiny-llama"
    config: dict = field(default_factory=dict)


def tiny_llama(seed: int = 0, vocab: int = 64, layers: int = 2, hidden: int = 64) -> Any:
    import mlx.core as mx
    from mlx_lm.models import llama

    mx.random.seed(seed)
    args = llama.ModelArgs(
        model_type="llama", hidden_size=hidden, num_hidden_layers=layers, intermediate_size=2 * hidden,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=vocab,
        tie_word_embeddings=True,
    )
    model = llama.Model(args)
    mx.eval(model.parameters())
    return model


def tiny_loaded(**kw: Any) -> TinyModel:
    return TinyModel(model=tiny_llama(), **kw)


def assert_same(a: Any, b: Any) -> None:
    """Two finished requests gave the same greedy tokens and logprobs (``logprobs=True``): this
    tiny random model's greedy tokens barely depend on its KV, so a block restored at a wrong
    position or layer can leave them unchanged where the logprobs move."""
    import pytest

    assert a.token_ids == b.token_ids
    assert [x.logprob for x in a.logprobs] == pytest.approx([x.logprob for x in b.logprobs], abs=1e-4)
