import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from mlxctl.engine.detokenize import IncrementalDetokenizer, StopMatcher

CORPUS = [
    "Héllo wörld, café crème brûlée!",
    "日本語のテキストです。中文也可以。",
    "Emoji time 😀🎉👍🏽 and 🇫🇷 flags",
    "naïve façade résumé, Ünïcödé ß ø å æ",
    "The quick brown fox jumps over the lazy dog.",
]
END = "<|end|>"


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """A real byte-level BPE (vocab 300): most non-ASCII characters span several tokens."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[END],
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, clean_up_tokenization_spaces=False)


def stream(detok: IncrementalDetokenizer, ids: list[int]) -> list[str]:
    return [detok.add(i) for i in ids] + [detok.flush()]


# --- IncrementalDetokenizer -------------------------------------------------------------------


@pytest.mark.parametrize("text", [*CORPUS, "👍🏽👍🏽 日本 x", "é", ""])
def test_streamed_text_equals_full_decode(tokenizer, text):
    ids = tokenizer.encode(text)
    detok = IncrementalDetokenizer(tokenizer)
    chunks = stream(detok, ids)
    assert "".join(chunks) == tokenizer.decode(ids) == text == detok.text
    assert not any("\ufffd" in chunk for chunk in chunks)


def test_partial_characters_are_held_until_complete(tokenizer):
    ids = tokenizer.encode("😀")
    assert len(ids) > 1  # the emoji's 4 bytes span several tokens
    detok = IncrementalDetokenizer(tokenizer)
    assert [detok.add(i) for i in ids] == [""] * (len(ids) - 1) + ["😀"]


def test_special_tokens_are_skipped_or_kept(tokenizer):
    ids = tokenizer.encode(f"ab{END}cd")
    assert "".join(stream(IncrementalDetokenizer(tokenizer), ids)) == "abcd"
    kept = IncrementalDetokenizer(tokenizer, skip_special_tokens=False)
    assert "".join(stream(kept, ids)) == f"ab{END}cd"


def test_truly_invalid_bytes_come_out_on_flush(tokenizer):
    ids = tokenizer.encode("日")[:1]  # the first bytes of a 3-byte character, never completed
    detok = IncrementalDetokenizer(tokenizer)
    assert detok.add(ids[0]) == ""
    assert detok.flush() == tokenizer.decode(ids)
    assert "\ufffd" in detok.text
    assert detok.flush() == ""


def test_context_ids_keep_the_first_tokens_leading_space():
    """A SentencePiece-style decoder drops the first token's leading space; context prevents it."""
    spm = Tokenizer(models.BPE())
    spm.pre_tokenizer = pre_tokenizers.Metaspace()
    spm.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=60, show_progress=False)
    spm.train_from_iterator(["once upon a time"] * 3, trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=spm, clean_up_tokenization_spaces=False)
    prompt, generated = wrapped.encode("once"), wrapped.encode("once upon a time")[1:]
    assert "".join(stream(IncrementalDetokenizer(wrapped), generated)) == "upon a time"
    with_context = IncrementalDetokenizer(wrapped, context_ids=prompt)
    assert "".join(stream(with_context, generated)) == " upon a time" == with_context.text


class CountingDecoder:
    def __init__(self, tokenizer):
        self.tokenizer, self.decoded = tokenizer, 0

    def decode(self, ids, skip_special_tokens=True):
        self.decoded += len(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def test_work_per_token_is_bounded(tokenizer):
    ids = tokenizer.encode(" ".join(CORPUS) * 20)
    counter = CountingDecoder(tokenizer)
    stream(IncrementalDetokenizer(counter), ids)
    assert counter.decoded < 12 * len(ids)  # a small window each time, not the whole output


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\ufffd")))
@example(text="a" + END)  # (the case CI drew once: left out, not failed)
def test_any_unicode_text_streams_exactly(tokenizer, text):
    # a special token's own text (the fixture's "<|end|>") encodes to that token, which streamed
    # text leaves out by design (skip_special_tokens): not text this property is about
    assume(END not in text)
    ids = tokenizer.encode(text)
    chunks = stream(IncrementalDetokenizer(tokenizer), ids)
    assert "".join(chunks) == tokenizer.decode(ids) == text
    assert not any("\ufffd" in chunk for chunk in chunks)


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(min_value=0, max_value=299), max_size=30))
def test_any_id_sequence_streams_like_a_full_decode(tokenizer, ids):
    assert "".join(stream(IncrementalDetokenizer(tokenizer), ids)) == tokenizer.decode(
        ids, skip_special_tokens=True
    )


# --- StopMatcher ------------------------------------------------------------------------------


def cut_at_first_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """Reference: scan as if streaming one character at a time; the first stop to complete wins."""
    for end in range(1, len(text) + 1):
        done = [s for s in stops if text[:end].endswith(s)]
        if done:
            return text[: end - max(len(s) for s in done)], True
    return text, False


def run(matcher: StopMatcher, chunks: list[str]) -> tuple[list[str], bool]:
    emitted, hit = [], False
    for chunk in chunks:
        out, hit = matcher.feed(chunk)
        emitted.append(out)
        if hit:
            return emitted, True
    return emitted + [matcher.flush()], False


def test_holds_back_a_possible_stop_and_releases_it():
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("abc ST") == ("abc ", False)
    assert matcher.feed("O") == ("", False)
    assert matcher.feed("p") == ("STOp", False)
    assert matcher.feed("xx STO") == ("xx ", False)
    assert matcher.flush() == "STO"


def test_stop_split_across_chunks_is_cut_and_then_silent():
    matcher = StopMatcher(["</end>"])
    assert matcher.feed("hello </e") == ("hello ", False)
    assert matcher.feed("nd> more") == ("", True)
    assert matcher.feed("again") == ("", True)
    assert matcher.flush() == ""
    assert matcher.stopped


def test_stop_at_the_very_start():
    assert StopMatcher(["##"]).feed("## rest") == ("", True)


def test_overlapping_and_multiple_stops():
    assert StopMatcher(["ab", "bc"]).feed("xabc") == ("x", True)
    assert StopMatcher(["abcd", "c"]).feed("abcd") == ("ab", True)  # "c" completes first
    assert StopMatcher(["bc", "abc"]).feed("zabc") == ("z", True)  # same end: the longer one
    matcher = StopMatcher(["abcd", "c"])
    assert run(matcher, list("abcd")) == (["", "", "ab"], True)


def test_no_stops_passes_everything_through():
    matcher = StopMatcher([])
    assert matcher.feed("anything") == ("anything", False)
    assert matcher.flush() == ""


def test_empty_stop_string_is_refused():
    with pytest.raises(ValueError):
        StopMatcher(["a", ""])


@st.composite
def text_stops_and_splits(draw):
    alphabet = st.sampled_from("abc😀é")
    stops = draw(st.lists(st.text(alphabet, min_size=1, max_size=4), max_size=3))
    text = draw(st.text(alphabet, max_size=30))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=10)))
    bounds = [0, *cuts, len(text)]
    return text, stops, [text[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=500, deadline=None)
@given(case=text_stops_and_splits())
def test_any_chunking_gives_the_text_cut_at_the_first_stop(case):
    text, stops, chunks = case
    emitted, hit = run(StopMatcher(stops), chunks)
    expected, expected_hit = cut_at_first_stop(text, stops)
    assert ("".join(emitted), hit) == (expected, expected_hit)
    so_far = ""
    for piece in emitted:  # at no point did any part of the stop string leak out
        so_far += piece
        assert expected.startswith(so_far)


def test_stop_matcher_reports_which_stop_hit():
    from mlxctl.engine.detokenize import StopMatcher

    m = StopMatcher(["world", "lo w", "xyz"])
    out = [m.feed(c) for c in ["hel", "lo w", "orld"]]
    assert "".join(t for t, _ in out) == "hel" and out[1][1] and m.matched == "lo w"
    assert StopMatcher(["a"]).matched is None
