"""Reasoning (thinking) parsers: split a model's output into reasoning and answer content.

One parser per request, picked by name (:func:`get_parser`, :func:`names`) or guessed from the
model's chat template (:func:`detect_parser`); :func:`prompt_opens_reasoning` tells whether the
rendered prompt already opened thinking, which the parser must know (``starts_in_reasoning``).

Formats: ``think`` (``<think>...</think>``), ``deepseek_r1`` (the same, always starting in
reasoning), ``gpt_oss`` (Harmony channels), ``mistral`` (``[THINK]...[/THINK]``), ``seed_oss``
(``<seed:think>...</seed:think>``), ``granite`` (``Here is my thought process:`` / ``Here is my
response:``) and ``gemma4`` (``<|channel>thought ... <channel|>``). :class:`ThinkingBudget` caps
thinking tokens. Each module's docstring gives the exact rules of its format.
"""

from mlxctl.api.reasoning.base import ReasoningDelta, ReasoningParser
from mlxctl.api.reasoning.budget import ThinkingBudget
from mlxctl.api.reasoning.harmony import GptOssParser
from mlxctl.api.reasoning.registry import detect_parser, get_parser, names, prompt_opens_reasoning
from mlxctl.api.reasoning.tagged import (
    DeepSeekR1Parser,
    Gemma4Parser,
    GraniteParser,
    MistralParser,
    SeedOssParser,
    ThinkParser,
)

__all__ = [
    "DeepSeekR1Parser",
    "Gemma4Parser",
    "GptOssParser",
    "GraniteParser",
    "MistralParser",
    "ReasoningDelta",
    "ReasoningParser",
    "SeedOssParser",
    "ThinkParser",
    "ThinkingBudget",
    "detect_parser",
    "get_parser",
    "names",
    "prompt_opens_reasoning",
]
