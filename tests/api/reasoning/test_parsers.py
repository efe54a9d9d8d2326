"""Reasoning parsers: per-format vectors, and every way of streaming them gives the same split."""

from __future__ import annotations

import random
import zlib

import pytest

from mlxctl.api.reasoning import ReasoningDelta, get_parser, names

# (parser, output text, starts_in_reasoning, expected reasoning, expected content)
THINK = [
    ("think", "<think>\nA\n</think>\n\nB", False, "A\n", "\nB"),  # Qwen3 / QwQ style, one "\n" dropped each side
    ("think", "<think>\nA\n</think>\n\nB", True, "A\n", "\nB"),  # a repeated opening marker is dropped
    ("think", "A\n</think>\n\nB", True, "A\n", "\nB"),  # the template opened <think> in the prompt
    ("think", "\nA</think>B", True, "A", "B"),  # prompt ended with "<think>" without the newline
    ("think", "Hello world", False, None, "Hello world"),  # no reasoning at all
    ("think", "\n\nHi <b>there</b>", False, None, "\n\nHi <b>there</b>"),  # content at the start is verbatim
    ("think", "Hello world", True, "Hello world", None),  # unterminated, started inside thinking
    ("think", "<think>\nstill thinking", False, "still thinking", None),  # unterminated, opened in the output
    ("think", "A</think>B", False, None, "A</think>B"),  # did not start in thinking: all content
    ("think", "  <think>x</think>y", False, "x", "y"),  # leading whitespace before the opening marker
    ("think", "<think></think>answer", False, None, "answer"),  # empty thinking
    ("think", "<think>\n\n</think>\n\nanswer", False, "\n", "\nanswer"),
    ("think", "", False, None, None),
    ("think", "", True, None, None),
    ("think", "<thinking about it>", False, None, "<thinking about it>"),  # not the marker
    ("think", "<think>a</think>b</think>c<think>d", False, "a", "b</think>c<think>d"),  # only the first close
    ("think", "<think>x < y </thi nk> <think></think>\nz", False, "x < y </thi nk> <think>", "z"),
    ("think", "\n</think>\n\nB", True, None, "\nB"),
    ("think", "<think>\nA\n</think>", False, "A\n", None),
    ("think", "<think>\nA\n</think>\n", False, "A\n", None),
]
DEEPSEEK_R1 = [
    ("deepseek_r1", "abc</think>\n\nd", False, "abc", "\nd"),  # R1 often leaves <think> out
    ("deepseek_r1", "abc</think>\n\nd", True, "abc", "\nd"),
    ("deepseek_r1", "<think>\nabc</think>d", False, "abc", "d"),  # R1-0528 writes it
    ("deepseek_r1", "just reasoning", False, "just reasoning", None),  # unterminated: reasoning
    ("deepseek_r1", "\nabc\n</think>\n\nd", False, "abc\n", "\nd"),
    ("deepseek_r1", "", False, None, None),
]
MISTRAL = [
    ("mistral", "[THINK]plan[/THINK]answer", False, "plan", "answer"),
    ("mistral", "[THINK]\nplan\n[/THINK]\nanswer", False, "plan\n", "answer"),
    ("mistral", "answer only [with brackets]", False, None, "answer only [with brackets]"),
    ("mistral", "[THINK]unfinished", False, "unfinished", None),
    ("mistral", "plan[/THINK]\nanswer", True, "plan", "answer"),
    ("mistral", "[THINK]a [/THIN b[/THINK]c", False, "a [/THIN b", "c"),
    ("mistral", "[TOOL_CALLS]x", False, None, "[TOOL_CALLS]x"),
]
GRANITE = [
    ("granite", "Here is my thought process:\nX\nHere is my response:\nY", False, "X\n", "Y"),
    ("granite", "Here's my thought process:\nX\nHere's my response:\nY", False, "X\n", "Y"),
    ("granite", "Here is the answer.", False, None, "Here is the answer."),
    ("granite", "Here is my thought process:\nX", False, "X", None),
    ("granite", "Here is my thought process: Here is a thought. Here is my response: Y", False,
     " Here is a thought. ", " Y"),
]
HARMONY_TOOL = (
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Paris"}<|call|>'
)
ANALYSIS = "<|channel|>analysis<|message|>"
FINAL = "<|start|>assistant<|channel|>final<|message|>"
GPT_OSS = [
    ("gpt_oss", ANALYSIS + "Think.<|end|>" + FINAL + "Ans.<|return|>", False, "Think.", "Ans."),
    ("gpt_oss", "<|channel|>final<|message|>Hi<|return|>", False, None, "Hi"),  # no reasoning at all
    ("gpt_oss", "<|channel|>final<|message|>Hi", False, None, "Hi"),  # stopped before the terminator
    ("gpt_oss", "thinking<|end|><|start|>assistant<|channel|>final<|message|>Hi", True, "thinking", "Hi"),
    ("gpt_oss", "<|channel|>analysis<|message|>thinking...", False, "thinking...", None),  # unterminated
    ("gpt_oss", "thinking...", True, "thinking...", None),
    ("gpt_oss", "<|channel|>analysis<|message|>Need weather.<|end|>" + HARMONY_TOOL, False,
     "Need weather.", HARMONY_TOOL),  # a tool call passes through untouched
    ("gpt_oss", ' to=functions.f<|channel|>commentary json<|message|>{"a": 1}<|call|>', False,
     None, ' to=functions.f<|channel|>commentary json<|message|>{"a": 1}<|call|>'),  # recipient in the role
    ("gpt_oss", "<|channel|>commentary<|message|>Let me check.<|end|>" + HARMONY_TOOL, False,
     None, "Let me check." + HARMONY_TOOL),  # a preamble is content
    ("gpt_oss", "Hello, plain text <|end|> here", False, None, "Hello, plain text <|end|> here"),  # not Harmony
    ("gpt_oss", "<|channel|>analysis<|message|>t<|start|>assistant<|channel|>final<|message|>A", False, "t", "A"),
    ("gpt_oss", "<|channel|>analysis<|message|>t<|end|><|start|>assistant<|chan", False, "t", None),
    ("gpt_oss", ANALYSIS + "a<|end|><|start|>assistant" + ANALYSIS + "b<|end|>" + FINAL + "x < y <| z<|return|>",
     False, "ab", "x < y <| z"),  # two analysis messages, and "<" / "<|" that are no markers
    ("gpt_oss", "<|channel|>analysis<|message|>t<|end|><|start|>assistant<|channel|>commentary to=functions.f",
     False, "t", "<|start|>assistant<|channel|>commentary to=functions.f"),  # unfinished call: for the tool parser
    ("gpt_oss", "", False, None, None),
]
SEED_OSS = [
    ("seed_oss", "<seed:think>plan</seed:think>answer", False, "plan", "answer"),
    ("seed_oss", "<seed:think>\nplan\n</seed:think>\nanswer", False, "plan\n", "answer"),
    ("seed_oss", ("<seed:think>Let me see.<seed:cot_budget_reflect>I have used 129 tokens, and there are 383 "
                  "tokens remaining.</seed:cot_budget_reflect>\nDone.</seed:think>Paris."), False,
     ("Let me see.<seed:cot_budget_reflect>I have used 129 tokens, and there are 383 tokens remaining."
      "</seed:cot_budget_reflect>\nDone."), "Paris."),  # the budget reflections stay reasoning
    ("seed_oss", "<seed:think>unfinished", False, "unfinished", None),
    ("seed_oss", "plan</seed:think>answer", True, "plan", "answer"),
    ("seed_oss", "<think>x</think>y", False, None, "<think>x</think>y"),  # another format's markers: text
    ("seed_oss", "answer only <seed:thin", False, None, "answer only <seed:thin"),
]
GEMMA4 = [
    ("gemma4", "<|channel>thought\nPlan.<channel|>Answer.", False, "Plan.", "Answer."),  # the label is no reasoning
    ("gemma4", "<|channel>thought\n\nPlan.\n<channel|>\nAnswer.", False, "\nPlan.\n", "Answer."),
    ("gemma4", "Answer only.", False, None, "Answer only."),  # thinking off, or not used
    ("gemma4", "<|channel>thought\nunfinished", False, "unfinished", None),
    ("gemma4", "Plan.<channel|>Answer.", True, "Plan.", "Answer."),  # the prompt opened the channel
    ("gemma4", "<|channel>thought\n<channel|>Answer.", False, None, "Answer."),  # an empty thought
    ("gemma4", "<|channel>thought\na <channel b<channel|><|tool_call>call:f{}<tool_call|>", False,
     "a <channel b", "<|tool_call>call:f{}<tool_call|>"),  # a call after thinking is content, for the tool parser
    ("gemma4", "<|channel>thoughtful", False, "ful", None),  # the marker is the channel's name, read as written
]
VECTORS = THINK + DEEPSEEK_R1 + MISTRAL + GRANITE + GPT_OSS + SEED_OSS + GEMMA4


def _ids(vectors):
    return [f"{v[0]}-{i}-{'sir' if v[2] else 'out'}" for i, v in enumerate(vectors)]


def stream(name: str, pieces: list[str], starts_in_reasoning: bool) -> tuple[str | None, str | None]:
    parser = get_parser(name)(starts_in_reasoning=starts_in_reasoning)
    reasoning, content = "", ""
    for piece in pieces:
        delta = parser.feed(piece)
        assert isinstance(delta, ReasoningDelta)
        reasoning += delta.reasoning
        content += delta.content
    last = parser.finish()
    reasoning += last.reasoning
    content += last.content
    return reasoning or None, content or None


def test_every_format_has_vectors():
    assert {v[0] for v in VECTORS} == set(names())


@pytest.mark.parametrize(("name", "text", "sir", "reasoning", "content"), VECTORS, ids=_ids(VECTORS))
def test_parse(name, text, sir, reasoning, content):
    assert get_parser(name).parse(text, starts_in_reasoning=sir) == (reasoning, content)


@pytest.mark.parametrize(("name", "text", "sir", "reasoning", "content"), VECTORS, ids=_ids(VECTORS))
def test_every_split_matches_parse(name, text, sir, reasoning, content):
    expected = (reasoning, content)
    assert stream(name, list(text), sir) == expected, "one character at a time"
    for cut in range(len(text) + 1):
        assert stream(name, [text[:cut], text[cut:]], sir) == expected, f"split at {cut}"
    rng = random.Random(zlib.crc32(text.encode()))
    for _ in range(20):
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(2, 6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        assert stream(name, pieces, sir) == expected, f"pieces {pieces!r}"


def test_empty_pieces_change_nothing():
    assert stream("think", ["", "<think>", "", "a", "", "</think>", "", "b", ""], False) == ("a", "b")


# -- releasing text as soon as it cannot be part of a marker


def test_think_releases_text_that_cannot_be_a_marker():
    parser = get_parser("think")(starts_in_reasoning=False)
    assert parser.feed("Hel") == ReasoningDelta("", "Hel")  # not "<think>": content at once
    assert parser.feed("lo </think") == ReasoningDelta("", "lo </think")  # content is never held back
    parser = get_parser("think")()
    assert parser.feed("<thi") == ReasoningDelta()  # might still be <think>
    assert parser.feed("nk>\nab") == ReasoningDelta("ab", "")
    assert parser.in_reasoning
    assert parser.feed("c </") == ReasoningDelta("c ", "")  # "</" might start </think>
    assert parser.feed("b>") == ReasoningDelta("</b>", "")
    assert parser.feed("</think") == ReasoningDelta()
    assert parser.in_reasoning
    assert parser.feed(">") == ReasoningDelta()  # the newline after the marker may still come
    assert not parser.in_reasoning
    assert parser.feed("\nAnswer") == ReasoningDelta("", "Answer")
    assert parser.finish() == ReasoningDelta()


def test_think_holds_nothing_once_the_marker_is_impossible():
    parser = get_parser("think")()
    assert parser.feed("<") == ReasoningDelta()
    assert parser.feed("b>") == ReasoningDelta("", "<b>")


def test_in_reasoning_follows_the_output():
    parser = get_parser("think")(starts_in_reasoning=True)
    assert parser.in_reasoning
    parser.feed("x</think>y")
    assert not parser.in_reasoning
    parser = get_parser("think")()
    assert not parser.in_reasoning
    parser = get_parser("deepseek_r1")()
    assert parser.in_reasoning and parser.starts_in_reasoning


def test_finish_releases_held_text_and_is_idempotent():
    parser = get_parser("think")(starts_in_reasoning=True)
    assert parser.feed("a </thi") == ReasoningDelta("a ", "")
    assert parser.finish() == ReasoningDelta("</thi", "")
    assert parser.finish() == ReasoningDelta()
    with pytest.raises(RuntimeError):
        parser.feed("more")


def test_gpt_oss_releases_bodies_and_holds_headers():
    parser = get_parser("gpt_oss")()
    assert parser.feed("<|channel|>analysis") == ReasoningDelta()
    assert not parser.in_reasoning
    assert parser.feed("<|message|>Let me") == ReasoningDelta("Let me", "")
    assert parser.in_reasoning
    assert parser.feed(" think<|e") == ReasoningDelta(" think", "")
    assert parser.feed("nd|><|start|>assistant<|channel|>final<|message|>") == ReasoningDelta()
    assert not parser.in_reasoning
    assert parser.feed("Hi") == ReasoningDelta("", "Hi")
    assert parser.feed("<|return|>") == ReasoningDelta()
    assert parser.finish() == ReasoningDelta()


def test_gpt_oss_tool_header_is_released_whole_when_known():
    parser = get_parser("gpt_oss")()
    assert parser.feed("<|channel|>commentary to=functions.f <|constrain|>json") == ReasoningDelta()
    delta = parser.feed('<|message|>{"a"')
    assert delta == ReasoningDelta("", '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a"')
    assert parser.feed(": 1}<|call|>") == ReasoningDelta("", ": 1}<|call|>")


def test_end_marker_ends_reasoning():
    for name in names():
        parser = get_parser(name)(starts_in_reasoning=True)
        assert parser.in_reasoning, name
        parser.feed("thinking " + parser.end_marker + "\n")
        assert not parser.in_reasoning, name
        assert parser.feed("answer").content == "answer", name
