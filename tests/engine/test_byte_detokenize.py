"""The byte-table detokenizer gives exactly what the tokenizer's own decode gives, token by
token, on real tokenizers: real text, random ids (invalid UTF-8 on the way), special tokens."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from mlxctl.engine.byte_detokenize import ByteDetokenizer, byte_table
from mlxctl.engine.detokenize import IncrementalDetokenizer
from mlxctl.engine.output import make_detokenizer
from tests.engine.test_detokenize import tokenizer  # noqa: F401  (a trained byte-level BPE, vocab 300)

TEXT = "Héllo wörld, 日本語のテキスト, emoji 😀🎉👍🏽 🇫🇷 and code: def f(x):\n    return x ** 2\n"


@pytest.fixture(scope="module")
def smol(smollm2):
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    return load_tokenizer(smollm2.path)


def streamed(detok, ids: list[int]) -> str:
    return "".join(detok.add(i) for i in ids) + detok.flush()


@pytest.mark.parametrize("skip", [True, False])
def test_real_tokenizer_text_random_ids_and_specials_decode_as_the_tokenizer_does(smol, skip):
    rng = random.Random(3)
    ids = smol.encode(TEXT * 3)
    vocab = len(smol.vocab)
    sequences = [ids, [rng.randrange(vocab) for _ in range(2000)], [0, *ids[:40], 1, 2, *ids[40:80], 0]]
    for seq in sequences:
        detok = make_detokenizer(smol, skip)
        assert isinstance(detok, ByteDetokenizer)
        assert streamed(detok, seq) == smol.decode(seq, skip_special_tokens=skip)
        assert detok.text == smol.decode(seq, skip_special_tokens=skip)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=299), max_size=40))
def test_any_ids_of_a_small_byte_level_bpe(tokenizer, ids):  # noqa: F811
    for skip in (True, False):
        detok = make_detokenizer(tokenizer, skip)
        assert isinstance(detok, ByteDetokenizer)
        assert "".join(detok.add(i) for i in ids) + detok.flush() == tokenizer.decode(ids, skip_special_tokens=skip)


def test_tokenizers_that_are_not_plain_byte_level_keep_the_generic_path(tokenizer):  # noqa: F811
    cleaned = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, clean_up_tokenization_spaces=True)
    assert byte_table(cleaned) is None
    word = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    word.pre_tokenizer = pre_tokenizers.Whitespace()
    word.decoder = decoders.WordPiece()
    wordlevel = PreTrainedTokenizerFast(tokenizer_object=word, clean_up_tokenization_spaces=False)
    assert byte_table(wordlevel) is None
    assert isinstance(make_detokenizer(wordlevel, True), IncrementalDetokenizer)
    assert byte_table(object()) is None


def test_the_engine_builds_its_tokenizers_table_at_load_not_in_the_first_request():
    """Building the table reads the whole vocabulary (0.4 s for SmolLM2's on our CPU): done while
    the model loads, the first request's admission does not wait for it."""
    from mlxctl.engine import byte_detokenize
    from mlxctl.engine.engine import Engine
    from tests.engine.tiny import tiny_loaded

    loaded = tiny_loaded()
    assert loaded.tokenizer not in byte_detokenize._TABLES
    with Engine(lambda: loaded):
        assert loaded.tokenizer in byte_detokenize._TABLES
