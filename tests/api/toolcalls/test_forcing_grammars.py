"""Every forcing grammar against its format's parser, with the real SmolLM2 tokenizer.

Both directions are sampled:

* random valid calls, rendered in the format the way its models write them, are accepted by the
  engine's matcher token by token, and the parser reads them back as the same calls; calls off
  the schema, of an unknown tool, one too many, or with runaway whitespace are rejected;
* random walks through the grammar itself (a random allowed token at each step, from the real
  vocabulary) decode to texts that the parser reads as calls of the allowed tools whose
  arguments validate against the tool's schema, streamed or not.
"""

from __future__ import annotations

import codecs
import json
import random

import numpy as np
import pytest

from mlxctl.api.toolcalls import get_parser, names, validate_arguments
from mlxctl.engine.constraints import ConstraintSpec, compile_constraint

from .helpers import check_stream, stream

llg = pytest.importorskip("llguidance")

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "hourly": {"type": "boolean"},
        "at": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
    },
    "required": ["city"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": 60},
        "filters": {
            "type": "object",
            "properties": {"lang": {"type": "string", "maxLength": 8},
                           "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}},
            "required": ["lang"],
            "additionalProperties": False,
        },
        "limit": {"type": ["integer", "null"], "minimum": 0, "maximum": 99},
    },
    "required": ["query", "filters"],
    "additionalProperties": False,
}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


def _tool(name: str, schema: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


TOOLS = [_tool("get_weather", WEATHER), _tool("get_time", EMPTY), _tool("search.docs-v2", SEARCH)]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
FORCED = sorted(n for n in names() if getattr(get_parser(n), "forcing_grammar", None))

# strings that look like markers of some format: inside JSON they are only text
TRICKY = ["Paris", "São Paulo", 'a "quoted" word', "back\\slash", "two\nlines", "</tool_call>", "[ARGS]",
          "[TOOL_CALLS]", "<｜tool▁call▁end｜>", "<|tool_call_end|>", "<|call|>", "```", '{"name": "x"}', "東京"]


# -- the tokenizer and matching -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))


def _matcher(tokenizer, grammar: str):
    return compile_constraint(ConstraintSpec("lark", grammar), tokenizer).matcher(len(tokenizer))


def accepts(tokenizer, grammar: str, text: str) -> bool:
    """Whether the engine's matcher takes ``text``'s tokens one by one and ends complete."""
    matcher = _matcher(tokenizer, grammar)
    for token in tokenizer.encode(text, add_special_tokens=False):
        matcher.advance(token)
        if matcher.error is not None:
            return False
    return matcher.is_accepting()


# -- random valid calls, rendered per format --------------------------------------------------------


def sample(schema: dict, rng: random.Random, depth: int = 0):
    """A random value valid against the (small) schemas above."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "string":
        text = rng.choice(TRICKY)
        return text[: schema.get("maxLength", len(text))] or "x"
    if kind == "integer":
        return rng.randint(schema.get("minimum", -50), schema.get("maximum", 50))
    if kind == "number":
        return rng.choice([0, -3, 2.5, 1e-05, 1234.125])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        return [sample(schema["items"], rng, depth + 1) for _ in range(rng.randint(0, schema.get("maxItems", 2)))]
    out = {}
    for key, sub in schema.get("properties", {}).items():  # in schema order, as the grammar writes them
        if key in schema.get("required", ()) or rng.random() < 0.5:
            out[key] = sample(sub, rng, depth + 1)
    return out


def dumps(value, rng: random.Random) -> str:
    """JSON as models write it: compact, spaced or indented. Non-ASCII stays raw: llguidance's
    JSON admits ``\\u`` escapes only for control characters."""
    if rng.random() < 0.25:
        return json.dumps(value, ensure_ascii=False, indent=2)
    return json.dumps(value, ensure_ascii=False, separators=rng.choice([(", ", ": "), (",", ":")]))


def render(fmt: str, calls: list[tuple[str, dict]], rng: random.Random) -> str:
    """``calls`` as a model writing format ``fmt`` would (picking a layout where it has two)."""
    objects = [{"name": n, "arguments": a} for n, a in calls]
    if fmt == "hermes":
        return "\n".join(f"<tool_call>\n{dumps(o, rng)}\n</tool_call>" for o in objects)
    if fmt == "llama3_json":
        return "; ".join(dumps({"name": n, "parameters": a}, rng) for n, a in calls)
    if fmt == "granite":
        return "<|tool_call|>" + dumps(objects, rng)
    if fmt == "mistral":
        if rng.random() < 0.5:
            return "[TOOL_CALLS]" + dumps(objects, rng)
        return "".join(f"[TOOL_CALLS]{n}[ARGS]{dumps(a, rng)}" for n, a in calls)
    if fmt == "deepseek_v3":
        parts = []
        for n, a in calls:
            if rng.random() < 0.5:  # V3 / R1
                parts.append(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{dumps(a, rng)}\n```<｜tool▁call▁end｜>")
            else:  # V3.1
                parts.append(f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{dumps(a, rng)}<｜tool▁call▁end｜>")
        return "<｜tool▁calls▁begin｜>" + rng.choice(["", "\n"]).join(parts) + "<｜tool▁calls▁end｜>"
    if fmt == "kimi_k2":
        body = "".join(f"<|tool_call_begin|>functions.{n}:{rng.randint(0, 120)}<|tool_call_argument_begin|>"
                       f"{dumps(a, rng)}<|tool_call_end|>" for n, a in calls)
        return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"
    if fmt == "gpt_oss":
        return "<|call|><|start|>assistant".join(
            f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{dumps(a, rng)}" for n, a in calls)
    raise AssertionError(f"no renderer for {fmt}")


def random_calls(rng: random.Random, name: str | None, count: int) -> list[tuple[str, dict]]:
    picks = [name or rng.choice(list(SCHEMAS)) for _ in range(count)]
    return [(n, sample(SCHEMAS[n], rng)) for n in picks]


def parsed(fmt: str, text: str) -> tuple[str | None, list[tuple[str, dict]]]:
    content, calls = get_parser(fmt).parse(text, TOOLS)
    return content, [(c.name, json.loads(c.arguments)) for c in calls]


def test_every_format_but_the_text_valued_ones_has_a_forcing_grammar():
    assert set(FORCED) == set(names()) - {"qwen3_coder", "glm4", "pythonic", "gemma"}


@pytest.mark.parametrize("fmt", FORCED)
def test_rendered_valid_calls_are_accepted_and_parse_back(fmt, tokenizer):
    rng = random.Random(fmt)
    for trial in range(24):
        name = rng.choice([None, None, "get_weather", "search.docs-v2"])
        parallel = name is None and rng.random() < 0.5
        calls = random_calls(rng, name, rng.randint(2, 3) if parallel else 1)
        text = render(fmt, calls, rng)
        grammar = get_parser(fmt).forcing_grammar(TOOLS, name, parallel)
        assert accepts(tokenizer, grammar, text), (trial, text)
        assert parsed(fmt, text) == (None, calls), (trial, text)


def _invalid(fmt: str, rng: random.Random) -> dict[str, str]:
    """Texts in the format that a grammar for (all tools, one call) must refuse, by reason."""
    good = ("get_weather", {"city": "Paris", "days": 3})
    return {
        "unknown tool": render(fmt, [("get_wether", {"city": "Paris"})], rng),
        "missing required": render(fmt, [("get_weather", {"days": 3})], rng),
        "wrong type": render(fmt, [("get_weather", {"city": 7})], rng),
        "below minimum": render(fmt, [("get_weather", {"city": "Paris", "days": 0})], rng),
        "not in enum": render(fmt, [("get_weather", {"city": "Paris", "unit": "kelvin"})], rng),
        "extra property": render(fmt, [("get_weather", {"city": "Paris", "country": "FR"})], rng),
        "nested required": render(fmt, [("search.docs-v2", {"query": "q", "filters": {}})], rng),
        "two calls": render(fmt, [good, ("get_time", {})], rng),
        "plain text": "It is sunny in Paris.",
    }


@pytest.mark.parametrize("fmt", FORCED)
def test_calls_off_the_schema_are_refused(fmt, tokenizer):
    rng = random.Random(fmt + "bad")
    grammar = get_parser(fmt).forcing_grammar(TOOLS, None, False)
    for seed in range(3):  # each layout the renderer may pick
        rng.seed(f"{fmt}{seed}")
        for why, text in _invalid(fmt, rng).items():
            assert not accepts(tokenizer, grammar, text), (why, text)
    named = get_parser(fmt).forcing_grammar(TOOLS, "get_time", True)
    assert not accepts(tokenizer, named, render(fmt, [("get_weather", {"city": "Paris"})], rng))
    assert accepts(tokenizer, named, render(fmt, [("get_time", {}), ("get_time", {})], rng))


@pytest.mark.parametrize("fmt", FORCED)
def test_whitespace_inside_the_arguments_is_bounded(fmt, tokenizer):
    grammar = get_parser(fmt).forcing_grammar(TOOLS, "get_weather")
    rng = random.Random(0)
    text = render(fmt, [("get_weather", {"city": "Paris"})], rng)
    for gap, ok in (("\n  ", True), ("\n" * 40, False)):
        spaced = text.replace('"city"', f'{gap}"city"', 1)
        assert accepts(tokenizer, grammar, spaced) is ok, spaced


# -- random walks through the grammar ---------------------------------------------------------------

CLOSERS = frozenset('"}]')


def walk(tokenizer, grammar: str, rng: random.Random, budget: int = 48, limit: int = 2000) -> list[int]:
    """A random token sequence the grammar accepts: uniform over the allowed tokens for
    ``budget`` steps, then steered to finish (tokens that close strings and containers or hold
    ``end``, else single-byte ones). End of sequence is left to the walk, which stops at random
    once the grammar accepts."""
    matcher = _matcher(tokenizer, grammar)
    width = len(tokenizer)
    row = np.zeros((width + 31) // 32, dtype=np.int32)
    vocab = tokenizer.convert_ids_to_tokens(list(range(width)))
    closers = {i for i, t in enumerate(vocab) if t and (set(t) <= CLOSERS or "end" in t)}
    short = {i for i, t in enumerate(vocab) if t and len(t) == 1}
    special = set(tokenizer.all_special_ids)
    tokens: list[int] = []
    while not matcher.is_stopped():
        if matcher.is_accepting() and rng.random() < 0.5:
            break
        assert len(tokens) < limit, tokenizer.decode(tokens)
        assert matcher.fill_bitmask(row), matcher.error
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:width]
        allowed = [t for t in np.flatnonzero(bits).tolist() if t not in special]
        if not allowed:
            break
        if len(tokens) >= budget or rng.random() < 0.2:
            steer = [t for t in allowed if t in closers] or [t for t in allowed if t in short]
            allowed = steer or allowed
        token = rng.choice(allowed)
        matcher.advance(token)
        assert matcher.error is None, matcher.error
        tokens.append(token)
    assert matcher.is_accepting(), tokenizer.decode(tokens)
    return tokens


def pieces(tokenizer, tokens: list[int]) -> list[str]:
    """The decoded text of each token, as a detokenizer streams it (UTF-8 joined across tokens)."""
    from mlxctl.engine.constraints import ll_tokenizer

    llt, decoder = ll_tokenizer(tokenizer), codecs.getincrementaldecoder("utf-8")()
    return [decoder.decode(llt.decode_bytes([t])) for t in tokens] + [decoder.decode(b"", final=True)]


@pytest.mark.parametrize("fmt", FORCED)
def test_texts_sampled_from_the_grammar_parse_to_valid_calls(fmt, tokenizer):
    rng = random.Random(fmt + "walk")
    for trial, (name, parallel) in enumerate([(None, False), (None, True), ("search.docs-v2", False),
                                              ("get_weather", True), (None, False), (None, True)]):
        grammar = get_parser(fmt).forcing_grammar(TOOLS, name, parallel)
        parts = pieces(tokenizer, walk(tokenizer, grammar, rng))
        text = "".join(parts)
        result, deltas = stream(get_parser(fmt), parts, TOOLS)
        check_stream(result, deltas)
        content, calls = result
        assert content is None, (trial, text)
        assert calls and (parallel or len(calls) == 1), (trial, text)
        assert parsed(fmt, text)[1] == [(c.name, json.loads(c.arguments)) for c in calls]
        for call in calls:
            assert name in (None, call.name), (trial, text)
            assert validate_arguments(call, TOOLS) is None, (trial, text)
