"""Tool-call parsers: split a model's output into content and OpenAI-style tool calls.

One parser per request, picked by name (:func:`get_parser`, :func:`names`) or guessed from the
model's chat template (:func:`detect_parser`); :func:`validate_arguments` checks a parsed call
against its tool's JSON schema; parsers run it on every complete call (see
:mod:`mlxctl.api.toolcalls.base`), and :func:`add_validation_listener` is told of each mismatch. :mod:`mlxctl.api.toolcalls.base` states the streaming contract
and each format's module its exact rules.

Formats: ``hermes`` (Hermes, Qwen2.5, Qwen3), ``qwen3_coder`` (Qwen3-Coder XML), ``llama3_json``,
``mistral``, ``pythonic``, ``deepseek_v3`` (V3, R1, V3.1), ``deepseek_v32`` (V3.2's DSML), ``gpt_oss``
(Harmony), ``glm4`` (GLM-4.5 to 4.7), ``gemma`` (Gemma 4, FunctionGemma), ``kimi_k2``, ``granite``
(Granite 3.x), ``minimax_m2``, ``seed_oss`` (Seed-OSS) and ``nemotron`` (``<TOOLCALL>``:
Llama-3.3-Nemotron, Nemotron-Nano v1/v2).
"""

from mlxctl.api.toolcalls.base import ParseDelta, ToolCall, ToolCallDelta, ToolParser
from mlxctl.api.toolcalls.registry import (
    add_validation_listener,
    detect_parser,
    get_parser,
    names,
    validate_arguments,
)

__all__ = [
    "ParseDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolParser",
    "add_validation_listener",
    "detect_parser",
    "get_parser",
    "names",
    "validate_arguments",
]
