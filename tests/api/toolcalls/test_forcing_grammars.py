"""Every forcing grammar against its format's parser, with the real SmolLM2 tokenizer.

Both directions are sampled:

* random valid calls, rendered in the format the way its models write them, are accepted by the
  engine's matcher token by token, and the parser reads them back as the same calls; calls off
  the schema, of an unknown tool, one too many, or with runaway whitespace are rejected;
* random walks through the grammar itself (a random allowed token at each step, from the real
  vocabulary) decode to texts that the parser reads as calls of the allowed tools whose
  arguments validate against the tool's schema, streamed or not.

The formats that write arguments one by one (pythonic, qwen3_coder, seed_oss, minimax_m2, glm4, gemma)
narrow what they
admit where the format cannot carry a value (documented in ``docs/tools.md``); the samples keep
within those limits, and the narrowings have tests of their own.
"""

from __future__ import annotations

import codecs
import json
import random
import re

import numpy as np
import pytest

from mlxctl.api.toolcalls import ToolCall, get_parser, names, validate_arguments
from mlxctl.api.toolcalls.gemma import MARKERS as GEMMA_MARKERS
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
FORCED = sorted(n for n in names() if getattr(get_parser(n), "forcing_grammar", None))
# a pythonic call is a Python call: the tool's name must be a dotted Python name
SEARCH_NAME = {"pythonic": "search.docs_v2"}


def search_name(fmt: str) -> str:
    return SEARCH_NAME.get(fmt, "search.docs-v2")


def tools_for(fmt: str) -> list[dict]:
    return [_tool(search_name(fmt), SEARCH) if t["function"]["name"] == "search.docs-v2" else t for t in TOOLS]


def schemas_for(fmt: str) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in tools_for(fmt)}


# strings that look like markers of some format: inside JSON they are only text
TRICKY = ["Paris", "São Paulo", 'a "quoted" word', "back\\slash", "two\nlines", "</tool_call>", "[ARGS]",
          "[TOOL_CALLS]", "<｜tool▁call▁end｜>", "<|tool_call_end|>", "<|call|>", "```", '{"name": "x"}', "東京",
          "a<b", "x=1)", "<arg_value>", '<|"|>', "<escape>", "null", "None", " 42 ", "<tool_call|>"]
# what a format cannot carry inside a string (the narrowings of text-valued formats; inside JSON
# values Qwen3-Coder refuses `</` and `<p`, GLM `</`; Gemma's strings stop at their delimiter)
UNWRITABLE = {
    "qwen3_coder": ("</", "<p"),
    "seed_oss": ("</", "<p"),
    "minimax_m2": ("</", "<p"),
    "glm4": ("</",),
    "gemma": ('<|"|>', "<tool_call|>", "<escape>", "<end_function_call>"),
    "deepseek_v32": ("</",),
}


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


def sample(schema: dict, rng: random.Random, fmt: str = "hermes"):
    """A random value valid against the (small) schemas above, that ``fmt`` can carry."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "string":
        text = rng.choice([t for t in TRICKY if not any(u in t for u in UNWRITABLE.get(fmt, ()))])
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
        return [sample(schema["items"], rng, fmt) for _ in range(rng.randint(0, schema.get("maxItems", 2)))]
    out = {}
    for key, sub in schema.get("properties", {}).items():  # in schema order, as the grammar writes them
        if key in schema.get("required", ()) or rng.random() < 0.5:
            out[key] = sample(sub, rng, fmt)
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
    if fmt == "pythonic":
        sep = rng.choice([", ", ","])
        body = sep.join(f"{n}({sep.join(f'{k}={dumps(v, rng)}' for k, v in a.items())})" for n, a in calls)
        return rng.choice(["[{}]", "<|python_start|>[{}]<|python_end|>", "<|python_start|>[{}]"]).format(body)
    if fmt == "qwen3_coder":
        return "\n".join("<tool_call>\n" + _qwen_function(n, a, rng) + "</tool_call>" for n, a in calls)
    if fmt == "glm4":
        nl = rng.choice(["", "\n"])  # GLM-4.5/4.6 put newlines between the parts, GLM-4.7 does not
        return nl.join(f"<tool_call>{n}{nl}" + "".join(
            f"<arg_key>{k}</arg_key>{nl}<arg_value>{_text(v, rng)}</arg_value>{nl}" for k, v in a.items())
            + "</tool_call>" for n, a in calls)
    if fmt == "gemma":
        start, (end, quote) = rng.choice(list(GEMMA_MARKERS.items()))
        return "".join(f"{start}call:{n}{gemma_literal(a, quote)}{end}" for n, a in calls)
    if fmt == "seed_oss":  # one block, a blank line between calls or not
        return "<seed:tool_call>\n" + rng.choice(["", "\n"]).join(
            f"<function={n}>\n" + "".join(f"<parameter={k}>{_text(v, rng)}</parameter>\n" for k, v in a.items())
            + "</function>\n" for n, a in calls) + "</seed:tool_call>"
    if fmt == "minimax_m2":
        return "<minimax:tool_call>\n" + "".join(
            f'<invoke name="{n}">\n' + "".join(f'<parameter name="{k}">{_text(v, rng)}</parameter>\n'
                                                for k, v in a.items()) + "</invoke>\n" for n, a in calls
        ) + "</minimax:tool_call>"
    if fmt == "nemotron":
        return "<TOOLCALL>" + dumps(objects, rng) + "</TOOLCALL>"
    if fmt == "deepseek_v32":
        return "<｜DSML｜function_calls>\n" + "\n".join(_dsml_invoke(n, a, rng) for n, a in calls) + (
            "\n</｜DSML｜function_calls>")
    raise AssertionError(f"no renderer for {fmt}")


def _dsml_invoke(name: str, arguments: dict, rng: random.Random) -> str:
    """One call as DeepSeek's V3.2 encoder writes it (strings raw, other values JSON)."""
    params = "\n".join(f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                       f"{v if isinstance(v, str) else dumps(v, rng)}</｜DSML｜parameter>" for k, v in arguments.items())
    return f'<｜DSML｜invoke name="{name}">\n{params}\n</｜DSML｜invoke>'



def _text(value, rng: random.Random) -> str:
    """A value as the Qwen3-Coder and GLM templates write it: strings raw, others as JSON (or,
    for Qwen3-Coder's booleans and null, Python's spelling)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return rng.choice([json.dumps(value), str(value)])
    return dumps(value, rng)


def _qwen_function(name: str, arguments: dict, rng: random.Random) -> str:
    params = "".join(f"<parameter={k}>\n{_text(v, rng)}\n</parameter>\n" for k, v in arguments.items())
    return f"<function={name}>\n{params}</function>\n"


def gemma_literal(value, quote: str) -> str:
    if isinstance(value, str):
        return quote + value + quote
    if isinstance(value, list):
        return "[" + ",".join(gemma_literal(v, quote) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{gemma_literal(v, quote)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def random_calls(rng: random.Random, name: str | None, count: int, fmt: str = "hermes") -> list[tuple[str, dict]]:
    schemas = schemas_for(fmt)
    picks = [name or rng.choice(list(schemas)) for _ in range(count)]
    return [(n, sample(schemas[n], rng, fmt)) for n in picks]


def parsed(fmt: str, text: str, tools: list[dict] | None = None) -> tuple[str | None, list[tuple[str, dict]]]:
    content, calls = get_parser(fmt).parse(text, tools or tools_for(fmt))
    return content, [(c.name, json.loads(c.arguments)) for c in calls]


def test_every_format_has_a_forcing_grammar():
    assert set(FORCED) == set(names())


@pytest.mark.parametrize("fmt", FORCED)
def test_rendered_valid_calls_are_accepted_and_parse_back(fmt, tokenizer):
    rng = random.Random(fmt)
    tools = tools_for(fmt)
    for trial in range(24):
        name = rng.choice([None, None, "get_weather", search_name(fmt)])
        parallel = name is None and rng.random() < 0.5
        calls = random_calls(rng, name, rng.randint(2, 3) if parallel else 1, fmt)
        text = render(fmt, calls, rng)
        grammar = get_parser(fmt).forcing_grammar(tools, name, parallel)
        assert accepts(tokenizer, grammar, text), (trial, text)
        assert parsed(fmt, text) == (None, calls), (trial, text)


# texts each format's grammar must refuse besides the common ones: what its parser reads otherwise
SPECIFIC_INVALID = {
    "pythonic": {
        "positional argument": '[get_weather("Paris")]',
        "empty list": "[]",
        "text after the list": '[get_weather(city="Paris")] done',
    },
    "qwen3_coder": {
        "end tag in a string": ("<tool_call>\n<function=get_weather>\n<parameter=city>\nPa</parameter>ris\n"
                                "</parameter>\n</function>\n</tool_call>"),
        "end tag in JSON": ('<tool_call>\n<function=search.docs-v2>\n<parameter=query>\nq\n</parameter>\n'
                            '<parameter=filters>\n{"lang": "a</p"}\n</parameter>\n</function>\n</tool_call>'),
    },
    "glm4": {
        "end tag in a string": ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Pa</arg_value>ris"
                                "</arg_value></tool_call>"),
        "unknown key": "<tool_call>get_weather<arg_key>town</arg_key><arg_value>Paris</arg_value></tool_call>",
    },
    "seed_oss": {
        "end tag in a string": ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>Pa</parameter>ris"
                                "</parameter>\n</function>\n</seed:tool_call>"),
        "Qwen3-Coder's block": "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        "a string between newlines": ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                                      "</parameter>\n</function>\n</seed:tool_call>"),
    },
    "minimax_m2": {
        "end tag in a string": ('<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Pa'
                                "</invoke>ris</parameter>\n</invoke>\n</minimax:tool_call>"),
        "an unquoted name": ("<minimax:tool_call>\n<invoke name=get_weather>\n<parameter name=\"city\">Paris"
                             "</parameter>\n</invoke>\n</minimax:tool_call>"),
    },
    "nemotron": {
        "no closing marker": '<TOOLCALL>[{"name": "get_time", "arguments": {}}]',
        "empty array": "<TOOLCALL>[]</TOOLCALL>",
    },
    "deepseek_v32": {
        "a string flagged as JSON": ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
                                     '<｜DSML｜parameter name="city" string="false">"Paris"</｜DSML｜parameter>\n'
                                     "</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
        "end tag in a string": ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
                                '<｜DSML｜parameter name="city" string="true">a</b</｜DSML｜parameter>\n'
                                "</｜DSML｜invoke>\n</｜DSML｜function_calls>"),
    },
    "gemma": {
        "delimiter in a string": '<|tool_call>call:get_weather{city:<|"|>Pa<|"|>ris<|"|>}<tool_call|>',
        "the other layout's delimiter": "<|tool_call>call:get_weather{city:<escape>Paris<escape>}<tool_call|>",
        "string for a number": '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:<|"|>3<|"|>}<tool_call|>',
    },
}
TEXT_VALUED = ("qwen3_coder", "seed_oss", "minimax_m2", "glm4")  # a number written for a string is its text there


def _invalid(fmt: str, rng: random.Random) -> dict[str, str]:
    """Texts in the format that a grammar for (all tools, one call) must refuse, by reason."""
    good = ("get_weather", {"city": "Paris", "days": 3})
    cases = {
        "unknown tool": render(fmt, [("get_wether", {"city": "Paris"})], rng),
        "missing required": render(fmt, [("get_weather", {"days": 3})], rng),
        "wrong type": render(fmt, [("get_weather", {"city": "Paris", "days": "soon"})], rng),
        "below minimum": render(fmt, [("get_weather", {"city": "Paris", "days": 0})], rng),
        "not in enum": render(fmt, [("get_weather", {"city": "Paris", "unit": "kelvin"})], rng),
        "too long": render(fmt, [("get_weather", {"city": "P" * 41})], rng),
        "extra property": render(fmt, [("get_weather", {"city": "Paris", "country": "FR"})], rng),
        "nested required": render(fmt, [(search_name(fmt), {"query": "q", "filters": {}})], rng),
        "two calls": render(fmt, [good, ("get_time", {})], rng),
        "plain text": "It is sunny in Paris.",
        **SPECIFIC_INVALID.get(fmt, {}),
    }
    if fmt not in TEXT_VALUED:
        cases["number for a string"] = render(fmt, [("get_weather", {"city": 7})], rng)
    return cases


@pytest.mark.parametrize("fmt", FORCED)
def test_calls_off_the_schema_are_refused(fmt, tokenizer):
    rng = random.Random(fmt + "bad")
    tools = tools_for(fmt)
    grammar = get_parser(fmt).forcing_grammar(tools, None, False)
    for seed in range(3):  # each layout the renderer may pick
        rng.seed(f"{fmt}{seed}")
        for why, text in _invalid(fmt, rng).items():
            assert not accepts(tokenizer, grammar, text), (why, text)
    named = get_parser(fmt).forcing_grammar(tools, "get_time", True)
    assert not accepts(tokenizer, named, render(fmt, [("get_weather", {"city": "Paris"})], rng))
    assert accepts(tokenizer, named, render(fmt, [("get_time", {}), ("get_time", {})], rng))


@pytest.mark.parametrize("fmt", FORCED)
def test_whitespace_inside_the_arguments_is_bounded(fmt, tokenizer):
    grammar = get_parser(fmt).forcing_grammar(tools_for(fmt), "get_weather")
    text = render(fmt, [("get_weather", {"city": "Paris", "at": [1]})], random.Random(0))
    # between JSON members, and inside an array (JSON in most formats; Gemma writes no whitespace)
    for point in ('"city"', "["):
        for gap, ok in (("\n  ", fmt != "gemma"), ("\n" * 40, False)):
            if point == '"city"':
                spaced = text.replace(point, f"{gap}{point}", 1)
            else:
                spaced = re.sub(r"\[\s*1", lambda _: f"[{gap}1", text, count=1)  # noqa: B023
            # the formats that do not write arguments as JSON (MiniMax-M2's and DSML's `"city"` is a tag's name)
            if point == '"city"' and (spaced == text or fmt in ("minimax_m2", "deepseek_v32")):
                assert fmt in TEXT_FORMATS, text
                continue
            assert accepts(tokenizer, grammar, spaced) is ok, spaced


# -- random walks through the grammar ---------------------------------------------------------------

CLOSERS = frozenset('"}]')
# what ends a value, a call or a block in some format: a walk steered to finish completes them
ENDINGS = ('"', "}", "]", ")", "\n</parameter>\n", "</function>\n</tool_call>", "</arg_value>", "</tool_call>",
           '<|"|>', "<tool_call|>", "<escape>", "<end_function_call>", "</parameter>\n",
           "</function>\n</seed:tool_call>", "</invoke>\n</minimax:tool_call>", "]</TOOLCALL>",
           "</｜DSML｜parameter>\n", "</｜DSML｜invoke>", "</｜DSML｜function_calls>")


class _Vocab:
    """The tokenizer's tokens by decoded text, for steering walks."""

    def __init__(self, tokenizer):
        from mlxctl.engine.constraints import ll_tokenizer

        llt = ll_tokenizer(tokenizer)
        self.width = len(tokenizer)
        self.special = set(tokenizer.all_special_ids)
        self.text = [llt.decode_bytes([i]).decode("utf-8", "replace") for i in range(self.width)]
        vocab = tokenizer.convert_ids_to_tokens(list(range(self.width)))
        self.closers = {i for i, t in enumerate(vocab) if t and (set(t) <= CLOSERS or "end" in t)}
        self.short = {i for i, t in enumerate(vocab) if t and len(t) == 1}
        self.by_text: dict[str, list[int]] = {}
        for i, t in enumerate(self.text):
            if i not in self.special:
                self.by_text.setdefault(t, []).append(i)

    def completing(self, text: str, allowed: set[int], rng: random.Random) -> list[int]:
        """Allowed tokens that go on with an ending, the longest first; the ending is picked at
        random, the further ``text`` is into one the likelier (not always: the end of one ending
        may begin it again)."""
        options = []
        for ending in ENDINGS:
            k = next((k for k in range(min(len(ending) - 1, len(text)), 0, -1) if text.endswith(ending[:k])), 0)
            rest = ending[k:]
            for n in range(len(rest), 0, -1):
                tokens = [t for t in self.by_text.get(rest[:n], ()) if t in allowed]
                if tokens:
                    options.append((4**k, tokens))
                    break
        if not options:
            return []
        return rng.choices([tokens for _, tokens in options], [weight for weight, _ in options])[0]


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return _Vocab(tokenizer)


def walk(tokenizer, vocab: _Vocab, grammar: str, rng: random.Random, budget: int = 48, limit: int = 2000) -> list[int]:
    """A random token sequence the grammar accepts: uniform over the allowed tokens for
    ``budget`` steps, then steered to finish (tokens that complete an ending, close strings and
    containers or hold ``end``, else single-byte ones). End of sequence is left to the walk, which
    stops at random once the grammar accepts."""
    matcher = _matcher(tokenizer, grammar)
    row = np.zeros((vocab.width + 31) // 32, dtype=np.int32)
    tokens: list[int] = []
    text = ""
    while not matcher.is_stopped():
        if matcher.is_accepting() and rng.random() < 0.5:
            break
        assert len(tokens) < limit, tokenizer.decode(tokens)
        assert matcher.fill_bitmask(row), matcher.error
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.width]
        allowed = [t for t in np.flatnonzero(bits).tolist() if t not in vocab.special]
        if not allowed:
            break
        if len(tokens) >= budget or rng.random() < 0.2:
            allowed_set = set(allowed)
            steer = (vocab.completing(text, allowed_set, rng) or [t for t in allowed if t in vocab.closers]
                     or [t for t in allowed if t in vocab.short])
            allowed = steer or allowed
        token = rng.choice(allowed)
        matcher.advance(token)
        assert matcher.error is None, matcher.error
        tokens.append(token)
        text = (text + vocab.text[token])[-64:]
    assert matcher.is_accepting(), tokenizer.decode(tokens)
    return tokens


def pieces(tokenizer, tokens: list[int]) -> list[str]:
    """The decoded text of each token, as a detokenizer streams it (UTF-8 joined across tokens)."""
    from mlxctl.engine.constraints import ll_tokenizer

    llt, decoder = ll_tokenizer(tokenizer), codecs.getincrementaldecoder("utf-8")()
    return [decoder.decode(llt.decode_bytes([t])) for t in tokens] + [decoder.decode(b"", final=True)]


def check_walks(fmt: str, tools: list[dict], cases, tokenizer, vocab, rng: random.Random) -> None:
    """Walk each (name, parallel) grammar of ``fmt`` for ``tools``: the text parses, streamed or
    not, to calls of the allowed tools whose arguments validate."""
    for trial, (name, parallel) in enumerate(cases):
        grammar = get_parser(fmt).forcing_grammar(tools, name, parallel)
        parts = pieces(tokenizer, walk(tokenizer, vocab, grammar, rng))
        text = "".join(parts)
        result, deltas = stream(get_parser(fmt), parts, tools)
        check_stream(result, deltas)
        content, calls = result
        assert content is None, (trial, text)
        assert calls and (parallel or len(calls) == 1), (trial, text)
        assert parsed(fmt, text, tools)[1] == [(c.name, json.loads(c.arguments)) for c in calls]
        for call in calls:
            assert name in (None, call.name), (trial, text)
            assert validate_arguments(call, tools) is None, (trial, text)


@pytest.mark.parametrize("fmt", FORCED)
def test_texts_sampled_from_the_grammar_parse_to_valid_calls(fmt, tokenizer, vocab):
    cases = [(None, False), (None, True), (search_name(fmt), False), ("get_weather", True), (None, False), (None, True)]
    check_walks(fmt, tools_for(fmt), cases, tokenizer, vocab, random.Random(fmt + "walk"))


# -- narrowings: what the formats that write arguments one by one cannot carry ------------------------

ODD = {
    "type": "object",
    "$defs": {
        "Unit": {"type": "string", "enum": ["c", "f", "a</parameter>b", 'x<|"|>y']},
        "Tree": {"type": "object", "properties": {"v": {"type": "integer"},
                                                  "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"},
                                                           "maxItems": 2}},
                 "required": ["v"]},
    },
    "properties": {
        "note": {"type": ["string", "null"], "maxLength": 10},
        "label": {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 6}, {"type": "null"}]},
        "unit": {"$ref": "#/$defs/Unit"},
        "tree": {"$ref": "#/$defs/Tree"},
        "free": {"type": "object"},
        "anything": {},
        "either": {"oneOf": [{"type": "integer", "minimum": 5}, {"type": "boolean"}]},
        "from": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 3},
        "dash-key": {"type": "number", "maximum": 2.5},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "fixed": {"const": "yes"},
        "maybe": {"enum": ["a", None]},
    },
    "required": ["note", "unit", "either", "fixed"],
    "additionalProperties": False,
}
# `y` is required but not a property: any value goes (a string, as the grammars write it)
LOOSE = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x", "y"]}
ODD_TOOLS = [_tool("odd", ODD), _tool("loose", LOOSE)]
TEXT_FORMATS = ("pythonic", "qwen3_coder", "seed_oss", "minimax_m2", "glm4", "gemma", "deepseek_v32")


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_walks_through_grammars_of_odd_schemas_parse_to_valid_calls(fmt, tokenizer, vocab):
    cases = [("odd", False), (None, True), ("loose", False), (None, False)]
    check_walks(fmt, ODD_TOOLS, cases, tokenizer, vocab, random.Random(fmt + "odd"))


def _q(params: str) -> str:
    return f"<tool_call>\n<function=odd>\n{params}</function>\n</tool_call>"


def _qp(**values) -> str:
    return "".join(f"<parameter={k.replace('_', '-')}>\n{v}\n</parameter>\n" for k, v in values.items())


def _seed(**values) -> str:
    params = "".join(f"<parameter={k.replace('_', '-')}>{v}</parameter>\n" for k, v in values.items())
    return f"<seed:tool_call>\n<function=odd>\n{params}</function>\n</seed:tool_call>"


def _mm(**values) -> str:
    return '<minimax:tool_call>\n<invoke name="odd">\n' + "".join(
        f'<parameter name="{k}">{v}</parameter>\n' for k, v in values.items()) + "</invoke>\n</minimax:tool_call>"


def _glm(**values) -> str:
    return "<tool_call>odd" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
                                      for k, v in values.items()) + "</tool_call>"


def _gem(body: str, quote: str = '<|"|>') -> str:
    body = body.replace('"', quote)
    return f"<|tool_call>call:odd{{{body}}}<tool_call|>" if quote == '<|"|>' else \
        f"<start_function_call>call:odd{{{body}}}<end_function_call>"


BASE = {"note": "hi", "unit": "c", "either": 7, "fixed": "yes"}
# (format, text, the arguments it parses to when the grammar admits it, or None when it refuses it)
NARROWINGS = [
    ("pythonic", '[odd(note=null, unit="f", either=true, fixed="yes")]',
     {"note": None, "unit": "f", "either": True, "fixed": "yes"}),
    ("pythonic", '[odd(note="hi", unit="c", tree={"v": 1, "kids": [{"v": 2}]}, either=7, fixed="yes")]',
     {**BASE, "tree": {"v": 1, "kids": [{"v": 2}]}}),
    ("pythonic", '[odd(note="hi", unit="c", either=7, code="ABC", fixed="yes")]', {**BASE, "code": "ABC"}),
    ("pythonic", '[odd(note="hi", unit="c", either=7, from=3, fixed="yes")]', None),  # a keyword: not Python
    ("pythonic", '[odd(note="hi", unit="c", either=True, fixed="yes")]', None),  # JSON's spellings only
    ("pythonic", '[odd(note="hi", unit="c", either=7, fixed="yes", maybe=None)]', None),
    ("pythonic", "[odd(note='hi', unit='c', either=7, fixed='yes')]", None),  # JSON strings only
    ("qwen3_coder", _q(_qp(note="None", unit="c", either=5, fixed="yes")),
     {"note": None, "unit": "c", "either": 5, "fixed": "yes"}),
    ("qwen3_coder", _q(_qp(note="hi", label="null", unit="c", either="False", fixed="yes")),
     {"note": "hi", "label": None, "unit": "c", "either": False, "fixed": "yes"}),
    ("qwen3_coder", _q(_qp(note=" nULl ", unit="c", either=7, fixed="yes")), None),  # null as a string: no
    ("qwen3_coder", _q(_qp(note="hi", unit="a</parameter>b", either=7, fixed="yes")), None),
    ("qwen3_coder", _q(_qp(note="hi", unit="c", free='{"k": [1, "</b>"]}', either=7, fixed="yes")), None),
    ("qwen3_coder", _q(_qp(note="hi", unit="c", free='{"k": [1, "a<b"]}', either=7, fixed="yes")),
     {**BASE, "free": {"k": [1, "a<b"]}}),
    ("qwen3_coder", _q(_qp(note="hi", unit="c", anything="</div>", either=7, fixed="yes")),
     {**BASE, "anything": "</div>"}),
    ("qwen3_coder", _q(_qp(note="hi", unit="c", either=7, dash_key=2.5, fixed="yes")), {**BASE, "dash-key": 2.5}),
    ("qwen3_coder", _q(_qp(note="hi", unit="c", either=7, code="ABC", fixed="yes")), None),  # a pattern
    ("seed_oss", _seed(note="None", unit="c", either=5, fixed="yes"), {**BASE, "note": None, "either": 5}),
    ("seed_oss", _seed(note="a\nb", unit="c", either="True", fixed="yes"), {**BASE, "note": "a\nb", "either": True}),
    ("seed_oss", _seed(note="\nhi", unit="c", either=7, fixed="yes"), None),  # a newline at its edge is layout
    ("seed_oss", _seed(note="hi\n", unit="c", either=7, fixed="yes"), None),
    ("seed_oss", _seed(note="hi", unit="a</parameter>b", either=7, fixed="yes"), None),
    ("minimax_m2", _mm(note="hi ", unit="c", either=7, fixed="yes"), {**BASE, "note": "hi "}),
    ("minimax_m2", _mm(note="hi", unit="c", free='{"k": [1, "a<b"]}', either=7, fixed="yes"),
     {**BASE, "free": {"k": [1, "a<b"]}}),
    ("minimax_m2", _mm(note="hi", unit="c", free='{"k": "</invoke>"}', either=7, fixed="yes"), None),
    ("minimax_m2", _mm(note=" nULl ", unit="c", either=7, fixed="yes"), None),  # null as a string: no
    ("glm4", _glm(note="x</b", unit="c", either=5, fixed="yes"), {**BASE, "note": "x</b", "either": 5}),
    ("glm4", _glm(note="hi", unit="a</parameter>b", either=7, fixed="yes"), {**BASE, "unit": "a</parameter>b"}),
    # the parser converts by the parameter's own schema: through a $ref it sees no type, so text
    ("glm4", _glm(note="hi", unit="c", tree='{"v": 1, "kids": []}', either=7, fixed="yes"), None),
    ("glm4", _glm(note="hi", unit="c", free='{"</": 1}', either=7, fixed="yes"), None),
    ("glm4", _glm(note="hi", unit="c", either=4, fixed="yes"), None),
    ("gemma", _gem('note:null,unit:"c",tree:{v:1,kids:[{v:2,kids:[]}]},either:7,fixed:"yes"'),
     {**BASE, "note": None, "tree": {"v": 1, "kids": [{"v": 2, "kids": []}]}}),
    ("gemma", ("<start_function_call>call:odd{note:<escape>hi<escape>,unit:<escape>x<|\"|>y<escape>,either:7,"
               "fixed:<escape>yes<escape>}<end_function_call>"), {**BASE, "unit": 'x<|"|>y'}),
    ("gemma", '<|tool_call>call:odd{note:<|"|>hi<|"|>,unit:<|"|>x<|"|>y<|"|>,either:7,fixed:<|"|>yes<|"|>}<tool_call|>',
     None),
    ("gemma", _gem('note:"hi",unit:"c",either:7,dash-key:1,fixed:"yes"'), {**BASE, "dash-key": 1}),
    ("gemma", _gem('note:"hi",unit:"c",either:7,"dash-key":1,fixed:"yes"'), None),  # one spelling per name
    ("gemma", _gem('note:"hi",unit:"c",free:{a:1},either:7,fixed:"yes"'), None),  # no members beyond properties
    ("gemma", _gem('note:"hi",unit:"c",anything:"a",either:7,fixed:"yes",maybe:null'),
     {**BASE, "anything": "a", "maybe": None}),
    ("gemma", _gem('note:hi,unit:"c",either:7,fixed:"yes"'), None),  # bare strings are not written
]


@pytest.mark.parametrize(("fmt", "text", "arguments"), NARROWINGS)
def test_what_text_valued_grammars_admit(fmt, text, arguments, tokenizer):
    grammar = get_parser(fmt).forcing_grammar(ODD_TOOLS, "odd")
    if arguments is None:
        assert not accepts(tokenizer, grammar, text), text
        return
    assert accepts(tokenizer, grammar, text), text
    assert parsed(fmt, text, ODD_TOOLS) == (None, [("odd", arguments)])
    assert validate_arguments(ToolCall("odd", json.dumps(arguments), ""), ODD_TOOLS) is None


UNWRITABLE_TOOLS = {  # a tool whose required parameter the format cannot write
    "pythonic": ({"class": {"type": "string"}}, ["'bad'", "parameter 'class'", "not a Python identifier"]),
    "qwen3_coder": ({"v": {"type": ["string", "integer"]}}, ["parameter 'v'", "mixes strings"]),
    "seed_oss": ({"v": {"type": ["string", "integer"]}}, ["parameter 'v'", "mixes strings"]),
    "minimax_m2": ({'say "v"': {"type": "string"}}, ["parameter 'say \"v\"'", "cannot be written in a tag"]),
    "glm4": ({"v": {"type": "string", "pattern": "^a"}}, ["parameter 'v'", "pattern"]),
    "gemma": ({"v": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}, ["uniqueItems"]),
    "deepseek_v32": ({"v": {"type": ["string", "integer"]}}, ["parameter 'v'", "mixes strings"]),
}


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_tool_the_format_cannot_write_is_left_out_or_a_400(fmt, tokenizer):
    from mlxctl.errors import BadInputError

    properties, words = UNWRITABLE_TOOLS[fmt]
    bad = _tool("bad", {"type": "object", "properties": properties, "required": list(properties)})
    tools = [bad, _tool("get_time", EMPTY)]
    for name in ("bad", None):
        if name is None:  # another tool is left: only it can be called
            grammar = get_parser(fmt).forcing_grammar(tools, None)
            assert accepts(tokenizer, grammar, render(fmt, [("get_time", {})], random.Random(0)))
            continue
        with pytest.raises(BadInputError) as info:
            get_parser(fmt).forcing_grammar(tools, name)
        assert all(w in str(info.value) for w in [fmt, *words]), str(info.value)
    with pytest.raises(BadInputError):
        get_parser(fmt).forcing_grammar([bad], None)


def test_gemma_keeps_the_layout_that_can_write_the_call(tokenizer):
    tool = _tool("f", {"type": "object", "properties": {"q": {"const": 'say <|"|>hi<|"|>'}}, "required": ["q"]})
    grammar = get_parser("gemma").forcing_grammar([tool], None)
    text = '<start_function_call>call:f{q:<escape>say <|"|>hi<|"|><escape>}<end_function_call>'
    assert accepts(tokenizer, grammar, text)
    assert parsed("gemma", text, [tool]) == (None, [("f", {"q": 'say <|"|>hi<|"|>'})])
    assert "<|tool_call>" not in grammar
