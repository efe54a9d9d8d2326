"""Reasoning parsers by name, and choosing one from a model's chat template."""

from __future__ import annotations

import re

from mlxctl.api.reasoning.base import ReasoningParser
from mlxctl.api.reasoning.harmony import GptOssParser
from mlxctl.api.reasoning.tagged import (
    DeepSeekR1Parser,
    Gemma4Parser,
    GraniteParser,
    MistralParser,
    SeedOssParser,
    ThinkParser,
)
from mlxctl.errors import BadInputError

_PARSERS: dict[str, type[ReasoningParser]] = {
    parser.name: parser
    for parser in (ThinkParser, DeepSeekR1Parser, GptOssParser, MistralParser, GraniteParser, SeedOssParser,
                   Gemma4Parser)
}


def names() -> list[str]:
    """The known parser names, in a stable order."""
    return list(_PARSERS)


def get_parser(name: str) -> type[ReasoningParser]:
    """The parser class called ``name``; an unknown name is the user's error."""
    try:
        return _PARSERS[name]
    except KeyError:
        known = ", ".join(_PARSERS)
        raise BadInputError(
            f"unknown reasoning parser {name!r}; known parsers: {known}", hint=f"pick one of: {known}"
        ) from None


_DEEPSEEK_ASSISTANT = "<｜Assistant｜>"  # full-width bars, as in DeepSeek's templates
_THINKING_SWITCH = re.compile(r"\bthinking\b")  # DeepSeek-V3.1+ templates switch thinking on/off


def detect_parser(chat_template: str | None) -> str | None:
    """Guess the parser from the Jinja chat template text; None when it shows no thinking format.

    * ``<|channel|>`` (Harmony) -> ``gpt_oss``
    * ``<|channel>`` (Gemma 4's thought channel, closed by ``<channel|>``) -> ``gemma4``
    * ``[THINK]`` (Magistral) -> ``mistral``
    * ``Here is my thought process`` (Granite 3.2) -> ``granite``
    * ``<seed:think>`` (Seed-OSS) -> ``seed_oss``
    * ``<think>`` / ``</think>`` in a DeepSeek template (``<｜Assistant｜>``) without a ``thinking``
      switch (R1 and its early distills) -> ``deepseek_r1``
    * any other ``<think>`` / ``</think>`` (Qwen3, QwQ, DeepSeek-V3.1, GLM, ...) -> ``think``
    """
    if not chat_template:
        return None
    if "<|channel|>" in chat_template:
        return GptOssParser.name
    if "<|channel>" in chat_template:
        return Gemma4Parser.name
    if "[THINK]" in chat_template:
        return MistralParser.name
    if "Here is my thought process" in chat_template or "Here's my thought process" in chat_template:
        return GraniteParser.name
    if "<seed:think>" in chat_template:
        return SeedOssParser.name
    if "<think>" in chat_template or "</think>" in chat_template:
        if _DEEPSEEK_ASSISTANT in chat_template and not _THINKING_SWITCH.search(chat_template):
            return DeepSeekR1Parser.name
        return ThinkParser.name
    return None


def prompt_opens_reasoning(parser_name: str, rendered_prompt: str) -> bool:
    """True when the rendered prompt ends inside an open thinking block.

    That is: the prompt, trailing whitespace ignored, ends with the format's opening marker
    (``<think>``, ``[THINK]``, ``<|channel|>analysis<|message|>``, ...). A marker earlier in the
    prompt (a system prompt describing the format, a user quoting it) does not count, and neither
    does ``<think>\\n\\n</think>`` (Qwen3 with thinking switched off).
    """
    return get_parser(parser_name).prompt_opens(rendered_prompt)
