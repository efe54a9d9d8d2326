"""Forcing grammars on a tokenizer whose markers are added tokens (as Qwen's ``<tool_call>`` is).

SmolLM2's tokenizer with every format's markers added: each format's forced grammar compiles,
and the engine's matcher takes the token ids of valid calls, each marker as its one token."""

from __future__ import annotations

import random

import pytest

from mlxctl.api.toolcalls import get_parser
from mlxctl.engine.constraints import ConstraintSpec, compile_constraint

from .test_forcing_grammars import FORCED, random_calls, render, search_name, tools_for

pytest.importorskip("llguidance")

MARKERS = {
    "hermes": ["<tool_call>", "</tool_call>"],
    "qwen3_coder": ["<tool_call>", "</tool_call>"],
    "mistral": ["[TOOL_CALLS]", "[ARGS]"],
    "llama3_json": [],  # its forced calls are bare JSON (no `<|python_tag|>`)
    "granite": ["<|tool_call|>"],
    "kimi_k2": ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>", "<|tool_call_end|>"],
    "deepseek_v3": ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                    "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"],
    "deepseek_v32": ["｜DSML｜"],  # one token in the middle of every DSML tag
    "gpt_oss": ["<|channel|>", "<|constrain|>", "<|message|>", "<|call|>", "<|start|>"],
    "pythonic": ["<|python_start|>", "<|python_end|>"],
    "glm4": ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"],
    "gemma": ["<start_function_call>", "<end_function_call>", "<escape>", "<|tool_call>", "<tool_call|>", '<|"|>'],
    "minimax_m2": ["<minimax:tool_call>", "</minimax:tool_call>"],
    "seed_oss": ["<seed:tool_call>", "</seed:tool_call>"],
    "nemotron": ["<TOOLCALL>", "</TOOLCALL>"],
}
ALL = sorted({m for markers in MARKERS.values() for m in markers})


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))
    tokenizer.add_tokens(ALL)
    return tokenizer


def test_every_format_has_its_markers_listed():
    assert set(MARKERS) == set(FORCED)


def _calls_without_markers(rng: random.Random, name: str | None, count: int, fmt: str):
    """Random calls whose arguments spell no marker (inside a value, a marker is text)."""
    while True:
        calls = random_calls(rng, name, count, fmt)
        if not any(m in repr(calls) for m in ALL):
            return calls


def _follows(matcher, tokens: list[int]) -> bool:
    for token in tokens:
        matcher.advance(token)
        if matcher.error is not None:
            return False
    return matcher.is_accepting()


@pytest.mark.parametrize("fmt", FORCED)
def test_a_forced_call_takes_the_markers_as_their_token_ids(fmt, tokenizer):
    rng = random.Random(fmt)
    seen = set()
    for trial in range(6):
        name = rng.choice([None, "get_weather", search_name(fmt)])
        parallel = name is None and trial % 2 == 0
        text = render(fmt, _calls_without_markers(rng, name, 2 if parallel else 1, fmt), rng)
        tokens = tokenizer.encode(text, add_special_tokens=False)
        written = {m for m in MARKERS[fmt] if m in text}
        assert {tokenizer.convert_tokens_to_ids(m) for m in written} <= set(tokens), text  # as one token each
        seen |= written
        grammar = get_parser(fmt).forcing_grammar(tools_for(fmt), name, parallel)
        compiled = compile_constraint(ConstraintSpec("lark", grammar, token_markers=True), tokenizer)
        assert _follows(compiled.matcher(len(tokenizer)), tokens), (trial, text)
    assert seen or not MARKERS[fmt]


def test_without_token_markers_the_marker_token_is_refused(tokenizer):
    """What a user's own Lark grammar gets: text literals, as written (and the bug mlxctl had)."""
    grammar = get_parser("hermes").forcing_grammar(tools_for("hermes"), "get_weather", False)
    tokens = tokenizer.encode('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
                              add_special_tokens=False)
    assert not _follows(compile_constraint(ConstraintSpec("lark", grammar), tokenizer).matcher(len(tokenizer)), tokens)
