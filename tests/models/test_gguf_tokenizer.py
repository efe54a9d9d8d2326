import json

import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_tokenizer import build_tokenizer, tokenizer_config
from tests.models.helpers import tiny_vocab, tokenizer_metadata

VOCAB = {token: i for i, token in enumerate(tiny_vocab())}


def test_merges_apply():
    tok = build_tokenizer(tokenizer_metadata())
    assert tok.encode(" the and").tokens == ["Ġthe", "Ġand"]


def test_smollm_splits_digits_one_by_one():
    tok = build_tokenizer(tokenizer_metadata("smollm"))
    assert tok.encode("12").tokens == ["1", "2"]


def test_default_pre_tokenizer_keeps_digit_runs():
    tok = build_tokenizer(tokenizer_metadata("default"))
    assert tok.encode("12").tokens == ["12"]


def test_llama3_pre_tokenizer_groups_three_digits():
    tok = build_tokenizer(tokenizer_metadata("llama-bpe"))
    assert [t for t in tok.encode("12345").tokens] == ["12", "3", "4", "5"]


def test_special_tokens_keep_their_ids_and_are_skipped_on_decode():
    tok = build_tokenizer(tokenizer_metadata())
    ids = tok.encode("<|im_start|>user\nthe<|im_end|>").ids
    assert ids[0] == VOCAB["<|im_start|>"] == 1
    assert ids[-1] == VOCAB["<|im_end|>"] == 2
    assert tok.decode(ids, skip_special_tokens=True) == "user\nthe"


@pytest.mark.parametrize("text", ["Hello, world 2024!", "café ☕ 日本語", "  spaces\tand\nlines  "])
def test_round_trip(text):
    tok = build_tokenizer(tokenizer_metadata())
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_add_bos_token_prepends_bos():
    from mlx.core import array

    metadata = {**tokenizer_metadata(), "tokenizer.ggml.add_bos_token": array(True)}
    assert build_tokenizer(metadata).encode("the").ids[0] == 1


def test_tokenizer_config_fields():
    config = tokenizer_config(tokenizer_metadata(), 512)
    assert config["bos_token"] == "<|im_start|>"
    assert config["eos_token"] == "<|im_end|>"
    assert config["pad_token"] == "<|im_end|>"
    assert config["unk_token"] == "<|endoftext|>"
    assert config["model_max_length"] == 512
    json.dumps(config)


def test_transformers_tokenizer_matches(tiny_model_dir):
    from mlx_lm import load

    _, wrapper = load(str(tiny_model_dir))
    direct = build_tokenizer(tokenizer_metadata())
    text = "<|im_start|>user\nthe 12 and café<|im_end|>"
    assert wrapper.encode(text) == direct.encode(text).ids
    prompt = wrapper.apply_chat_template(
        [{"role": "user", "content": "the"}], add_generation_prompt=True
    )
    assert wrapper.decode(prompt) == "<|im_start|>user\nthe<|im_end|>\n<|im_start|>assistant\n"


def test_bad_merges_are_a_format_error():
    metadata = {**tokenizer_metadata(), "tokenizer.ggml.merges": ["x yz"]}
    with pytest.raises(ModelFormatError, match="inconsistent"):
        build_tokenizer(metadata)


def test_qwen2_pre_tokenizer_splits_digits_and_normalises_to_nfc():
    tok = build_tokenizer(tokenizer_metadata("qwen2"))
    assert tok.encode("12").tokens == ["1", "2"]  # llama-bpe would keep "12"
    assert tok.encode("e\u0301").ids == tok.encode("\u00e9").ids  # NFC first


# -- SentencePiece (tokenizer.ggml.model = llama), rebuilt as BPE with byte fallback -------------

_SP_PIECES = ["<pad>", "<eos>", "<bos>", "<unk>", *[f"<0x{b:02X}>" for b in range(256)],
              "\u2581", "h", "e", "l", "o", "w", "r", "d", "ll", "he", "llo", "hello", "\u2581w",
              "\u2581wor", "or", "ld", "\u2581world", "<start_of_turn>"]  # fmt: skip


def sentencepiece_metadata(**extra) -> dict:
    import mlx.core as mx

    n_special, n_bytes = 4, 256
    kinds = [3, 3, 3, 2] + [6] * n_bytes + [1] * (len(_SP_PIECES) - n_special - n_bytes - 1) + [4]
    # normal pieces score by their order (the later, the worse); "hello" beats "he" + "llo"
    scores = [0.0] * (n_special + n_bytes) + [-float(i) for i in range(len(_SP_PIECES) - 260)]
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": _SP_PIECES,
        "tokenizer.ggml.scores": mx.array(scores, dtype=mx.float32),
        "tokenizer.ggml.token_type": mx.array(kinds, dtype=mx.int32),
        "tokenizer.ggml.bos_token_id": mx.array(2, dtype=mx.uint32),
        "tokenizer.ggml.eos_token_id": mx.array(1, dtype=mx.uint32),
        "tokenizer.ggml.unknown_token_id": mx.array(3, dtype=mx.uint32),
        "tokenizer.ggml.add_bos_token": mx.array(True),
        "tokenizer.ggml.add_space_prefix": mx.array(False),
        **extra,
    }


def test_sentencepiece_pieces_merge_by_score_and_bos_comes_first():
    tok = build_tokenizer(sentencepiece_metadata())
    assert tok.encode("hello world").tokens == ["<bos>", "hello", "\u2581world"]


def test_sentencepiece_falls_back_to_bytes_and_decodes_back():
    tok = build_tokenizer(sentencepiece_metadata())
    encoding = tok.encode("hé")
    assert encoding.tokens == ["<bos>", "h", "<0xC3>", "<0xA9>"]
    assert tok.decode(encoding.ids, skip_special_tokens=True) == "hé"


def test_sentencepiece_user_defined_pieces_are_matched_whole():
    tok = build_tokenizer(sentencepiece_metadata())
    assert tok.encode("<start_of_turn>hello").tokens == ["<bos>", "<start_of_turn>", "hello"]


def test_sentencepiece_space_prefix_when_the_file_asks_for_it():
    import mlx.core as mx

    tok = build_tokenizer(sentencepiece_metadata(**{"tokenizer.ggml.add_space_prefix": mx.array(True)}))
    assert tok.encode("world").tokens == ["<bos>", "\u2581world"]
    assert tok.decode(tok.encode("world").ids, skip_special_tokens=True) == "world"
