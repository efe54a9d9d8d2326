"""POST /v1/responses (and GET/DELETE by id) through the official `openai` client."""

from __future__ import annotations


import openai
import pytest
from tests.server.infra import sse_events, without_keepalives

MODEL = "smollm2-135m"
QUESTION = "What is the capital of France? Answer in one word."


@pytest.fixture
def client(base_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)


def test_non_stream_text(client):
    r = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=12, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete")
    assert "Paris" in r.output_text
    assert r.output[0].type == "message" and r.output[0].content[0].type == "output_text"
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens


def test_max_output_tokens_makes_it_incomplete(client):
    r = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=2, temperature=0)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 2


def test_stream_gives_the_same_text(client):
    plain = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=12, temperature=0)
    with client.responses.stream(model=MODEL, input=QUESTION, max_output_tokens=12, temperature=0) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == plain.output_text == final.output_text
    assert final.status == plain.status


def _sse_events(base_url: str, body: dict) -> list[tuple[str, dict]]:
    return sse_events(f"{base_url}/v1/responses", body)


def test_raw_stream_event_sequence(base_url):
    body = {"model": MODEL, "input": QUESTION, "max_output_tokens": 12, "temperature": 0, "stream": True}
    seen = _sse_events(base_url, body)
    assert all(name == data["type"] for name, data in seen)
    assert [data["sequence_number"] for _, data in seen] == list(range(len(seen)))
    names = without_keepalives([name for name, _ in seen])
    assert names[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert set(names[4:-4]) == {"response.output_text.delta"}
    assert names[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    assert names[-1] in ("response.completed", "response.incomplete")
    text = "".join(data["delta"] for name, data in seen if name == "response.output_text.delta")
    assert seen[-4][1]["text"] == text


def test_input_items_and_instructions(client):
    r = client.responses.create(
        model=MODEL, instructions="Answer in one word.", max_output_tokens=8, temperature=0,
        input=[{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}])
    assert "Paris" in r.output_text


def test_previous_response_id_continues_the_conversation(client):
    first = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=12, temperature=0)
    second = client.responses.create(model=MODEL, input="And of Italy?", previous_response_id=first.id,
                                     max_output_tokens=8, temperature=0)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert client.responses.retrieve(second.id).output_text == second.output_text


def test_unknown_previous_response_id_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_nope", max_output_tokens=2)
    assert "resp_nope" in err.value.body["message"]
    assert err.value.body["param"] == "previous_response_id"


def test_store_false_is_not_kept(client):
    r = client.responses.create(model=MODEL, input="hi", store=False, max_output_tokens=2)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_delete(client):
    r = client.responses.create(model=MODEL, input="hi", max_output_tokens=2)
    assert client.responses.delete(r.id) is None
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


@pytest.mark.parametrize("extra, named", [
    ({"tools": [{"type": "custom", "name": "apply_patch"}]}, "custom"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning"),
    ({"text": {"format": {"type": "xml"}}}, "text.format"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"input": [{"type": "computer_call_output", "call_id": "c", "output": "x"}]}, "computer_call_output"),
])
def test_unsupported_fields_are_a_400_naming_them(client, extra, named):
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", max_output_tokens=2, extra_body=extra)
    assert named in err.value.body["message"]


def test_a_bad_input_item_is_named_not_the_string_form_of_input(client):
    """``input`` is a string or a list of items: a bad item's 400 names the item's field."""
    item = {"type": "function_call", "name": "f", "arguments": "{}"}  # no call_id
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=[item], max_output_tokens=2)
    assert err.value.body["message"] == "invalid field 'input.0.function_call.call_id': Field required"


def test_unknown_model_is_a_404(client):
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="gpt-nope", input="hi", max_output_tokens=2)
    assert "gpt-nope" in err.value.body["message"]
