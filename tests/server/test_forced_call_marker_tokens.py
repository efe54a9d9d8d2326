"""A forced call on a model whose tokenizer has ``<tool_call>`` as one added token (as Qwen's
has: 151657, ``special: false``): tiny random weights, SmolLM2's tokenizer with the Hermes
markers added. The grammar asks for the marker token by id, so the call comes back parsed
(a 500 before: the mask admitted the token, then the matcher refused it)."""

from __future__ import annotations

import json

import pytest

from mlxctl.engine.engine import Engine
from mlxctl.models.dummy import load_dummy
from tests.server.infra import MODEL, openai_client, served

pytest.importorskip("llguidance")

TINY = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
        "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5, "vocab_size": 49216,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "max_position_embeddings": 2048}
TOOL = {"type": "function", "function": {"name": "get_time", "description": "The current time.",
                                         "parameters": {"type": "object", "properties": {},
                                                        "additionalProperties": False}}}


@pytest.fixture(scope="module")
def marker_engine(smollm2, tmp_path_factory):
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("marker-model")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(smollm2.path))
    tokenizer.add_tokens(["<tool_call>", "</tool_call>", "<think>", "</think>", "｜DSML｜"])
    tokenizer.save_pretrained(root / "tokenizer")
    (root / "config.json").write_text(json.dumps(TINY))
    engine = Engine(lambda: load_dummy(str(root), root / "tokenizer", "float32")).start()
    yield engine
    engine.shutdown()


def test_a_required_call_is_made_with_the_marker_token(marker_engine):
    tokenizer = marker_engine.model.tokenizer
    assert tokenizer.encode("<tool_call>", add_special_tokens=False) == [tokenizer.convert_tokens_to_ids("<tool_call>")]
    with served(marker_engine) as url:
        r = openai_client(url).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "What time is it?"}], max_tokens=200,
            tools=[TOOL], tool_choice="required")
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and len(r.choices[0].message.tool_calls) == 1
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {}


def test_a_required_call_after_thinking_is_made_with_the_think_tokens(marker_engine):
    """Qwen3's ``<think>``/``</think>`` are added tokens too: the thinking grammar asks for them
    by id. The budget makes the thinking block, and so both marker tokens, part of the answer of
    random weights (a model closing its thinking itself, the case that failed before, is in
    tests/api/test_thinking_token_markers.py)."""
    with served(marker_engine, reasoning_parser="think") as url:
        r = openai_client(url).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "What time is it?"}], max_tokens=200,
            tools=[TOOL], tool_choice="required", extra_body={"thinking_budget": 4})
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and len(message.tool_calls) == 1
    assert message.tool_calls[0].function.name == "get_time"
    assert getattr(message, "reasoning_content", None)  # the thinking came back as reasoning


def test_a_named_dsml_call_is_made_with_the_dsml_token(marker_engine):
    """``--tool-call-parser deepseek_v32``: DeepSeek V3.2's ``｜DSML｜`` is one token inside every
    tag; the forced call's grammar takes it by id and the call comes back parsed, streamed too."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
        "additionalProperties": False}}}
    with served(marker_engine, tool_call_parser="deepseek_v32") as url:
        client = openai_client(url)
        ask = {"model": MODEL, "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 200,
               "tools": [weather], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        r = client.chat.completions.create(**ask)
        chunks = list(client.chat.completions.create(**ask, stream=True))
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    streamed = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert streamed and streamed[0].function.name == "get_weather"
    assert isinstance(json.loads("".join(d.function.arguments or "" for d in streamed))["city"], str)
