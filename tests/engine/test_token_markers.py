"""Markers a tokenizer has as one added token, written as token references in Lark grammars."""

from __future__ import annotations

import pytest

from mlxctl.api.toolcalls import get_parser, names
from mlxctl.engine.token_markers import marker_tokens, refer_by_id

pytest.importorskip("llguidance")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}]
HERMES = {"<tool_call>": 900, "</tool_call>": 901}


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))


def test_a_marker_inside_a_literal_becomes_its_token_reference():
    grammar = 'start: "<tool_call>\\n" body "\\n</tool_call>"?\nbody: "x"'
    assert refer_by_id(grammar, HERMES) == 'start: (<[900]> "\\n") body ("\\n" <[901]>)?\nbody: "x"'


def test_json_schemas_regexes_and_lexeme_operands_keep_their_text():
    grammar = ('start: %json {"enum": ["<tool_call>"]} A ("<tool_call>" & /x/) /"<tool_call>"/\n'
               'A: "<tool_call>"')
    assert refer_by_id(grammar, HERMES) == grammar


def test_a_terminal_closed_by_a_marker_is_wrapped_in_a_rule_that_holds_the_token():
    grammar = 'start: "k" T_1 T_1\nT_1: (/[a-z]+/ & ~/x/) "</tool_call>"'
    assert refer_by_id(grammar, HERMES).split("\n") == [
        "start: \"k\" t_1_tokens t_1_tokens", "T_1: (/[a-z]+/ & ~/x/)", "t_1_tokens: T_1 <[901]>"]


def test_only_added_tokens_that_encode_as_themselves_are_markers(tokenizer):
    from transformers import PreTrainedTokenizerFast

    added = PreTrainedTokenizerFast.from_pretrained(tokenizer.name_or_path)
    added.add_tokens(["<tool_call>", "</tool_call>", "toolword", "a b"])
    markers = marker_tokens(added)
    assert markers["<tool_call>"] == added.convert_tokens_to_ids("<tool_call>")
    assert "toolword" not in markers and "a b" not in markers  # a plain word or spaced text is no marker


@pytest.mark.parametrize("fmt", sorted(names()))
def test_grammars_for_a_tokenizer_whose_markers_are_text_are_unchanged(fmt, tokenizer):
    """SmolLM2 has no tool marker as an added token: its grammars (and golden transcripts) stay."""
    markers = marker_tokens(tokenizer)
    for name, parallel in ((None, False), ("get_weather", False), (None, True)):
        grammar = get_parser(fmt).forcing_grammar(TOOLS, name, parallel)
        assert refer_by_id(grammar, markers) == grammar
