"""What a chat request asks beyond plain text: tools, tool choice, reasoning, structured output.

Each API (OpenAI chat, Anthropic messages, Responses) normalises its own fields into the same
:class:`ChatPlan`: the tools in OpenAI's shape, a :class:`ToolChoice`, the model's tool-call and
reasoning formats, the chat-template arguments, and the grammar constraint (if any) that the
engine enforces token by token. Everything a request got wrong is a BadInputError naming it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from mlxctl.api.prompt import render_chat
from mlxctl.errors import BadInputError

TOOL_MODES = ("none", "auto", "required", "named")
# formats whose markers are special tokens in their models' vocabularies: the text must keep them
SPECIAL_TOKEN_FORMATS = frozenset({"gpt_oss", "kimi_k2", "deepseek_v3", "deepseek_v32", "deepseek_r1", "mistral",
                                   "granite", "gemma", "gemma4", "minimax_m2", "seed_oss"})


@dataclass(frozen=True)
class ModelFormats:
    """The served model's tool-call and reasoning formats (detected from its chat template, or
    forced with ``serve --tool-call-parser`` / ``--reasoning-parser``)."""

    tool_parser: str | None = None
    reasoning_parser: str | None = None
    template_tools: bool = False  # the template renders a `tools` list itself
    default_tool_parser: str = "hermes"  # used (with a tools system prompt) when the template has none

    @classmethod
    def detect(cls, tokenizer: Any, tool_flag: str = "auto", reasoning_flag: str = "auto") -> ModelFormats:
        from mlxctl.api import reasoning, toolcalls

        template = _template_text(tokenizer)
        tool = toolcalls.detect_parser(template) if tool_flag == "auto" else None if tool_flag == "none" else tool_flag
        if tool_flag not in ("auto", "none"):
            toolcalls.get_parser(tool_flag)  # an unknown name fails at start
        think = (reasoning.detect_parser(template) if reasoning_flag == "auto"
                 else None if reasoning_flag == "none" else reasoning_flag)
        if reasoning_flag not in ("auto", "none"):
            reasoning.get_parser(reasoning_flag)
        return cls(tool, think, "tools" in template)

    def as_dict(self) -> dict:
        return {"tool_call_parser": self.tool_parser or self.default_tool_parser,
                "tool_call_parser_detected": self.tool_parser is not None,
                "reasoning_parser": self.reasoning_parser, "template_renders_tools": self.template_tools}


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates
        template = "\n".join(str(t) for t in template.values())
    if isinstance(template, list):
        template = "\n".join(str(t.get("template", "")) for t in template if isinstance(t, dict))
    return template or ""


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "auto"  # none | auto | required | named
    name: str | None = None


@dataclass(frozen=True)
class OutputFormat:
    """Structured output: json_object | json_schema | regex | lark | choice (None: free text)."""

    kind: str
    value: str = ""
    strict: bool = True


@dataclass(frozen=True)
class ChatPlan:
    tools: list[dict] = field(default_factory=list)
    choice: ToolChoice = ToolChoice("none")
    tool_parser: str | None = None  # set when the output is to be parsed for tool calls
    reasoning_parser: str | None = None
    template_kwargs: dict = field(default_factory=dict)
    output_format: OutputFormat | None = None
    thinking_budget: int | None = None
    parallel: bool = False  # a forced call may be followed by more (parallel_tool_calls: true)

    @property
    def uses_tools(self) -> bool:
        return bool(self.tools) and self.choice.mode != "none"


# -- normalising each API's tool fields -----------------------------------------------------------


def openai_tools(tools: list[Any] | None) -> list[dict]:
    out = []
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise BadInputError(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{...}}}}")
        out.append(_function(tool["function"], f"tools[{i}].function"))
    return _unique(out)


def responses_tools(tools: list[Any] | None) -> list[dict]:
    """Function tools, a namespace's functions under their flat names, no hosted tools (see
    :mod:`~mlxctl.api.responses_tools`)."""
    from mlxctl.api.responses_tools import custom_refusal, is_hosted, namespace_functions

    out = []
    for i, tool in enumerate(tools or ()):
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        if kind == "namespace":
            for fn, where, name in namespace_functions(tool, f"tools[{i}]"):
                checked = _function(fn, where)
                out.append({**checked, "function": {**checked["function"], "name": name}})
            continue
        if kind == "custom":
            raise custom_refusal(f"tools[{i}]", tool)
        if is_hosted(kind):
            continue  # accepted, not offered: mlxctl cannot run it
        if kind != "function":
            raise BadInputError(f"tools[{i}]: only function, namespace and hosted tools are supported, got {kind!r}")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        out.append(_function(fn, f"tools[{i}]"))
    return _unique(out)


def anthropic_tools(tools: list[Any] | None) -> list[dict]:
    out = []
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict) or tool.get("type") not in (None, "custom"):
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise BadInputError(f"tools[{i}]: only custom (client) tools are supported, got {kind!r}")
        fn = {"name": tool.get("name"), "description": tool.get("description"),
              "parameters": tool.get("input_schema"), "strict": tool.get("strict")}
        if fn["parameters"] is None:
            raise BadInputError(f"tools[{i}].input_schema is required")
        out.append(_function({k: v for k, v in fn.items() if v is not None}, f"tools[{i}]"))
    return _unique(out)


def _function(fn: dict, where: str) -> dict:
    import jsonschema

    name = fn.get("name")
    if not isinstance(name, str) or not name or len(name) > 64 or not all(c.isalnum() or c in "_-." for c in name):
        raise BadInputError(f"{where}.name must be 1-64 letters, digits, '_', '-' or '.', got {name!r}")
    params = fn.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise BadInputError(f"{where}.parameters must be a JSON schema object")
    try:
        jsonschema.validators.validator_for(params).check_schema(params)
    except jsonschema.SchemaError as exc:
        raise BadInputError(f"{where}.parameters is not a valid JSON schema: {exc.message}") from exc
    out = {"name": name, "parameters": params}
    if fn.get("description"):
        out["description"] = str(fn["description"])
    if fn.get("strict") is True:  # an auto-mode call off the schema is then rejected (toolcalls.base)
        out["strict"] = True
    return {"type": "function", "function": out}


def _unique(tools: list[dict]) -> list[dict]:
    seen = set()
    for tool in tools:
        name = tool["function"]["name"]
        if name in seen:
            raise BadInputError(f"two tools are named {name!r}")
        seen.add(name)
    return tools


def openai_choice(choice: Any, tools: list[dict]) -> ToolChoice:
    if choice is None:
        return ToolChoice("auto" if tools else "none")
    if choice in ("none", "auto", "required"):
        mode = choice
    elif isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function") if isinstance(choice.get("function"), dict) else choice  # chat | responses
        return _named(fn.get("name"), tools)
    else:
        raise BadInputError(f"tool_choice must be none, auto, required or a function, got {choice!r}")
    return _checked(ToolChoice(mode), tools)


def anthropic_choice(choice: dict | None, tools: list[dict]) -> ToolChoice:
    if choice is None:
        return ToolChoice("auto" if tools else "none")
    kind = choice.get("type")
    if kind == "tool":
        return _named(choice.get("name"), tools)
    modes = {"auto": "auto", "any": "required", "none": "none"}
    if kind not in modes:
        raise BadInputError(f"tool_choice.type must be auto, any, tool or none, got {kind!r}")
    return _checked(ToolChoice(modes[kind]), tools)


def _named(name: Any, tools: list[dict]) -> ToolChoice:
    known = [t["function"]["name"] for t in tools]
    if name not in known:
        raise BadInputError(f"tool_choice names {name!r}, which is not in tools ({', '.join(known) or 'none given'})")
    return ToolChoice("named", name)


def _checked(choice: ToolChoice, tools: list[dict]) -> ToolChoice:
    if choice.mode == "required" and not tools:
        raise BadInputError("tool_choice requires a tool call, but no tools were given")
    return choice


# -- structured output ------------------------------------------------------------------------------


def openai_response_format(fmt: dict | None) -> OutputFormat | None:
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputFormat("json_object")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
            raise BadInputError("response_format.json_schema must be an object with a schema")
        return OutputFormat("json_schema", json.dumps(spec.get("schema", {})), bool(spec.get("strict", False)))
    raise BadInputError(f"response_format.type must be text, json_object or json_schema, got {kind!r}")


def responses_text_format(fmt: dict | None) -> OutputFormat | None:
    """The Responses API's ``text.format``: the schema sits beside type, not under json_schema."""
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("schema", {}), dict):
            raise BadInputError("text.format.schema must be a JSON schema object")
        return OutputFormat("json_schema", json.dumps(fmt.get("schema", {})), bool(fmt.get("strict", False)))
    if fmt.get("type") == "json_object":
        return OutputFormat("json_object")
    raise BadInputError(f"text.format.type must be text, json_object or json_schema, got {fmt.get('type')!r}")


def structured_outputs(spec: dict | None) -> OutputFormat | None:
    """vLLM's ``structured_outputs`` extension: exactly one of json, regex, grammar, choice."""
    if not spec:
        return None
    given = [k for k in ("json", "regex", "grammar", "choice") if spec.get(k) is not None]
    unknown = set(spec) - {"json", "regex", "grammar", "choice"}
    if unknown:
        raise BadInputError(f"structured_outputs: unknown key {sorted(unknown)[0]!r}")
    if len(given) != 1:
        raise BadInputError("structured_outputs needs exactly one of json, regex, grammar or choice")
    key, value = given[0], spec[given[0]]
    if key == "json":
        return OutputFormat("json_schema", value if isinstance(value, str) else json.dumps(value))
    if key == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise BadInputError("structured_outputs.choice must be a non-empty list of strings")
        return OutputFormat("lark", "start: " + " | ".join(json.dumps(v) for v in value))
    if not isinstance(value, str) or not value:
        raise BadInputError(f"structured_outputs.{key} must be a non-empty string")
    return OutputFormat("regex" if key == "regex" else "lark", value)


# -- putting it together ------------------------------------------------------------------------------


def make_plan(formats: ModelFormats, tools: list[dict], choice: ToolChoice, output_format: OutputFormat | None,
              *, template_kwargs: dict | None = None, thinking_budget: int | None = None,
              parallel: bool = False) -> ChatPlan:
    if choice.mode in ("required", "named"):
        output_format = None  # a forced turn's output is the call; the format is for a later turn's answer
    parser = (formats.tool_parser or formats.default_tool_parser) if tools and choice.mode != "none" else None
    if thinking_budget is not None and formats.reasoning_parser is None:
        raise BadInputError("a thinking budget was given, but this model has no reasoning format")
    return ChatPlan(tools, choice, parser, formats.reasoning_parser, dict(template_kwargs or {}), output_format,
                    thinking_budget, parallel and choice.mode == "required")


def constraint_for(plan: ChatPlan, reasoning_open: bool = False) -> Any:
    """The engine constraint that enforces the plan (None when nothing is enforced); a forced
    call's markers, and a thinking grammar's, are matched by token id where the tokenizer has
    them as one added token."""
    spec = _plan_constraint(plan, reasoning_open)
    if spec is not None and spec.kind == "lark" and (_forced(plan) or _own_grammar(plan, spec)):
        spec = dataclasses.replace(spec, token_markers=True)
    return spec


def _own_grammar(plan: ChatPlan, spec: Any) -> bool:
    """Whether every string literal of a Lark spec is mlxctl's: a thinking grammar around a JSON
    or regex answer (a user's Lark output format is compiled as written)."""
    fmt = plan.output_format
    return spec.activate_after is None and (fmt is None or fmt.kind != "lark") and bool(plan.reasoning_parser)


def _plan_constraint(plan: ChatPlan, reasoning_open: bool) -> Any:
    """The engine constraint that enforces the plan (None when nothing is enforced).

    With a reasoning format whose markers are text (``<think>``, ``[THINK]``), the grammar
    covers the thinking too: an optional thinking block (or, when the prompt opened it, the rest
    of one), capped at ``thinking_budget`` tokens when given, then the answer the plan enforces.
    A model that answers without thinking is still constrained. Formats whose markers are
    special tokens (GPT-OSS) start the constraint when the end marker shows in the text."""
    from mlxctl.api import reasoning
    from mlxctl.engine.constraints import ConstraintSpec

    answer = _answer_grammar(plan)
    thinking = plan.reasoning_parser and plan.template_kwargs.get("enable_thinking", True) is not False
    if not thinking:
        if plan.thinking_budget is not None:
            raise BadInputError("a thinking budget was given, but thinking is off for this request")
        return None if answer is None else ConstraintSpec(*answer)
    parser = reasoning.get_parser(plan.reasoning_parser)
    if getattr(parser, "open_markers", None):
        if answer is None and plan.thinking_budget is None:
            return None
        return ConstraintSpec("lark", _thinking_grammar(plan, parser, answer, reasoning_open), True, None)
    if plan.thinking_budget is not None:
        raise BadInputError(f"a thinking budget is not supported for the {plan.reasoning_parser} reasoning format")
    if answer is not None and _forced(plan) and plan.tool_parser == "gpt_oss":
        # Harmony calls are commentary messages: they never come after `final`, so no waiting for it
        return ConstraintSpec("lark", _harmony_call_grammar(answer, reasoning_open), True)
    return None if answer is None else ConstraintSpec(*answer, parser.end_marker)


def _forced(plan: ChatPlan) -> bool:
    return plan.choice.mode in ("required", "named") and bool(plan.tools)


# Harmony's analysis message, as the model writes it before a call (the prompt ends `<|start|>assistant`)
_HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"
_HARMONY_END, _HARMONY_NEXT = "<|end|>", "<|start|>assistant"


def _harmony_call_grammar(answer: tuple[str, str, bool], reasoning_open: bool) -> str:
    """A forced call for a Harmony (GPT-OSS) model: an optional analysis message (the rest of
    one, mandatory, when the prompt opened it), then the forced call messages."""
    head = "" if reasoning_open else f"{json.dumps(_HARMONY_ANALYSIS)} "
    block = f"{head}analysis {json.dumps(_HARMONY_NEXT)}"
    start = f"start: {block} answer" if reasoning_open else f"start: ({block})? answer"
    rules = ["%llguidance {}", start, *_up_to_marker("analysis", _HARMONY_END)]
    return "\n".join(rules + _answer_rules(answer))


def _answer_grammar(plan: ChatPlan) -> tuple[str, str, bool] | None:
    """(kind, value, strict) of what the answer must be: a forced tool call or the output format."""
    from mlxctl.api import toolcalls
    from mlxctl.api.toolcalls.schema_relax import enforceable_tools

    if _forced(plan):
        forcing = toolcalls.get_parser(plan.tool_parser).forcing_grammar
        tools = enforceable_tools(plan.tools, plan.choice.name)  # non-strict tools relaxed (schema_relax)
        return "lark", forcing(tools, plan.choice.name, plan.parallel), True
    fmt = plan.output_format
    return None if fmt is None else (fmt.kind, fmt.value, fmt.strict)


_THINKING_GAP = r"[\x20\x0A\x0D\x09]{1,8}"


def _thinking_grammar(plan: ChatPlan, parser: Any, answer: tuple[str, str, bool] | None, reasoning_open: bool) -> str:
    opener, end = parser.open_markers[0], parser.end_marker
    head = "" if reasoning_open else f"{json.dumps(opener)} "
    if plan.thinking_budget is None:
        # a lazy lexeme that ends at the first end marker: a greedy "anything but the marker"
        # lexeme would swallow the marker's first characters and never let the model close
        block = f"{head}think GAP?"
        think = _up_to_marker("think", end)
    else:  # at most N tokens, then the end marker is forced
        block = f"{head}think {json.dumps(end)} GAP?"
        think = [f"think[max_tokens={plan.thinking_budget}]: THINK", _without_marker("THINK", end)]
    if plan.thinking_budget is None and not reasoning_open:
        block = f"({block})?"
    gap = f"GAP: /{_THINKING_GAP}/"  # the blank line models write after thinking
    return "\n".join(["%llguidance {}", f"start: {block} answer", *think, gap] + _answer_rules(answer))


def _up_to_marker(name: str, marker: str) -> list[str]:
    """Rules for ``name``: any text up to and including the first ``marker``, which may come as
    text or, where the tokenizer has it as one added token (Qwen3's ``</think>``), as that token.

    A lazy lexeme ends at the first marker written as text, but llguidance never matches an added
    token against text, so the other branch is the text without the marker, then the marker as
    a string literal: :mod:`mlxctl.engine.token_markers` writes that literal as the token's id
    (a greedy lexeme alone would swallow the first characters of a marker written as text)."""
    body = name.upper() + "_BODY"
    return [f"{name}: {name}_text | {name}_body {json.dumps(marker)}",
            f"{name}_text[lazy]: /(?s:.*){_lark_literal_regex(marker)}/",
            f"{name}_body: {body}",
            _without_marker(body, marker)]


def _without_marker(terminal: str, marker: str) -> str:
    """A terminal: text that does not hold ``marker``. The negation needs the positive part beside
    it: alone it also matches the bytes llguidance gives an added token, so it would take the
    marker's token (and every other one) as thinking text."""
    return f"{terminal}: /(?s:.*)/ & ~/(?s:.*){_lark_literal_regex(marker)}(?s:.*)/"


def _lark_literal_regex(text: str) -> str:
    """``text`` as a Lark regex that matches it literally (every other character as a hex escape,
    which Rust's regex syntax reads as itself: ``[`` and ``<`` have meanings of their own)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == " ") else f"\\x{{{ord(c):X}}}" for c in text)


def _answer_rules(answer: tuple[str, str, bool] | None) -> list[str]:
    """Lark rules defining ``answer``: free text, JSON (with the engine's whitespace cap), a
    regex, or a Lark grammar whose start rule is renamed."""
    from mlxctl.engine.constraints import JSON_WHITESPACE

    if answer is None:
        return ["answer: ANSWER", "ANSWER: /(?s:.*)/"]
    kind, value, strict = answer
    if kind in ("json_object", "json_schema"):
        schema = json.loads(value) if kind == "json_schema" else {"type": "object"}
        if isinstance(schema, dict):
            schema = {**schema, "x-guidance": {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE,
                                               "lenient": not strict}}
        return [f"answer: %json {json.dumps(schema)}"]
    if kind == "regex":
        from llguidance import regex_to_lark

        return ["answer: ANSWER", f"ANSWER: /{regex_to_lark(value, 'dw')}/"]
    lines = [line for line in value.splitlines() if not line.lstrip().startswith("%llguidance")]
    return [re.sub(r"^(\s*)start(\s*[:\[])", r"\1answer\2", line) for line in lines]


def template_messages(plan: ChatPlan, formats: ModelFormats, messages: list[dict]) -> tuple[list[dict], dict]:
    """Messages and chat-template kwargs: tools go to the template when it renders them, else
    into a system prompt in the Hermes format (whose parser then reads the output)."""
    kwargs = dict(plan.template_kwargs)
    if not plan.tools or plan.choice.mode == "none":
        return [_flatten_calls(m, formats) for m in messages], kwargs
    if formats.template_tools:
        return messages, kwargs | {"tools": plan.tools}
    return [_tools_system(plan.tools, messages)] + [_flatten_calls(m, formats) for m in _without_system(messages)], kwargs


def _without_system(messages: list[dict]) -> list[dict]:
    return messages[1:] if messages and messages[0].get("role") == "system" else messages


def _tools_system(tools: list[dict], messages: list[dict]) -> dict:
    system = messages[0]["content"] + "\n\n" if messages and messages[0].get("role") == "system" else ""
    listing = "\n".join(json.dumps({k: v for k, v in t["function"].items() if k != "strict"}, ensure_ascii=False)
                        for t in tools)
    return {"role": "system", "content": (
        f"{system}You can call functions. Their signatures, as JSON schema, are inside <tools></tools>:\n"
        f"<tools>\n{listing}\n</tools>\n"
        "To call a function, answer with a JSON object holding its name and arguments inside "
        "<tool_call></tool_call> tags, for example:\n"
        '<tool_call>\n{"name": "function_name", "arguments": {"arg": "value"}}\n</tool_call>')}


def _flatten_calls(message: dict, formats: ModelFormats) -> dict:
    """For templates that do not render tool calls: an assistant turn's calls as Hermes text, a
    tool result as a <tool_response>."""
    if formats.template_tools:
        return message
    if message.get("role") == "assistant" and message.get("tool_calls"):
        text = message.get("content") or ""
        for call in message["tool_calls"]:
            fn = call["function"]
            body = json.dumps({"name": fn["name"], "arguments": fn["arguments"]}, ensure_ascii=False)
            text += f"{chr(10) if text else ''}<tool_call>\n{body}\n</tool_call>"
        return {"role": "assistant", "content": text}
    if message.get("role") == "tool":
        return {"role": "tool", "content": f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"}
    return message


def with_plan(params: Any, plan: ChatPlan, reasoning_open: bool = False) -> Any:
    """The sampling parameters (SamplingParams) with the plan's constraint."""
    constraint = constraint_for(plan, reasoning_open)
    if constraint is not None:
        params = dataclasses.replace(params, constraint=constraint)
    if {plan.tool_parser, plan.reasoning_parser} & SPECIAL_TOKEN_FORMATS:
        params = dataclasses.replace(params, skip_special_tokens=False)
    return params


def render_plan(tokenizer: Any, plan: ChatPlan, formats: ModelFormats, messages: list[dict]) -> tuple[list[int], bool]:
    """Prompt tokens for the plan, and whether the prompt already opened the model's thinking."""
    messages, kwargs = template_messages(plan, formats, messages)
    tokens = render_chat(tokenizer, messages, **kwargs)
    if plan.reasoning_parser is None:
        return tokens, False
    from mlxctl.api.reasoning import prompt_opens_reasoning

    return tokens, prompt_opens_reasoning(plan.reasoning_parser, tokenizer.decode(tokens[-16:]))
