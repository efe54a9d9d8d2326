"""The OpenAI layer without a server: models, translation, chunk grouping, stream merging."""

import asyncio

import pytest
from pydantic import ValidationError

from mlxctl.api.openai_logprobs import TokenBytes
from mlxctl.api.openai_models import ChatCompletionRequest, CompletionRequest
from mlxctl.api.openai_output import total_usage
from mlxctl.api.openai_pieces import ChunkGrouper, finish_reason
from mlxctl.api.openai_translate import (
    choice_params,
    completion_params,
    prompt_list,
    template_message,
)
from mlxctl.engine.events import FinishEvent, FinishReason, Timings, TokenEvent, Usage
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import BadInputError, EngineError, MlxctlError
from mlxctl.server.streaming import Merged

TIMINGS = Timings(0, 0, 0, 0, 0)


def finish(reason=FinishReason.STOP, text="", error=None):
    return FinishEvent(reason, Usage(3, 2), TIMINGS, text, error)


def test_grouper_sends_every_interval_and_always_the_last():
    grouper = ChunkGrouper(2, logprobs=False, offset=5)
    assert grouper.add(TokenEvent("a", (1,))) is None
    piece = grouper.add(TokenEvent("b", (2,)))
    assert (piece.text, piece.offset, piece.finish_reason) == ("ab", 5, None)
    last = grouper.add(finish())
    assert (last.text, last.offset, last.finish_reason) == ("", 7, "stop")


def test_grouper_holds_empty_text_until_there_is_some():
    grouper = ChunkGrouper(1, logprobs=False)
    assert grouper.add(TokenEvent("", (1,))) is None  # half a UTF-8 character
    assert grouper.add(TokenEvent("é", (2,))).text == "é"
    assert grouper.add(finish(FinishReason.LENGTH, text="!")).text == "!"


@pytest.mark.parametrize("reason", [FinishReason.ABORT, FinishReason.ERROR])
def test_aborted_or_failed_is_an_error_not_a_reason(reason):
    with pytest.raises(MlxctlError):
        finish_reason(reason)


def test_usage_counts_each_prompt_once():
    usages = [Usage(10, 3), Usage(10, 4), Usage(7, 1), Usage(7, 2)]
    assert total_usage(usages, n=2) == Usage(17, 10)


def test_seeds_differ_per_choice():
    params = SamplingParams(seed=5)
    assert [choice_params(params, c).seed for c in range(3)] == [5, 6, 7]
    assert choice_params(SamplingParams(), 1).seed is None


def test_request_fields_become_sampling_params():
    body = CompletionRequest(model="m", prompt="x", logprobs=2, stop="\n", logit_bias={"7": -100}, top_k=-1)
    params = completion_params(body)
    assert (params.max_tokens, params.logprobs, params.top_logprobs) == (16, True, 2)
    assert params.stop == ("\n",) and params.logit_bias == ((7, -100.0),) and params.top_k == 0


def test_prompt_forms():
    assert prompt_list("a") == ["a"] and prompt_list([1, 2]) == [[1, 2]]
    assert prompt_list(["a", "b"]) == ["a", "b"] and prompt_list([[1], [2]]) == [[1], [2]]
    with pytest.raises(BadInputError):
        prompt_list([])


def test_messages_for_the_template():
    body = ChatCompletionRequest(model="m", messages=[
        {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "x", "reasoning": "because"},
    ])
    assert template_message(body.messages[0]) == {"role": "system", "content": "a\nb"}
    assert template_message(body.messages[1])["reasoning_content"] == "because"


@pytest.mark.parametrize("message", [
    {"role": "user"},
    {"role": "user", "content": "x", "reasoning_content": "y"},
    {"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]},
])
def test_bad_messages(message):
    with pytest.raises(ValidationError):
        ChatCompletionRequest(model="m", messages=[message])


def test_token_bytes_keep_partial_characters(engine):
    tokenizer = engine.model.tokenizer
    tokens = TokenBytes(tokenizer)
    ids = tokenizer.encode("party 🎉")
    assert b"".join(tokens.bytes(i) for i in ids) == "party 🎉".encode()


def run_merge(feed):
    async def main():
        loop = asyncio.get_running_loop()
        streams = [RequestStream(f"r{i}", lambda rid: None, loop) for i in range(2)]
        feed(streams)
        merged, got = Merged(streams), []
        try:
            while merged.left:
                got.append(await merged.next_or_wake())
        finally:
            merged.close()
        return got

    return asyncio.run(main())


def test_merge_interleaves_until_every_stream_finishes():
    def feed(streams):
        streams[0].put(TokenEvent("a", (1,)))
        streams[1].put(TokenEvent("b", (2,)))
        streams[1].put(finish())
        streams[0].put(finish())

    events = run_merge(feed)
    assert [type(e) for i, e in events if i == 0] == [TokenEvent, FinishEvent]
    assert [type(e) for i, e in events if i == 1] == [TokenEvent, FinishEvent]


def test_merge_raises_a_stream_error():
    def feed(streams):
        streams[0].put(TokenEvent("a", (1,)))
        streams[1].put(finish(FinishReason.ERROR, error=EngineError("boom")))

    with pytest.raises(EngineError, match="boom"):
        run_merge(feed)


@pytest.mark.parametrize("n", [1, 2])
def test_a_wake_gives_the_reader_none_and_loses_no_event(n):
    async def main():
        loop = asyncio.get_running_loop()
        streams = [RequestStream(f"r{i}", lambda rid: None, loop) for i in range(n)]
        merged = Merged(streams)
        try:
            waiting = asyncio.ensure_future(merged.next_or_wake())
            await asyncio.sleep(0)  # the reader waits on an empty queue
            merged.wake()
            assert await waiting is None
            for s in streams:
                s.put(TokenEvent("a", (1,)))
                s.put(finish())
            got = []
            while merged.left:
                got.append(await merged.next_or_wake())
            return got
        finally:
            merged.close()

    got = asyncio.run(main())
    assert sorted((i, type(e).__name__) for i, e in got) == sorted((i, t) for i in range(n) for t in ("FinishEvent", "TokenEvent"))
