"""Protocol requests -> chat messages and sampling parameters, without a model."""

import pydantic
import pytest

from mlxctl.api import anthropic_translate, responses_translate
from mlxctl.api.anthropic_models import MessagesRequest
from mlxctl.api.responses_models import ResponsesRequest
from mlxctl.errors import BadInputError


def test_anthropic_system_blocks_and_content_blocks():
    req = MessagesRequest.model_validate({
        "model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        "temperature": 0.5, "top_k": 3, "stop_sequences": ["\n"]})
    assert anthropic_translate.chat_messages(req) == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "a\nb"}]
    params = anthropic_translate.sampling_params(req)
    assert (params.max_tokens, params.temperature, params.top_k, params.stop) == (5, 0.5, 3, ("\n",))


def test_anthropic_image_is_refused():
    req = MessagesRequest.model_validate({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x"}}]}]})
    with pytest.raises(BadInputError, match="image"):
        anthropic_translate.chat_messages(req)


@pytest.mark.parametrize("field", ["container", "frobnicate"])
def test_anthropic_unsupported_fields_are_named(field):
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], field: [{"x": 1}]}
    with pytest.raises(pydantic.ValidationError) as err:
        MessagesRequest.model_validate(body)
    assert err.value.errors()[0]["loc"] == (field,)


def test_anthropic_advisory_fields_are_accepted():
    MessagesRequest.model_validate({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                                    "metadata": {"user_id": "u"}, "service_tier": "auto",
                                    "thinking": {"type": "disabled"}})


def test_responses_conversation_prepends_previous_turns():
    req = ResponsesRequest.model_validate({"model": "m", "input": [
        {"role": "developer", "content": "terse"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]})
    previous = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert responses_translate.conversation(req, previous) == [
        *previous, {"role": "system", "content": "terse"}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("extra, loc", [
    ({"reasoning": {"effort": "extreme"}}, ("reasoning", "effort")),
    ({"text": {"format": {"type": "xml"}}}, ("text", "format", "type")),
    ({"include": ["message.output_text.logprobs"]}, ("include",)),
    ({"input": [{"type": "web_search_call"}]}, ("input",)),
])
def test_responses_unsupported_fields_are_named(extra, loc):
    with pytest.raises(pydantic.ValidationError) as err:
        ResponsesRequest.model_validate({"model": "m", "input": "hi", **extra})
    assert err.value.errors()[0]["loc"] == loc
