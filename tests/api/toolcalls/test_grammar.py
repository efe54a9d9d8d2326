"""Forcing grammars compile with llguidance and admit exactly what the parser reads as calls."""

from __future__ import annotations

import pytest

from mlxctl.api.toolcalls import get_parser
from mlxctl.errors import BadInputError

from .helpers import TOOLS, normalized

llg = pytest.importorskip("llguidance")


class _ByteTokenizer:
    """A tokenizer with one token per byte, so any text can be fed to a matcher."""

    eos_token_id = 256
    bos_token_id = None
    tokens = tuple([bytes([i]) for i in range(256)] + [b"<eos>"])
    special_token_ids = (256,)

    def __call__(self, text):
        return list(text.encode() if isinstance(text, str) else text)


@pytest.fixture(scope="module")
def tokenizer():
    return llg.LLTokenizer(llg.TokenizerWrapper(_ByteTokenizer()))


def _accepts(tokenizer, grammar: str, text: str) -> bool:
    matcher = llg.LLMatcher(tokenizer, llg.LLMatcher.grammar_from_lark(grammar), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    ok = matcher.consume_tokens(list(text.encode()))
    return bool(ok) and not matcher.is_error() and matcher.is_accepting()


CASES = {
    "hermes": (
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
        ),
        '<tool_call>\n{"name": "get_weather", "arguments": {"days": 2}}\n</tool_call>',  # no city
    ),
    "llama3_json": (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}',
        '{"name": "get_weather", "parameters": {"city": 3}}',
    ),
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_forcing_grammar_compiles_and_matches_the_parser(fmt, tokenizer):
    cls = get_parser(fmt)
    good, bad = CASES[fmt]
    grammar = cls.forcing_grammar(TOOLS, None, parallel=True)
    assert llg.LLMatcher.validate_grammar(llg.LLMatcher.grammar_from_lark(grammar), tokenizer) == ""
    assert _accepts(tokenizer, grammar, good)
    assert normalized(cls.parse(good, TOOLS))[1] == [
        ("get_weather", {"city": "Paris", "days": 2} if fmt == "hermes" else {"city": "Paris"}),
        ("get_time", {}),
    ]
    assert not _accepts(tokenizer, grammar, bad)  # arguments off the schema
    assert not _accepts(tokenizer, grammar, "Just some text.")  # a call is required


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_forcing_grammar_for_a_named_tool(fmt, tokenizer):
    cls = get_parser(fmt)
    grammar = cls.forcing_grammar(TOOLS, "get_time")
    good, _ = CASES[fmt]
    assert not _accepts(tokenizer, grammar, good)  # get_weather is not allowed
    only_time = good.split("\n<tool_call>")[0] if fmt == "hermes" else good
    assert not _accepts(tokenizer, grammar, only_time)
    key = "arguments" if fmt == "hermes" else "parameters"
    call = f'{{"name": "get_time", "{key}": {{}}}}'
    text = f"<tool_call>\n{call}\n</tool_call>" if fmt == "hermes" else call
    assert _accepts(tokenizer, grammar, text)
    with pytest.raises(BadInputError):
        cls.forcing_grammar(TOOLS, "delete_all")
    with pytest.raises(BadInputError):
        cls.forcing_grammar([], None)


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_forcing_grammar_bounds_the_whitespace_inside_a_call(fmt, tokenizer):
    # Pretty-printed arguments are fine; a run of newlines longer than JSON_WHITESPACE allows is
    # not, so a small model cannot loop on newlines until max_tokens cuts the call off.
    grammar = get_parser(fmt).forcing_grammar(TOOLS, "get_time")
    key = "arguments" if fmt == "hermes" else "parameters"

    def call(gap: str) -> str:
        body = f'{{{gap}"name": "get_time",{gap}"{key}": {{}}\n}}'
        return f"<tool_call>\n{body}\n</tool_call>" if fmt == "hermes" else body

    assert _accepts(tokenizer, grammar, call("\n  "))
    assert not _accepts(tokenizer, grammar, call("\n" * 40))
