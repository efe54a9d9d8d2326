"""What Codex CLI sends to /v1/responses on every request, through the official client: namespace
tools (flattened for the model, their calls named back as OpenAI names them: ``name`` and
``namespace``) and hosted tools (accepted, not offered, listed in ``tools_not_offered``, logged
once; forcing one is a 400). Custom (freeform) tools are a 400 naming them."""

from __future__ import annotations

import json
import logging
import logging.handlers

import openai
import pytest

from tests.server.infra import openai_client, served

MODEL = "smollm2-135m"
ASK = [{"role": "user", "content": "Open an issue about the broken build."}]
CALL_TOKENS = 64
CREATE_ISSUE = {"type": "function", "name": "create_issue", "description": "Create an issue", "strict": False,
                "parameters": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 24}},
                               "required": ["title"], "additionalProperties": False}}
CRM = {"type": "namespace", "name": "crm", "description": "Issue tracker tools.", "tools": [CREATE_ISSUE]}
MCP = {"type": "namespace", "name": "mcp__tracker__", "description": "Tracker MCP server.", "tools": [CREATE_ISSUE]}
HOSTED = [{"type": "web_search", "external_web_access": False}, {"type": "file_search", "vector_store_ids": ["vs_1"]},
          {"type": "image_generation", "output_format": "png"}]


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


@pytest.fixture
def server_log():
    """The mlxctl.server records emitted during the test (a handler of its own: that logger may
    not propagate, once ``serve``'s logging is configured)."""
    logger, handler = logging.getLogger("mlxctl.server"), logging.handlers.BufferingHandler(10_000)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.buffer
    logger.removeHandler(handler)
    logger.setLevel(level)


def _forced(url: str, tools: list, name: str, **extra):
    return openai_client(url).responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=CALL_TOKENS, tools=tools,
        tool_choice={"type": "function", "name": name}, **extra)


def test_namespaced_call_names_function_and_namespace(url):
    r = _forced(url, [CRM, *HOSTED], "crm.create_issue")
    [item] = r.output
    assert (item.type, item.name, item.namespace) == ("function_call", "create_issue", "crm")
    assert isinstance(json.loads(item.arguments)["title"], str)


def test_namespace_ending_in_underscores_is_joined_as_is(url):
    r = openai_client(url).responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=CALL_TOKENS, tools=[MCP],
        tool_choice={"type": "function", "name": "create_issue", "namespace": "mcp__tracker__"})
    [item] = r.output
    assert (item.name, item.namespace) == ("create_issue", "mcp__tracker__")


def test_streamed_namespaced_call_names_function_and_namespace(url):
    with openai_client(url).responses.stream(
            model=MODEL, input=ASK, temperature=0, max_output_tokens=CALL_TOKENS, tools=[CRM],
            tool_choice={"type": "function", "name": "crm.create_issue"}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e.item for e in events if e.type == "response.output_item.added"]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(i.name, i.namespace) for i in added + done] == [("create_issue", "crm")] * 2
    assert [(i.name, i.namespace) for i in final.output] == [("create_issue", "crm")]


def test_namespaced_call_sent_back_continues_the_conversation(url):
    history = [*ASK, {"type": "function_call", "call_id": "call_1", "name": "create_issue", "namespace": "crm",
                      "arguments": '{"title": "Broken build"}'},
               {"type": "function_call_output", "call_id": "call_1", "output": "Issue #7 created."}]
    r = openai_client(url).responses.create(model=MODEL, input=history, temperature=0, max_output_tokens=8,
                                            tools=[CRM, *HOSTED])
    assert r.status in ("completed", "incomplete")


def test_hosted_tools_are_echoed_listed_and_logged_not_offered(url, server_log):
    r = openai_client(url).responses.create(model=MODEL, input=ASK, temperature=0, max_output_tokens=8,
                                            tools=[CRM, *HOSTED])
    assert [t.type for t in r.tools] == ["namespace", "web_search", "file_search", "image_generation"]
    assert r.model_extra["tools_not_offered"] == ["web_search", "file_search", "image_generation"]
    assert all(item.type in ("message", "function_call", "reasoning") for item in r.output)
    logged = [rec.getMessage() for rec in server_log if "hosted tools not offered" in rec.getMessage()]
    assert len(logged) == 1 and "web_search, file_search, image_generation" in logged[0]


def test_only_hosted_tools_is_plain_text(url):
    r = openai_client(url).responses.create(model=MODEL, input=ASK, temperature=0, max_output_tokens=8,
                                            tools=HOSTED)
    assert [item.type for item in r.output] == ["message"]


def test_no_hosted_tools_no_field(url):
    r = openai_client(url).responses.create(model=MODEL, input=ASK, temperature=0, max_output_tokens=4)
    assert "tools_not_offered" not in (r.model_extra or {})


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview", "file_search"])
def test_forcing_a_hosted_tool_is_a_400_naming_it(url, kind):
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).responses.create(model=MODEL, input=ASK, max_output_tokens=8,
                                            tools=[CRM, {"type": kind}], tool_choice={"type": kind})
    assert repr(kind) in err.value.body["message"]


@pytest.mark.parametrize("where", ["top", "namespace"])
def test_custom_tool_is_a_400_naming_it(url, where):
    patch = {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
    tools = [patch] if where == "top" else [{**CRM, "tools": [CREATE_ISSUE, patch]}]
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).responses.create(model=MODEL, input=ASK, max_output_tokens=8, tools=tools)
    assert "custom" in err.value.body["message"] and "'apply_patch'" in err.value.body["message"]


def test_malformed_namespace_is_a_400(url):
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).responses.create(model=MODEL, input=ASK, max_output_tokens=8,
                                            tools=[{"type": "namespace", "name": "crm", "description": "x"}])
    assert "tools[0].tools" in err.value.body["message"]
