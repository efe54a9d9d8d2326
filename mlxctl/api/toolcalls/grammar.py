"""llguidance Lark grammars that force tool calls (for ``tool_choice`` "required" or a named tool).

Each grammar admits only calls in its format, at least one, every call of one of the request's
tools (of ``name`` when given) with arguments matching the tool's JSON schema (``%json``, with
the same bounded whitespace as ``response_format`` schemas, so a small model cannot spend its
whole budget on newlines inside a forced call). Without ``parallel`` a grammar admits exactly
one call; with it, one or more. Every text a grammar admits is read back by the format's parser
as exactly those calls (``tests/api/toolcalls/test_forcing_grammars.py`` samples both sides).
The formats that write arguments one by one (pythonic, Qwen3-Coder, Seed-OSS, MiniMax-M2, GLM,
Gemma) get grammars built from the schema, parameter by parameter; where a format cannot carry
part of a schema they narrow, never widen (see :mod:`~mlxctl.api.toolcalls.grammar_schema` and ``docs/tools.md``).

The markers are written as text literals. Where the tokenizer has a marker as one added or
special token (``<tool_call>`` in Qwen's), the engine compiles the grammar with that marker as a
reference to the token by id (:mod:`mlxctl.engine.token_markers`; the constraint is marked
``token_markers`` by :func:`mlxctl.api.chat_plan.constraint_for`).
Formats with two layouts (Mistral, DeepSeek) admit both, so the model keeps the one it was
trained on.

This module is the public entry point; the grammars live by kind:

* :mod:`~mlxctl.api.toolcalls.grammar_core`: Lark text shared by every grammar (the allowed
  tools, literals, ``%json`` with bounded whitespace, string lexemes, rules with fresh names);
* :mod:`~mlxctl.api.toolcalls.grammar_json`: formats whose arguments are one JSON object
  (Hermes, Llama 3 JSON, Mistral, Granite, DeepSeek V3, Kimi K2, gpt-oss, Nemotron);
* :mod:`~mlxctl.api.toolcalls.grammar_schema`: what a grammar written parameter by parameter can
  follow of a JSON schema (and the narrowings where it cannot);
* :mod:`~mlxctl.api.toolcalls.grammar_params`: pythonic, Qwen3-Coder, Seed-OSS, MiniMax-M2 and
  GLM, with their values in :mod:`~mlxctl.api.toolcalls.grammar_text` (text up to an end tag);
* :mod:`~mlxctl.api.toolcalls.grammar_gemma`: Gemma's own value syntax;
* :mod:`~mlxctl.api.toolcalls.grammar_dsml`: DeepSeek V3.2's DSML, parameter by parameter.
"""

from __future__ import annotations

from mlxctl.api.toolcalls.grammar_dsml import deepseek_v32_grammar
from mlxctl.api.toolcalls.grammar_gemma import gemma_grammar
from mlxctl.api.toolcalls.grammar_json import (
    arguments_schema,
    call_object_schema,
    deepseek_v3_grammar,
    gpt_oss_grammar,
    granite_grammar,
    hermes_grammar,
    kimi_k2_grammar,
    llama3_json_grammar,
    mistral_grammar,
)
from mlxctl.api.toolcalls.grammar_json import nemotron_grammar
from mlxctl.api.toolcalls.grammar_params import (
    glm4_grammar,
    minimax_m2_grammar,
    pythonic_grammar,
    qwen3_coder_grammar,
    seed_oss_grammar,
)

__all__ = [
    "arguments_schema",
    "call_object_schema",
    "deepseek_v3_grammar",
    "deepseek_v32_grammar",
    "gemma_grammar",
    "glm4_grammar",
    "gpt_oss_grammar",
    "granite_grammar",
    "hermes_grammar",
    "kimi_k2_grammar",
    "llama3_json_grammar",
    "minimax_m2_grammar",
    "mistral_grammar",
    "nemotron_grammar",
    "pythonic_grammar",
    "qwen3_coder_grammar",
    "seed_oss_grammar",
]
