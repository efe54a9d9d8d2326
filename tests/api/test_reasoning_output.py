"""Reasoning in each API's output, whole and streamed: OpenAI chat messages and chunks, Anthropic
content blocks and stream events, Responses output items and stream events.

A known generated text goes through the real pieces the server uses: the plan from each API's
``chat_plan`` (a model served with a reasoning format), ``new_splitter`` (reasoning parser, then the
tool-call parser), and the builders (``ChatOutput``, ``message_body`` / ``BlockStream``,
``finished_body`` / ``ResponseEvents``). Streams are fed the text in SmolLM2's own detokenized token
pieces, one character at a time, and cut in two at every character. Every object and event is also
validated against the official ``openai`` / ``anthropic`` SDK types, and the Anthropic stream is
folded with the SDK's own accumulator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from mlxctl.api import (
    anthropic_events,
    anthropic_translate,
    openai_translate,
    responses_translate,
)
from mlxctl.api.anthropic_models import MessagesRequest
from mlxctl.api.chat_plan import ChatPlan, ModelFormats
from mlxctl.api.chat_split import new_splitter
from mlxctl.api.openai_models import ChatCompletionRequest
from mlxctl.api.openai_output import ChatOutput
from mlxctl.api.openai_pieces import Piece
from mlxctl.api.output_stream import ChoiceSegments
from mlxctl.api.responses_events import ResponseEvents
from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.api.responses_objects import ResponseDraft
from mlxctl.engine.events import FinishReason, Usage

MODEL = "m"
USAGE = Usage(11, 23)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@dataclass(frozen=True)
class Case:
    """A generated text, how its model thinks, and the split the docs promise for it."""

    name: str
    parser: str
    text: str
    reasoning: str
    content: str
    opens: bool = False  # the rendered prompt ended inside thinking


CASES = [
    # Qwen3's layout: one newline after each marker is not part of the text
    Case("think", "think", "<think>\nThe user says hello. I should greet back.\n</think>\n\nHello! How can I help?",
         "The user says hello. I should greet back.\n", "\nHello! How can I help?"),
    Case("think-opened-in-prompt", "think", "The prompt opened it.\n</think>\n\nHi.", "The prompt opened it.\n",
         "\nHi.", opens=True),
    Case("deepseek_r1", "deepseek_r1", "No opening marker here.</think>Answer.", "No opening marker here.", "Answer."),
    Case("mistral", "mistral", "[THINK]Short thought.[/THINK]Answer.", "Short thought.", "Answer."),
    Case("gpt_oss", "gpt_oss",
         "<|channel|>analysis<|message|>Thought.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
         "Thought.", "Answer."),
    Case("granite", "granite", "Here is my thought process:\nThought.\nHere is my response:\nAnswer.",
         "Thought.\n", "Answer."),
]
THINK = CASES[0]


@pytest.fixture(scope="module")
def tok(smollm2):
    """mlx-lm's TokenizerWrapper of SmolLM2 (what LoadedModel.tokenizer is)."""
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    return load_tokenizer(smollm2.path)


def token_pieces(tok, text: str) -> list[str]:
    """``text`` as the engine streams it: SmolLM2's tokens through its streaming detokenizer."""
    detok = tok.detokenizer
    detok.reset()
    pieces = []
    for token in tok.encode(text, add_special_tokens=False):
        detok.add_token(token)
        pieces.append(detok.last_segment)
    detok.finalize()
    pieces.append(detok.last_segment)
    assert "".join(pieces) == text
    return pieces


def splits(tok, text: str) -> list[list[str]]:
    """Ways to stream ``text``: token pieces, single characters, and every cut in two."""
    return [token_pieces(tok, text), list(text), *([text[:k], text[k:]] for k in range(len(text) + 1))]


# -- each API's plan, for a model served with a reasoning format ----------------------------------------

def formats(case: Case) -> ModelFormats:
    return ModelFormats(reasoning_parser=case.parser)


def openai_plan(case: Case, tools: bool = False) -> ChatPlan:
    extra = {"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]} if tools else {}
    body = ChatCompletionRequest.model_validate({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                                                 **extra})
    return openai_translate.chat_plan(body, formats(case))


def anthropic_plan(case: Case, tools: bool = False) -> ChatPlan:
    extra = {"tools": [{"name": "get_weather", "input_schema": WEATHER}]} if tools else {}
    req = MessagesRequest.model_validate({"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
                                          "thinking": {"type": "enabled"}, **extra})
    return anthropic_translate.chat_plan(req, formats(case))


def responses_request(tools: bool = False) -> ResponsesRequest:
    extra = {"tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER}]} if tools else {}
    return ResponsesRequest.model_validate({"model": MODEL, "input": "hi", "reasoning": {"effort": "low"}, **extra})


# -- OpenAI chat completions -------------------------------------------------------------------------

def chat_message(tok, plan: ChatPlan, case: Case, finish: str = "stop") -> dict:
    out = ChatOutput(MODEL, tok, plan=plan, reasoning_open=case.opens)
    body = out.response([Piece(case.text, finish_reason=finish)], USAGE)
    ChatCompletion.model_validate(body)
    assert len(body["choices"]) == 1
    return body["choices"][0]


def chat_chunks(tok, plan: ChatPlan, case: Case, pieces: list[str], finish: str = "stop") -> list[dict]:
    out = ChatOutput(MODEL, tok, plan=plan, reasoning_open=case.opens)
    chunks = [out.opening(0, "")]
    for i, text in enumerate(pieces):
        chunk = out.chunk(0, Piece(text, finish_reason=finish if i == len(pieces) - 1 else None))
        if chunk is not None:
            chunks.append(chunk)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        assert chunk["id"] == out.id
    return chunks


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_openai_message_carries_reasoning_content_and_reasoning(tok, case):
    choice = chat_message(tok, openai_plan(case), case)
    message = choice["message"]
    assert message["reasoning_content"] == message["reasoning"] == case.reasoning
    assert message["content"] == case.content
    assert "tool_calls" not in message
    assert choice["finish_reason"] == "stop"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_openai_stream_sends_reasoning_then_content_equal_to_the_message(tok, case):
    plan = openai_plan(case)
    message = chat_message(tok, plan, case)["message"]
    for pieces in splits(tok, case.text):
        chunks = chat_chunks(tok, plan, case, pieces)
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        choices = [c["choices"][0] for c in chunks[1:]]
        deltas = [c["delta"] for c in choices]
        for delta in deltas:
            assert delta.get("reasoning") == delta.get("reasoning_content")  # both or neither, same text
        thinking = [i for i, d in enumerate(deltas) if d.get("reasoning_content")]
        saying = [i for i, d in enumerate(deltas) if d.get("content")]
        assert thinking and saying
        assert max(thinking) <= min(saying), pieces  # all reasoning first (one chunk may hold both)
        assert all(not d.get("reasoning_content") for d in deltas[min(saying) + 1:])
        assert "".join(d.get("reasoning_content", "") for d in deltas) == message["reasoning_content"]
        assert "".join(d.get("content") or "" for d in deltas) == message["content"]
        assert [c["finish_reason"] for c in choices] == [None] * (len(choices) - 1) + ["stop"]


def test_openai_stream_with_one_chunk_per_token_sends_reasoning_as_it_comes(tok):
    # markers are held back only while they may still be a marker: most token pieces go out at once
    pieces = token_pieces(tok, THINK.text)
    assert len(pieces) > 20
    deltas = [c["choices"][0]["delta"] for c in chat_chunks(tok, openai_plan(THINK), THINK, pieces)[1:]]
    assert sum(1 for d in deltas if d.get("reasoning_content")) >= 8
    assert sum(1 for d in deltas if d.get("content")) >= 4


def test_openai_reasoning_then_a_tool_call(tok):
    case = Case("call", "think", "<think>\nThey want the weather.\n</think>\n\n" + CALL, "They want the weather.\n", "")
    plan = openai_plan(case, tools=True)
    choice = chat_message(tok, plan, case)
    message = choice["message"]
    assert message["reasoning_content"] == message["reasoning"] == "They want the weather.\n"
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("get_weather", {"city": "Paris"})
    assert choice["finish_reason"] == "tool_calls"
    for pieces in splits(tok, case.text)[:2]:
        choices = [c["choices"][0] for c in chat_chunks(tok, plan, case, pieces)[1:]]
        deltas = [c["delta"] for c in choices]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == message["reasoning_content"]
        assert not any(d.get("content") for d in deltas)  # the blank line before the call is no text
        first_call = min(i for i, d in enumerate(deltas) if d.get("tool_calls"))
        assert all(not d.get("reasoning_content") for d in deltas[first_call:])
        arguments = "".join(t["function"]["arguments"] for d in deltas for t in d.get("tool_calls", []))
        assert json.loads(arguments) == {"city": "Paris"}
        assert choices[-1]["finish_reason"] == "tool_calls"


def test_openai_thinking_cut_off_by_max_tokens_is_all_reasoning(tok):
    case = Case("cut", "think", "<think>\nStill thinking about", "Still thinking about", "")
    plan = openai_plan(case)
    message = chat_message(tok, plan, case, finish="length")["message"]
    assert message["reasoning_content"] == message["reasoning"] == "Still thinking about"
    assert not message["content"]
    chunks = chat_chunks(tok, plan, case, token_pieces(tok, case.text), finish="length")
    deltas = [c["choices"][0]["delta"] for c in chunks[1:]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "Still thinking about"
    assert not any(d.get("content") for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_without_a_reasoning_format_think_tags_are_content(tok):
    plan = openai_translate.chat_plan(
        ChatCompletionRequest.model_validate({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}),
        ModelFormats())
    message = chat_message(tok, plan, THINK)["message"]
    assert message["content"] == THINK.text
    assert "reasoning_content" not in message and "reasoning" not in message


# -- Anthropic messages ----------------------------------------------------------------------------------

def anthropic_body(plan: ChatPlan, case: Case, reason: FinishReason = FinishReason.STOP) -> dict:
    splitter = new_splitter(plan, case.opens)
    splitter.feed(case.text)
    splitter.finish()
    result = splitter.result()
    stop = anthropic_translate.stop_reason(reason, None, bool(result.calls))
    body = anthropic_translate.message_body("msg_1", MODEL, result, stop, USAGE)
    Message.model_validate(body)
    return body


def anthropic_stream(plan: ChatPlan, case: Case, pieces: list[str], reason: FinishReason = FinishReason.STOP) -> list[dict]:
    """What the /v1/messages view sends (less its ping), in order."""
    output, blocks = ChoiceSegments(new_splitter(plan, case.opens)), anthropic_events.BlockStream()
    events = [anthropic_events.message_start("msg_1", MODEL, USAGE.prompt_tokens)]
    for text in pieces:
        events += blocks.events(output.segments(text, False))
    events += blocks.events(output.segments("", True))
    events = [event for event in events if event["type"] != "ping"]
    stop = anthropic_translate.stop_reason(reason, None, output.called)
    events += [anthropic_events.message_delta(stop, USAGE), anthropic_events.message_stop()]
    for event in events:
        ANTHROPIC_EVENT.validate_python(event)
    return events


def shape(events: list[dict]) -> list[tuple]:
    """The block events, with runs of the same delta kind folded into one."""
    out: list[tuple] = []
    for event in events:
        if event["type"] == "content_block_start":
            step = ("start", event["index"], event["content_block"]["type"])
        elif event["type"] == "content_block_delta":
            step = ("delta", event["index"], event["delta"]["type"])
        elif event["type"] == "content_block_stop":
            step = ("stop", event["index"])
        else:
            step = (event["type"],)
        if not out or out[-1] != step:
            out.append(step)
    return out


def accumulated(events: list[dict]) -> dict:
    """The final message as the anthropic SDK's stream helper builds it from the events."""
    snapshot, bufs = None, {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot.to_dict(exclude_none=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_anthropic_thinking_block_comes_before_the_text_block(case):
    body = anthropic_body(anthropic_plan(case), case)
    assert body["content"] == [{"type": "thinking", "thinking": case.reasoning, "signature": ""},
                               {"type": "text", "text": case.content}]
    assert body["stop_reason"] == "end_turn"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_anthropic_stream_thinking_block_then_text_block(tok, case):
    plan = anthropic_plan(case)
    body = anthropic_body(plan, case)
    for pieces in splits(tok, case.text):
        events = anthropic_stream(plan, case, pieces)
        assert shape(events) == [
            ("message_start",),
            ("start", 0, "thinking"), ("delta", 0, "thinking_delta"), ("delta", 0, "signature_delta"), ("stop", 0),
            ("start", 1, "text"), ("delta", 1, "text_delta"), ("stop", 1),
            ("message_delta",), ("message_stop",),
        ], pieces
        assert events[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
        signatures = [e for e in events if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"]
        assert [s["delta"]["signature"] for s in signatures] == [""]
        thinking = "".join(e["delta"]["thinking"] for e in events
                           if e["type"] == "content_block_delta" and e["delta"]["type"] == "thinking_delta")
        text = "".join(e["delta"]["text"] for e in events
                       if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")
        assert (thinking, text) == (case.reasoning, case.content)
        final = accumulated(events)
        assert final["content"] == body["content"]
        assert final["stop_reason"] == body["stop_reason"]


def test_anthropic_reasoning_then_a_tool_call(tok):
    case = Case("call", "think", "<think>\nThey want the weather.\n</think>\n\n" + CALL, "They want the weather.\n", "")
    plan = anthropic_plan(case, tools=True)
    body = anthropic_body(plan, case)
    assert [b["type"] for b in body["content"]] == ["thinking", "tool_use"]
    assert body["content"][0]["thinking"] == "They want the weather.\n"
    assert (body["content"][1]["name"], body["content"][1]["input"]) == ("get_weather", {"city": "Paris"})
    assert body["stop_reason"] == "tool_use"
    for pieces in splits(tok, case.text)[:2]:
        events = anthropic_stream(plan, case, pieces)
        kinds = [s for s in shape(events) if s[0] == "start"]
        assert kinds == [("start", 0, "thinking"), ("start", 1, "tool_use")]
        final = accumulated(events)
        assert final["content"][0] == body["content"][0]
        assert {k: v for k, v in final["content"][1].items() if k != "id"} == \
               {k: v for k, v in body["content"][1].items() if k != "id"}
        assert final["stop_reason"] == "tool_use"


def test_anthropic_thinking_cut_off_by_max_tokens_is_one_thinking_block(tok):
    # nothing was said: no empty text block after the thinking, streamed or not (as Anthropic does)
    case = Case("cut", "think", "<think>\nStill thinking about", "Still thinking about", "")
    plan = anthropic_plan(case)
    body = anthropic_body(plan, case, FinishReason.LENGTH)
    assert body["content"] == [{"type": "thinking", "thinking": "Still thinking about", "signature": ""}]
    assert body["stop_reason"] == "max_tokens"
    events = anthropic_stream(plan, case, token_pieces(tok, case.text), FinishReason.LENGTH)
    final = accumulated(events)
    assert final["content"] == body["content"]
    assert final["stop_reason"] == "max_tokens"


# -- OpenAI Responses --------------------------------------------------------------------------------------

def responses_plan(case: Case, tools: bool = False) -> ChatPlan:
    return responses_translate.chat_plan(responses_request(tools), formats(case))


def responses_body(plan: ChatPlan, case: Case, reason: FinishReason = FinishReason.STOP) -> dict:
    splitter = new_splitter(plan, case.opens)
    splitter.feed(case.text)
    splitter.finish()
    body = responses_translate.finished_body(ResponseDraft(responses_request()), reason, splitter.result(), USAGE)
    Response.model_validate(sdk_checkable(body))
    return body


def responses_stream(plan: ChatPlan, case: Case, pieces: list[str],
                     reason: FinishReason = FinishReason.STOP) -> tuple[list[dict], dict]:
    """What the /v1/responses view sends, in order, and the final body."""
    splitter, draft = new_splitter(plan, case.opens), ResponseDraft(responses_request())
    events, output = ResponseEvents(draft), ChoiceSegments(splitter)
    out = events.opening()
    for text in pieces:
        out += events.events(output.segments(text, False))
    out += events.events(output.segments("", True))
    body = responses_translate.finished_body(draft, reason, splitter.result(), USAGE, events.items)
    out += events.closing(body)
    for event in out:  # every name and field as the openai SDK knows them
        RESPONSES_EVENT.validate_python({**event, "response": sdk_checkable(event["response"])} if "response" in event else event)
    return out, body


def sdk_checkable(body: dict) -> dict:
    """``body`` less its usage: openai 2.x+ SDK types require ``input_tokens_details.cache_write_tokens``,
    which the server does not report (usage is not what these tests are about)."""
    return {**body, "usage": None}


def without_ids(items: list[dict]) -> list[dict]:
    return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in items]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_responses_reasoning_item_comes_before_the_message(case):
    body = responses_body(responses_plan(case), case)
    reasoning, message = body["output"]
    assert reasoning["type"] == "reasoning" and reasoning["id"].startswith("rs_")
    assert reasoning["content"] == [{"type": "reasoning_text", "text": case.reasoning}]
    assert reasoning["summary"] == []
    assert message["type"] == "message" and message["status"] == "completed"
    assert [p["text"] for p in message["content"]] == [case.content]
    assert body["status"] == "completed" and body["reasoning"]["effort"] == "low"


REASONING_THEN_MESSAGE = [
    "response.created", "response.in_progress",
    "response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done",
    "response.output_item.done",
    "response.output_item.added", "response.content_part.added", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.completed",
]


def folded(events: list[dict]) -> list[str]:
    out: list[str] = []
    for event in events:
        if not out or out[-1] != event["type"] or not event["type"].endswith(".delta"):
            out.append(event["type"])
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_responses_stream_reasoning_events_then_message_events(tok, case):
    plan = responses_plan(case)
    whole = responses_body(plan, case)
    for pieces in splits(tok, case.text):
        events, body = responses_stream(plan, case, pieces)
        assert folded(events) == REASONING_THEN_MESSAGE, pieces
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        added = [e for e in events if e["type"] == "response.output_item.added"]
        assert [(e["output_index"], e["item"]["type"]) for e in added] == [(0, "reasoning"), (1, "message")]
        rs_id = added[0]["item"]["id"]
        deltas = [e for e in events if e["type"] == "response.reasoning_text.delta"]
        assert {(e["item_id"], e["output_index"], e["content_index"]) for e in deltas} == {(rs_id, 0, 0)}
        [done] = [e for e in events if e["type"] == "response.reasoning_text.done"]
        assert done["text"] == "".join(e["delta"] for e in deltas) == case.reasoning
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        assert text == case.content
        assert events[-1]["response"] == body
        assert without_ids(body["output"]) == without_ids(whole["output"])
        assert body["output"][0]["id"] == rs_id


def test_responses_reasoning_then_a_call(tok):
    case = Case("call", "think", "<think>\nThey want the weather.\n</think>\n\n" + CALL, "They want the weather.\n", "")
    plan = responses_plan(case, tools=True)
    whole = responses_body(plan, case)
    assert [i["type"] for i in whole["output"]] == ["reasoning", "function_call"]
    for pieces in splits(tok, case.text)[:2]:
        events, body = responses_stream(plan, case, pieces)
        added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
        assert added == ["reasoning", "function_call"]
        assert without_ids(body["output"]) == without_ids(whole["output"])
        assert json.loads(body["output"][1]["arguments"]) == {"city": "Paris"}


def test_responses_thinking_cut_off_is_only_a_reasoning_item(tok):
    # "a message item is present only when there is text, or when nothing else was produced"
    case = Case("cut", "think", "<think>\nStill thinking about", "Still thinking about", "")
    plan = responses_plan(case)
    whole = responses_body(plan, case, FinishReason.LENGTH)
    assert [i["type"] for i in whole["output"]] == ["reasoning"]
    assert whole["status"] == "incomplete"
    events, body = responses_stream(plan, case, token_pieces(tok, case.text), FinishReason.LENGTH)
    assert without_ids(body["output"]) == without_ids(whole["output"])
    assert events[-1]["type"] == "response.incomplete"


# -- streamed equals non-streamed, for edge outputs --------------------------------------------------------

EDGES = [
    "",
    "  \n",  # blank: still said (a text block, a message)
    "<think>\nAll thought, nothing said.\n</think>\n\n",  # a blank answer after thinking is kept
    "<think></think>Hi",
    "<think>\nA</think>\n\n\nHi",  # blank pieces before the text join it
    "Plain answer, no thinking.",
    "Plain answer with a stray </think> later.",
    "<think>\nWeather.\n</think>\n\n" + CALL,  # Qwen3's layout: the blank line before a call is no text
    "<think>\nWeather.\n</think>\n\n" + CALL + "\n",
    "<think>\nWeather.\n</think>\n\nLet me check.\n" + CALL,
]
TOOLS = pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])


def edge_splits(text: str) -> list[list[str]]:
    """One piece, single characters, every cut in two (never an empty stream: the finish needs a piece)."""
    return [[text], list(text) or [""], *([text[:k], text[k:]] for k in range(len(text) + 1))]


@TOOLS
@pytest.mark.parametrize("text", EDGES)
def test_anthropic_stream_final_message_equals_the_message(text, tools):
    case = Case("edge", "think", text, "", "")
    plan = anthropic_plan(case, tools)
    body = anthropic_body(plan, case)
    assert body["content"]  # never an empty content list
    for pieces in edge_splits(text):
        events = anthropic_stream(plan, case, pieces)
        assert without_ids(accumulated(events)["content"]) == without_ids(body["content"]), pieces
        starts = [e for e in events if e["type"] == "content_block_start"]
        assert [e["index"] for e in starts] == list(range(len(body["content"])))


@TOOLS
@pytest.mark.parametrize("text", EDGES)
def test_responses_streamed_items_equal_the_response(text, tools):
    case = Case("edge", "think", text, "", "")
    plan = responses_plan(case, tools)
    whole = responses_body(plan, case)
    assert whole["output"]
    for pieces in edge_splits(text):
        events, body = responses_stream(plan, case, pieces)
        assert without_ids(body["output"]) == without_ids(whole["output"]), pieces
        assert [e["type"] for e in events].count("response.output_item.added") == len(whole["output"])


@TOOLS
@pytest.mark.parametrize("text", EDGES)
def test_openai_streamed_deltas_join_to_the_message(tok, text, tools):
    case = Case("edge", "think", text, "", "")
    plan = openai_plan(case, tools)
    choice = chat_message(tok, plan, case)
    message = choice["message"]
    for pieces in edge_splits(text):
        choices = [c["choices"][0] for c in chat_chunks(tok, plan, case, pieces)[1:]]
        deltas = [c["delta"] for c in choices]
        assert "".join(d.get("reasoning_content", "") for d in deltas) == (message.get("reasoning_content") or "")
        assert "".join(d.get("content") or "" for d in deltas) == (message["content"] or ""), pieces
        assert choices[-1]["finish_reason"] == choice["finish_reason"]
